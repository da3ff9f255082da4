// Copyright 2026 the jaccl authors.
// The gate that lets ranks outnumbering their CPUs wait by yielding: its
// reading of /proc/loadavg, and its decisions on a scripted runnable count
// and clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "common/host_load.h"

namespace jaccl::detail {
namespace {

constexpr long long kMs = 1000 * 1000;

TEST(HostLoad, ParsesTheRunnableCount) {
  EXPECT_EQ(parse_runnable("0.60 3.97 5.12 3/456 12345\n"), 3);
  EXPECT_EQ(parse_runnable("12.00 1.00 0.00 117/2048 9"), 117);
  EXPECT_EQ(parse_runnable(""), -1);
  EXPECT_EQ(parse_runnable("0.60 3.97 5.12"), -1);
  EXPECT_EQ(parse_runnable("0.60 3.97 5.12 3"), -1);
  EXPECT_EQ(parse_runnable("0.60 3.97 5.12 x/456 1"), -1);
  EXPECT_EQ(parse_runnable("0.60 3.97 5.12 -3/456 1"), -1);
}

TEST(HostLoad, ThisKernelsLoadavgParses) {
  std::ifstream f("/proc/loadavg");
  std::stringstream text;
  text << f.rdbuf();
  // The reader is itself running.
  EXPECT_GE(parse_runnable(text.str()), 1) << text.str();
}

// A gate over a count the test sets, with the number of readings kept.
struct Scripted {
  int running = 0;
  int reads = 0;
  YieldGate gate{[this] {
    ++reads;
    return running;
  }};
};

TEST(HostLoad, QuietHostAllowsAndReadsAtMostOnceAMillisecond) {
  Scripted s;
  s.running = 4;
  for (long long t = 0; t < 10 * kMs; t += kMs / 10) {
    EXPECT_TRUE(s.gate.allows(kMs + t, 4));
  }
  EXPECT_EQ(s.reads, 10);
}

TEST(HostLoad, OneStrayReadingDoesNotCloseTwoInARowDo) {
  Scripted s;
  long long t = kMs;
  s.running = 4;
  EXPECT_TRUE(s.gate.allows(t, 4));
  s.running = 5;  // a kernel thread for a moment
  EXPECT_TRUE(s.gate.allows(t += kMs, 4));
  s.running = 4;
  EXPECT_TRUE(s.gate.allows(t += kMs, 4));
  s.running = 5;  // a task that stays
  EXPECT_TRUE(s.gate.allows(t += kMs, 4));
  EXPECT_FALSE(s.gate.allows(t += kMs, 4));
  const long long closed = t;
  // Closed for the first back-off (50 ms), whatever the count says, and
  // without reading it.
  s.running = 1;
  const int reads = s.reads;
  EXPECT_FALSE(s.gate.allows(closed + 49 * kMs, 4));
  EXPECT_EQ(s.reads, reads);
  EXPECT_TRUE(s.gate.allows(closed + 50 * kMs, 4));
}

TEST(HostLoad, AfterACloseOneReadingClosesAgainForTwiceAsLong) {
  Scripted s;
  long long t = kMs;
  s.running = 9;
  EXPECT_TRUE(s.gate.allows(t, 4));
  EXPECT_FALSE(s.gate.allows(t += kMs, 4));
  t += 50 * kMs;
  s.running = 4;
  EXPECT_TRUE(s.gate.allows(t, 4));
  s.running = 9;
  EXPECT_FALSE(s.gate.allows(t += kMs, 4));  // one strike, on probation
  EXPECT_FALSE(s.gate.allows(t + 99 * kMs, 4));
  s.running = 4;
  EXPECT_TRUE(s.gate.allows(t + 100 * kMs, 4));
}

TEST(HostLoad, BackOffStopsDoublingAtItsCapAndForgetsAfterAQuietSpell) {
  Scripted s;
  s.running = 9;
  long long t = kMs;
  EXPECT_TRUE(s.gate.allows(t, 4));
  EXPECT_FALSE(s.gate.allows(t += kMs, 4));
  long long back_off = 50 * kMs;
  for (int i = 0; i < 8; ++i) {
    t += back_off;
    EXPECT_FALSE(s.gate.allows(t, 4)) << "close " << i;
    back_off = std::min(back_off * 2, 1600 * kMs);
    EXPECT_FALSE(s.gate.allows(t + back_off - 1, 4));
  }
  EXPECT_FALSE(s.gate.allows(t + back_off, 4));  // reads 9: closes again
  // Three quiet seconds later a load needs two readings again and the
  // back-off starts over.
  t += back_off + 4000 * kMs;
  s.running = 4;
  EXPECT_TRUE(s.gate.allows(t, 4));
  s.running = 9;
  EXPECT_TRUE(s.gate.allows(t += kMs, 4));
  EXPECT_FALSE(s.gate.allows(t += kMs, 4));
  EXPECT_FALSE(s.gate.allows(t + 49 * kMs, 4));
  s.running = 4;
  EXPECT_TRUE(s.gate.allows(t + 50 * kMs, 4));
}

TEST(HostLoad, TwoLongYieldsCloseShortOnesNever) {
  Scripted s;
  s.running = 4;
  long long t = kMs;
  EXPECT_TRUE(s.gate.allows(t, 4));
  for (int i = 0; i < 1000; ++i) {
    s.gate.yielded(t += 900 * 1000, 900 * 1000);  // 0.9 ms each
  }
  EXPECT_TRUE(s.gate.allows(t, 4));
  s.gate.yielded(t += 3 * kMs, 3 * kMs);
  EXPECT_TRUE(s.gate.allows(t, 4));
  s.gate.yielded(t += 200 * kMs, 2 * kMs);  // outside the 100 ms window
  EXPECT_TRUE(s.gate.allows(t, 4));
  s.gate.yielded(t += 50 * kMs, 2 * kMs);
  EXPECT_FALSE(s.gate.allows(t, 4));
  EXPECT_TRUE(s.gate.allows(t + 50 * kMs, 4));
}

TEST(HostLoad, UnknownCountClosesForGood) {
  Scripted s;
  s.running = -1;
  EXPECT_FALSE(s.gate.allows(kMs, 4));
  s.running = 1;
  EXPECT_FALSE(s.gate.allows(1000000 * kMs, 4));
}

}  // namespace
}  // namespace jaccl::detail
