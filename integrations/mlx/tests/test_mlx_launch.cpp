// Copyright 2026 the jaccl authors.
// MLX's own launcher, `mlx.launch --backend jaccl --hostfile hosts.json`,
// across hosts reached over real ssh (tests/support/ssh_hosts.h: network
// namespaces with their own sshd), starting the MLX built on this jaccl.
// mlx.launch runs a plain `ssh HOST`, so a wrapper named ssh first on PATH
// adds the test hosts' ssh config (what ~/.ssh/config does for a user).
// Run through integrations/mlx/run.sh (PYTHONPATH and PATH reach the MLX
// build). Root only: skips with the reason elsewhere.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "support/proc.h"
#include "support/ssh_hosts.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kJobDeadline = 300s;  // never reached unless broken
constexpr int kRanks = 4;            // two per host
const int kHostOf[kRanks] = {0, 0, 1, 1};

#define REQUIRE_SSH_HOSTS(h)           \
  if (!(h).skip_reason().empty()) {    \
    GTEST_SKIP() << (h).skip_reason(); \
  }                                    \
  ASSERT_EQ((h).error(), "") << "setting up the hosts failed"

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// hosts.json in mlx.launch's format; rdma(r, c) is entry [r][c] of the
// device matrix ("null" or a quoted name).
template <typename Rdma>
std::string write_hostfile(const SshHosts& hosts, const TempDir& dir,
                           Rdma rdma) {
  std::string entries;
  for (int r = 0; r < kRanks; ++r) {
    std::string row;
    for (int c = 0; c < kRanks; ++c) {
      row += std::string(c ? ", " : "") + (c == r ? "null" : rdma(r, c));
    }
    const std::string& ip = hosts.ip(kHostOf[r]);
    entries += std::string(r ? ",\n" : "") + "  {\"ssh\": \"" + ip +
               "\", \"ips\": [\"" + ip + "\"], \"rdma\": [" + row + "]}";
  }
  const std::string file = dir / "hosts.json";
  std::ofstream(file) << "{\"backend\": \"jaccl\", \"hosts\": [\n"
                      << entries << "]}\n";
  return file;
}

// Runs mlx.launch with `hostfile` and returns its result.
ProcResult launch(const SshHosts& hosts, const TempDir& dir,
                  const std::string& hostfile) {
  const std::string wrap = dir / "bin";
  ::mkdir(wrap.c_str(), 0755);
  {
    std::ofstream f(wrap + "/ssh");
    f << "#!/bin/sh\nexec /usr/bin/" << hosts.ssh_command() << " \"$@\"\n";
  }
  ::chmod((wrap + "/ssh").c_str(), 0755);
  const std::string worker =
      std::string(JACCL_SOURCE_DIR) + "/integrations/mlx/tests/mlx_worker.py";
  return run(
      "mlx.launch",
      {"--backend", "jaccl", "--hostfile", hostfile, "--starting-port",
       std::to_string(free_loopback_port()), "--env",
       "PYTHONPATH=" + env_or_empty("PYTHONPATH"), "--env", "JACCL_LOG=info",
       "--env", "JACCL_TIMEOUT=60", "--env", "LAUNCH_DIR=" + dir.path(),
       "--python", "/usr/bin/python3", worker, "launched"},
      {{"PATH", wrap + ":" + env_or_empty("PATH")}}, kJobDeadline);
}

// What rank r wrote into the launch directory (mlx_worker.py launched).
std::string report(const TempDir& dir, int r) {
  std::ifstream f(dir / ("rank-" + std::to_string(r)));
  std::string line;
  std::getline(f, line);
  return line;
}

// Every rank ran, in both hosts' network namespaces.
void expect_launched(const ProcResult& r, const TempDir& dir) {
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  std::set<std::string> netns;
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::string line = report(dir, rank);
    const std::string want = "RANK " + std::to_string(rank) + " OF 4 NETNS ";
    ASSERT_EQ(line.rfind(want, 0), 0u) << line << "\n" << r.output;
    netns.insert(line.substr(want.size()));
  }
  EXPECT_EQ(netns.size(), 2u) << r.output;
}

