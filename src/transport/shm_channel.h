// Copyright 2026 the jaccl authors.
// Shared memory's channel (its "Pair", in Gloo's terms): one host's segment
// as one of its ranks sees it. The staging slots and result buffers the
// algorithms address by sync step; the sync step itself (every rank
// announces its op, arrives, and waits for the others, the announcements
// compared); a byte ring per ordered pair for send/recv; and where this
// rank runs (a waiter that shares its CPU with the rank it waits for
// yields, and moves off it now and then). Made by transport/shm_setup.h;
// the shared-memory group (collectives/shm_group.h) runs its algorithms on
// it. Every wait is bounded by the op's deadline and woken by the group's
// failure.
#pragma once

#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "common/deadline.h"
#include "common/error_detail.h"
#include "common/shm_segment.h"
#include "transport/failure.h"
#include "transport/shm_layout.h"

namespace jaccl::detail {

class ShmChannel {
 public:
  // seg is mapped and initialized (init_segment, by its creator). rank and
  // size are this host's (the group's); names[i] is the job rank of member
  // i, used in every message (empty: member i is rank i). host_cpus: the
  // CPUs the members may run on between them (CpuUnion); more ranks
  // than that and waits yield while a rank on the waiter's CPU is waited
  // for (oversubscribed_mode). keepalive: what the failure state's
  // reporters need (the liveness monitor).
  ShmChannel(int rank, int size, std::vector<int> names, ShmSegment seg,
             ShmLayout layout, int host_cpus,
             std::shared_ptr<FailureState> state,
             std::shared_ptr<void> keepalive);
  ShmChannel(ShmChannel&&) = default;
  ShmChannel& operator=(ShmChannel&&) = delete;
  ~ShmChannel();

  // Writes a fresh header into a newly created segment. strategy and
  // chunk_bytes are the group's, read back by every rank of the host
  // (opaque here).
  static void init_segment(char* base, const ShmLayout& layout,
                           uint32_t strategy, uint64_t chunk_bytes);

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The job rank of member q, for messages.
  int who(int q) const {
    return names_.empty() ? q : names_[static_cast<size_t>(q)];
  }
  const std::vector<int>& names() const { return names_; }
  const ShmLayout& layout() const { return layout_; }
  const ShmHeader& header() const {
    return *reinterpret_cast<const ShmHeader*>(base_);
  }
  FailureState& state() const { return *state_; }
  const std::shared_ptr<FailureState>& shared_state() const { return state_; }

  // Sync steps completed so far. Data written for step s lives in the
  // parity s % 2 buffers (shm_layout.h): a rank stages into
  // slot(rank, steps() + 1), steps, and reads slot(q, steps()).
  uint64_t steps() const { return step_; }
  char* slot(int r, uint64_t s) const {
    return base_ + layout_.slot_off(r, static_cast<int>(s & 1));
  }
  char* result(uint64_t s) const {
    return base_ + layout_.result_off(static_cast<int>(s & 1));
  }
  // Maps the first `bytes` of every slot and of the result into this
  // process at once: each page is otherwise a fault when first touched
  // (dear where a VM traps page-table writes), and an op that moves its
  // staging from call to call would take them one call at a time. Best
  // effort (older kernels lack the call). Then touches each page once as
  // the ops will (writes its own slots and the result, reads the peers'
  // slots), without changing a byte: on this VM a process's first access
  // to a page stayed dear after the mapping (BENCHMARKS.md, History,
  // "first touches of the staging window").
  void populate_staging(size_t bytes) const;
  // What rank q announced at the last step.
  const ShmStepDesc& announced(int q) const { return line(q, step_).desc; }

  // One sync step: publishes d, arrives, waits until every rank has, and
  // checks that every rank announced the same op (ProtocolError naming the
  // first that did not). A Timeout at dl names the ranks still missing.
  // Returns the largest `report` any rank announced.
  uint64_t step(const ShmStepDesc& d, const Deadline& dl) {
    arrive(d);
    return await(dl);
  }
  // step() in halves, so that a rank can do work of its own while the
  // others arrive: arrive() publishes d and arrives (steps() counts the new
  // step from here), await() is the rest. In between, the rank may touch
  // its own buffers only, no slot: the peers may still read the previous
  // step's. `carry` (at most kCarriedBytes) goes out in the step's line,
  // for carried() after the step.
  void arrive(const ShmStepDesc& d, std::span<const char> carry = {});
  uint64_t await(const Deadline& dl);
  // What rank q carried at the last step (readable until the next arrive).
  const unsigned char* carried(int q) const { return line(q, step_).carried; }

  // Point to point through the pair's byte ring: n bytes behind a header
  // that carries n, so a recv of another size is a ProtocolError. Blocks
  // while the ring is full (send) or empty (recv), bounded by dl.
  void send(const void* in, size_t n, int dst, const Deadline& dl);
  void recv(void* out, size_t n, int src, const Deadline& dl);

