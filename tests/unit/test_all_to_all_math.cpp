// Copyright 2026 the jaccl authors.
// The pure arithmetic of all_to_all(v) (collectives/all_to_all_math.h): peer
// order, the counts matrix and its check, rounds and wire splits.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "collectives/all_to_all_math.h"

namespace {

using namespace jaccl::detail::a2a;

TEST(AllToAllMath, EveryStepIsAPermutationAndEveryPairMeetsOnce) {
  for (int n : {2, 3, 4, 5, 8}) {
    std::set<std::pair<int, int>> met;
    for (int k = 1; k < n; ++k) {
      std::set<int> to, from;
      for (int r = 0; r < n; ++r) {
        const int s = send_peer(r, n, k);
        EXPECT_NE(s, r);
        to.insert(s);
        from.insert(recv_peer(r, n, k));
        // r's receive partner at step k sends to r at step k.
        EXPECT_EQ(send_peer(recv_peer(r, n, k), n, k), r);
        EXPECT_TRUE(met.insert({r, s}).second) << n << " " << r << " " << s;
      }
      EXPECT_EQ(static_cast<int>(to.size()), n);
      EXPECT_EQ(static_cast<int>(from.size()), n);
    }
    EXPECT_EQ(static_cast<int>(met.size()), n * (n - 1));
  }
}

// Rows as the all-gather delivers them: send counts, then receive counts.
std::vector<uint64_t> matrix(const std::vector<std::vector<uint64_t>>& send) {
  const size_t n = send.size();
  std::vector<uint64_t> m;
  for (size_t a = 0; a < n; ++a) {
    m.insert(m.end(), send[a].begin(), send[a].end());
    for (size_t b = 0; b < n; ++b)
      m.push_back(send[b][a]);  // what a expects from b
  }
  return m;
}

TEST(AllToAllMath, ConsistentCountsHaveNoMismatch) {
  auto m = matrix({{1, 0, 7}, {4, 4, 0}, {0, 9, 2}});
  Counts c{m.data(), 3};
  EXPECT_FALSE(find_mismatch(c).found());
  EXPECT_EQ(c.sends(2, 1), 9u);
  EXPECT_EQ(c.expects(1, 2), 9u);
  EXPECT_EQ(c.largest(), 9u);
  EXPECT_EQ(c.total(), 27u);
  // Rank 1's input: 4 for rank 0, then 4 for itself from byte 4. Rank 1's
  // output: 0 from rank 0, 4 from itself, then 9 from rank 2 at byte 4.
  EXPECT_EQ(c.input_offset(1, 1), 4u);
  EXPECT_EQ(c.input_offset(2, 2), 9u);
  EXPECT_EQ(c.output_offset(1, 2), 4u);
  EXPECT_EQ(c.output_offset(2, 2), 7u);
  EXPECT_EQ(c.output_offset(0, 0), 0u);
}

TEST(AllToAllMath, TheFirstMismatchInReceiverOrderIsReported) {
  auto m = matrix({{1, 0, 7}, {4, 4, 0}, {0, 9, 2}});
  const size_t n = 3;
  // Rank 2 expects 12 bytes from rank 1 (which sends 9); rank 1 expects 5
  // from rank 0 (which sends 0): receiver 1 comes first.
  m[2 * 2 * n + n + 1] = 12;
  m[1 * 2 * n + n + 0] = 5;
  Mismatch x = find_mismatch(Counts{m.data(), 3});
  ASSERT_TRUE(x.found());
  EXPECT_EQ(x.receiver, 1);
  EXPECT_EQ(x.sender, 0);
  EXPECT_EQ(x.expects, 5u);
  EXPECT_EQ(x.sends, 0u);
  // A rank's own block counts too (N = 1).
  std::vector<uint64_t> self = {3, 4};
  x = find_mismatch(Counts{self.data(), 1});
  ASSERT_TRUE(x.found());
  EXPECT_EQ(x.receiver, 0);
  EXPECT_EQ(x.expects, 4u);
  EXPECT_EQ(x.sends, 3u);
}

TEST(AllToAllMath, SumsDetectOverflow) {
  size_t out = 0;
  const size_t ok[] = {1, 2, 3};
  EXPECT_TRUE(sum(ok, 3, &out));
  EXPECT_EQ(out, 6u);
  const size_t big[] = {SIZE_MAX - 1, 2};
  EXPECT_FALSE(sum(big, 2, &out));
}

TEST(AllToAllMath, RoundsCoverEveryByteOnce) {
  static_assert(round_part(10, 4, 0) == Part{0, 4});
  static_assert(round_part(10, 4, 2) == Part{8, 2});
  static_assert(round_part(10, 4, 3).len == 0);
  static_assert(rounds(0, 4) == 1);
  for (size_t block : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(65),
                       size_t(1000)}) {
    for (size_t window : {size_t(1), size_t(64), size_t(100)}) {
      size_t next = 0;
      for (size_t k = 0; k < rounds(1000, window); ++k) {
        const Part p = round_part(block, window, k);
        if (p.len == 0)
          continue;
        EXPECT_EQ(p.off, next);
        EXPECT_LE(p.len, window);
        next += p.len;
      }
      EXPECT_EQ(next, block) << block << " " << window;
    }
  }
}

