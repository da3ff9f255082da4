// Copyright 2026 the jaccl authors.
// A group whose ranks all share one host: collectives through one shared
// segment, designed for memory rather than as a pipe under socket
// algorithms. Small reductions: every rank stages its input and reduces all
// staged inputs itself (one sync). Large ones: a pipeline over cache-sized
// chunks (one sync per chunk, double-buffered) in which each rank stages
// the slices of a chunk its peers reduce, reduces its own 1/N slice into a
// shared result, and copies the result out; only the caller's buffers
// reach DRAM, whose bandwidth all local ranks share.
#pragma once

#include <sched.h>

#include <memory>
#include <vector>

#include "collectives/op_runner.h"
#include "collectives/shm_layout.h"
#include "collectives/shm_strategy.h"
#include "common/reduce.h"
#include "jaccl/group.h"
#include "transport/connections.h"
#include "transport/shm_segment.h"

namespace jaccl::detail {

class ShmGroup : public Group {
 public:
  // seg is mapped and initialized (header written by the creator). rank and
  // size are this group's (the ranks on one host); names[i] is the job rank
  // of member i, used in every message (empty: member i is rank i).
  ShmGroup(int rank, int size, std::vector<int> names, ShmSegment seg,
           ShmLayout layout, std::shared_ptr<FailureState> state,
           Millis op_timeout, std::shared_ptr<void> keepalive);
  ~ShmGroup() override;

  int rank() override { return rank_; }
  int size() override { return size_; }
  void all_sum(const void* in, void* out, size_t n, int dtype) override;
  void all_max(const void* in, void* out, size_t n, int dtype) override;
  void all_min(const void* in, void* out, size_t n, int dtype) override;
  void all_gather(const void* in, void* out, size_t n) override;
  void sum_scatter(const void* in, void* out, size_t n, int dtype) override;
  void send(const void* in, size_t n, int dst) override;
  void recv(void* out, size_t n, int src) override;
  void barrier() override;
  void broadcast(void* buf, size_t n, int root) override;
  const char* backend_name() const override { return "shm"; }
  // shm_all_to_all.cpp: every rank stages its blocks, then copies its own
  // block out of every peer's staging slot (chunked when the blocks do not
  // fit a slot).
  void all_to_all(const void* in, void* out, size_t n) override;
  void all_to_allv(const void* in, std::span<const size_t> send_counts,
                   void* out, std::span<const size_t> recv_counts) override;

  // Writes a fresh header into a newly created segment. strategy: how large
  // ops copy out on every rank of the host (JACCL_SHM_STRATEGY; Auto
  // measures, see shm_strategy.h). Each rank reads it from the header.
  static void init_segment(char* base, const ShmLayout& layout,
                           ShmStrategy strategy = ShmStrategy::Auto);

  // How often this rank has moved itself off a CPU it shared with a rank
  // it waited for (wait_mode; tests and logs).
  int cpu_moves() const { return cpu_moves_; }

  // Whether this host's ranks outnumber the CPUs this rank may use (then
  // every wait yields; tests).
  bool oversubscribed() const { return oversubscribed_; }

  // The copy-out used for large ops of this kind and size from now on
  // (Auto while still measuring).
  ShmStrategy strategy_for(ShmTuner::Kind kind, size_t bytes) const {
    return tuner_.chosen(kind, bytes);
  }

