// Copyright 2026 the jaccl authors.
// --bind-to: each rank started here gets an equal, disjoint share of the
// CPUs jaccl-run may run on, as mpirun and srun bind their ranks. Two ranks
// that wait on each other and are left unbound are often put on one CPU by
// the kernel (a wakee goes to its waker's CPU) and stay there. Reading and
// setting masks is common/affinity.h's.
#pragma once

#include <string>
#include <vector>

namespace jaccl::run {

// Rank r of n gets cpus[r*C/n, (r+1)*C/n): consecutive CPUs in the kernel's
// numbering, not a topology-aware placement (with SMT a share may hold a
// sibling of another rank's core). Requires n <= C.
std::vector<std::vector<int>> cpu_shares(int n, const std::vector<int>& cpus);

// "0-3,8" (the form of taskset -c and /proc/self/status).
std::string cpu_list(const std::vector<int>& cpus);

}  // namespace jaccl::run
