// Copyright 2026 the jaccl authors.
// Groups spanning several "hosts": each host is an IPC namespace of its own
// (made with unshare, entered with nsenter), so its ranks share memory with
// each other but not with the other hosts, exactly as on separate machines;
// TCP still runs over loopback. Checks the host map, the full conformance
// matrix over the shared-memory + TCP group for several layouts (interleaved,
// blocked, uneven, three hosts), faults (a rank or a host leader SIGKILLed,
// ranks calling different ops) and JACCL_TRANSPORT=tcp across namespaces.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/hier_group.h"
#include "support/fixtures.h"
#include "support/ipc_hosts.h"
#include "support/netns.h"
#include "support/proc.h"
#include "support/slowdown.h"

namespace {

using namespace std::chrono_literals;
using jaccl::detail::HostMap;
using jaccl::test::all_output;
using jaccl::test::coordinator_rank_env;
using jaccl::test::Job;
using jaccl::test::kUnsetEnv;
using jaccl::test::line_of;
using jaccl::test::ProcResult;
using jaccl::test::TempDir;
namespace fs = std::filesystem;
using Env = std::map<std::string, std::string>;

// ---- the host map ---------------------------------------------------------

TEST(HostMap, GroupsRanksByHostInFirstRankOrder) {
  HostMap m = HostMap::from_host_ids({7, 3, 7, -4, 3});
  ASSERT_EQ(m.hosts.size(), 3u);
  EXPECT_EQ(m.hosts[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(m.hosts[1], (std::vector<int>{1, 4}));
  EXPECT_EQ(m.hosts[2], (std::vector<int>{3}));
  EXPECT_EQ(m.host_of, (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(m.index_of, (std::vector<int>{0, 0, 1, 0, 1}));
  EXPECT_EQ(m.leaders(), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(m.members_of(4), (std::vector<int>{1, 4}));
  EXPECT_EQ(m.size(), 5);
}

// ---- IPC namespaces as hosts (tests/support/ipc_hosts.h) -----------------

using Hosts = jaccl::test::IpcHosts;
using jaccl::test::start_on_hosts;

int host_count(const std::vector<int>& host_of) {
  return *std::max_element(host_of.begin(), host_of.end()) + 1;
}

// Every rank of a conformance job exited 0 over the shm+tcp group with no
// failed check.
void expect_conformance_ok(const std::vector<ProcResult>& rs) {
  const std::string all = all_output(rs);
  const int n = static_cast<int>(rs.size());
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(rs[r].exited_ok()) << "rank " << r << "\n" << all;
    const std::string summary = line_of(rs[r].output, "SUMMARY ");
    EXPECT_NE(summary.find("rank=" + std::to_string(r) +
                           " size=" + std::to_string(n) + " backend=shm+tcp"),
              std::string::npos)
        << summary << "\n"
        << all;
    EXPECT_NE(summary.find(" failures=0"), std::string::npos) << all;
  }
}

#define REQUIRE_HOSTS(h)         \
  if (!(h).error().empty()) {    \
    GTEST_SKIP() << (h).error(); \
  }

// ---- conformance over shared memory + TCP ---------------------------------

struct Layout {
  std::string name;
  std::vector<int> host_of;  // rank -> host
  std::string matrix;        // conformance worker CONF_MATRIX
  bool ring = false;
};
void PrintTo(const Layout& l, std::ostream* os) {
  *os << l.name;
}

class HierConformance : public ::testing::TestWithParam<Layout> {};

TEST_P(HierConformance, EveryOpMatchesTheReference) {
  const Layout& l = GetParam();
  Hosts hosts(host_count(l.host_of));
  REQUIRE_HOSTS(hosts);
  TempDir dir;
  const int n = static_cast<int>(l.host_of.size());
  const int port = jaccl::test::free_loopback_port();
  Job job = start_on_hosts(
      hosts, l.host_of, jaccl::test::worker_path("conformance"), {},
      [&](int r) {
        Env e = coordinator_rank_env(r, n, port, "auto");
        // TSan took ~2.5 minutes a layout over the full matrix's
        // MiB-sized rows: there every layout runs the reduced one (every
        // op, fewer counts).
        e["CONF_MATRIX"] =
            jaccl::test::under_tsan() ? std::string("reduced") : l.matrix;
        e["CONF_DIR"] = dir.path();
        if (l.ring)
          e["JACCL_RING"] = "1";
        return e;
      });
  expect_conformance_ok(job.wait(300s));
}

INSTANTIATE_TEST_SUITE_P(
    Hier, HierConformance,
    ::testing::Values(
        // Hosts {0,2} and {1,3}: no host's ranks are consecutive.
        Layout{"Interleaved_N4", {0, 1, 0, 1}, "full"},
        // {0,1} {2,3}: leaders' all_gather/sum_scatter line up with ranks.
        Layout{"Blocked_N4", {0, 0, 1, 1}, "full"},
        Layout{"Blocked_N4_Ring", {0, 0, 1, 1}, "reduced", true},
        // {0,1,3} {2} {4}: hosts of one rank next to a bigger one.
        Layout{"Uneven_N5", {0, 0, 1, 0, 2}, "full"},
        Layout{"ThreeHosts_N6", {0, 0, 1, 1, 2, 2}, "reduced"}),
    [](const auto& info) { return info.param.name; });

// ---- faults -----------------------------------------------------------------

struct KillCase {
  std::string name;
  std::vector<int> host_of;
  int victim;
};
void PrintTo(const KillCase& c, std::ostream* os) {
  *os << c.name;
}

class HierKill : public ::testing::TestWithParam<KillCase> {};

TEST_P(HierKill, SurvivorsOnEveryHostThrowPeerLostNamingIt) {
  const KillCase& c = GetParam();
  Hosts hosts(host_count(c.host_of));
  REQUIRE_HOSTS(hosts);
  const int n = static_cast<int>(c.host_of.size());
  const int port = jaccl::test::free_loopback_port();
  Job job = start_on_hosts(
      hosts, c.host_of, jaccl::test::worker_path("fault_worker"), {"loop"},
      [&](int r) { return coordinator_rank_env(r, n, port, "auto"); });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(job.wait_for_output(r, "LOOPING", 60s))
        << "rank " << r << " never got going:\n"
        << all_output(job.wait(1s));
  }
  // The shell exec'd nsenter, which exec'd the worker: the pid is the rank.
  job.kill(c.victim, SIGKILL);
  auto rs = job.wait(60s);  // far below JACCL_OP_TIMEOUT: a hang fails here
  const std::string all = all_output(rs);
  const std::string victim = "rank " + std::to_string(c.victim);
  for (int r = 0; r < n; ++r) {
    if (r == c.victim)
      continue;
    EXPECT_FALSE(rs[r].timed_out) << "rank " << r << " hung\n" << all;
    EXPECT_EQ(rs[r].exit_code, 3) << "rank " << r << "\n" << all;
    const std::string err = line_of(rs[r].output, "ERROR ");
    EXPECT_EQ(err.rfind("ERROR PeerLost PeerLostError | ", 0), 0u)
        << "rank " << r << ": " << err << "\n"
        << all;
    EXPECT_NE(err.find(victim), std::string::npos)
        << "rank " << r << " does not name " << victim << ": " << err;
    EXPECT_NE(rs[r].output.find("DESTROYED"), std::string::npos) << all;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Hier, HierKill,
    ::testing::Values(KillCase{"NonLeader_N4", {0, 0, 1, 1}, 3},
                      KillCase{"Leader_N4", {0, 0, 1, 1}, 2},
                      KillCase{"LoneHost_N3", {0, 0, 1}, 2}),
    [](const auto& info) { return info.param.name; });

TEST(HierFaults, RanksCallingDifferentOpsGetProtocolErrorOnEveryHost) {
  const std::vector<int> host_of = {0, 0, 1, 1};
  Hosts hosts(2);
  REQUIRE_HOSTS(hosts);
  const int n = 4, odd = 3;  // a non-leader on the second host
  const int port = jaccl::test::free_loopback_port();
  Job job =
      start_on_hosts(hosts, host_of, jaccl::test::worker_path("fault_worker"),
                     {"mismatch"}, [&](int r) {
                       Env e = coordinator_rank_env(r, n, port, "auto");
                       e["FAULT_ODD"] = std::to_string(odd);
                       return e;
                     });
  auto rs = job.wait(120s);
  const std::string all = all_output(rs);
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(rs[r].timed_out) << "rank " << r << " hung\n" << all;
    EXPECT_EQ(rs[r].exit_code, 3) << "rank " << r << "\n" << all;
    const std::string err = line_of(rs[r].output, "ERROR ");
    EXPECT_EQ(err.rfind("ERROR Protocol ProtocolError | ", 0), 0u)
        << "rank " << r << ": " << err << "\n"
        << all;
  }
  // The ranks sharing memory with the odd one see what it called.
  EXPECT_NE(line_of(rs[2].output, "ERROR ").find("all_gather"),
            std::string::npos)
      << all;
}

// Two hosts that do not share a network either: host 1 also lives in a
// network namespace of its own, joined by a veth pair, so its TCP runs over
// a real link with its own addresses (JACCL_IFNAME) and no shared loopback;
// the side channel is a shared directory.
TEST(HierNetns, TwoHostsOverAVethPair) {
  const std::vector<int> host_of = {0, 0, 1, 1};
  Hosts hosts(2);
  REQUIRE_HOSTS(hosts);
  jaccl::test::Netns net;
  if (!net.ok())
    GTEST_SKIP() << "cannot make a network namespace: " << net.why();
  TempDir dir;
  const int n = 4;
  const std::string w = jaccl::test::worker_path("conformance");
  std::vector<std::string> sh = {
      "-c",
      "if [ -n \"$HIER_NETNS\" ]; then set -- ip netns exec \"$HIER_NETNS\"; "
      "else set --; fi; exec \"$@\" nsenter --ipc=\"$HIER_HOST\" -- '" +
          w + "'"};
  Job job = Job::start("/bin/sh", sh, n, [&](int r) {
    const int h = host_of[static_cast<size_t>(r)];
    Env e = coordinator_rank_env(r, n, 0, "auto");
    e["JACCL_COORDINATOR"] = kUnsetEnv;
    e["JACCL_SIDE_CHANNEL"] = "file://" + dir.path();
    e["JACCL_JOB"] = "hier-veth";  // the directory is this test's own
    e["JACCL_IFNAME"] = h == 0 ? net.host_ip() : net.ns_ip();
    e["HIER_HOST"] = hosts.file(h);
    e["HIER_NETNS"] = h == 0 ? "" : net.name();
    e["CONF_MATRIX"] = "reduced";
    e["CONF_DIR"] = dir.path();
    e["JACCL_LOG"] = "info";
    return e;
  });
  auto rs = job.wait(300s);
  expect_conformance_ok(rs);
  for (int r = 0; r < n; ++r) {
    // Each host's ranks listen on their own side of the link.
    const std::string ip =
        host_of[static_cast<size_t>(r)] == 0 ? net.host_ip() : net.ns_ip();
    EXPECT_NE(rs[r].output.find("listening on " + ip + ":"), std::string::npos)
        << "rank " << r << "\n"
        << rs[r].output;
  }
}

TEST(HierTransport, TcpAcrossNamespacesStaysPlainTcp) {
  const std::vector<int> host_of = {0, 0, 1};
  Hosts hosts(2);
  REQUIRE_HOSTS(hosts);
  const int n = 3;
  const int port = jaccl::test::free_loopback_port();
  Job job = start_on_hosts(
      hosts, host_of, jaccl::test::worker_path("fault_worker"), {"once"},
      [&](int r) { return coordinator_rank_env(r, n, port, "tcp"); });
  auto rs = job.wait(60s);
  const std::string all = all_output(rs);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(rs[r].exited_ok()) << all;
    EXPECT_NE(
        rs[r].output.find("OK rank=" + std::to_string(r) + " backend=tcp"),
        std::string::npos)
        << all;
  }
}

}  // namespace
