// Copyright 2026 the jaccl authors.
#include "common/host_load.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <string>
#include <utility>

#include "common/affinity.h"
#include "common/read_file.h"

namespace jaccl::detail {

namespace {

constexpr long long kMs = 1000 * 1000;
constexpr long long kCheckEveryNs = 1 * kMs;
// Readings in a row above the job's ranks that close the gate: the job's
// own liveness threads wake together at each heartbeat and kernel threads
// come and go (4 ranks alone on 2 CPUs read 5-7 for a millisecond every
// few seconds); a busy task stays.
constexpr int kStrikes = 2;
constexpr long long kFirstBackOffNs = 50 * kMs;
constexpr int kMaxLevel = 5;  // 50 ms << 5 = 1.6 s
// For this long after it reopens, one reading or one long yield closes the
// gate again (a load that stays is found at once, while the ranks that
// would show it in the count may still sleep).
constexpr long long kProbationNs = 200 * kMs;
// A close within this long of the gate's last reopening doubles the
// back-off.
constexpr long long kMemoryNs = 1000 * kMs;
// Unloaded, 4 ranks on 2 CPUs saw one or two yields of a millisecond or
// more per process in a 3-second run; beside a compute thread, hundreds.
constexpr long long kLongYieldNs = 1 * kMs;
constexpr long long kLongYieldWindowNs = 100 * kMs;
constexpr long long kSettleNs = 10 * kMs;
// After a long yield, no moves to a home CPU for this long: a compute
// thread beside the ranks makes long yields many times within it, so a
// move lands beside it no more often than with 100 ms (4 shm ranks and a
// compute thread, 10 runs each), while ranks that finished setting up
// move home 70 ms sooner (4-rank TCP all_to_all at 64 KiB in a job's
// first 100 ms: 0.73x the time).
constexpr long long kUnsettleNs = 30 * kMs;
// A job's ranks finish setting up at different times (page faults on fresh
// buffers, connections, first checks), and a rank that yields to a co-rank
// still doing so waits out its slice: every 4-rank TCP job closed the gate
// that way in its first milliseconds and slept through its first 50-150
// ms. For this long after the gate's first use a long yield does not close
// it (the count still does); like any long yield it stops the moves to a
// home CPU for a while (settled()), as it may be a compute thread's.
// BENCHMARKS.md, History, "2026-12-05 midday".
constexpr long long kStartGraceNs = 300 * kMs;

// Opened, read and closed each time (a few microseconds, at most once a
// millisecond): a descriptor kept open would be one the process never
// asked for, and the job's descriptor checks count them.
int read_loadavg() {
  std::string text;
  if (!read_file("/proc/loadavg", &text)) {
    return -1;
  }
  return parse_runnable(text);
}

}  // namespace

int parse_runnable(std::string_view s) {
  size_t pos = 0;
  for (int field = 0; field < 3; ++field) {
    pos = s.find(' ', pos);
    if (pos == std::string_view::npos) {
      return -1;
    }
    ++pos;
  }
  int v = -1;
  const char* end = s.data() + s.size();
  const auto [stop, ec] = std::from_chars(s.data() + pos, end, v);
  if (ec != std::errc() || stop == end || *stop != '/' || v < 0) {
    return -1;
  }
  return v;
}

YieldGate::YieldGate(std::function<int()> runnable)
    : runnable_(std::move(runnable)) {}

bool YieldGate::allows(long long now_ns, int ranks) {
  if (first_use_ns_.load(std::memory_order_relaxed) < 0) {
    long long unused = -1;  // a plain load first: no locked RMW per call
    first_use_ns_.compare_exchange_strong(unused, now_ns,
                                          std::memory_order_relaxed);
  }
  if (now_ns < closed_until_ns_.load(std::memory_order_relaxed)) {
    return false;
  }
  if (now_ns < next_check_ns_.load(std::memory_order_relaxed)) {
    return true;
  }
  next_check_ns_.store(now_ns + kCheckEveryNs, std::memory_order_relaxed);
  const int running = runnable_();
  if (running < 0) {
    closed_until_ns_.store(LLONG_MAX, std::memory_order_relaxed);
    return false;
  }
  if (running <= ranks) {
    strikes_.store(0, std::memory_order_relaxed);
    long long none = -1;
    quiet_since_ns_.compare_exchange_strong(none, now_ns,
                                            std::memory_order_relaxed);
    return true;
  }
  quiet_since_ns_.store(-1, std::memory_order_relaxed);
  if (!since_reopening(now_ns, kProbationNs) &&
      strikes_.fetch_add(1, std::memory_order_relaxed) + 1 < kStrikes) {
    return true;
  }
  close(now_ns);
  return false;
}

void YieldGate::yielded(long long now_ns, long long took_ns) {
  if (took_ns < kLongYieldNs) {
    return;
  }
  const long long last = long_yield_at_ns_.exchange(now_ns);
  const long long first = first_use_ns_.load(std::memory_order_relaxed);
  if (first >= 0 && now_ns - first < kStartGraceNs) {
    return;  // unsettles it (settled()) but does not close it
  }
  if (since_reopening(now_ns, kProbationNs) ||
      (last >= 0 && now_ns - last < kLongYieldWindowNs)) {
    close(now_ns);
  }
}

bool YieldGate::settled(long long now_ns, int ranks) {
  if (!allows(now_ns, ranks)) {
    return false;
  }
  const long long lya = long_yield_at_ns_.load(std::memory_order_relaxed);
  if (lya >= 0 && now_ns - lya < kUnsettleNs) {
    return false;
  }
  const long long since = quiet_since_ns_.load(std::memory_order_relaxed);
  return since >= 0 && now_ns - since >= kSettleNs;
}

bool YieldGate::since_reopening(long long now_ns, long long within) const {
  const long long until = closed_until_ns_.load(std::memory_order_relaxed);
  return until > 0 && now_ns >= until && now_ns - until < within;
}

void YieldGate::close(long long now_ns) {
  if (now_ns < closed_until_ns_.load(std::memory_order_relaxed)) {
    return;  // another thread closed it already
  }
  const int level =
      since_reopening(now_ns, kMemoryNs)
          ? std::min(level_.load(std::memory_order_relaxed) + 1, kMaxLevel)
          : 0;
  level_.store(level, std::memory_order_relaxed);
  strikes_.store(0, std::memory_order_relaxed);
  quiet_since_ns_.store(-1, std::memory_order_relaxed);
  closed_until_ns_.store(now_ns + (kFirstBackOffNs << level),
                         std::memory_order_relaxed);
}

bool move_home(int home_cpu, int ranks, long long now_ns) {
  return ::sched_getcpu() != home_cpu &&
         YieldGate::host().settled(now_ns, ranks) && move_to_cpu(home_cpu);
}

YieldGate& YieldGate::host() {
  static YieldGate gate(read_loadavg);
  return gate;
}

}  // namespace jaccl::detail
