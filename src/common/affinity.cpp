// Copyright 2026 the jaccl authors.
#include "common/affinity.h"

#include <sched.h>

namespace jaccl::detail {

bool move_off_this_cpu() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof(mask), &mask) != 0)
    return false;
  const int cpu = ::sched_getcpu();
  if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mask) ||
      CPU_COUNT(&mask) < 2)
    return false;
  cpu_set_t others = mask;
  CPU_CLR(cpu, &others);
  const bool moved = ::sched_setaffinity(0, sizeof(others), &others) == 0;
  // Always restore what the thread had, even if the first call failed
  // half-way: the caller's mask is not ours to change.
  ::sched_setaffinity(0, sizeof(mask), &mask);
  return moved;
}

}  // namespace jaccl::detail
