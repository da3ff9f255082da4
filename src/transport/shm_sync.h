// Copyright 2026 the jaccl authors.
// Waiting on shared memory: spin briefly, then sleep on a futex until the op
// deadline (at most kMaxSleepMs at a time); a failure bumps the word
// (ShmChannel), so it wakes the sleepers at once. Ranks may be oversubscribed
// (4 ranks on 2 cores), so a waiter that may hold the core its peer needs
// yields on every poll; one whose peers all run elsewhere never yields (see
// wait_until).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <thread>

#include "common/deadline.h"

namespace jaccl::detail {

inline constexpr size_t kCacheLine = 64;

// A waker stores its progress, then looks for sleepers; a sleeper counts
// itself, then re-checks the progress. Each side needs a store-load fence
// between the two, or both may miss the other and the sleeper sleeps a whole
// slice. On the waker's side that fence runs on every step and waits for
// the stores just made to shared lines to drain (their cache misses
// included: a visible part of a small op's time). Where ranks have a CPU
// each, sleeping is rare, so the sleeper pays for both: heavy_fence() makes
// every thread of every process that called asymmetric_fences() pass a
// full barrier (membarrier(2), MEMBARRIER_CMD_GLOBAL_EXPEDITED), and the
// waker's fence is a compiler barrier. Oversubscribed, ranks sleep often
// and the membarrier's interrupts cost more than the fences: both sides
// fence. A channel decides once, alike on every rank (`asymmetric`).
//
// asymmetric_fences(): registers this process (once); whether heavy_fence()
// works. Every process of a channel calls it before its first step.
bool asymmetric_fences();
void heavy_fence();
inline void waker_fence(bool asymmetric) {
  if (asymmetric) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

// One word others can sleep on. Writers publish their progress elsewhere,
// then call bump(); sleepers re-check their condition after every wake.
struct alignas(kCacheLine) WakeWord {
  std::atomic<uint32_t> word{0};
  std::atomic<uint32_t> sleepers{0};

  void bump() {
    // After the caller's waker_fence(): pairs with the sleeper's increment
    // (and heavy_fence()) and recheck in wait_until.
    if (sleepers.load(std::memory_order_seq_cst) != 0) {
      word.fetch_add(1, std::memory_order_seq_cst);
      ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE,
                INT32_MAX, nullptr, nullptr, 0);
    }
  }
};
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

// How a waiter should wait for the rank it waits for, from where that rank
// runs.
enum class WaitMode {
  kSpin,   // it runs on another core: it answers in well under a microsecond
  kYield,  // it may be waiting for this core (oversubscribed, or same CPU)
};

// Waits until ready() holds. check() runs after every sleep (and may throw:
// the failure state, the deadline dl). Returns when ready. mode() says how
// to wait (re-read as the wait goes on). asymmetric: the channel's wakers
// fence lightly (see waker_fence).
template <class Ready, class Check, class Mode>
void wait_until(WakeWord& ww, bool asymmetric, const Deadline& dl, Ready ready,
                Check check, Mode mode) {
  using Clock = std::chrono::steady_clock;
  // 1. Poll for up to kSleepAfter, then sleep on the futex.
  //    A peer that runs on another core answers in well under a
  //    microsecond, so the poll spins and never yields: a yield hands this
  //    core to whatever else is runnable here (a compute thread of this
  //    process, another process) until the scheduler's next tick, and a
  //    step that waits for that costs milliseconds (a 1 MiB all_sum beside
  //    a compute thread in its rank's process took 24x its unloaded time).
  //    The scheduler preempts a spinner at its tick anyway, so others here
  //    lose no more than their fair share.
  //    When the peer last ran on this CPU, or shares it with this rank
  //    (oversubscribed), it is likely waiting for this core: every poll
  //    yields. The scheduler may
  //    put two ranks that woke each other on one CPU and leave them there
  //    for a long while (a spin then costs a whole step); the caller then
  //    moves one of them (ShmChannel::wait_mode). Sleeping on the futex
  //    instead did not separate them (the wake-up put the sleeper back
  //    beside its waker). Figures: BENCHMARKS.md, History.
  //    A yield may hand the core away for long (a round of every task
  //    runnable here), so the clock is read after each one: 1024 ranks on
  //    2 CPUs yielded some 60 times each, a switch apiece, in a wait the
  //    200 µs should have ended.
  // 2. Sleep on the futex, so that a long wait (a peer computing between
  //    ops) leaves the core to others; spinning longer before it made one
  //    busy process beside the job slower (the spinner takes its slices).
  //    The sleep lasts until the deadline: a failure and the awaited
  //    progress bump the word. kMaxSleepMs only bounds a wake-up missed by
  //    some path yet unknown; periodic wake-ups of a thousand sleepers
  //    (every 50 ms, before) took a CPU-second a second.
  constexpr auto kSleepAfter = std::chrono::microseconds(200);
  constexpr int kMaxSleepMs = 1000;
  if (ready())
    return;
  const auto start = Clock::now();
  WaitMode m = mode();
  for (unsigned i = 1;; ++i) {
    if (ready())
      return;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 0) {
      if (Clock::now() - start > kSleepAfter)
        break;
      m = mode();
    }
    if (m == WaitMode::kYield) {
      std::this_thread::yield();
      if (Clock::now() - start > kSleepAfter)
        break;
    }
  }
  for (;;) {
    uint32_t seen = ww.word.load(std::memory_order_seq_cst);
    ww.sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (asymmetric) {
      heavy_fence();  // every waker's last store is now visible here
    }
    // check() too before sleeping: a failure recorded before the increment
    // bumped no word, one recorded after it does (FailureState hooks,
    // ShmChannel), so the sleep ends at once either way.
    bool done = false;
    try {
      done = ready();
      if (!done)
        check();
    } catch (...) {
      ww.sleepers.fetch_sub(1, std::memory_order_seq_cst);
      throw;
    }
    if (done) {
      ww.sleepers.fetch_sub(1, std::memory_order_seq_cst);
      return;
    }
    const int ms = dl.poll_ms(kMaxSleepMs);
    timespec slice{ms / 1000, static_cast<long>(ms % 1000) * 1000 * 1000};
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ww.word), FUTEX_WAIT,
              seen, &slice, nullptr, 0);
    ww.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (ready())
      return;
    check();
  }
}

}  // namespace jaccl::detail
