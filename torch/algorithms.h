// Copyright 2026 the jaccl authors.
// Collectives the PyTorch backend builds from jaccl's own ops, on raw bytes
// (no torch headers: this file compiles fast and holds the schedules).
#pragma once

#include <cstddef>
#include <vector>

#include "jaccl/group.h"

namespace jaccl_torch {

// The partner of `rank` in round `round` (0 <= round < rounds(size)) of a
// round-robin tournament (circle method) over `size` ranks, or -1 when the
// rank sits the round out (odd size). Every pair of distinct ranks meets in
// exactly one round, and a round's pairs are disjoint.
constexpr int tournament_rounds(int size) {
  return size <= 1 ? 0 : (size % 2 == 0 ? size - 1 : size);
}
constexpr int tournament_partner(int rank, int size, int round) {
  const int m = size % 2 == 0 ? size : size + 1;  // players, with a bye
  const int ring = m - 1;
  int partner;
  if (rank == ring) {
    partner = round;
  } else if (rank == round) {
    partner = ring;
  } else {
    partner = ((2 * round - rank) % ring + ring) % ring;
  }
  return partner >= size ? -1 : partner;
}

// What this rank sends to and receives from one peer (its own entry is a
// local copy; send_bytes must equal recv_bytes there).
struct PeerBlock {
  const void* send = nullptr;
  size_t send_bytes = 0;
  void* recv = nullptr;
  size_t recv_bytes = 0;
};

// All-to-all with per-peer sizes (blocks.size() == g.size()). Built from
// jaccl's send/recv, which block and which a group runs one at a time, so
// the schedule must be deadlock-free: tournament rounds, and in each pair the
// lower rank sends then receives while the higher receives then sends. Empty
// blocks are skipped on both sides (each side knows the size from its own
// split sizes). Moves to Group::all_to_all once jaccl has it (issue 13).
void all_to_all(jaccl::Group& g, const std::vector<PeerBlock>& blocks);

}  // namespace jaccl_torch
