// Copyright 2026 the jaccl authors.
// From a bootstrapped side channel to a working group: the level above the
// transports and the collectives. Cards are exchanged, the plan chosen
// (group/plan.h), links connected and the group assembled.
#pragma once

#include <cstdint>
#include <memory>

#include "bootstrap/side_channel.h"
#include "jaccl/jaccl.h"

namespace jaccl::detail {

class FailureState;
class LivenessMonitor;
struct MonitorSlot;

// What the elastic calls of a group need (group/shrink.h): its state and
// its liveness monitor (null for a group of one).
struct GroupControl {
  std::shared_ptr<FailureState> state;
  std::shared_ptr<LivenessMonitor> monitor;
};

// control, when given, receives the group's GroupControl. With
// later_monitor the group makes no control connections and starts no
// monitor: the caller puts one in the slot (and in control) afterwards
// (setup_tcp).
std::shared_ptr<Group> make_group(
    const Config& cfg, SideChannel& sc, GroupControl* control = nullptr,
    std::shared_ptr<MonitorSlot> later_monitor = nullptr);

// The SideChannel fingerprint of cfg: what every rank's config must agree
// on (device matrix, topology, transport and wires, token), rank excluded.
// Defined in init.cpp.
uint64_t config_fingerprint(const Config& cfg);

}  // namespace jaccl::detail
