// Copyright 2026 the jaccl authors.
// Group::grow (members) and init with Config::set_join (newcomers): both
// meet on a side channel of the grown size that is never the job's TCP
// star (rank 0 may be dead): the caller's all-gather factory, or the grow
// channel (kv:// hosted by jaccl-run, file://, redis://). Over a store the
// members' rank 0 first publishes the plan of generation g (old and new
// size) and the latest generation, so a newcomer learns its rank, and a
// stale newcomer (g below the latest) or one started for another size fails
// at once, saying so. Every participant then sends a vote (generation,
// sizes, member or newcomer) that all check before the grown group is
// built from scratch, as init builds any group (make_group).
#pragma once

#include <memory>
#include <string>

#include "jaccl/jaccl.h"

namespace jaccl::detail {

class GroupHandle;

// The grow channel of cfg: set_grow_channel's, else the side channel when
// it is file:// or redis://, else "".
std::string grow_channel_uri(const Config& cfg);

// Collective over parent's members (all alive: shrink first). Errors name
// ranks of the grown group.
std::shared_ptr<Group> grow_group(GroupHandle& parent, int new_size,
                                  AllGatherFactory factory);

// init() of a newcomer (cfg.get_join() >= 1).
std::shared_ptr<Group> join_group(const Config& cfg);

}  // namespace jaccl::detail