// The same hostfile through jaccl-run, which reads mlx.launch's format.
TEST(MlxLaunch, JacclRunStartsTheSameJobFromTheSameHostfile) {
  SshHosts hosts(2);
  REQUIRE_SSH_HOSTS(hosts);
  TempDir dir;
  const std::string file =
      write_hostfile(hosts, dir, [](int, int) { return std::string("null"); });
  const std::string worker =
      std::string(JACCL_SOURCE_DIR) + "/integrations/mlx/tests/mlx_worker.py";
  ProcResult r =
      run(tool_path("jaccl-run"),
          {"--hostfile", file, "--ssh", hosts.ssh_command(), "--timeout", "240",
           "--env", "PYTHONPATH=" + env_or_empty("PYTHONPATH"), "--env",
           "LAUNCH_DIR=" + dir.path(), "--", "/usr/bin/python3", worker,
           "launched"},
          {}, kJobDeadline);
  expect_launched(r, dir);
  EXPECT_TRUE(hosts.all_quiet(30s)) << hosts.describe_leftovers();
}

// What a machine without RDMA writes: null everywhere. Shared memory inside
// a host, TCP between them.
TEST(MlxLaunch, NullDeviceMatrixRunsOverShmAndTcp) {
  SshHosts hosts(2);
  REQUIRE_SSH_HOSTS(hosts);
  TempDir dir;
  ProcResult r = launch(hosts, dir, write_hostfile(hosts, dir, [](int, int) {
                          return std::string("null");
                        }));
  expect_launched(r, dir);
  EXPECT_NE(r.output.find("TCP between them"), std::string::npos) << r.output;
  EXPECT_TRUE(hosts.all_quiet(30s)) << hosts.describe_leftovers();
}

// Names of libfabric domains (the tcp provider's are interfaces): the
// ranks take ofi over the named interface between hosts.
TEST(MlxLaunch, DeviceNamesAreLibfabricDomains) {
  SshHosts hosts(2);
  REQUIRE_SSH_HOSTS(hosts);
  TempDir dir;
  ProcResult r = launch(hosts, dir, write_hostfile(hosts, dir, [&](int r, int) {
                          return "\"" + hosts.ifname(kHostOf[r]) + "\"";
                        }));
  expect_launched(r, dir);
  EXPECT_NE(r.output.find("ofi between them"), std::string::npos) << r.output;
  EXPECT_TRUE(hosts.all_quiet(30s)) << hosts.describe_leftovers();
}

// A macOS hostfile's device on Linux: every rank's init fails naming it and
// what exists, and the job ends.
TEST(MlxLaunch, UnknownDeviceNameFailsClearly) {
  SshHosts hosts(2);
  REQUIRE_SSH_HOSTS(hosts);
  TempDir dir;
  ProcResult r = launch(hosts, dir, write_hostfile(hosts, dir, [](int, int) {
                          return std::string("\"rdma_en3\"");
                        }));
  // mlx.launch stops the other ranks when the first fails (before their
  // own init may have failed) and itself exits 0 then: the failed ranks'
  // reports are what there is to check.
  EXPECT_NE(r.output.find("exited with code 1"), std::string::npos) << r.output;
  int failed = 0;
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::string line = report(dir, rank);
    if (line.empty()) {
      continue;  // stopped by mlx.launch
    }
    ++failed;
    EXPECT_EQ(line.rfind("INIT FAILED: ", 0), 0u) << line << "\n" << r.output;
    EXPECT_NE(line.find("rank " + std::to_string(rank) +
                        ": the device matrix (JACCL_IBV_DEVICES) names device "
                        "'rdma_en3'"),
              std::string::npos)
        << line;
    EXPECT_NE(line.find("providers and domains here: tcp;ofi_rxm (domains"),
              std::string::npos)
        << line;
  }
  EXPECT_GE(failed, 1) << r.output;
  EXPECT_TRUE(hosts.all_quiet(30s)) << hosts.describe_leftovers();
}

}  // namespace
}  // namespace jaccl::test
