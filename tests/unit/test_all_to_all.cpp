// Copyright 2026 the jaccl authors.
// all_to_all and all_to_allv at group level, small enough for the sanitizer
// runs (scripts/sanitize.sh): jaccl::init with threads as ranks over an
// in-process side channel, over TCP (mesh, 1 and 2 wires) and shared memory,
// at sizes on both sides of the wire split and of the shared-memory window;
// the counts check (the same ProtocolError on every rank, the group still
// usable, also when a block that disagrees is large) and the usage errors. The
// full matrix (every element size class, N up to 8, the hierarchical group,
// ofi) runs in test_group_conformance, test_conformance and test_hier
// (tests/support/group_conformance_a2a.cpp).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/affinity.h"
#include "jaccl/jaccl.h"
#include "support/thread_ranks.h"

namespace jaccl::detail {
namespace {

using namespace std::chrono_literals;

struct Case {
  std::string name;
  std::string transport;  // tcp | shm
  int n;
  int wires;
  // Every rank's thread on one CPU: the ranks outnumber the CPUs, so
  // from 4 ranks small all_to_all blocks go in Bruck's rounds
  // (net_group.cpp).
  bool one_cpu = false;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

// Runs f(group) on one thread per rank (support/thread_ranks.h).
std::vector<std::string> run_ranks(const Case& c,
                                   const std::function<void(Group&)>& f) {
  return test::run_thread_ranks(
      c.n,
      [&](int) {
        if (c.one_cpu) {
          const std::vector<int> cpus = allowed_cpus();
          EXPECT_TRUE(!cpus.empty() && set_allowed_cpus({cpus.front()}));
        }
        Config cfg;
        cfg.set_transport(c.transport)
            .set_wires(c.wires)
            .set_interface("127.0.0.1")
            .set_timeout(60s)
            .set_op_timeout(60s);
        return cfg;
      },
      [&](int, Group& g) { f(g); });
}

uint8_t byte_of(int from, int to, size_t i) {
  return static_cast<uint8_t>(from * 31 + to * 7 + i * 13 + (i >> 9));
}

// Bytes rank `from` sends rank `to` in the variable check: some empty, one
// pair (0 -> n-1) `big`.
size_t v_count(int from, int to, int n, size_t big) {
  if (from == 0 && to == n - 1)
    return big;
  return (from + 2 * to) % 3 == 1 ? 0 : size_t(1 + 5 * from + 3 * to);
}

// "" or the first wrong byte.
std::string check(Group& g, size_t n, size_t big) {
  const int P = g.size(), me = g.rank();
  std::vector<uint8_t> in(n * P), out(n * P, 0xA5);
  for (int j = 0; j < P; ++j)
    for (size_t i = 0; i < n; ++i)
      in[j * n + i] = byte_of(me, j, i);
  g.all_to_all(in.data(), out.data(), n);
  for (int q = 0; q < P; ++q)
    for (size_t i = 0; i < n; ++i)
      if (out[q * n + i] != byte_of(q, me, i))
        return "all_to_all n=" + std::to_string(n) + " from rank " +
               std::to_string(q) + " byte " + std::to_string(i);
  std::vector<size_t> send(P), recv(P);
  std::vector<uint8_t> vin, vout;
  for (int j = 0; j < P; ++j) {
    send[j] = v_count(me, j, P, big);
    recv[j] = v_count(j, me, P, big);
    for (size_t i = 0; i < send[j]; ++i)
      vin.push_back(byte_of(me, j, i));
  }
  size_t total = 0;
  for (size_t c : recv)
    total += c;
  vout.assign(total, 0xA5);
  g.all_to_allv(vin.data(), send, vout.data(), recv);
  size_t at = 0;
  for (int q = 0; q < P; ++q) {
    for (size_t i = 0; i < recv[q]; ++i, ++at)
      if (vout[at] != byte_of(q, me, i))
        return "all_to_allv big=" + std::to_string(big) + " from rank " +
               std::to_string(q) + " byte " + std::to_string(i);
  }
  return "";
}

class AllToAll : public ::testing::TestWithParam<Case> {};

TEST_P(AllToAll, EveryBlockReachesItsRank) {
  const Case& c = GetParam();
  std::vector<std::string> wrong(static_cast<size_t>(c.n));
  auto errors = run_ranks(c, [&](Group& g) {
    std::string& w = wrong[static_cast<size_t>(g.rank())];
    // 0 and odd sizes; 600001 bytes split over two wires and take several
    // shared-memory windows.
    for (size_t n : {size_t(0), size_t(1), size_t(1003), size_t(600001)}) {
      if (w.empty())
        w = check(g, n, n == 600001 ? 1300001 : 7);
    }
  });
  for (int r = 0; r < c.n; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(wrong[static_cast<size_t>(r)], "") << "rank " << r;
  }
}

TEST_P(AllToAll, MismatchedCountsFailEveryRankAlikeAndKeepTheGroup) {
  const Case& c = GetParam();
  const int last = c.n - 1;
  std::vector<std::string> seen(static_cast<size_t>(c.n)),
      after(static_cast<size_t>(c.n));
  auto errors = run_ranks(c, [&](Group& g) {
    const int P = g.size(), me = g.rank();
    std::vector<uint8_t> buf(64);
    try {
      g.all_to_all(buf.data(), buf.data(), 1);
    } catch (const UsageError&) {
    }
    std::vector<size_t> send(P, 2), recv(P, 2);
    if (me == last)
      recv[0] = 5;
    std::vector<uint8_t> in(2 * P), out(2 * P + 3);
    try {
      g.all_to_allv(in.data(), send, out.data(), recv);
    } catch (const ProtocolError& e) {
      const std::string what = e.what();
      seen[static_cast<size_t>(me)] = what.substr(what.find("all_to_allv:"));
    }
    after[static_cast<size_t>(me)] = check(g, 33, 100);
  });
  const std::string want =
      "all_to_allv: rank " + std::to_string(last) +
      " expects 5 bytes from rank 0, but rank 0 sends 2 bytes to rank " +
      std::to_string(last);
  for (int r = 0; r < c.n; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(seen[static_cast<size_t>(r)].rfind(want, 0), 0u)
        << "rank " << r << ": " << seen[static_cast<size_t>(r)];
    EXPECT_EQ(seen[static_cast<size_t>(r)], seen[0]) << "rank " << r;
    EXPECT_EQ(after[static_cast<size_t>(r)], "") << "rank " << r;
  }
}

// Counts that disagree both ways, one block large enough to be split over
// the wires: every rank reports the first pair, and the streams stay in
// step (over TCP a receiver drops a block whose counts disagree). A small
// all_to_allv first, so that where ranks outnumber CPUs the first
// mismatched call goes in Bruck's rounds (chosen by the previous call's
// blocks, net_group.cpp) and the second one directly.
TEST_P(AllToAll, MismatchedLargeAndShortBlocksKeepTheStreamsInStep) {
  const Case& c = GetParam();
  if (c.n < 2)
    GTEST_SKIP() << "needs a peer";
  const int last = c.n - 1;
  std::vector<std::string> seen(static_cast<size_t>(c.n)),
      before(static_cast<size_t>(c.n)), after(static_cast<size_t>(c.n));
  auto errors = run_ranks(c, [&](Group& g) {
    const int P = g.size(), me = g.rank();
    before[static_cast<size_t>(me)] = check(g, 5, 9);
    std::vector<size_t> send(P, 3), recv(P, 3);
    if (me == 0)
      send[last] = 1300001;  // last expects 3: more than it takes
    if (me == last)
      send[0] = 1;  // 0 expects 3: fewer than it waits for
    size_t in_bytes = 0, out_bytes = 0;
    for (int j = 0; j < P; ++j) {
      in_bytes += send[j];
      out_bytes += recv[j];
    }
    std::vector<uint8_t> in(in_bytes, 7), out(out_bytes);
    for (int round = 0; round < 2; ++round) {
      try {
        g.all_to_allv(in.data(), send, out.data(), recv);
      } catch (const ProtocolError& e) {
        const std::string what = e.what();
        seen[static_cast<size_t>(me)] = what.substr(what.find("all_to_allv:"));
      }
    }
    after[static_cast<size_t>(me)] = check(g, 1003, 700001);
  });
  const std::string want = "all_to_allv: rank 0 expects 3 bytes from rank " +
                           std::to_string(last) + ", but rank " +
                           std::to_string(last) + " sends 1 bytes to rank 0";
  for (int r = 0; r < c.n; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(seen[static_cast<size_t>(r)].rfind(want, 0), 0u)
        << "rank " << r << ": " << seen[static_cast<size_t>(r)];
    EXPECT_EQ(before[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(after[static_cast<size_t>(r)], "") << "rank " << r;
  }
}

// all_to_allv switching between Bruck's rounds and the direct exchange
// from call to call (small and large blocks alternating), every block
// checked.
TEST_P(AllToAll, AlternatingSmallAndLargeBlocks) {
  const Case& c = GetParam();
  std::vector<std::string> wrong(static_cast<size_t>(c.n));
  auto errors = run_ranks(c, [&](Group& g) {
    std::string& w = wrong[static_cast<size_t>(g.rank())];
    for (size_t big : {size_t(3), size_t(70001), size_t(11), size_t(5),
                       size_t(200003), size_t(2)}) {
      if (w.empty())
        w = check(g, 17, big);
    }
  });
  for (int r = 0; r < c.n; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(wrong[static_cast<size_t>(r)], "") << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Planes, AllToAll,
    ::testing::Values(Case{"Tcp_N1", "tcp", 1, 1},
                      Case{"Tcp_N2_W2", "tcp", 2, 2},
                      Case{"Tcp_N3_W1", "tcp", 3, 1},
                      Case{"Tcp_N4_W2", "tcp", 4, 2},
                      Case{"Tcp_N3_OneCpu", "tcp", 3, 1, true},
                      Case{"Tcp_N4_W2_OneCpu", "tcp", 4, 2, true},
                      Case{"Tcp_N5_OneCpu", "tcp", 5, 1, true},
                      Case{"Shm_N2", "shm", 2, 1}, Case{"Shm_N3", "shm", 3, 1}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace jaccl::detail
