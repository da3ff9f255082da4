// Copyright 2026 the jaccl authors.
// Group::shrink: the survivors agree on who failed (over the liveness
// monitor's control connections, transport/agreement.h), then build their
// group as any group is built (make_group), with a side channel made of
// the same control connections: never the job's side channel, whose TCP
// star dies with rank 0. A second agreement commits the new group on every
// survivor or on none; a member that fails during the set-up makes every
// survivor try again without it. After a failure the new group takes the
// parent's control connections between the survivors over
// (LivenessMonitor::hand_off) instead of dialing its own, and a one-host
// shared-memory group plans from the parent's cards.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "jaccl/jaccl.h"

namespace jaccl::detail {

class GroupHandle;
class LivenessMonitor;

// The ranks of a group of `size` neither failed nor excluded, ascending.
std::vector<int> survivors(int size, const std::vector<int>& failed,
                           const std::vector<int>& excluded);

// An all-gather among `members` (ranks of the monitor's group; me is
// members[me_index]) over the monitor's control connections, the calls
// tagged tag0 + 1, tag0 + 2 ...; each call waits up to `timeout`.
AllGatherFn survivors_all_gather(LivenessMonitor& monitor,
                                 std::vector<int> members, int me_index,
                                 uint64_t tag0, Millis timeout);

// One member's bytes to every member of `members` over the same
// connections (ControlBlock::broadcast): f(bytes, root) returns
// members[root]'s bytes on every member; tags apart from
// survivors_all_gather's. Each call waits up to `timeout`.
std::function<std::string(std::string_view, int)> survivors_broadcast(
    LivenessMonitor& monitor, std::vector<int> members, int me_index,
    uint64_t tag0, Millis timeout);

// A UsageError naming `call` unless the monitor reaches every peer (a
// one-host group above kFullControlMeshMax ranks keeps a star at rank 0).
void require_full_mesh(const GroupHandle& g, const LivenessMonitor& monitor,
                       const char* call);

// Collective over parent's live members (Group::shrink). Errors name job
// ranks.
std::shared_ptr<Group> shrink_group(GroupHandle& parent,
                                    std::span<const int> exclude);

}  // namespace jaccl::detail
