// Copyright 2026 the jaccl authors.
// PLACEHOLDER while the coordinator is written (helper-3 replaces this file).
#include "bootstrap/tcp_star.h"

#include "common/error.h"

namespace jaccl::detail {

AllGatherFn make_tcp_star(const TcpStarOptions& o) {
  raise(ErrorKind::Internal, "TCP star not built yet", {.rank = o.rank});
}

}  // namespace jaccl::detail
