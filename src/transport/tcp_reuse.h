// Copyright 2026 the jaccl authors.
// A shrunk group's TCP data plane made of its parent's surviving data
// connections (transport/tcp_endpoint.h: WireBank), instead of a new mesh
// of connections to dial: at 64 ranks on a few cores, dialing ~2000
// connections was most of a TCP shrink.
//
// Where the parent's stream ends: every link counts the bytes it moved
// each way. One gather over the new group's side channel publishes what
// each member sent on each wire to each other member; a member then reads
// and drops, on each wire, what its peer sent past what it had read (the
// rest of a failed operation), and the stream is the new group's from
// there on. Every member decides alike whether the connections can be
// taken over (every one of them must say so in the gather); when not,
// the caller dials new ones. The counts are read under the parent's op
// lock (WireBank::ops), so that no op of the parent still running on
// another thread sends after them; a member that waits a second for it
// cannot take over. Where the new plan wants more wires to a
// member than the parent had (ring neighbours with several wires, past
// 16 ranks), the caller dials only those.
#pragma once

#include <optional>
#include <vector>

#include "bootstrap/side_channel.h"
#include "jaccl/jaccl.h"
#include "transport/control_block.h"
#include "transport/tcp_endpoint.h"

namespace jaccl::detail {

// What reuse_tcp_wires leaves: the control block with the connections
// taken over (rank, size, wires, send_buffer, op_timeout set); missing[i]:
// the wires to member i the plan wants beyond those (the parent's plan
// connected fewer: a ring neighbour now that was not one before);
// any_missing: some member, any, misses some (the same on every member:
// then every member dials what it misses, collectively).
struct ReusedWires {
  ControlBlock conns;
  std::vector<int> missing;
  bool any_missing = false;
};

// Collective over the new group (cfg's rank and size; one gather of sc).
// bank: the parent's data sockets; parent_of[i]: member i's index in the
// parent; want[i]: the data wires the new group's plan wants to member i;
// slots: the most wires any pair wants (the same on every member). Returns
// nullopt when some member cannot take its connections over (then every
// member dials them all). Throws when a member is lost meanwhile (sc's
// abort fd) or at the set-up's deadline. gather (may be empty): an
// all-gather among the same members to use instead of sc's, without its
// frames: past 200 bytes (24 ranks) sc takes two rounds for the message,
// each a wake-up of every member; the message carries its own magic.
std::optional<ReusedWires> reuse_tcp_wires(const Config& cfg, SideChannel& sc,
                                           WireBank& bank,
                                           const std::vector<int>& parent_of,
                                           const std::vector<int>& want,
                                           int slots,
                                           const AllGatherFn& gather = {});

}  // namespace jaccl::detail
