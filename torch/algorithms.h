// Copyright 2026 the jaccl authors.
// Collectives the PyTorch backend builds from jaccl's own ops, on raw bytes
// (no torch headers: this file compiles fast).
#pragma once

#include <cstddef>
#include <vector>

#include "jaccl/group.h"

namespace jaccl_torch {

// What this rank sends to and receives from one peer, anywhere in memory.
struct PeerBlock {
  const void* send = nullptr;
  size_t send_bytes = 0;
  void* recv = nullptr;
  size_t recv_bytes = 0;
};

// All-to-all of blocks that are not packed back to back (torch's list
// form, blocks.size() == g.size()): the send blocks are packed into one
// buffer, moved by one Group::all_to_allv (which checks the counts across
// ranks) and the received bytes copied out to each block. Packed tensors
// (all_to_all_single) call Group::all_to_allv directly.
void all_to_all_blocks(jaccl::Group& g, const std::vector<PeerBlock>& blocks);

}  // namespace jaccl_torch
