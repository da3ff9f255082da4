// Copyright 2026 the jaccl authors.
// jaccl-run across hosts over real ssh: every "host" is a network namespace
// with its own IPC namespace and its own sshd (tests/support/ssh_hosts.h),
// so ranks on one host share memory and reach the other hosts over veth
// links and a bridge. Root only (skips with the reason elsewhere).
// Deadlines only keep a broken build from hanging; nothing asserts timings.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "support/launcher_output.h"
#include "support/proc.h"
#include "support/ssh_hosts.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr auto kJobDeadline = 240s;  // never reached unless broken
constexpr auto kQuiet = 30s;

#define REQUIRE_SSH_HOSTS(h)           \
  if (!(h).skip_reason().empty()) {    \
    GTEST_SKIP() << (h).skip_reason(); \
  }                                    \
  ASSERT_EQ((h).error(), "") << "setting up the hosts failed"

std::string launcher() {
  return tool_path("jaccl-run");
}
std::string probe() {
  return worker_path("launcher_probe");
}

std::vector<std::string> concat(std::vector<std::string> a,
                                const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Each rank of a conformance job printed a clean summary over shm+tcp.
void expect_conformance(const ProcResult& r, int n) {
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  for (int rank = 0; rank < n; ++rank) {
    const std::string summary =
        line_of(r.output, "[" + std::to_string(rank) + "] SUMMARY ");
    EXPECT_NE(summary.find("rank=" + std::to_string(rank) +
                           " size=" + std::to_string(n) + " backend=shm+tcp"),
              std::string::npos)
        << "rank " << rank << ": '" << summary << "'\n"
        << r.output;
    EXPECT_NE(summary.find(" failures=0"), std::string::npos) << r.output;
  }
}

// Starts jaccl-run and waits until n ranks printed "pid=".
Job start_job(const std::vector<std::string>& args, int n) {
  Job job = Job::start(launcher(), args, 1, nullptr);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(job.wait_for_output(0, "[" + std::to_string(r) + "] pid=", 60s))
        << job.output(0);
  }
  return job;
}

