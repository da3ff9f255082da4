// Copyright 2026 the jaccl authors.
// The default side channel: a TCP star rooted at rank 0 (JACCL_COORDINATOR).
#pragma once

#include <string>

#include "common/deadline.h"
#include "jaccl/side_channel.h"

namespace jaccl::detail {

struct TcpStarOptions {
  int rank = -1;
  int size = 0;
  std::string address;  // host:port; rank 0 listens, the others dial
  std::string token;    // job token ("" = none)
  Millis timeout{60000};
};

// Rank 0 binds immediately (so "address in use" surfaces at init); everyone
// connects and completes the handshake on the first call. The returned
// function keeps the connections for its lifetime.
AllGatherFn make_tcp_star(const TcpStarOptions& options);

}  // namespace jaccl::detail