 private:
  void reduce(ReduceOp op, OpKind kind, const void* in, void* out, size_t n,
              int dtype);
  void reduce_large(ReduceOp op, const ShmStepDesc& d, const char* src,
                    char* dst, size_t n, int dtype);
  // Publishes d for the next step, arrives, waits for every rank, and checks
  // that every rank announced the same op.
  void step(const ShmStepDesc& d);
  // The host's first rank logs each size class's choice (JACCL_LOG=debug).
  void log_decision() const;
  void check_alive(const Deadline& dl, const char* waiting_for);
  // all_to_all(v)'s bodies (shm_all_to_all.cpp).
  void a2a_fixed(const char* src, char* dst, size_t n);
  void a2a_varying(const char* src, std::span<const size_t> send, char* dst,
                   std::span<const size_t> recv);
  // The data rounds of all_to_all(v): block j of this rank (send[j] bytes
  // at in + soff[j]) to rank j, block i from rank i (recv[i] bytes at out +
  // roff[i]), `largest` the job's largest block, `total` the tuner's size.
  void a2a_rounds(const ShmStepDesc& d, const char* in, const size_t* send,
                  const size_t* soff, char* out, const size_t* recv,
                  const size_t* roff, uint64_t largest, size_t total);
  // The same blocks read straight out of each peer's input with
  // process_vm_readv (one copy): peer_off[q] is where block `rank` starts in
  // rank q's input. Two syncs: addresses published, reads done.
  void a2a_direct(const ShmStepDesc& d, const char* in, const size_t* send,
                  const size_t* soff, char* out, const size_t* recv,
                  const size_t* roff, const size_t* peer_off);
  // all_gather's direct way: every peer's input read into the output.
  void gather_direct(const ShmStepDesc& d, const char* src, char* dst,
                     size_t n);
  // Whether every rank of the host can read every peer's memory (probed
  // on the first large all_to_all, the same verdict on every rank).
  bool a2a_direct_ok(const ShmStepDesc& d);
  // peer: the rank waited for, or -1 for every rank that has not arrived
  // at the current step.
  template <class Ready, class Check>
  void wait(Ready ready, Check check, int peer = -1) {
    wait_until(wake(), ready, check, [&] { return wait_mode(peer); });
  }
  // Publishes the CPU this rank runs on (RankCtl::cpu).
  void note_cpu() {
    ctl(rank_).cpu.store(::sched_getcpu(), std::memory_order_relaxed);
  }
  // How to wait for `peer` (or the ranks not yet at the current step): spin
  // while they run elsewhere; yield when they share this rank's CPU (and
  // the higher rank of such a pair moves itself off it; see shm_sync.h).
  WaitMode wait_mode(int peer);

  size_t header_chunk() const {
    return reinterpret_cast<const ShmHeader*>(base_)->chunk_bytes;
  }

  // The job rank of member q, for messages.
  int who(int q) const {
    return names_.empty() ? q : names_[static_cast<size_t>(q)];
  }

  char* slot(int r, uint64_t s) const {
    return base_ + layout_.slot_off(r, static_cast<int>(s & 1));
  }
  char* result(uint64_t s) const {
    return base_ + layout_.result_off(static_cast<int>(s & 1));
  }
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

  int rank_;
  int size_;
  std::vector<int> names_;
  ShmSegment seg_;
  ShmLayout layout_;
  char* base_;
  std::shared_ptr<void> keepalive_;
  OpRunner ops_;  // every op's lock, checks, deadline and failure rule
  uint64_t step_ = 0;
  // More ranks than cores: waits yield at once (see wait_until).
  bool oversubscribed_ = false;
  // The first step at which this rank may move itself off a CPU it shares
  // with a rank it waits for (wait_mode: one try per kMoveEverySteps).
  uint64_t next_move_step_ = 0;
  int cpu_moves_ = 0;
  size_t chunk_bytes_;  // large ops' unit of staging (<= slot_bytes)
  size_t llc_bytes_;    // last-level cache (sysfs)
  ShmTuner tuner_;      // cached or streaming copy-out, measured per size
  std::vector<uint64_t> counts_;     // all_to_allv's counts matrix
  std::vector<size_t> a2a_scratch_;  // all_to_all(v)'s counts and offsets
  int direct_ = -1;                  // a2a_direct_ok: -1 not probed yet
  uint64_t probe_word_ = 0;          // what peers read in the probe
  // The first guess at whether an op whose ranks each touch `bytes` of
  // their own buffers should write its output with non-temporal stores:
  // when all ranks' buffers together overflow the last-level cache. Only
  // the first trial of each size class uses it; the tuner then measures.
  bool streaming(size_t bytes) const {
    return bytes * static_cast<size_t>(size_) >= llc_bytes_;
  }
};

}  // namespace jaccl::detail
