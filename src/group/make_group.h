// Copyright 2026 the jaccl authors.
// From a bootstrapped side channel to a working group: the level above the
// transports and the collectives. Cards are exchanged, the plan chosen
// (group/plan.h), links connected and the group assembled.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/side_channel.h"
#include "jaccl/jaccl.h"
#include "transport/tcp_card.h"

namespace jaccl::detail {

class FailureState;
class LivenessMonitor;
struct MonitorSlot;
struct WireBank;

// What the elastic calls of a group need (group/shrink.h): its state, its
// liveness monitor (null for a group of one), its members' cards and, for
// a TCP group, its data connections as a shrink takes them over.
struct GroupControl {
  std::shared_ptr<FailureState> state;
  std::shared_ptr<LivenessMonitor> monitor;
  std::shared_ptr<const std::vector<TcpCard>> cards;
  std::shared_ptr<WireBank> wires;
};

// A shrunk group's set-up (group/shrink.cpp). The group makes no control
// connections and starts no monitor: the caller puts one in `slot` (and in
// the GroupControl) afterwards. cards (may be empty): the members' cards
// from the parent's set-up, renumbered; when they give a plan of shared
// memory alone, and no member had ofi, nothing is exchanged or connected.
// wires (may be null): the parent's TCP data connections; parent_of[i]:
// member i's rank in the parent. When the plan is TCP alone, the new group
// takes those connections over (transport/tcp_reuse.h) instead of dialing.
// broadcast (may be empty): the survivors' one-to-all send
// (ControlBlock::broadcast), for a quick shared-memory set-up. gather (may
// be empty): the survivors' all-gather without the side channel's frames,
// for the TCP take-over's one message (one round, not two: tcp_reuse.h).
struct Takeover {
  std::shared_ptr<MonitorSlot> slot;
  std::vector<TcpCard> cards;
  std::shared_ptr<WireBank> wires;
  std::vector<int> parent_of;
  std::function<std::string(std::string_view, int)> broadcast;
  AllGatherFn gather;
};

// control, when given, receives the group's GroupControl.
std::shared_ptr<Group> make_group(const Config& cfg, SideChannel& sc,
                                  GroupControl* control = nullptr,
                                  const Takeover* takeover = nullptr);

// The SideChannel fingerprint of cfg: what every rank's config must agree
// on (device matrix, topology, transport and wires, token), rank excluded.
// Defined in init.cpp.
uint64_t config_fingerprint(const Config& cfg);

}  // namespace jaccl::detail
