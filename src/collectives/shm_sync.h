// Copyright 2026 the jaccl authors.
// Waiting on shared memory: spin briefly, then sleep on a futex, waking every
// slice to check the group's failure state and the op deadline. Ranks may be
// oversubscribed (4 ranks on 2 cores), so a waiter must give up its core
// quickly; the spin phase is short and yields.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <thread>

namespace jaccl::detail {

inline constexpr size_t kCacheLine = 64;

// One word others can sleep on. Writers publish their progress elsewhere,
// then call bump(); sleepers re-check their condition after every wake.
struct alignas(kCacheLine) WakeWord {
  std::atomic<uint32_t> word{0};
  std::atomic<uint32_t> sleepers{0};

  void bump() {
    // seq_cst pairs with the sleeper's increment-then-recheck in wait_until.
    if (sleepers.load(std::memory_order_seq_cst) != 0) {
      word.fetch_add(1, std::memory_order_seq_cst);
      ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE,
                INT32_MAX, nullptr, nullptr, 0);
    }
  }
};
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

// Waits until ready() holds. check() runs every slice (and may throw: the
// failure state, the deadline). Returns when ready.
// oversubscribed: more local ranks than cores; then the peer we wait for
// may need this very core, so every poll yields.
template <class Ready, class Check>
void wait_until(WakeWord& ww, Ready ready, Check check,
                bool oversubscribed = false) {
  using Clock = std::chrono::steady_clock;
  // 1. Spin without giving up the core: a peer that is running answers in
  //    well under a microsecond, and a yield here would hand the core to any
  //    other process for a whole time slice. Oversubscribed, the peer is
  //    likely waiting for this core, so every poll yields (4 ranks on 2
  //    cores: 24 us -> 3 us per small all_sum).
  // 2. Then yield between polls for a while (oversubscribed ranks let the
  //    peer run on this core).
  // 3. Then sleep on the futex.
  const auto start = Clock::now();
  for (unsigned i = 1;; ++i) {
    if (ready())
      return;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 0) {
      auto spent = Clock::now() - start;
      if (spent > std::chrono::microseconds(200))
        break;
      if (spent > std::chrono::microseconds(20))
        std::this_thread::yield();
    }
    if (oversubscribed) {
      std::this_thread::yield();
    }
  }
  for (;;) {
    uint32_t seen = ww.word.load(std::memory_order_seq_cst);
    ww.sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (ready()) {
      ww.sleepers.fetch_sub(1, std::memory_order_seq_cst);
      return;
    }
    timespec slice{0, 50 * 1000 * 1000};  // 50 ms: bounds failure detection
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&ww.word), FUTEX_WAIT,
              seen, &slice, nullptr, 0);
    ww.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (ready())
      return;
    check();
  }
}

}  // namespace jaccl::detail
