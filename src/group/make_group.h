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

std::shared_ptr<Group> make_group(const Config& cfg, SideChannel& sc);

// The SideChannel fingerprint of cfg: what every rank's config must agree
// on (device matrix, topology, transport and wires, token), rank excluded.
// Defined in init.cpp.
uint64_t config_fingerprint(const Config& cfg);

}  // namespace jaccl::detail
