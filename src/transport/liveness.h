// Copyright 2026 the jaccl authors.
// The liveness monitor: one thread per group that owns one control
// connection to every peer and turns a peer's death into a group failure
// without help from the side channel. It also carries what elastic groups
// need over those connections (revoke, the failed set, the agreement and
// the survivors' side channel; docs/failures.md, "Elastic groups").
//
// Control frames (transport/control_frame.h):
//   HEARTBEAT  sent every heartbeat_timeout / 4
//   GOODBYE    sent when the group is destroyed normally (the peer left)
//   ABORT      (root rank, error kind, the root's error fields encoded by
//              common/error_wire.h) a notice, when this rank's FailureState
//              records its first failure; of kind Aborted, sent to every
//              peer directly, when this rank aborted the group (it is then
//              gone)
//   DEAD       (root: a rank now failed, body: why) a notice, when this
//              rank learns of a failure first; the failed rank itself gets
//              it too, directly (if it is only stopped, it reads that it
//              was excluded when it wakes) and its connection is then closed
//   REVOKE     (root: the rank that revoked) a notice, once per member
// Notices go to the hub (the lowest live rank), which passes on to every
// peer what is new to it (liveness_loop.h: Shared::notice).
//   VOTE, DECIDE  the agreement (transport/agreement.h)
//   MAIL       (body: tag u64, bytes) the survivors' side channel
// A shrunk group's monitor takes its parent's connections over (hand_off)
// and speaks one generation up (control_frame.h): on each connection, what
// the peer's old monitor sent comes first, then its new monitor's frames;
// each monitor handles its own generation's and keeps the next one's for
// its successor. A new monitor answers an old monitor's VOTE with the last
// decision of its parent (a survivor that missed the commit learns it), and
// passes that decision on to every peer once its sender is gone (as the
// agreement passes decisions on lazily).
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
//     root cause ("rank 2 reported: ...") in about two network round trips
//     (through the hub; a hub that is only stopped delays it by up to
//     heartbeat_timeout, until it is declared failed).
// Every survivor's FailureState is failed, so every pending and future
// operation on it throws (its wake_fd() wakes every blocked poll).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/net.h"
#include "transport/control_block.h"

namespace jaccl::detail {

// What a monitor taking connections over inherits from the old one: its
// generation (plus one) and the parent's last decision (a DECIDE frame of
// the old generation; empty: none), with the member it came from while
// that one has not been seen gone (-1: none; -2: gone already).
struct MonitorInherit {
  uint8_t generation = 0;
  std::string decide;
  int held_from = -1;
};

class LivenessMonitor {
 public:
  // control[p]: connected control socket to peer p (invalid for this rank).
  // Starts the thread; registers the ABORT and escalation hooks on state.
  // A monitor taking connections over (hand_off) gets, per peer, what the
  // old one left (taken[p]; a lost one is reported failed at once).
  struct Taken {
    std::string in;   // read, not yet handled
    std::string out;  // queued, not yet sent (the old monitor's)
    bool lost = false;
  };
  using Inherit = MonitorInherit;
  LivenessMonitor(int rank, std::vector<Fd> control,
                  std::shared_ptr<FailureState> state, Millis heartbeat_timeout,
                  std::vector<Taken> taken = {}, Inherit inherit = {});
  // Sends GOODBYE (best effort, non-blocking), stops and joins the thread.
  // Never waits for a peer.
  ~LivenessMonitor();
  LivenessMonitor(const LivenessMonitor&) = delete;
  LivenessMonitor& operator=(const LivenessMonitor&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Whether this rank has a control connection to every peer (agreement
  // and shrink need it; a large one-host group keeps a star at rank 0).
  bool full_mesh() const { return full_mesh_; }
  const std::shared_ptr<FailureState>& state() const { return state_; }

  // ---- elastic groups (any thread) ----------------------------------------

  // One agreement (transport/agreement.h), collective over the live
  // members: the failed ranks, the ranks left out (every caller's exclude)
  // and whether every caller passed ok. A rank that fails meanwhile is in
  // `failed` on every member. Throws the group's error once this rank is
  // excluded or has aborted; a TimeoutError at dl names whom it waited for.
  struct Decision {
    uint64_t epoch = 0;
    std::vector<int> failed;
    std::vector<int> excluded;
    bool ok = true;
  };
  // hand_off_to: when the decision is ok and fails none of these peers, the
  // thread gives their connections away (hand_off) as soon as it has the
  // decision and has passed on what it owes, so that hand_off, called then,
  // returns at once (a shrink's commit: one wake-up less per survivor).
  Decision agree(const std::vector<int>& exclude, bool ok, const Deadline& dl,
                 const std::vector<int>* hand_off_to = nullptr);

  // The survivors' side channel: post() sends bytes to each of `to` under
  // tag; take() waits for what `from` posted under tag (PeerLost once
  // `from`, or any rank of `watch`, is known failed or gone; TimeoutError
  // at dl). Mail under tags below drop_below's is dropped.
  void post(uint64_t tag, const std::vector<int>& to, std::string_view bytes);
  std::string take(uint64_t tag, int from, const Deadline& dl,
                   const std::vector<int>& watch = {});
  // take() from every rank of `from` in one wait (the first member of the
  // survivors' side channel: one wake-up a gather, not one per member).
  std::vector<std::string> take_all(uint64_t tag, const std::vector<int>& from,
                                    const Deadline& dl,
                                    const std::vector<int>& watch = {});
  void drop_mail_below(uint64_t tag);

  // Gives the control connections to `peers` away (to a shrunk group's
  // monitor, of the next generation), so that group needs no connections
  // of its own (collective over peers): nothing more of this monitor's goes
  // out on them. Returns at once (within one turn of the thread), per peer,
  // the socket (invalid: the connection was lost first) and what goes with
  // it, and what the new monitor inherits (held_from in this group's
  // ranks). This monitor then no longer agrees or carries mail
  // (UsageError).
  struct Handed {
    Fd fd;
    Taken taken;
  };
  struct HandOff {
    std::vector<Handed> peers;
    Inherit inherit;
  };
  HandOff hand_off(const std::vector<int>& peers, const Deadline& dl);

  struct Shared;  // state shared with the hooks and callers
  class Loop;     // the thread's own state (liveness_loop.h)

 private:
  // UsageError naming `what` once hand_off has run.
  void check_not_handed_off(const char* what);

  int rank_;
  int size_;
  Millis heartbeat_;
  std::shared_ptr<FailureState> state_;
  std::shared_ptr<Shared> shared_;
  std::vector<Fd> control_;
  std::vector<Taken> taken_;  // for the thread's first turn (or empty)
  bool lost_at(size_t p) const { return p < taken_.size() && taken_[p].lost; }
  uint8_t gen_ = 0;
  bool full_mesh_ = true;
  std::thread thread_;
};

// TCP keepalive for data and control sockets, derived from the heartbeat
// timeout (idle = timeout, probes every timeout / 4, 4 probes; 60 s / 10 s /
// 6 probes when heartbeats are off). No TCP_USER_TIMEOUT (see net.h).
void apply_keepalive(int fd, Millis heartbeat_timeout);

}  // namespace jaccl::detail
