// Copyright 2026 the jaccl authors.
// From a bootstrapped side channel to a working group: cards are exchanged,
// links connected and the group type chosen.
#pragma once

#include <memory>

#include "bootstrap/side_channel.h"
#include "jaccl/jaccl.h"

namespace jaccl::detail {

std::shared_ptr<Group> make_group(const Config& cfg, SideChannel& sc);

}  // namespace jaccl::detail
