// Copyright 2026 the jaccl authors.
#include "transport/shm_channel.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <string>

#include "common/affinity.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/host_load.h"
#include "common/log.h"
#include "common/op_kind.h"
#include "transport/shm_copy.h"

namespace jaccl::detail {

namespace {

constexpr uint64_t kP2pMagic = 0x50325048534c4341ull;  // "ACLSHP2P"
// A rank that finds itself on the CPU of a rank it waits for moves off it
// at most once per this many sync steps (ShmChannel::wait_mode).
constexpr uint64_t kMoveEverySteps = 1024;
// Ranks that outnumber the CPUs yield or poll and rarely sleep, so
// the kernel leaves them where it stacked them: each goes back to a CPU of
// its own share (consecutive ranks share one) every this many steps, while
// the CPUs are the job's alone (YieldGate). 4 ranks on 2 CPUs, all_sum
// medians 0.73-0.92x the time at 8 B-2 MiB; moved beside a busy task, the
// ranks sat behind its slices (1.4-3.8 ms a call), hence the gate.
constexpr uint64_t kHomeEverySteps = 64;
// populate_staging touches one byte in each run of this many (the smallest
// page size: with larger pages, a few touches more than needed).
constexpr size_t kPageBytes = 4096;

struct P2pHeader {
  uint64_t magic;
  uint64_t n_bytes;
};

}  // namespace

void ShmChannel::init_segment(char* base, const ShmLayout& layout,
                              uint32_t strategy, uint64_t chunk_bytes) {
  std::memset(base, 0, layout.slots_off());
  // Lazy rings stay untouched: a fresh page reads as zeros, a RingCtl's
  // initial state (constructing N x N of them would fault them all in).
  for (int from = 0; from < layout.nranks && !layout.lazy_rings; ++from) {
    for (int to = 0; to < layout.nranks; ++to) {
      new (base + layout.ring_ctl_off(from, to)) RingCtl();
    }
  }
  auto* h = new (base) ShmHeader();
  h->magic = kShmMagic;
  h->nranks = static_cast<uint32_t>(layout.nranks);
  h->strategy = strategy;
  h->slot_bytes = layout.slot_bytes;
  h->ring_bytes = layout.ring_bytes;
  h->chunk_bytes = chunk_bytes;
  new (base + layout.wake_off()) WakeWord();
  for (int r = 0; r < layout.nranks; ++r) {
    new (base + layout.ctl_off(r)) RankCtl();
  }
}

ShmChannel::ShmChannel(int rank, int size, std::vector<int> names,
                       ShmSegment seg, ShmLayout layout, int host_cpus,
                       std::shared_ptr<FailureState> state,
                       std::shared_ptr<void> keepalive)
    : rank_(rank),
      size_(size),
      names_(std::move(names)),
      seg_(std::move(seg)),
      layout_(layout),
      base_(seg_.data()),
      state_(std::move(state)),
      keepalive_(std::move(keepalive)),
      oversubscribed_(size > host_cpus),
      // Registers this process before any step (shm_sync.h).
      asymmetric_(!oversubscribed_ && asymmetric_fences()) {
  if (oversubscribed_)
    home_of_ = share_cpus(size_);  // empty with fewer than two CPUs
  // A failure, revoke or abort wakes this group's sleepers at once (in
  // every process: the word is shared) instead of at their next slice.
  wake_link_ = std::make_shared<WakeLink>();
  wake_link_->word = &wake();
  auto bump = [link = std::weak_ptr<WakeLink>(wake_link_)] {
    if (auto l = link.lock()) {
      std::lock_guard<std::mutex> lock(l->mu);
      if (l->word != nullptr) {
        // Orders the failure state's store before bump()'s sleeper count.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        l->word->bump();
      }
    }
  };
  state_->on_abort(bump);
  state_->on_escalate([bump](GroupStatus) { bump(); });
}

ShmChannel::~ShmChannel() {
  if (wake_link_) {  // null when moved from
    std::lock_guard<std::mutex> lock(wake_link_->mu);
    wake_link_->word = nullptr;
  }
}

void ShmChannel::raise_timeout(const Deadline& dl,
                               const Detail& waiting_for) const {
  raise(ErrorKind::Timeout,
        "timed out after " + format_duration(dl.total()) + " waiting for " +
            waiting_for,
        {.rank = who(rank_), .address = "shared memory"});
}

WaitMode ShmChannel::wait_mode(int peer) {
  if (oversubscribed_) {
    if (home_cpu() >= 0 && step_ >= next_home_step_) {
      next_home_step_ = step_ + kHomeEverySteps;
      if (move_home(home_cpu(), size_, static_cast<long long>(now_ns()))) {
        ++cpu_moves_;
        note_cpu();
      }
    }
    return oversubscribed_mode(peer);
  }
  const int me = ::sched_getcpu();
  if (me < 0)
    return WaitMode::kSpin;
  int lowest = -1;  // the lowest rank waited for that last ran on this CPU
  for (int q = 0; q < size_ && lowest < 0; ++q) {
    if (waited_for(q, peer) && cpu_of(q) == me)
      lowest = q;
  }
  if (lowest < 0)
    return WaitMode::kSpin;
  // Two ranks on one CPU both see it; only the higher one moves, and only
  // now and then, so that a mask of one CPU or a scheduler that keeps them
  // together costs a system call per many steps, not per poll.
  if (rank_ > lowest && step_ >= next_move_step_) {
    next_move_step_ = step_ + kMoveEverySteps;
    if (move_off_this_cpu()) {
      ++cpu_moves_;
      note_cpu();
      JACCL_LOG(Debug, "rank " << who(rank_) << ": shared CPU " << me
                               << " with rank " << who(lowest)
                               << ", moved to CPU " << ::sched_getcpu());
      return WaitMode::kSpin;
    }
  }
  return WaitMode::kYield;
}

WaitMode ShmChannel::oversubscribed_mode(int peer) const {
  // Yield while a rank waited for may need this CPU: one whose home it is
  // too, that last ran here, or that has not said where it runs (before
  // its first step; ranks a user pinned to one CPU have no homes). Once
  // all of those have arrived, a yield only hands the core to a rank that
  // waits as well and gets it back a switch later (several microseconds
  // each in this kind of VM: 4 ranks on 2 CPUs switched 6.6 times per
  // 256 KiB all_sum where 4 suffice); the ranks elsewhere answer without
  // this core.
  const int me = ::sched_getcpu();
  for (int q = 0; q < size_; ++q) {
    if (!waited_for(q, peer))
      continue;
    const int at = cpu_of(q);
    if (me < 0 || at < 0 || at == me || shares_home(q))
      return WaitMode::kYield;
  }
  return WaitMode::kSpin;
}

void ShmChannel::arrive(const ShmStepDesc& d, std::span<const char> carry) {
  if (carry.size() > kCarriedBytes) {  // before the step: nothing announced
    raise(ErrorKind::Internal,
          std::to_string(carry.size()) +
              " operand bytes for a step line that carries " +
              std::to_string(kCarriedBytes),
          {.rank = who(rank_), .address = "shared memory"});
  }
  ++step_;
  const uint64_t s = step_;
  StepLine& me = line(rank_, s);
  me.desc = d;
  if (!carry.empty()) {
    std::memcpy(me.carried, carry.data(), carry.size());
  }
  note_cpu();
  me.arrive.store(s, std::memory_order_release);
  waker_fence(asymmetric_);  // shm_sync.h: who pays for the store-load fence
  if (wake().sleepers.load(std::memory_order_relaxed) != 0) {
    // Only a rank that finds everyone arrived wakes the sleepers (the last
    // of those that see a sleeper always does: they fence, and every other
    // arrival is visible to the sleeper's recheck). Waking them at every
    // arrival made a step of N ranks N^2 wake-ups, each rescanning N ranks.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    bool all_in = true;
    for (int q = 0; q < size_ && all_in; ++q) {
      all_in = arrived(q, s, std::memory_order_seq_cst);
    }
    if (all_in) {
      wake().bump();
    }
  }
}

uint64_t ShmChannel::await(const Deadline& dl) {
  const uint64_t s = step_;
  const ShmStepDesc d = line(rank_, s).desc;
  int first_missing = 0;  // arrivals only grow: earlier ranks stay arrived
  auto ready = [&] {
    for (; first_missing < size_; ++first_missing) {
      if (!arrived(first_missing, s, std::memory_order_acquire))
        return false;
    }
    return true;
  };
  wait(dl, ready, [&] {
    state_->throw_if_failed();
    if (dl.expired()) {
      std::vector<int> missing;
      for (int q = 0; q < size_; ++q) {
        if (!arrived(q, s, std::memory_order_acquire))
          missing.push_back(who(q));
      }
      raise(ErrorKind::Timeout,
            std::string(op_kind_name(d.op)) + " timed out after " +
                format_duration(dl.total()) + " waiting for " +
                ranks_ref(missing),
            {.rank = who(rank_), .address = "shared memory"});
    }
  });
  uint64_t slowest = 0;
  for (int q = 0; q < size_; ++q) {
    const ShmStepDesc& o = line(q, s).desc;
    slowest = std::max(slowest, o.report);
    if (o.op != d.op || o.n_bytes != d.n_bytes || o.dtype != d.dtype ||
        o.root != d.root) {
      auto call = [](const ShmStepDesc& x) {
        return std::string(op_kind_name(x.op)) +
               "(n_bytes=" + std::to_string(x.n_bytes) +
               ", dtype=" + std::to_string(x.dtype) + ")";
      };
      raise(ErrorKind::Protocol,
            "ranks disagree: this rank called " + call(d) + " but " +
                rank_ref(who(q)) + " called " + call(o),
            {.rank = who(rank_), .peer = who(q)});
    }
  }
  return slowest;
}

void ShmChannel::send(const void* in, size_t n, int dst, const Deadline& dl) {
  note_cpu();
  RingCtl& rc = ring(rank_, dst);
  char* data = ring_data(rank_, dst);
  const size_t cap = layout_.ring_bytes;
  P2pHeader h{kP2pMagic, n};
  auto put = [&](const char* p, size_t len) {
    uint64_t head = rc.head.load(std::memory_order_relaxed);
    size_t done = 0;
    while (done < len) {
      uint64_t tail = 0;
      wait(
          dl,
          [&] {
            tail = rc.tail.load(std::memory_order_acquire);
            return head - tail < cap;
          },
          [&] {
            check_alive(dl, [&] { return rank_ref(who(dst)) + " to receive"; });
          },
          dst);
      size_t room = cap - (head - tail);
      size_t at = head % cap;
      size_t k = std::min({len - done, room, cap - at});
      cached_copy(data + at, p + done, k);
      done += k;
      head += k;
      rc.head.store(head, std::memory_order_release);
      waker_fence(asymmetric_);
      wake().bump();
    }
  };
  put(reinterpret_cast<const char*>(&h), sizeof(h));
  put(static_cast<const char*>(in), n);
}

void ShmChannel::recv(void* out, size_t n, int src, const Deadline& dl) {
  note_cpu();
  RingCtl& rc = ring(src, rank_);
  const char* data = ring_data(src, rank_);
  const size_t cap = layout_.ring_bytes;
  auto get = [&](char* p, size_t len) {
    uint64_t tail = rc.tail.load(std::memory_order_relaxed);
    size_t done = 0;
    while (done < len) {
      uint64_t head = 0;
      wait(
          dl,
          [&] {
            head = rc.head.load(std::memory_order_acquire);
            return head != tail;
          },
          [&] {
            check_alive(dl,
                        [&] { return "a message from " + rank_ref(who(src)); });
          },
          src);
      size_t at = tail % cap;
      size_t k = std::min({len - done, size_t(head - tail), cap - at});
      cached_copy(p + done, data + at, k);
      done += k;
      tail += k;
      rc.tail.store(tail, std::memory_order_release);
      waker_fence(asymmetric_);
      wake().bump();
    }
  };
  P2pHeader h{};
  get(reinterpret_cast<char*>(&h), sizeof(h));
  if (h.magic != kP2pMagic) {
    raise(ErrorKind::Protocol,
          "corrupt message header from " + rank_ref(who(src)),
          {.rank = who(rank_), .peer = who(src)});
  }
  if (h.n_bytes != n) {
    raise(ErrorKind::Protocol,
          rank_ref(who(src)) + " sent " + std::to_string(h.n_bytes) +
              " bytes but this rank's recv expects " + std::to_string(n),
          {.rank = who(rank_), .peer = who(src)});
  }
  get(static_cast<char*>(out), n);
}

void ShmChannel::populate_staging(size_t bytes) const {
  bytes = std::min(bytes, layout_.slot_bytes);
  // writes: an atomic add of zero, so that a peer reading or writing the
  // page meanwhile finds every byte as it was.
  auto prepare = [&](size_t off, bool writes) {
    char* at = base_ + off;
#ifdef MADV_POPULATE_WRITE
    [[maybe_unused]] int rc = ::madvise(at, bytes, MADV_POPULATE_WRITE);
#endif
    for (size_t o = 0; o < bytes; o += kPageBytes) {
      if (writes) {
        __atomic_fetch_add(at + o, 0, __ATOMIC_RELAXED);
      } else {
        (void)*static_cast<volatile const char*>(at + o);
      }
    }
  };
  for (int r = 0; r < size_; ++r) {
    prepare(layout_.slot_off(r, 0), r == rank_);
    prepare(layout_.slot_off(r, 1), r == rank_);
  }
  prepare(layout_.result_off(0), true);
  prepare(layout_.result_off(1), true);
}

}  // namespace jaccl::detail
