// Copyright 2026 the jaccl authors.
// The calling thread's CPU affinity mask, and a nudge when the scheduler has
// put two ranks that wait for each other on one CPU.
#pragma once

#include <cstdint>
#include <vector>

namespace jaccl::detail {

// The CPUs the calling thread may run on, ascending (empty if the system
// refuses to say).
std::vector<int> allowed_cpus();

// How many CPUs the calling thread may run on: its affinity mask's count
// (taskset, a cpuset), not the host's, so that "more ranks than CPUs" holds
// under either; the host's count if the mask cannot be read; at least 1.
// The one CPU count for every oversubscription decision.
int allowed_cpu_count();

// A rank's CPU mask as ranks exchange it at set-up: CPUs below kBits as
// bits, and how many it may use past them. Trivial, as the messages it
// travels in are: value-initialise it (CpuMask m{}).
struct CpuMask {
  static constexpr int kWords = 3;
  static constexpr int kBits = kWords * 64;
  uint64_t bits[kWords];
  uint32_t beyond;
};

// The calling thread's mask (every CPU of the host if it cannot be read).
CpuMask cpu_mask();

// How many CPUs ranks with these masks may run on between them: the union's
// count, not any one rank's, so that ranks bound to a CPU each (jaccl-run's,
// mpirun's or srun's binding) are not taken for ranks sharing one. CPUs past
// the bits count as many as the most any one mask has there. At least 1.
// One mask at a time: a rank adds the masks of its host's ranks as it reads
// them, with no vector of them (32 KiB at 1024 ranks).
class CpuUnion {
 public:
  void add(const CpuMask& m);
  int count() const;

 private:
  uint64_t all_[CpuMask::kWords] = {};
  uint32_t beyond_ = 0;
};

// Restricts the calling thread to `cpus` (called in a forked child before
// exec, it binds the process); false if the system refuses. Allocates
// nothing.
bool set_allowed_cpus(const std::vector<int>& cpus);

// Moves the calling thread off the CPU it runs on, to another CPU of its
// affinity mask, and leaves that mask as it was (set without this CPU, the
// kernel migrates the thread at once; set back, only the scheduler's own
// balancing moves it again). False if the mask allows no other CPU, the
// system refuses, or the thread was not seen on another CPU.
bool move_off_this_cpu();

// Moves the calling thread to `cpu` (one of its mask's) the same way,
// leaving the mask as it was. False if the mask allows no other CPU, does
// not hold `cpu`, or the system refuses.
bool move_to_cpu(int cpu);

// The CPU of the calling thread's mask that member `index` of `count`
// goes back to when they share those CPUs in consecutive blocks (members
// 0-1 on the first of 2 CPUs, 2-3 on the second, as jaccl-run's shares):
// -1 when the mask holds fewer than two CPUs or index is out of range.
int share_cpu(int index, int count);
// share_cpu of every member 0..count-1, from one look at the mask (empty
// when it holds fewer than two CPUs).
std::vector<int> share_cpus(int count);

}  // namespace jaccl::detail
