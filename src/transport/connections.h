// Copyright 2026 the jaccl authors.
// What the TCP set-up produces: connected sockets to peers and the group's
// shared failure state (transport/tcp_endpoint.h turns them into links).
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/error.h"
#include "common/net.h"
#include "transport/failure.h"

namespace jaccl::detail {

// Sockets to the other ranks, set up by the transport.
struct Connections {
  int rank = -1;
  int size = 0;
  // wires[peer][w]: the w-th TCP connection to peer (empty for self and for
  // peers this topology does not connect). Non-blocking, TCP_NODELAY.
  std::vector<std::vector<Fd>> wires;
  // send_buffer[peer]: the SO_SNDBUF set on its data wires (same host), or
  // 0 (the kernel's autotuning); may be empty (all 0).
  std::vector<int> send_buffer;
  // names[i]: the job rank of member i, for messages, when this group is a
  // subset of the job (the hosts' leaders); empty: member i is rank i.
  std::vector<int> names;
  // Deadline budget for one blocking operation (0 = none).
  Millis op_timeout{0};
  std::shared_ptr<FailureState> state = std::make_shared<FailureState>();
  // Keeps the liveness monitor (heartbeats, control sockets) alive as long
  // as the group; type-erased so collectives do not depend on it.
  std::shared_ptr<void> keepalive;

  Deadline op_deadline() const { return Deadline::after(op_timeout); }
};

}  // namespace jaccl::detail
