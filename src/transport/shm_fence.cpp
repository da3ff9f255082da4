// Copyright 2026 the jaccl authors.
#include "transport/shm_sync.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace jaccl::detail {

namespace {

long membarrier(int cmd) {
  return ::syscall(SYS_membarrier, cmd, 0, 0);
}

}  // namespace

bool asymmetric_fences() {
  // Once per process: registering makes this process's threads take part
  // in every later GLOBAL_EXPEDITED barrier (any process may issue one).
  static const bool ok = [] {
    const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0 &&
           membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
  }();
  return ok;
}

void heavy_fence() {
  if (asymmetric_fences()) {
    membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
  }
}

}  // namespace jaccl::detail
