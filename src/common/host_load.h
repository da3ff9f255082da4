// Copyright 2026 the jaccl authors.
// Whether ranks that outnumber their host's CPUs may wait by yielding to
// each other instead of sleeping. Yielding keeps every rank runnable, so
// the kernel never parks a woken rank behind its waker while another CPU
// idles (4 ranks on 2 CPUs over TCP slept through a quarter of the CPU
// time); but a yield to a task outside the job hands it a whole time
// slice. The gate follows the kernel's count of runnable tasks and how
// long yields take, and closes for a while when the CPUs are not the
// job's alone.
#pragma once

#include <atomic>
#include <functional>
#include <string_view>

namespace jaccl::detail {

// How a rank waits when its host's ranks outnumber the CPUs.
struct YieldPlan {
  int ranks = 0;      // this host's ranks; 0: never yield
  int home_cpu = -1;  // the CPU it moves back to while yielding; -1: none
};

// /proc/loadavg's runnable count ("0.60 3.97 5.12 3/456 12345" -> 3), -1
// when the text has no such field.
int parse_runnable(std::string_view loadavg);

class YieldGate {
 public:
  // `runnable` returns the host's runnable tasks now (-1: unknown).
  explicit YieldGate(std::function<int()> runnable);

  // Whether a rank of a job with `ranks` members on this host may yield at
  // now_ns. While the job yields, all its ranks are runnable, so more
  // runnable tasks than `ranks` means work from outside it; two such
  // readings in a row (threads that wake for a moment seldom last that
  // long, a busy task does) close the gate for a back-off of 50 ms,
  // doubled at each close within 1 s of the last reopening, up to 1.6 s;
  // within 200 ms of a reopening one reading closes it. It reads the count
  // at most once a millisecond; unknown closes it for good.
  bool allows(long long now_ns, int ranks);

  // A yield the gate allowed ended at now_ns after took_ns: one of a
  // millisecond or more went to a task that does not yield back (a
  // rank's own compute thread, unseen by the count while co-ranks sleep);
  // two within 100 ms, or one within 200 ms of a reopening, close the
  // gate. In the first 300 ms after the gate's first use (ranks still
  // setting up) none closes it. Any long yield unsettles it for 30 ms.
  void yielded(long long now_ns, long long took_ns);

  // Whether the gate allows, has read no more runnable tasks than `ranks`
  // for at least 10 ms and saw no long yield in the last 30 ms: for
  // moving a rank to another CPU, which beside a task that does not yield
  // puts it behind that task's slices (a move made before two readings
  // could close the gate cost a 4-rank shm job 45x at 8 B beside a
  // compute thread).
  bool settled(long long now_ns, int ranks);

  // The process's gate, over /proc/loadavg.
  static YieldGate& host();

 private:
  // Whether the gate reopened less than `within` before now_ns.
  bool since_reopening(long long now_ns, long long within) const;
  void close(long long now_ns);

  std::function<int()> runnable_;
  std::atomic<long long> next_check_ns_{0};
  std::atomic<long long> closed_until_ns_{0};
  std::atomic<long long> long_yield_at_ns_{-1};
  // The first allows() call (-1: none yet): the start of the grace for
  // long yields.
  std::atomic<long long> first_use_ns_{-1};
  // The first reading of the current quiet spell (-1: none yet).
  std::atomic<long long> quiet_since_ns_{-1};
  std::atomic<int> level_{0};
  std::atomic<int> strikes_{0};
};

// Moves the calling thread back to `home_cpu` (move_to_cpu) if it runs
// elsewhere and the host's gate has settled for a job of `ranks` here;
// true if it moved. Oversubscribed ranks that yield call it now and then.
bool move_home(int home_cpu, int ranks, long long now_ns);

}  // namespace jaccl::detail
