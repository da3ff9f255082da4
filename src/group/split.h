// Copyright 2026 the jaccl authors.
// Group::split: who goes in which child (pure, testable without sockets)
// and the child's set-up over its parent.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "jaccl/jaccl.h"

namespace jaccl::detail {

class GroupHandle;

// What every parent rank contributes to a split.
struct SplitVote {
  int32_t color = -1;
  int32_t key = -1;
};

// The parent ranks of `me`'s child in child order (by key, key -1 meaning
// the parent rank, ties by parent rank); empty when me's color is negative.
std::vector<int> split_members(const std::vector<SplitVote>& votes, int me);

// The child's configuration: rank and size in the child, the device matrix
// cut down to the members (rows and columns), no bootstrap of its own.
Config child_config(const Config& parent, const std::vector<int>& members,
                    int child_rank);

// Collective over parent: the votes travel by an all_gather, the child's
// set-up by a side channel over parent's send/recv (a star at the child's
// first member), then the child is built like any group (make_group).
// Errors name job ranks.
std::shared_ptr<Group> split_group(GroupHandle& parent, int color, int key);

}  // namespace jaccl::detail
