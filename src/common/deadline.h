// Copyright 2026 the jaccl authors.
// Deadlines: every blocking wait in jaccl is bounded by one of these.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

namespace jaccl::detail {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// Nanoseconds on the steady clock, for measuring durations (the epoch is
// arbitrary): the shared-memory tuner's timings, the wait set's spin window.
inline uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          Clock::now().time_since_epoch())
          .count());
}

class Deadline {
 public:
  // A budget of d from now; d <= 0 means no limit.
  static Deadline after(Millis d) {
    Deadline dl;
    dl.total_ = d;
    dl.never_ = d.count() <= 0;
    dl.at_ = Clock::now() + d;
    return dl;
  }
  static Deadline never() { return after(Millis(0)); }

  bool is_never() const { return never_; }
  bool expired() const { return !never_ && Clock::now() >= at_; }
  Millis remaining() const {
    if (never_) {
      return Millis::max();
    }
    auto left = std::chrono::duration_cast<Millis>(at_ - Clock::now());
    return std::max(left, Millis(0));
  }
  // For poll(): -1 when unlimited, else the time left (rounded up) capped at
  // cap_ms if cap_ms >= 0.
  int poll_ms(int cap_ms = -1) const {
    if (never_) {
      return cap_ms;
    }
    auto left = std::chrono::ceil<Millis>(at_ - Clock::now()).count();
    left = std::max<long long>(left, 0);
    if (cap_ms >= 0) {
      left = std::min<long long>(left, cap_ms);
    }
    return static_cast<int>(left);
  }
  Millis total() const { return total_; }

  // The sooner of two deadlines.
  static Deadline sooner(const Deadline& a, const Deadline& b) {
    if (a.never_)
      return b;
    if (b.never_)
      return a;
    return a.at_ <= b.at_ ? a : b;
  }

 private:
  Clock::time_point at_{};
  Millis total_{0};
  bool never_ = true;
};

// "30 s", "1.5 s", "250 ms".
inline std::string format_duration(Millis d) {
  if (d.count() < 1000) {
    return std::to_string(d.count()) + " ms";
  }
  if (d.count() % 1000 == 0) {
    return std::to_string(d.count() / 1000) + " s";
  }
  std::string s = std::to_string(d.count() / 1000) + "." +
                  std::to_string((d.count() % 1000) / 100) + " s";
  return s;
}

}  // namespace jaccl::detail