bool gone(const std::vector<pid_t>& pids) {
  const auto until = std::chrono::steady_clock::now() + kQuiet;
  while (std::chrono::steady_clock::now() < until) {
    bool any = false;
    for (pid_t p : pids) {
      any = any || pid_alive(p);
    }
    if (!any) {
      return true;
    }
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// ------------------------------------------------------------ conformance

TEST(SshLauncher, JsonHostfileRunsConformanceOnTwoHosts) {
  SshHosts hosts(2);
  REQUIRE_SSH_HOSTS(hosts);
  TempDir dir;
  // mlx.launch's format: one entry per rank, the first host's address in
  // "ips", each rank's row of the device matrix in "rdma" (null everywhere:
  // these hosts have no RDMA).
  const int n = 4;
  const int host_of[n] = {0, 0, 1, 1};
  std::string entries;
  for (int r = 0; r < n; ++r) {
    std::string rdma;
    for (int c = 0; c < n; ++c) {
      rdma += std::string(c ? ", " : "") + "null";
    }
    const std::string& ip = hosts.ip(host_of[r]);
    entries += std::string(r ? ",\n" : "") + "  {\"ssh\": \"" + ip +
               "\", \"ips\": [\"" + ip + "\"], \"rdma\": [" + rdma + "]}";
  }
  const std::string file = dir / "hosts.json";
  std::ofstream(file) << "{\"backend\": \"jaccl\",\n \"envs\": "
                         "[\"CONF_MATRIX=reduced\", \"CONF_DIR="
                      << dir.path() << "\"],\n \"hosts\": [\n"
                      << entries << "]}\n";
  ProcResult r = run(launcher(),
                     {"--hostfile", file, "--ssh", hosts.ssh_command(),
                      "--timeout", "200", "--", worker_path("conformance")},
                     {}, kJobDeadline);
  expect_conformance(r, n);
  EXPECT_TRUE(hosts.all_quiet(kQuiet)) << hosts.describe_leftovers();
}

TEST(SshLauncher, TextHostfileRunsConformanceOnThreeHosts) {
  SshHosts hosts(3);
  REQUIRE_SSH_HOSTS(hosts);
  TempDir dir;
  const std::string file = dir / "hostfile";
  std::ofstream(file) << "# Open MPI / DeepSpeed style\n"
                      << hosts.ip(0) << " slots=2\n"
                      << hosts.ip(1) << " slots=2  # second\n\n"
                      << hosts.ip(2) << " slots=2\n";
  ProcResult r = run(launcher(),
                     {"--hostfile", file, "--ssh", hosts.ssh_command(), "--env",
                      "CONF_MATRIX=reduced", "--env", "CONF_DIR=" + dir.path(),
                      "--timeout", "200", "--", worker_path("conformance")},
                     {}, kJobDeadline);
  expect_conformance(r, 6);
  EXPECT_TRUE(hosts.all_quiet(kQuiet)) << hosts.describe_leftovers();
}

// ----------------------------------------------------------------- failures

TEST(SshLauncher, FailingRankOnSecondHostStopsTheFirst) {
  SshHosts hosts(2);
  REQUIRE_SSH_HOSTS(hosts);
  const std::string go = hosts.dir() / "go";
  Job job = start_job(
      {"-v", "--hosts", hosts.ip(0) + ":2," + hosts.ip(1) + ":2", "--ssh",
       hosts.ssh_command(), "--", probe(), "pid", "if-rank", "3", "await", go,
       "if-rank", "3", "exit", "7", "sleep", "600000"},
      4);
  auto pids = rank_pids_by_rank(job.output(0));
  ASSERT_EQ(pids.size(), 4u) << job.output(0);
  std::ofstream(go).put('\n');
  ProcResult r = job.wait_one(0, kJobDeadline);
  EXPECT_EQ(r.exit_code, 7) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("rank 3 exited with code 7 on " + hosts.ip(1)),
            std::string::npos)
      << r.output;
  // The ranks on the first host were stopped (SIGTERM reached them there).
  for (int rank : {0, 1}) {
    EXPECT_NE(
        r.output.find("rank " + std::to_string(rank) +
                      " exited with code 143 (128+SIGTERM) on " + hosts.ip(0)),
        std::string::npos)
        << r.output;
  }
  EXPECT_TRUE(gone({pids[0], pids[1], pids[2], pids[3]}));
  EXPECT_TRUE(hosts.all_quiet(kQuiet)) << hosts.describe_leftovers();
}

// --elastic over real ssh: a rank on the second host SIGKILLs itself once
// every rank runs; the ranks on both hosts carry on, keep their output and
// finish, and the closing line names the dead rank and its host.
TEST(SshLauncher, ElasticRankOnSecondHostDiesAndTheOthersFinish) {
  SshHosts hosts(2);
  REQUIRE_SSH_HOSTS(hosts);
  const std::string go = hosts.dir() / "go";
  const std::string dying = hosts.dir() / "dying";
  Job job = start_job({"-v",        "--elastic",
                       "--hosts",   hosts.ip(0) + ":2," + hosts.ip(1) + ":2",
                       "--ssh",     hosts.ssh_command(),
                       "--",        probe(),
                       "pid",       "await",
                       go,          "if-rank",
                       "3",         "touch",
                       dying,       "if-rank",
                       "3",         "signal",
                       "9",         "await",
                       dying,       "sleep",
                       "300",       "say",
                       "carried on"},
                      4);
  auto pids = rank_pids_by_rank(job.output(0));
  ASSERT_EQ(pids.size(), 4u) << job.output(0);
  std::ofstream(go).put('\n');
  ProcResult r = job.wait_one(0, kJobDeadline);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.describe() << "\n" << r.output;
  for (int rank : {0, 1, 2}) {
    EXPECT_NE(r.output.find("[" + std::to_string(rank) + "] carried on\n"),
              std::string::npos)
        << r.output;
  }
  EXPECT_NE(r.output.find("jaccl-run: elastic job ended: ranks 0-2 finished "
                          "(exit 0); rank 3 was killed by signal 9 (SIGKILL) "
                          "on " +
                          hosts.ip(1) + "\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("stopping"), std::string::npos) << r.output;
  EXPECT_TRUE(gone({pids[0], pids[1], pids[2], pids[3]}));
  EXPECT_TRUE(hosts.all_quiet(kQuiet)) << hosts.describe_leftovers();
}

TEST(SshLauncher, SigintAndSigtermReachEveryRemoteRank) {
  SshHosts hosts(2);
  REQUIRE_SSH_HOSTS(hosts);
  for (int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sigabbrev_np(sig));
    Job job = start_job(
        {"--hosts", hosts.ip(0) + "," + hosts.ip(1) + ":2", "--ssh",
         hosts.ssh_command(), "-v", "--", probe(), "pid", "sleep", "600000"},
        3);
    auto pids = rank_pids(job.output(0));
    ASSERT_EQ(pids.size(), 3u) << job.output(0);
    job.kill(0, sig);
    ProcResult r = job.wait_one(0, kJobDeadline);
    EXPECT_EQ(r.term_signal, sig) << r.describe() << "\n" << r.output;
    for (int rank = 0; rank < 3; ++rank) {
      // Each died of the signal itself, not of the grace period's SIGKILL.
      EXPECT_NE(r.output.find("rank " + std::to_string(rank) +
                              " exited with code " + std::to_string(128 + sig) +
                              " (128+SIG" + sigabbrev_np(sig)),
                std::string::npos)
          << r.output;
    }
    EXPECT_TRUE(gone(pids));
    EXPECT_TRUE(hosts.all_quiet(kQuiet)) << hosts.describe_leftovers();
  }
}

TEST(SshLauncher, SigkilledLauncherLeavesNothingOnAnyHost) {
  SshHosts hosts(3);
  REQUIRE_SSH_HOSTS(hosts);
  Job job =
      start_job({"--hosts", hosts.ip(0) + "," + hosts.ip(1) + "," + hosts.ip(2),
                 "--ssh", hosts.ssh_command(), "--", probe(), "ignore", "15",
                 "pid", "sleep", "600000"},
                3);
  auto pids = rank_pids(job.output(0));
  ASSERT_EQ(pids.size(), 3u) << job.output(0);
  for (int h = 0; h < 3; ++h) {
    EXPECT_FALSE(hosts.pids_in(h).empty()) << "host " << h << " runs nothing";
  }
  job.kill(0, SIGKILL);
  ProcResult r = job.wait_one(0, kJobDeadline);
  EXPECT_EQ(r.term_signal, SIGKILL);
  // The ssh clients die with jaccl-run, each remote shell sees its
  // connection end and kills its rank (SIGTERM, ignored here, then SIGKILL).
  EXPECT_TRUE(gone(pids));
  EXPECT_TRUE(hosts.all_quiet(kQuiet)) << hosts.describe_leftovers();
}

TEST(SshLauncher, DroppedConnectionKillsItsRankAndStopsTheJob) {
  SshHosts hosts(2);
  REQUIRE_SSH_HOSTS(hosts);
  Job job =
      start_job({"-v", "--hosts", hosts.ip(0) + ":2," + hosts.ip(1), "--ssh",
                 hosts.ssh_command(), "--", probe(), "pid", "sleep", "600000"},
                3);
  ASSERT_TRUE(job.wait_for_output(0, "rank 2 started on", 30s));
  auto pids = rank_pids_by_rank(job.output(0));
  auto ssh = ssh_pids(job.output(0));
  ASSERT_EQ(pids.size(), 3u) << job.output(0);
  ASSERT_EQ(ssh.count(2), 1u) << job.output(0);
  ASSERT_EQ(::kill(ssh[2], SIGKILL), 0);  // the connection to host 1 drops
  ProcResult r = job.wait_one(0, kJobDeadline);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("rank 2"), std::string::npos) << r.output;
  EXPECT_TRUE(gone({pids[2]})) << "the rank behind the dropped connection";
  EXPECT_TRUE(gone({pids[0], pids[1]}));
  EXPECT_TRUE(hosts.all_quiet(kQuiet)) << hosts.describe_leftovers();
}

TEST(SshLauncher, UnreachableHostIsNamedWithSshsMessage) {
  SshHosts hosts(1);
  REQUIRE_SSH_HOSTS(hosts);
  // Our bridge address, on a port nothing listens on: connection refused.
  const int closed = free_loopback_port();
  hosts.add_alias(hosts.bridge_ip(), closed);
  ProcResult r = run(launcher(),
                     {"--hosts", hosts.ip(0) + "," + hosts.bridge_ip(), "--ssh",
                      hosts.ssh_command(), "--", probe(), "sleep", "600000"},
                     {}, kJobDeadline);
  EXPECT_EQ(r.exit_code, 255) << r.describe() << "\n" << r.output;
  const std::string err = line_of(r.output, "jaccl-run: rank 1: ");
  EXPECT_NE(err.find("cannot reach host " + hosts.bridge_ip()),
            std::string::npos)
      << r.output;
  EXPECT_NE(err.find("Connection refused"), std::string::npos) << r.output;
  EXPECT_TRUE(hosts.all_quiet(kQuiet)) << hosts.describe_leftovers();
}

TEST(SshLauncher, SilentHostHitsTheConnectDeadline) {
  SshHosts hosts(1);
  REQUIRE_SSH_HOSTS(hosts);
  // A port that accepts TCP (the kernel's backlog) but never says a word.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, hosts.bridge_ip().c_str(), &addr.sin_addr);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  hosts.add_alias(hosts.bridge_ip(), ntohs(addr.sin_port));
  ProcResult r =
      run(launcher(),
          {"--hosts", hosts.bridge_ip() + ":2", "--ssh", hosts.ssh_command(),
           "--connect-timeout", "2", "--", probe(), "sleep", "600000"},
          {}, kJobDeadline);
  ::close(fd);
  EXPECT_EQ(r.exit_code, 255) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("rank 0: host " + hosts.bridge_ip() +
                          " did not start it within 2 s"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(hosts.all_quiet(kQuiet)) << hosts.describe_leftovers();
}

// ------------------------------------------------------------ environment

TEST(SshLauncher, TokenIsInNoCommandLineAndEachRankHasItsEnvironment) {
  SshHosts hosts(2);
  REQUIRE_SSH_HOSTS(hosts);
  TempDir cwd;
  Job job = start_job(
      {"--hosts", hosts.ip(0) + ":2," + hosts.ip(1), "--ssh",
       hosts.ssh_command(), "--cwd", cwd.path(), "--env", "FOO=a b'c", "--",
       probe(), "env", "getenv", "FOO", "cwd", "pid", "sleep", "600000"},
      3);
  const std::string out = job.output(0);
  auto envs = rank_envs(out);
  ASSERT_EQ(envs.size(), 3u) << out;
  const std::string token = envs[0]["JACCL_TOKEN"];
  ASSERT_EQ(token.size(), 32u) << out;
  for (int rank = 0; rank < 3; ++rank) {
    auto& env = envs[rank];
    EXPECT_EQ(env["JACCL_TOKEN"], token);
    EXPECT_EQ(env["JACCL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["JACCL_SIZE"], "3");
    // The coordinator is on the first host, where the others reach it.
    EXPECT_EQ(env["JACCL_COORDINATOR"].rfind(hosts.ip(0) + ":", 0), 0u)
        << env["JACCL_COORDINATOR"];
    const std::string r = "[" + std::to_string(rank) + "] ";
    EXPECT_NE(out.find(r + "FOO=a b'c\n"), std::string::npos) << out;
    EXPECT_NE(out.find(r + "cwd=" + cwd.path() + "\n"), std::string::npos)
        << out;
  }
  // ps shows argv to everyone: no process on any host (they share our pid
  // space) may carry the token in its command line.
  int scanned = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (!all_digits(name)) {
      continue;
    }
    std::ifstream f(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(f)),
                        std::istreambuf_iterator<char>());
    ++scanned;
    EXPECT_EQ(cmdline.find(token), std::string::npos)
        << "pid " << name << " has the token in its command line";
  }
  EXPECT_GT(scanned, 10);
  job.kill(0, SIGTERM);
  ProcResult r = job.wait_one(0, kJobDeadline);
  EXPECT_EQ(r.term_signal, SIGTERM) << r.output;
  EXPECT_TRUE(hosts.all_quiet(kQuiet)) << hosts.describe_leftovers();
}

}  // namespace
}  // namespace jaccl::test
