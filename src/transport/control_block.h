// Copyright 2026 the jaccl authors.
// Every transport's control block: what the job-wide set-up
// (transport/tcp_connect.h: setup_tcp, which always connects every pair for
// liveness) leaves for the data planes built on it, whichever carries the
// data -- TCP (tcp_endpoint.h), libfabric (ofi_link.h) or shared memory
// (shm_setup.h).
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "common/error.h"
#include "common/net.h"
#include "transport/failure.h"
#include "transport/tcp_card.h"

namespace jaccl::detail {

class LivenessMonitor;
struct WireBank;

// Where a group's liveness monitor goes when it comes after the group's
// data plane (a shrunk group's, made of its parent's connections).
struct MonitorSlot {
  std::shared_ptr<LivenessMonitor> monitor;
};

// The group's failure state and liveness monitor (every plane reports to
// them), its op budget and member names, and, where TCP carries data, the
// data sockets.
struct ControlBlock {
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
  // The members on this rank's kernel and the CPUs they may run on between
  // them (0: unknown), so the group knows whether a waiter may spin.
  int host_ranks = 0;
  int host_cpus = 0;
  int host_index = -1;  // this rank's place among them, in rank order
  // Deadline budget for one blocking operation (0 = none).
  Millis op_timeout{0};
  std::shared_ptr<FailureState> state = std::make_shared<FailureState>();
  // Keeps the liveness monitor (heartbeats, control sockets) alive as long
  // as the group; type-erased so collectives do not depend on it.
  std::shared_ptr<void> keepalive;
  // The same monitor, for the group layer's elastic calls (agreement,
  // survivors' side channel); null for a group of one.
  std::shared_ptr<LivenessMonitor> monitor;
  // Every member's card from the set-up (a shrink may plan from them).
  std::shared_ptr<const std::vector<TcpCard>> cards;
  // When set, make_tcp_network records every data socket's number there,
  // with the link's byte counts, so that a shrunk group can take the
  // surviving connections over (transport/tcp_reuse.h).
  std::shared_ptr<WireBank> bank;
  // A shrink's set-up (the group's monitor comes later, taking its
  // parent's control connections over; group/shrink.cpp).
  bool shrink = false;
  // A shrink's one-to-all send over the survivors' control connections:
  // broadcast(bytes, root) returns root's bytes on every member (bytes
  // ignored elsewhere); throws once any member is lost or at the set-up's
  // deadline. Set for a shrink's first attempt only: with it, a shared-
  // memory set-up on one host takes one message from the creator instead
  // of rounds of every member, and the commit agreement that follows the
  // set-up tells whether every member mapped the segment (shm_setup.h).
  std::function<std::string(std::string_view, int)> broadcast;
  // Set instead of monitor by setup_tcp's monitor_later: starts the liveness
  // monitor into monitor_slot (the keepalive). The caller runs it once a
  // side-channel round of every rank has followed the set-up, which proves
  // every rank connected, as setup_tcp's own barrier does otherwise.
  std::function<void()> start_monitor;
  std::shared_ptr<MonitorSlot> monitor_slot;

  Deadline op_deadline() const { return Deadline::after(op_timeout); }
};

}  // namespace jaccl::detail
