// Copyright 2026 the jaccl authors.
#include "algorithms.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "jaccl/error.h"

namespace jaccl_torch {

static_assert(tournament_partner(0, 2, 0) == 1 &&
              tournament_partner(1, 2, 0) == 0);
static_assert(tournament_partner(0, 3, 0) == -1 &&
              tournament_partner(1, 3, 0) == 2);
static_assert(tournament_partner(3, 4, 2) == 2 &&
              tournament_partner(0, 4, 2) == 1);

void all_to_all(jaccl::Group& g, const std::vector<PeerBlock>& blocks) {
  const int rank = g.rank();
  const int size = g.size();
  if (static_cast<int>(blocks.size()) != size) {
    throw jaccl::UsageError("[jaccl] rank " + std::to_string(rank) +
                            ": all_to_all: " + std::to_string(blocks.size()) +
                            " blocks for a group of size " +
                            std::to_string(size));
  }
  const PeerBlock& self = blocks[rank];
  if (self.send_bytes != self.recv_bytes) {
    throw jaccl::UsageError(
        "[jaccl] rank " + std::to_string(rank) + ": all_to_all: this rank " +
        "sends itself " + std::to_string(self.send_bytes) +
        " bytes but expects " + std::to_string(self.recv_bytes));
  }
  if (self.send_bytes > 0 && self.send != self.recv) {
    std::memmove(self.recv, self.send, self.send_bytes);
  }
  for (int round = 0; round < tournament_rounds(size); ++round) {
    const int peer = tournament_partner(rank, size, round);
    if (peer < 0)
      continue;
    const PeerBlock& b = blocks[peer];
    auto send = [&] {
      if (b.send_bytes > 0)
        g.send(b.send, b.send_bytes, peer);
    };
    auto recv = [&] {
      if (b.recv_bytes > 0)
        g.recv(b.recv, b.recv_bytes, peer);
    };
    if (rank < peer) {
      send();
      recv();
    } else {
      recv();
      send();
    }
  }
}

}  // namespace jaccl_torch
