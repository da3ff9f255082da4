// Copyright 2026 the jaccl authors.
// How a shared-memory group's large ops write their output into the
// caller's buffer: with ordinary (temporal) stores, which keep the output in
// cache, or with non-temporal stores, which skip reading each line first and
// do not evict the staging buffers. Which one wins depends on the machine,
// not on a cache size: on the 2026-12-01 AMD EPYC VM the streaming copy-out
// was ahead from 1 MiB (2 ranks) although a single core's memcpy stays in
// cache up to 4 MiB there, and `sysconf` reported the host's 256 MiB L3
// instead of the VM's 32 MiB. So, unless a strategy is forced
// (JACCL_SHM_STRATEGY), every rank measures, per op kind and power-of-two
// size class, its first calls with each copy-out (cached, stream, stream,
// cached), publishes each call's time at the next sync step, and from then
// on uses the one with the lower time per byte (slowest rank's time, best
// of its samples). The decision is a pure function of values every rank
// reads from the same shared step, so every rank of the host makes the same
// choice; results do not depend on it (the reduction order is fixed), only
// speed does.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace jaccl::detail {

enum class ShmStrategy : uint32_t { Auto = 0, Cached = 1, Stream = 2 };

inline const char* shm_strategy_name(ShmStrategy s) {
  switch (s) {
    case ShmStrategy::Auto:
      return "auto";
    case ShmStrategy::Cached:
      return "cached";
    case ShmStrategy::Stream:
      return "stream";
  }
  return "unknown";
}

// "auto", "cached", "stream"; false if none of these.
inline bool parse_shm_strategy(const char* text, ShmStrategy* out) {
  for (ShmStrategy s :
       {ShmStrategy::Auto, ShmStrategy::Cached, ShmStrategy::Stream}) {
    const char* name = shm_strategy_name(s);
    const char* a = text;
    const char* b = name;
    while (*a != '\0' && *a == *b) {
      ++a;
      ++b;
    }
    if (*a == '\0' && *b == '\0') {
      *out = s;
      return true;
    }
  }
  return false;
}

class ShmTuner {
 public:
  enum Kind { kReduce = 0, kGather = 1, kBroadcast = 2, kKinds = 3 };

  // forced: Auto to measure, else the strategy every op uses.
  explicit ShmTuner(ShmStrategy forced = ShmStrategy::Auto) : forced_(forced) {}

  ShmStrategy forced() const { return forced_; }

  // Whether the large op about to start (kind, `bytes` of the caller's
  // message) copies out with non-temporal stores. `guess` is the heuristic
  // choice used for the first trial. Remembers the op, so that finish()
  // can record its time.
  bool begin(Kind kind, size_t bytes, bool guess) {
    if (forced_ != ShmStrategy::Auto) {
      return forced_ == ShmStrategy::Stream;
    }
    Class& c = table_[kind][class_of(bytes)];
    int pick;
    const uint32_t idx = c.calls++;
    if (idx < 4) {
      // First guess, other, other, first guess: alternating cancels drift.
      const int g = guess ? 1 : 0;
      pick = (idx == 0 || idx == 3) ? g : 1 - g;
    } else if (c.samples[0] != 0 && c.samples[1] != 0) {
      pick = c.best[1] < c.best[0] ? 1 : 0;
    } else {
      pick = c.samples[1] != 0 ? 1 : 0;
    }
    cur_ = Record{kind, class_of(bytes), pick, bytes};
    timing_ = true;
    return pick == 1;
  }

  // The op begun last ended after `ns` on this rank: reported at the next
  // sync step (report()), then absorbed with every rank's report.
  void finish(uint64_t ns) {
    if (!timing_)
      return;
    timing_ = false;
    done_ = cur_;
    report_ = ns + 1;  // 0 means "nothing to report"
  }

  // What this rank publishes at its next sync step (0: nothing); taken
  // once.
  uint64_t take_report() {
    uint64_t r = report_;
    report_ = 0;
    reported_ = r != 0;
    return r;
  }

  // After that step: the largest report of all ranks (every rank reported
  // at the same step, since they run the same ops). Every rank calls this
  // with the same value, so the tables stay identical.
  void absorb(uint64_t slowest_ns) {
    if (!reported_)
      return;
    reported_ = false;
    Class& c = table_[done_.kind][done_.cls];
    const double per_byte =
        static_cast<double>(slowest_ns) / static_cast<double>(done_.bytes | 1);
    double& best = c.best[done_.pick];
    if (c.samples[done_.pick] == 0 || per_byte < best)
      best = per_byte;
    ++c.samples[done_.pick];
  }
  bool reported() const { return reported_; }

  // The choice made for ops of this kind and size from now on, if the
  // measurements are complete (tests, logs): Auto while still measuring.
  ShmStrategy chosen(Kind kind, size_t bytes) const {
    if (forced_ != ShmStrategy::Auto)
      return forced_;
    const Class& c = table_[kind][class_of(bytes)];
    if (c.calls < 4 || c.samples[0] == 0 || c.samples[1] == 0)
      return ShmStrategy::Auto;
    return c.best[1] < c.best[0] ? ShmStrategy::Stream : ShmStrategy::Cached;
  }

  static size_t class_of(size_t bytes) {
    size_t k = 0;
    while (k + 1 < kClasses && (size_t(1) << (k + 1)) <= bytes)
      ++k;
    return k;
  }

 private:
  static constexpr size_t kClasses = 48;
  struct Class {
    uint32_t calls = 0;
    std::array<uint32_t, 2> samples{};
    std::array<double, 2> best{};  // ns per byte, lowest seen
  };
  ShmStrategy forced_;
  std::array<std::array<Class, kClasses>, kKinds> table_{};
  struct Record {
    int kind = 0;
    size_t cls = 0;
    int pick = 0;
    size_t bytes = 1;
  };
  Record cur_;   // the op begun last
  Record done_;  // the op whose time is being reported
  bool timing_ = false;
  bool reported_ = false;
  uint64_t report_ = 0;
};

}  // namespace jaccl::detail