// The loads balance_pushes balances, recomputed from its plan: own block
// at half weight, reads of what was not pushed, the pushes a rank writes.
std::vector<uint64_t> loads_of(const Counts& c,
                               const std::vector<uint64_t>& push) {
  const auto n = static_cast<size_t>(c.n);
  std::vector<uint64_t> load(n);
  for (int r = 0; r < c.n; ++r) {
    const auto ur = static_cast<size_t>(r);
    load[ur] = c.sends(r, r) / 2;
    for (int q = 0; q < c.n; ++q) {
      if (q == r)
        continue;
      const auto uq = static_cast<size_t>(q);
      load[ur] += c.sends(q, r) - push[uq * n + ur];  // reads
      load[ur] += push[ur * n + uq];                  // writes
    }
  }
  return load;
}

TEST(AllToAllMath, PushesBalanceAHotReceiverAndLeaveEvenOnesAlone) {
  const uint64_t M = 1 << 20, unit = 4096;
  struct Case {
    std::vector<std::vector<uint64_t>> send;
    bool pushes;
  };
  const std::vector<Case> cases = {
      // uniform: every rank as busy as any, every block read
      {{{M, M}, {M, M}}, false},
      {{{M, M, M, M}, {M, M, M, M}, {M, M, M, M}, {M, M, M, M}}, false},
      // mixture of experts, 2 ranks: every rank sends 4 MiB, 2/3 to rank 0
      {{{8 * M / 3, 4 * M / 3}, {8 * M / 3, 4 * M / 3}}, true},
      // Zipf(1) over 4 ranks (48/24/16/12 %), as bench's moe pattern
      {{{48 * M / 25, 24 * M / 25, 16 * M / 25, 12 * M / 25},
        {48 * M / 25, 24 * M / 25, 16 * M / 25, 12 * M / 25},
        {48 * M / 25, 24 * M / 25, 16 * M / 25, 12 * M / 25},
        {48 * M / 25, 24 * M / 25, 16 * M / 25, 12 * M / 25}},
       true},
      // only ranks that send write (x <= the block, below)
      {{{M, 0, 0}, {3 * M, 0, 0}, {3 * M, 0, 0}}, true},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto m = matrix(cases[k].send);
    const int n = static_cast<int>(cases[k].send.size());
    const Counts c{m.data(), n};
    const auto un = static_cast<size_t>(n);
    std::vector<uint64_t> push(un * un, 7), load(un);
    balance_pushes(c, push.data(), load.data(), unit);
    uint64_t pushed = 0, before = 0, after = 0;
    const auto all_read = loads_of(c, std::vector<uint64_t>(un * un, 0));
    const auto planned = loads_of(c, push);
    for (int q = 0; q < n; ++q) {
      const auto uq = static_cast<size_t>(q);
      EXPECT_EQ(push[uq * un + uq], 0u) << "case " << k;
      EXPECT_EQ(planned[uq], load[uq]) << "case " << k << " rank " << q;
      before = std::max(before, all_read[uq]);
      after = std::max(after, planned[uq]);
      for (int p = 0; p < n; ++p) {
        const uint64_t x = push[uq * un + static_cast<size_t>(p)];
        EXPECT_LE(x, c.sends(q, p)) << "case " << k;
        EXPECT_TRUE(x == c.sends(q, p) || x % unit == 0) << "case " << k;
        pushed += x;
      }
    }
    EXPECT_EQ(pushed != 0, cases[k].pushes) << "case " << k;
    EXPECT_LE(after, before) << "case " << k;
    if (cases[k].pushes)
      EXPECT_LT(after, before) << "case " << k;
  }
  // Two ranks balance to within a unit: rank 0 receives 8/3 MiB and copies
  // 8/3 of its own, rank 1 4/3 of each.
  const auto m = matrix({{8 * M / 3, 4 * M / 3}, {8 * M / 3, 4 * M / 3}});
  const Counts c{m.data(), 2};
  uint64_t push[4], load[2];
  balance_pushes(c, push, load, unit);
  EXPECT_GT(push[1 * 2 + 0], 0u);
  EXPECT_EQ(push[0 * 2 + 1], 0u);
  EXPECT_LE(load[0] > load[1] ? load[0] - load[1] : load[1] - load[0],
            2 * unit);
}

