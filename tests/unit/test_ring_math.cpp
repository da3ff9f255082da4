// Copyright 2026 the jaccl authors.
// The ring's rank and chunk arithmetic, checked by simulating whole rings
// symbolically (which ranks' contributions each chunk holds).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "collectives/ring_math.h"

namespace jaccl::detail::ring {
namespace {

TEST(RingMath, SplitCoversInOrder) {
  for (size_t total : {0u, 1u, 7u, 8u, 1000u, 1001u}) {
    for (size_t parts : {1u, 2u, 3u, 8u}) {
      size_t next = 0;
      for (size_t i = 0; i < parts; ++i) {
        const Range r = split(total, parts, i);
        EXPECT_EQ(r.off, next);
        EXPECT_LE(r.len, total / parts + 1);
        EXPECT_GE(r.len, total / parts);
        next = r.off + r.len;
      }
      EXPECT_EQ(next, total);
    }
  }
  static_assert(split(10, 3, 0) == Range{0, 4});
  static_assert(split(10, 3, 2) == Range{7, 3});
}

TEST(RingMath, ModAndNeighbours) {
  EXPECT_EQ(mod(-1, 4), 3);
  EXPECT_EQ(mod(-9, 4), 3);
  EXPECT_EQ(mod(9, 4), 1);
  const Schedule cw{5, 0, 1, Mode::AllReduce};
  EXPECT_EQ(cw.to(), 1);
  EXPECT_EQ(cw.from(), 4);
  const Schedule ccw{5, 0, -1, Mode::AllReduce};
  EXPECT_EQ(ccw.to(), 4);
  EXPECT_EQ(ccw.from(), 1);
  EXPECT_EQ(directions(2), 1);
  EXPECT_EQ(directions(3), 2);
  EXPECT_EQ(piece_bytes(1000, 8), 1000u);
  EXPECT_EQ(piece_bytes(1001, 8), 1000u);
  EXPECT_EQ(piece_bytes(3, 8), 8u);
}

// Runs the schedule of every rank step by step, moving sets of
// contributions (bit q = rank q's data) like the real ring moves bytes.
// held[r][c]: what rank r's buffer holds for chunk c.
std::vector<std::vector<uint32_t>> simulate(int n, int sign, Mode mode) {
  std::vector<std::vector<uint32_t>> held(n, std::vector<uint32_t>(n));
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) {
      held[r][c] = mode == Mode::AllGather && c != r ? 0 : 1u << r;
    }
  }
  const int steps = Schedule{n, 0, sign, mode}.steps();
  for (int t = 0; t < steps; ++t) {
    std::vector<uint32_t> sent(n);
    for (int r = 0; r < n; ++r) {
      const Schedule s{n, r, sign, mode};
      // What step t forwards is what step t-1 received.
      if (t > 0) {
        EXPECT_EQ(s.send_chunk(t), s.recv_chunk(t - 1));
      }
      sent[r] = held[r][s.send_chunk(t)];
    }
    for (int r = 0; r < n; ++r) {
      const Schedule s{n, r, sign, mode};
      const Schedule from{n, s.from(), sign, mode};
      const int c = s.recv_chunk(t);
      EXPECT_EQ(from.send_chunk(t), c) << "rank " << r << " step " << t;
      const uint32_t got = sent[s.from()];
      if (s.reduces(t)) {
        EXPECT_EQ(got & (1u << r), 0u) << "contribution counted twice";
        held[r][c] = got | (1u << r);
      } else {
        held[r][c] = got;
      }
    }
  }
  return held;
}

TEST(RingMath, AllReduceEveryRankGetsEverything) {
  for (int n = 2; n <= 9; ++n) {
    for (int sign : {1, -1}) {
      const auto held = simulate(n, sign, Mode::AllReduce);
      const uint32_t all = (1u << n) - 1;
      for (int r = 0; r < n; ++r) {
        for (int c = 0; c < n; ++c) {
          EXPECT_EQ(held[r][c], all) << "n " << n << " rank " << r;
        }
      }
    }
  }
}

TEST(RingMath, AllGatherEveryRankGetsEverySlot) {
  for (int n = 2; n <= 9; ++n) {
    for (int sign : {1, -1}) {
      const auto held = simulate(n, sign, Mode::AllGather);
      for (int r = 0; r < n; ++r) {
        for (int c = 0; c < n; ++c) {
          EXPECT_EQ(held[r][c], 1u << c) << "n " << n << " rank " << r;
        }
      }
    }
  }
}

TEST(RingMath, ReduceScatterEndsWithOwnChunk) {
  for (int n = 2; n <= 9; ++n) {
    for (int sign : {1, -1}) {
      const auto held = simulate(n, sign, Mode::ReduceScatter);
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(held[r][r], (1u << n) - 1) << "n " << n << " rank " << r;
        // The first send is raw input (chunk r - sign), never chunk r.
        EXPECT_NE(Schedule({n, r, sign, Mode::ReduceScatter}).send_chunk(0), r);
      }
    }
  }
}

}  // namespace
}  // namespace jaccl::detail::ring
