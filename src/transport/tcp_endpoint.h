// Copyright 2026 the jaccl authors.
// The TCP implementation of the endpoint interface (transport/endpoint.h):
// one Link per connected stream socket. Messages are byte ranges laid end to
// end on the stream; a send's header and payload (and the next queued
// messages) leave in one sendmsg, a receive scatters into the queued
// messages with one recvmsg. A short read or write ends a progress() call
// (the socket is drained or full), so the wait set's poll() decides when
// to try again.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/net.h"
#include "transport/control_block.h"
#include "transport/endpoint.h"

namespace jaccl::detail {

// The bytes a link has moved through its socket, each way (what the kernel
// took from sendmsg, what recvmsg returned, read-ahead included): where
// the stream stands, for a shrunk group that takes the socket over
// (transport/tcp_reuse.h).
struct WireCount {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> received{0};
};

// A group's data sockets as a shrink takes them over: per peer (member
// index), per wire, the link's socket (not owned: the links close them;
// a shrink, which runs while its parent lives, duplicates them) and the
// link's counts. Not a second descriptor of its own: a killed rank's
// kernel then closes its data connections in the order of their numbers,
// as without the bank, before its control connections (a second,
// higher-numbered copy kept every data connection open until after
// them, and every peer learnt of the death from its liveness thread,
// tens of ms later at 64 ranks, instead of from its failing operation).
// Filled by make_tcp_network; used by one thread at a time.
struct WireBank {
  std::vector<std::vector<int>> fds;
  std::vector<std::vector<std::shared_ptr<WireCount>>> counts;
  std::vector<int> send_buffer;
  // The group's op lock (OpRunner's, through Network::op_lock): held, no
  // op of the group is on these wires.
  std::shared_ptr<std::mutex> ops;
};

// rank, peer: job ranks, for messages. sndbuf: the SO_SNDBUF the set-up
// gave the socket (same host), which the link then sizes per message; 0
// leaves the kernel's autotuning alone. count, when given, is kept up to
// date with the bytes moved.
std::unique_ptr<Link> make_tcp_link(Fd fd, int rank, int peer, int sndbuf,
                                    std::shared_ptr<WireCount> count = nullptr);

// Wraps the TCP set-up's sockets into links (the group owns them now);
// fills conns.bank, when set.
Network make_tcp_network(ControlBlock conns);

}  // namespace jaccl::detail