TEST(AllToAllMath, LargeBlocksUseEveryWire) {
  const size_t s = 256 << 10;
  EXPECT_EQ(wires_for(100, 4, s), 1u);
  EXPECT_EQ(wires_for(2 * s - 1, 4, s), 1u);
  EXPECT_EQ(wires_for(2 * s, 4, s), 2u);
  EXPECT_EQ(wires_for(3 * s + 5, 4, s), 3u);
  EXPECT_EQ(wires_for(64 * s, 4, s), 4u);
  EXPECT_EQ(wires_for(64 * s, 1, s), 1u);
}

}  // namespace

namespace jaccl::detail::a2a {
namespace {

// Bruck's rounds as all_to_all_bruck runs them, on (origin, destination)
// tags: after bruck_rounds(n) rounds, index i of rank r holds the block of
// rank r - i for r, and every round's message has bruck_blocks(n, k)
// blocks.
TEST(AllToAllMath, BruckRoundsDeliverEveryBlockToItsRank) {
  static_assert(bruck_rounds(1) == 0 && bruck_rounds(2) == 1 &&
                bruck_rounds(4) == 2 && bruck_rounds(5) == 3);
  static_assert(bruck_blocks(4, 0) == 2 && bruck_blocks(4, 1) == 2);
  for (int n = 1; n <= 17; ++n) {
    using Tag = std::pair<int, int>;  // origin, destination
    std::vector<std::vector<Tag>> tmp(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < n; ++i) {
        tmp[r].push_back({r, (r + i) % n});
      }
    }
    for (int k = 0; k < bruck_rounds(n); ++k) {
      auto next = tmp;
      for (int r = 0; r < n; ++r) {
        const int from = ((r - (1 << k)) % n + n) % n;
        int blocks = 0;
        for (int i = 1; i < n; ++i) {
          if ((i >> k) & 1) {
            next[r][i] = tmp[from][i];
            ++blocks;
          }
        }
        EXPECT_EQ(blocks, bruck_blocks(n, k)) << "n=" << n << " k=" << k;
      }
      tmp = next;
    }
    for (int r = 0; r < n; ++r) {
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(tmp[r][i], Tag(((r - i) % n + n) % n, r))
            << "n=" << n << " rank " << r << " index " << i;
      }
    }
  }
}

}  // namespace
}  // namespace jaccl::detail::a2a
