// Copyright 2026 the jaccl authors.
// Pure arithmetic of all_to_all and all_to_allv, shared by every group: the
// order in which a rank meets its peers, the counts matrix every rank
// gathers before an all_to_allv moves data, and how large blocks are cut
// into rounds and wires. No sockets, no allocation, constexpr: unit-tested on
// its own (tests/unit/test_all_to_all_math.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace jaccl::detail::a2a {

// Step k (1 <= k < n) of a direct exchange among n ranks: rank r sends to
// r + k and receives from r - k. Every step is a permutation, so the ranks
// do not all start with the same peer.
constexpr int send_peer(int r, int n, int k) {
  return (r + k) % n;
}
constexpr int recv_peer(int r, int n, int k) {
  return ((r - k) % n + n) % n;
}

// Bruck's all_to_all among n ranks: ceil(log2 n) rounds instead of n - 1
// messages per rank. Blocks are indexed by their distance i = dest - rank
// (mod n); round k sends every block whose index has bit k set to rank
// r + 2^k and receives the same indices from r - 2^k, so after the last
// round index i holds the block of rank r - i. A rank sends
// bruck_rounds(n) messages instead of n - 1 (4 ranks: 2 instead of 3),
// each of bruck_blocks(n, k) blocks.
constexpr int bruck_rounds(int n) {
  int k = 0;
  while ((1 << k) < n) {
    ++k;
  }
  return k;
}
constexpr int bruck_blocks(int n, int k) {
  int c = 0;
  for (int i = 1; i < n; ++i) {
    c += (i >> k) & 1;
  }
  return c;
}

// The counts matrix of an all_to_allv, as every rank has it after the
// counts all-gather: row r is rank r's send counts (n entries) followed by
// its receive counts (n entries).
struct Counts {
  const uint64_t* rows = nullptr;
  int n = 0;

  constexpr uint64_t sends(int from, int to) const {
    return rows[static_cast<size_t>(from) * 2 * static_cast<size_t>(n) +
                static_cast<size_t>(to)];
  }
  constexpr uint64_t expects(int at, int from) const {
    return rows[static_cast<size_t>(at) * 2 * static_cast<size_t>(n) +
                static_cast<size_t>(n) + static_cast<size_t>(from)];
  }
  // Where rank `owner`'s block for rank `to` starts in its input.
  constexpr uint64_t input_offset(int owner, int to) const {
    uint64_t o = 0;
    for (int j = 0; j < to; ++j) {
      o += sends(owner, j);
    }
    return o;
  }
  // Where the block from rank `from` starts in rank `owner`'s output.
  constexpr uint64_t output_offset(int owner, int from) const {
    uint64_t o = 0;
    for (int i = 0; i < from; ++i) {
      o += sends(i, owner);
    }
    return o;
  }
  // The largest block of the job (how many rounds a chunked copy needs).
  constexpr uint64_t largest() const {
    uint64_t m = 0;
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        m = sends(a, b) > m ? sends(a, b) : m;
      }
    }
    return m;
  }
  // Every byte the job moves (wraps on absurd counts; only compared).
  constexpr uint64_t total() const {
    uint64_t t = 0;
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        t += sends(a, b);
      }
    }
    return t;
  }
};

// A receiver whose expected count from a sender is not what the sender
// sends; receiver < 0 when there is none.
struct Mismatch {
  int receiver = -1;
  int sender = -1;
  uint64_t expects = 0;
  uint64_t sends = 0;
  constexpr bool found() const { return receiver >= 0; }
};

// The first mismatch in (receiver, sender) order: the same on every rank,
// since every rank holds the same matrix.
constexpr Mismatch find_mismatch(const Counts& c) {
  for (int a = 0; a < c.n; ++a) {
    for (int b = 0; b < c.n; ++b) {
      if (c.expects(a, b) != c.sends(b, a)) {
        return {a, b, c.expects(a, b), c.sends(b, a)};
      }
    }
  }
  return {};
}

// Sum of counts[0..n); false if it overflows size_t.
constexpr bool sum(const size_t* counts, size_t n, size_t* out) {
  size_t t = 0;
  for (size_t i = 0; i < n; ++i) {
    if (counts[i] > SIZE_MAX - t) {
      return false;
    }
    t += counts[i];
  }
  *out = t;
  return true;
}

// Bytes [off, off + len) of a block cut into rounds of `window` bytes: the
// part moved in round k (len 0 once the block is done).
struct Part {
  size_t off = 0;
  size_t len = 0;
  constexpr bool operator==(const Part&) const = default;
};
constexpr Part round_part(size_t block, size_t window, size_t k) {
  const size_t off = k * window;
  if (off >= block) {
    return {block, 0};
  }
  return {off, block - off < window ? block - off : window};
}
// Rounds needed for blocks of at most `largest` bytes (at least one, so
// that an op of empty blocks still syncs once).
constexpr size_t rounds(uint64_t largest, size_t window) {
  return largest == 0 ? 1
                      : static_cast<size_t>((largest + window - 1) / window);
}

// Who copies each block of a direct all_to_allv on one host, where a block
// moves by one kernel copy that its receiver makes (a read out of the
// sender's input) or its sender (a write into the receiver's output). All
// reads load each rank with what it receives; when every rank sends as
// much but some receive more (a mixture of experts' hot expert), the
// busiest receiver holds the others up while its senders idle. So, pair by
// pair, the tail of a block goes to its sender's writes until the two
// carry as much. A rank's load counts its own block at half weight: it is
// a memcpy inside one process, about twice as fast as a kernel copy
// between two (2.3-3.6x on the VMs of BENCHMARKS.md), so the balance does
// not hang on the exact ratio. push[q * n + p]: the bytes at the end of q's
// block for p that q writes (multiples of `unit`, except a whole block);
// load[r]: scratch of n entries. The same matrix gives every rank the same
// plan.
constexpr void balance_pushes(const Counts& c, uint64_t* push, uint64_t* load,
                              uint64_t unit) {
  const auto n = static_cast<size_t>(c.n);
  for (int r = 0; r < c.n; ++r) {
    load[r] = c.sends(r, r) / 2;
    for (int q = 0; q < c.n; ++q) {
      push[static_cast<size_t>(q) * n + static_cast<size_t>(r)] = 0;
      if (q != r) {
        load[r] += c.sends(q, r);
      }
    }
  }
  for (int p = 0; p < c.n; ++p) {
    for (int q = 0; q < c.n; ++q) {
      if (q == p || load[p] <= load[q]) {
        continue;
      }
      const uint64_t block = c.sends(q, p);
      uint64_t move = (load[p] - load[q]) / 2;
      if (move >= block) {
        move = block;
      } else {
        move -= move % unit;
      }
      push[static_cast<size_t>(q) * n + static_cast<size_t>(p)] = move;
      load[p] -= move;
      load[q] += move;
    }
  }
}

// How many of a pair's `wires` carry a block of `bytes`: one below
// split_bytes per wire, else every wire that gets at least split_bytes.
constexpr size_t wires_for(size_t bytes, size_t wires, size_t split_bytes) {
  if (wires <= 1 || bytes < 2 * split_bytes) {
    return 1;
  }
  const size_t w = bytes / split_bytes;
  return w < wires ? w : wires;
}

}  // namespace jaccl::detail::a2a
