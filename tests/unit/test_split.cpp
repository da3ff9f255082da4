// Copyright 2026 the jaccl authors.
// Group::split over real processes (tests/workers/split_worker): grids of
// row and column groups used concurrently, on TCP, shared memory, libfabric
// and hosts made of IPC namespaces; a user factory called once overall; a
// rank SIGKILLed failing the parent and every child that holds it, named by
// its job rank; a split that only some ranks call. Plus the pure parts:
// who goes in which child, the child's config (renaming member numbers:
// test_errors).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "group/split.h"
#include "support/fixtures.h"
#include "support/ipc_hosts.h"
#include "support/proc.h"

namespace {

using namespace std::chrono_literals;
using jaccl::detail::SplitVote;
using jaccl::test::all_output;
using jaccl::test::coordinator_rank_env;
using jaccl::test::Job;
using jaccl::test::kUnsetEnv;
using jaccl::test::line_of;
using jaccl::test::ProcResult;
using jaccl::test::TempDir;
using Env = std::map<std::string, std::string>;

std::string worker() {
  return jaccl::test::worker_path("split_worker");
}

// ---- pure parts ------------------------------------------------------------

TEST(SplitMembers, ColorKeyAndTies) {
  // colors 0 1 0 1 0 -1; keys: -1 means the parent rank.
  std::vector<SplitVote> v = {{0, 9},  {1, -1}, {0, 2},
                              {1, -1}, {0, 2},  {-1, 0}};
  EXPECT_EQ(jaccl::detail::split_members(v, 0), (std::vector<int>{2, 4, 0}));
  EXPECT_EQ(jaccl::detail::split_members(v, 3), (std::vector<int>{1, 3}));
  EXPECT_TRUE(jaccl::detail::split_members(v, 5).empty());
  // Negative keys other than -1 order like any key.
  std::vector<SplitVote> w = {{0, 5}, {0, -7}, {0, -1}};
  EXPECT_EQ(jaccl::detail::split_members(w, 1), (std::vector<int>{1, 2, 0}));
}

TEST(SplitConfig, DeviceMatrixIsCutToTheMembers) {
  jaccl::Config parent;
  jaccl::Config::DeviceMatrix d(3, std::vector<std::vector<std::string>>(3));
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      if (r != c)
        d[r][c] = {"d" + std::to_string(r) + std::to_string(c)};
  parent.set_devices(d).set_rank(1).set_token("t").set_coordinator(
      "127.0.0.1:1");
  jaccl::Config c = jaccl::detail::child_config(parent, {2, 0}, 1);
  EXPECT_EQ(c.get_size(), 2);
  EXPECT_EQ(c.get_rank(), 1);
  ASSERT_EQ(c.get_devices().size(), 2u);
  EXPECT_EQ(c.get_devices()[0][1], (std::vector<std::string>{"d20"}));
  EXPECT_EQ(c.get_devices()[1][0], (std::vector<std::string>{"d02"}));
  EXPECT_EQ(c.get_token(), "t");
  EXPECT_EQ(c.invalid_reason(), "");
}

// ---- jobs ------------------------------------------------------------------

void expect_all_ok(const std::vector<ProcResult>& rs) {
  const std::string all = all_output(rs);
  for (size_t r = 0; r < rs.size(); ++r) {
    EXPECT_TRUE(rs[r].exited_ok()) << "rank " << r << "\n" << all;
    EXPECT_NE(rs[r].output.find("SPLIT_OK"), std::string::npos) << all;
  }
}

// The backend a rank printed for one of its children.
std::string backend_of(const ProcResult& p, const std::string& child) {
  std::string l = line_of(p.output, "BACKEND " + child + " ");
  return l.empty() ? "(none printed)" : l.substr(l.rfind(' ') + 1);
}

struct GridCase {
  std::string name;
  std::string transport;
  std::string child_backend;  // prefix every child's backend must have
};
void PrintTo(const GridCase& c, std::ostream* os) {
  *os << c.name;
}

class SplitGrid : public ::testing::TestWithParam<GridCase> {};

TEST_P(SplitGrid, RowsAndColumnsConcurrently) {
  const GridCase& c = GetParam();
  const int n = 8;
  const int port = jaccl::test::free_loopback_port();
  Job job = Job::start(worker(), {"grid"}, n, [&](int r) {
    return coordinator_rank_env(r, n, port, c.transport);
  });
  auto rs = job.wait(240s);
  expect_all_ok(rs);
  for (int r = 0; r < n; ++r) {
    for (const char* child : {"row", "col", "pair"}) {
      EXPECT_EQ(backend_of(rs[r], child).rfind(c.child_backend, 0), 0u)
          << "rank " << r << " " << child << ": " << backend_of(rs[r], child);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Planes, SplitGrid,
                         ::testing::Values(GridCase{"tcp", "tcp", "tcp-"},
                                           GridCase{"shm", "auto", "shm"}),
                         [](const auto& info) { return info.param.name; });

// Over libfabric every child opens its own endpoints: four ranks (eight
// spend most of the run polling on two cores).
TEST(SplitOfi, ChildrenOnLibfabric) {
  const int n = 4;
  const int port = jaccl::test::free_loopback_port();
  Job job = Job::start(worker(), {"layout"}, n, [&](int r) {
    return coordinator_rank_env(r, n, port, "ofi:tcp;ofi_rxm");
  });
  auto rs = job.wait(180s);
  expect_all_ok(rs);
  for (int r = 0; r < n; ++r) {
    for (const char* child : {"block", "stride", "all"}) {
      EXPECT_EQ(backend_of(rs[r], child).rfind("ofi(tcp;ofi_rxm)", 0), 0u)
          << "rank " << r << " " << child << ": " << backend_of(rs[r], child);
    }
  }
}

// A job bootstrapped by a user factory splits without calling it again and
// without a coordinator.
TEST(SplitFactory, CalledOnceOverall) {
  TempDir dir;
  const int n = 4;
  Job job = Job::start(worker(), {"layout"}, n, [&](int r) {
    Env e = jaccl::test::clean_rank_env(r, n);
    e["JACCL_COORDINATOR"] = kUnsetEnv;
    e["TEST_SIDE_DIR"] = dir.path();
    return e;
  });
  auto rs = job.wait(120s);
  expect_all_ok(rs);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(line_of(rs[r].output, "FACTORY_CALLS "),
              "FACTORY_CALLS 1 SIDE_CALLS_AFTER_INIT 0")
        << all_output(rs);
  }
}

// Two hosts of two ranks: a child inside a host gets shared memory, one
// rank per host gets TCP, both hosts with two each the hierarchical group.
TEST(SplitHier, EachChildGetsItsPlane) {
  const std::vector<int> host_of = {0, 0, 1, 1};
  jaccl::test::IpcHosts hosts(2);
  if (!hosts.error().empty())
    GTEST_SKIP() << hosts.error();
  const int n = 4;
  const int port = jaccl::test::free_loopback_port();
  Job job = jaccl::test::start_on_hosts(
      hosts, host_of, worker(), {"layout"}, [&](int r) {
        Env e = coordinator_rank_env(r, n, port, "auto");
        e["SPLIT_PER"] = "2";
        return e;
      });
  auto rs = job.wait(180s);
  expect_all_ok(rs);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(backend_of(rs[r], "block"), "shm") << all_output(rs);
    EXPECT_EQ(backend_of(rs[r], "stride").rfind("tcp-", 0), 0u)
        << all_output(rs);
    EXPECT_EQ(backend_of(rs[r], "all"), "shm+tcp") << all_output(rs);
  }
}

// The fields split_worker prints after an error's message: "rank=R" and
// the peers ("peers=a,b").
struct Fields {
  int rank = -2;
  std::vector<int> peers;
};
Fields fields_of(const std::string& line) {
  Fields f;
  const size_t at = line.rfind(" | fields rank=");
  if (at == std::string::npos) {
    return f;
  }
  std::istringstream in(line.substr(at + 15));
  in >> f.rank;
  std::string peers;
  in >> peers;  // "peers=a,b"
  std::istringstream list(peers.substr(std::min(peers.size(), size_t(6))));
  for (std::string p; std::getline(list, p, ',');) {
    f.peers.push_back(std::stoi(p));
  }
  return f;
}

// A SIGKILLed rank fails the parent and every child that holds it on every
// survivor, each naming its job rank in the message and in the error's
// fields (the reporting rank too: a child's member numbers differ from the
// job ranks); a child without it keeps working; a split of the failed
// parent rethrows the failure.
class SplitKill : public ::testing::TestWithParam<std::string> {};

TEST_P(SplitKill, EveryGroupOfTheDeadRankFails) {
  const int n = 6, victim = 3;
  const int port = jaccl::test::free_loopback_port();
  jaccl::test::TempDir dir;
  const std::string go = dir / "go";
  Job job = Job::start(worker(), {"kill"}, n, [&](int r) {
    auto e = coordinator_rank_env(r, n, port, GetParam());
    e["SPLIT_GO"] = go;
    return e;
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(job.wait_for_output(r, "LOOPING", 120s))
        << all_output(job.wait(1s));
  }
  std::this_thread::sleep_for(200ms);  // into the loop
  job.kill(victim, SIGKILL);
  for (int r = 0; r < n; ++r) {
    if (r != victim && !job.wait_for_output(r, "FIRST ", 60s))
      break;  // the checks below say what it printed
  }
  std::ofstream(go) << "go";
  auto rs = job.wait(90s);
  const std::string all = all_output(rs);
  const std::string named = "rank " + std::to_string(victim);
  for (int r = 0; r < n; ++r) {
    if (r == victim)
      continue;
    EXPECT_TRUE(rs[r].exited_ok()) << "rank " << r << "\n" << all;
    EXPECT_EQ(line_of(rs[r].output, "FIRST ").rfind("FIRST PeerLost", 0), 0u)
        << all;
    const bool row_has_victim = r / 2 == victim / 2;
    for (std::string g : {"world", "all", "row", "split"}) {
      const std::string l = line_of(rs[r].output, "PROBE " + g + " ");
      if (g == "row" && !row_has_victim) {
        EXPECT_EQ(l, "PROBE row ok") << "rank " << r << "\n" << all;
        continue;
      }
      EXPECT_EQ(l.rfind("PROBE " + g + " PeerLost | ", 0), 0u)
          << "rank " << r << ": " << l << "\n"
          << all;
      EXPECT_NE(l.find(named), std::string::npos)
          << "rank " << r << " " << g << " does not name " << named << ": "
          << l;
      const Fields f = fields_of(l);
      EXPECT_EQ(f.rank, r) << "rank " << r << " " << g << ": " << l;
      EXPECT_NE(std::find(f.peers.begin(), f.peers.end(), victim),
                f.peers.end())
          << "rank " << r << " " << g << ": the peers lack " << victim << ": "
          << l;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Planes, SplitKill, ::testing::Values("tcp", "auto"),
                         [](const auto& info) {
                           return info.param == "auto" ? std::string("shm")
                                                       : info.param;
                         });

// A split that rank 0 never calls ends in a TimeoutError naming it.
TEST(SplitPartial, MissingRankTimesOut) {
  const int n = 3;
  const int port = jaccl::test::free_loopback_port();
  Job job = Job::start(worker(), {"partial"}, n, [&](int r) {
    Env e = coordinator_rank_env(r, n, port, "tcp");
    e["JACCL_OP_TIMEOUT"] = "2";
    e["SPLIT_HOLD_MS"] = "8000";
    return e;
  });
  auto rs = job.wait(60s);
  const std::string all = all_output(rs);
  for (int r = 1; r < n; ++r) {
    const std::string l = line_of(rs[r].output, "SPLIT_ERROR ");
    EXPECT_EQ(l.rfind("SPLIT_ERROR Timeout | ", 0), 0u) << all;
    EXPECT_NE(l.find("rank 0"), std::string::npos) << all;
  }
}

}  // namespace
