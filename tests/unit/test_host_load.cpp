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

// Not settled a millisecond before `after` past t, settled at it.
void expect_settles(Scripted& s, long long t, long long after) {
  EXPECT_FALSE(s.gate.settled(t + after - kMs, 4)) << after / kMs << " ms";
  EXPECT_TRUE(s.gate.settled(t + after, 4)) << after / kMs << " ms";
}

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
  s.running = 6;  // liveness threads at a heartbeat, for a moment
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

// Reads `running` from time t on until the gate closes: returns when.
long long close_at(Scripted& s, long long t, int running) {
  s.running = running;
  while (s.gate.allows(t, 4)) {
    t += kMs;
  }
  return t;
}

TEST(HostLoad, LoadThatStaysDoublesTheBackOffUpToItsCap) {
  Scripted s;
  long long t = close_at(s, kMs, 9);
  EXPECT_EQ(t, 2 * kMs);  // two readings
  long long back_off = 50 * kMs;
  for (int i = 0; i < 8; ++i) {
    EXPECT_FALSE(s.gate.allows(t + back_off - 1, 4)) << "close " << i;
    t += back_off;
    // Reopened: the first reading finds the load again.
    EXPECT_EQ(close_at(s, t, 9), t) << "close " << i;
    back_off = std::min(back_off * 2, 1600 * kMs);
  }
  EXPECT_EQ(back_off, 1600 * kMs);
  EXPECT_FALSE(s.gate.allows(t + back_off - 1, 4));
  s.running = 4;
  EXPECT_TRUE(s.gate.allows(t + back_off, 4));
}

TEST(HostLoad, ALoadLongAfterAReopeningStartsOver) {
  Scripted s;
  long long t = close_at(s, kMs, 9);
  t = close_at(s, t + 50 * kMs, 9);  // at the reopening: 100 ms
  EXPECT_FALSE(s.gate.allows(t + 99 * kMs, 4));
  t += 100 * kMs;
  s.running = 4;
  EXPECT_TRUE(s.gate.allows(t, 4));
  // Half a second after the reopening: two readings, and a doubled back-off.
  const long long half = close_at(s, t + 500 * kMs, 9);
  EXPECT_EQ(half, t + 501 * kMs);
  EXPECT_FALSE(s.gate.allows(half + 199 * kMs, 4));
  s.running = 4;
  EXPECT_TRUE(s.gate.allows(half + 200 * kMs, 4));
  // More than a second after that reopening: back to 50 ms.
  t = close_at(s, half + 200 * kMs + 1001 * kMs, 9);
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
  EXPECT_TRUE(s.gate.allows(t += 50 * kMs, 4));
  // Within 200 ms of the reopening one long yield is enough.
  s.gate.yielded(t += 150 * kMs, 2 * kMs);
  EXPECT_FALSE(s.gate.allows(t, 4));
}

TEST(HostLoad, SettledAfterTenQuietMillisecondsAndNotAfterAStrike) {
  Scripted s;
  s.running = 4;
  long long t = kMs;
  EXPECT_FALSE(s.gate.settled(t, 4));  // the first quiet reading
  EXPECT_TRUE(s.gate.allows(t, 4));
  expect_settles(s, t, 10 * kMs);
  // One stray reading: still open, but not settled until ten more quiet
  // milliseconds.
  t += 11 * kMs;
  s.running = 5;
  EXPECT_FALSE(s.gate.settled(t, 4));
  EXPECT_TRUE(s.gate.allows(t, 4));
  s.running = 4;
  EXPECT_FALSE(s.gate.settled(t += kMs, 4));
  expect_settles(s, t, 10 * kMs);
  // Closed by long yields (past the start's grace): neither open nor
  // settled, and ten quiet milliseconds after it reopens before it
  // settles again.
  t += 400 * kMs;
  s.gate.yielded(t, 2 * kMs);
  s.gate.yielded(t += kMs, 2 * kMs);
  EXPECT_FALSE(s.gate.settled(t, 4));
  EXPECT_FALSE(s.gate.settled(t + 49 * kMs, 4));
  EXPECT_FALSE(s.gate.settled(t + 50 * kMs, 4));  // reopened
  EXPECT_TRUE(s.gate.allows(t + 50 * kMs, 4));
  expect_settles(s, t, 60 * kMs);
  // A long yield that does not close it (the first of a pair) stops the
  // moves for 30 ms all the same.
  t += 300 * kMs;
  EXPECT_TRUE(s.gate.settled(t, 4));
  s.gate.yielded(t, 2 * kMs);
  EXPECT_TRUE(s.gate.allows(t, 4));
  expect_settles(s, t, 30 * kMs);
}

TEST(HostLoad, LongYieldsInTheFirst300MsOnlyUnsettle) {
  Scripted s;
  s.running = 4;
  long long t = 5 * kMs;
  EXPECT_TRUE(s.gate.allows(t, 4));  // the gate's first use
  EXPECT_TRUE(s.gate.settled(t += 10 * kMs, 4));
  // Co-ranks still setting up (or a compute thread): long yields keep
  // the gate open but stop the moves until 30 ms after the last.
  s.gate.yielded(t += kMs, 3 * kMs);
  s.gate.yielded(t += kMs, 3 * kMs);
  s.gate.yielded(t += kMs, 3 * kMs);
  EXPECT_TRUE(s.gate.allows(t, 4));
  EXPECT_FALSE(s.gate.settled(t, 4));
  expect_settles(s, t, 30 * kMs);
  // The count still closes it during the grace.
  t += 120 * kMs;
  s.running = 6;
  EXPECT_TRUE(s.gate.allows(t, 4));
  EXPECT_FALSE(s.gate.allows(t += kMs, 4));
  s.running = 4;
  // Past the grace (and the 200 ms after that close's reopening), two
  // long yields close it.
  t = 500 * kMs;
  EXPECT_TRUE(s.gate.allows(t, 4));
  s.gate.yielded(t += kMs, 3 * kMs);
  EXPECT_TRUE(s.gate.allows(t, 4));
  s.gate.yielded(t += kMs, 3 * kMs);
  EXPECT_FALSE(s.gate.allows(t, 4));
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
