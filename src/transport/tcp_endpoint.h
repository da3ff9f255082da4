// Copyright 2026 the jaccl authors.
// The TCP implementation of the endpoint interface (transport/endpoint.h):
// one Link per connected stream socket. Messages are byte ranges laid end to
// end on the stream; a send's header and payload (and the next queued
// messages) leave in one sendmsg, a receive scatters into the queued
// messages with one recvmsg. A short read or write ends a progress() call
// (the socket is drained or full), so the wait set's poll() decides when
// to try again.
#pragma once

#include <memory>

#include "common/net.h"
#include "transport/control_block.h"
#include "transport/endpoint.h"

namespace jaccl::detail {

// rank, peer: job ranks, for messages. sndbuf: the SO_SNDBUF the set-up
// gave the socket (same host), which the link then sizes per message; 0
// leaves the kernel's autotuning alone.
std::unique_ptr<Link> make_tcp_link(Fd fd, int rank, int peer, int sndbuf);

// Wraps the TCP set-up's sockets into links (the group owns them now).
Network make_tcp_network(ControlBlock conns);

}  // namespace jaccl::detail
