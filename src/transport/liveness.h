// Copyright 2026 the jaccl authors.
// The liveness monitor: one thread per group that owns one control
// connection to every peer it is connected to (every peer, or only rank 0
// in a single-host shared-memory job, where rank 0's ABORT relays a death to
// the rest) and turns a peer's death into a group failure without help from
// the side channel.
//
// Control frames (12-byte header, little endian: type u8, kind u8, magic u16,
// root rank i32, body length u32, then the body):
//   HEARTBEAT  sent every heartbeat_timeout / 4
//   GOODBYE    sent when the group is destroyed normally
//   ABORT      (root rank, error kind, the root's error fields encoded by
//              common/error_wire.h) sent once to every peer when this
//              rank's FailureState records its first failure
//
// Detection bounds:
//   - a peer process that dies (SIGKILL, crash, exit without destroying its
//     group): its kernel closes the control socket, we read EOF without a
//     GOODBYE -> PeerLost "rank 3 died or closed its connection (no goodbye)"
//     within milliseconds;
//   - a peer that is alive but silent (stopped, hung host, cable pulled,
//     host powered off): no frame for heartbeat_timeout (JACCL_HEARTBEAT_
//     TIMEOUT, default 10 s) -> PeerLost "no heartbeat from rank 3 for 10 s:
//     host unreachable?", within heartbeat_timeout plus one poll tick (at
//     most heartbeat_timeout / 4); with heartbeat_timeout = 0 only TCP
//     keepalive remains (about 2 minutes on an idle link);
//   - a failure on any rank reaches every other rank as an ABORT naming the
//     root cause ("rank 2 reported: ...") in about one network round trip.
// Every survivor's FailureState is failed, so every pending and future
// operation on it throws (its wake_fd() wakes every blocked poll).
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/net.h"
#include "transport/control_block.h"

namespace jaccl::detail {

class LivenessMonitor {
 public:
  // control[p]: connected control socket to peer p (invalid for this rank).
  // Starts the thread; registers the ABORT hook on state.
  LivenessMonitor(int rank, std::vector<Fd> control,
                  std::shared_ptr<FailureState> state,
                  Millis heartbeat_timeout);
  // Sends GOODBYE (best effort, non-blocking), stops and joins the thread.
  // Never waits for a peer.
  ~LivenessMonitor();
  LivenessMonitor(const LivenessMonitor&) = delete;
  LivenessMonitor& operator=(const LivenessMonitor&) = delete;

  struct Shared;  // state shared with the abort hook (outlives the monitor)

 private:
  void run();

  int rank_;
  Millis heartbeat_;
  std::shared_ptr<FailureState> state_;
  std::shared_ptr<Shared> shared_;
  std::vector<Fd> control_;
  std::thread thread_;
};

// TCP keepalive for data and control sockets, derived from the heartbeat
// timeout (idle = timeout, probes every timeout / 4, 4 probes; 60 s / 10 s /
// 6 probes when heartbeats are off). No TCP_USER_TIMEOUT (see net.h).
void apply_keepalive(int fd, Millis heartbeat_timeout);

}  // namespace jaccl::detail