  // Whether this host's ranks outnumber the CPUs this rank may use (then
  // waits yield to ranks on this CPU: oversubscribed_mode).
  bool oversubscribed() const { return oversubscribed_; }
  // Whether rank q goes back to this rank's CPU too (oversubscribed ranks
  // share CPUs in bands, share_cpu): what one stages for the other is
  // read from this core's caches.
  bool shares_home(int q) const {
    return home_cpu() >= 0 && q >= 0 && q < size_ &&
           home_of_[static_cast<size_t>(q)] == home_cpu();
  }
  // Where an oversubscribed rank goes back to (wait_mode; -1: nowhere).
  int home_cpu() const {
    return home_of_.empty() ? -1 : home_of_[static_cast<size_t>(rank_)];
  }
  // How often this rank has moved itself off a CPU it shared with a rank
  // it waited for.
  int cpu_moves() const { return cpu_moves_; }

 private:
  RankCtl& ctl(int r) const {
    return *reinterpret_cast<RankCtl*>(base_ + layout_.ctl_off(r));
  }
  WakeWord& wake() const {
    return *reinterpret_cast<WakeWord*>(base_ + layout_.wake_off());
  }
  RingCtl& ring(int from, int to) const {
    return *reinterpret_cast<RingCtl*>(base_ + layout_.ring_ctl_off(from, to));
  }
  char* ring_data(int from, int to) const {
    return base_ + layout_.ring_data_off(from, to);
  }
  // Rank r's announcement of step s.
  StepLine& line(int r, uint64_t s) const { return ctl(r).line[s & 1]; }
  // Whether rank r has arrived at step s (or later).
  bool arrived(int r, uint64_t s, std::memory_order mo) const {
    return line(r, s).arrive.load(mo) >= s;
  }
  // Publishes the CPU this rank runs on, in the line of its last step.
  void note_cpu() {
    line(rank_, step_).cpu.store(::sched_getcpu(), std::memory_order_relaxed);
  }
  // Where rank r last said it ran: the line of its later step.
  int cpu_of(int r) const {
    const StepLine* l = ctl(r).line;
    const bool later = l[1].arrive.load(std::memory_order_relaxed) >
                       l[0].arrive.load(std::memory_order_relaxed);
    return l[later ? 1 : 0].cpu.load(std::memory_order_relaxed);
  }
  // peer: the rank waited for, or -1 for every rank that has not arrived
  // at the current step.
  // check() throws at dl, which also bounds a sleep.
  template <class Ready, class Check>
  void wait(const Deadline& dl, Ready ready, Check check, int peer = -1) {
    wait_until(wake(), asymmetric_, dl, ready, check,
               [&] { return wait_mode(peer); });
  }
  // How to wait for `peer` (or the ranks not yet at the current step): spin
  // while they run elsewhere; yield when they share this rank's CPU (and
  // the higher rank of such a pair moves itself off it; see shm_sync.h).
  WaitMode wait_mode(int peer);
  // wait_mode's answer where ranks outnumber the CPUs.
  WaitMode oversubscribed_mode(int peer) const;
  // Whether a wait for `peer` (-1: the current step) waits for rank q.
  bool waited_for(int q, int peer) const {
    return peer >= 0
               ? q == peer
               : q != rank_ && !arrived(q, step_, std::memory_order_relaxed);
  }
  // The failure state, then the deadline: "timed out after 2 s waiting for
  // <waiting_for()>" (built only then: this runs on every slow poll).
  template <class What>
  void check_alive(const Deadline& dl, What waiting_for) const {
    state_->throw_if_failed();
    if (dl.expired()) {
      raise_timeout(dl, waiting_for());
    }
  }
  [[noreturn]] void raise_timeout(const Deadline& dl,
                                  const Detail& waiting_for) const;

  // What the failure state's hooks bump: the wake word while the segment
  // is mapped, null once the channel goes (the hooks outlive it).
  struct WakeLink {
    std::mutex mu;
    WakeWord* word = nullptr;
  };

  int rank_;
  int size_;
  std::vector<int> names_;
  ShmSegment seg_;
  ShmLayout layout_;
  char* base_;
  std::shared_ptr<FailureState> state_;
  std::shared_ptr<void> keepalive_;
  std::shared_ptr<WakeLink> wake_link_;
  uint64_t step_ = 0;
  // More ranks than the members' CPUs: waits yield at once (wait_until).
  bool oversubscribed_ = false;
  std::vector<int> home_of_;  // every rank's home CPU (empty: none)
  uint64_t next_home_step_ = 0;
  // Wakers fence lightly and sleepers heavily (shm_sync.h): every rank
  // decides alike (from the same host_cpus and kernel).
  bool asymmetric_ = false;
  // The first step at which this rank may move itself off a CPU it shares
  // with a rank it waits for (wait_mode: one try per kMoveEverySteps).
  uint64_t next_move_step_ = 0;
  int cpu_moves_ = 0;
};

}  // namespace jaccl::detail
