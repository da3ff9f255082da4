// Copyright 2026 the jaccl authors.
// jaccl-run, run for real (tool_path("jaccl-run")) with the launcher_probe
// worker as its program, plus the process helper the tests stand on.
// Deadlines only keep a broken build from hanging; nothing asserts timings.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/fixtures.h"
#include "support/launcher_output.h"
#include "support/proc.h"
#include "transport/ofi/ofi_fabric.h"
#include "transport/ofi/shm_regions.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kDeadline = 60s;  // never reached unless something is broken

std::string probe() {
  return worker_path("launcher_probe");
}
std::string launcher() {
  return tool_path("jaccl-run");
}

ProcResult launch(const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env = {}) {
  return run(launcher(), args, env, kDeadline);
}

// jaccl-run -n N [opts] -- probe probe_args...
std::vector<std::string> cmd(int n, const std::vector<std::string>& opts,
                             const std::vector<std::string>& probe_args) {
  std::vector<std::string> args{"-n", std::to_string(n)};
  args.insert(args.end(), opts.begin(), opts.end());
  args.push_back("--");
  args.push_back(probe());
  args.insert(args.end(), probe_args.begin(), probe_args.end());
  return args;
}

// The line launcher_probe's "lines"/"errlines" command prints.
std::string probe_line(const std::string& tag, int rank, int i, size_t len) {
  std::string line =
      tag + " " + std::to_string(rank) + " " + std::to_string(i) + " ";
  while (line.size() < len) {
    line += static_cast<char>('a' + (line.size() % 26));
  }
  return line;
}

// True once none of the pids is alive (death by PR_SET_PDEATHSIG is
// asynchronous, so allow it time).
bool all_gone(const std::vector<pid_t>& pids) {
  auto until = std::chrono::steady_clock::now() + kDeadline;
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

// Starts jaccl-run in the background and waits until each rank printed its
// pid.
Job start_and_wait_for_pids(const std::vector<std::string>& args, int n) {
  Job job = Job::start(launcher(), args, 1, nullptr);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(
        job.wait_for_output(0, "[" + std::to_string(r) + "] pid=", kDeadline))
        << job.output(0);
  }
  return job;
}

// ------------------------------------------------------------ proc helper

TEST(ProcHelper, RunCapturesOutputAndExitCode) {
  ProcResult r = run("/bin/sh", {"-c", "echo to-out; echo to-err >&2; exit 3"},
                     {}, kDeadline);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.output.find("to-out\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("to-err\n"), std::string::npos) << r.output;
}

TEST(ProcHelper, DeadlineKills) {
  // The deadline must leave the probe time to start and print under a
  // loaded ctest -j2 (300 ms did not, once: empty output).
  ProcResult r = run(probe(), {"say", "started", "sleep", "600000"}, {}, 3s);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_EQ(r.output, "started\n");
}

TEST(ProcHelper, EnvPerRankAndUnset) {
  ::setenv("JACCL_PROC_TEST_INHERITED", "yes", 1);
  Job job = Job::start(
      probe(), {"getenv", "PER_RANK", "getenv", "JACCL_PROC_TEST_INHERITED"}, 3,
      [](int rank) {
        std::map<std::string, std::string> env{
            {"PER_RANK", "value" + std::to_string(rank)}};
        if (rank == 2) {
          env["JACCL_PROC_TEST_INHERITED"] = kUnsetEnv;
        }
        return env;
      });
  auto results = job.wait(kDeadline);
  ::unsetenv("JACCL_PROC_TEST_INHERITED");
  ASSERT_EQ(results.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(results[r].exited_ok()) << results[r].describe();
    EXPECT_NE(results[r].output.find("PER_RANK=value" + std::to_string(r)),
              std::string::npos);
  }
  EXPECT_NE(results[0].output.find("JACCL_PROC_TEST_INHERITED=yes"),
            std::string::npos);
  EXPECT_NE(results[2].output.find("JACCL_PROC_TEST_INHERITED unset"),
            std::string::npos);
}

TEST(ProcHelper, ChattyChildIsDrained) {
  // Far more than a pipe buffer, while nobody is in wait().
  Job job =
      Job::start(probe(), {"lines", "20000", "100", "say", "end"}, 2, nullptr);
  ASSERT_TRUE(job.wait_for_output(0, "\nend\n", kDeadline));
  ASSERT_TRUE(job.wait_for_output(1, "\nend\n", kDeadline));
  auto results = job.wait(kDeadline);
  for (const auto& r : results) {
    EXPECT_TRUE(r.exited_ok()) << r.describe();
    EXPECT_EQ(r.output.size(), 20000u * 101 + 4);
  }
}

TEST(ProcHelper, KillAndWaitOne) {
  Job job = Job::start(probe(), {"say", "up", "sleep", "600000"}, 2, nullptr);
  ASSERT_TRUE(job.wait_for_output(1, "up\n", kDeadline));
  job.kill(1, SIGTERM);
  ProcResult r1 = job.wait_one(1, kDeadline);
  EXPECT_EQ(r1.term_signal, SIGTERM);
  EXPECT_FALSE(r1.timed_out);
  EXPECT_TRUE(pid_alive(job.pid(0)));
  ProcResult r0 = job.wait_one(0, 100ms);
  EXPECT_TRUE(r0.timed_out);
  EXPECT_FALSE(pid_alive(job.pid(0)));
}

TEST(ProcHelper, EachRankLeadsAProcessGroupOfItsOwn) {
  // When the shell that started the suite exits, the suite's process group
  // is orphaned, and the kernel hangs up such a group if a member is
  // stopped: a rank a test stopped (SIGSTOP) died of SIGHUP once. A rank in
  // a group of its own, whose parent (this test) is in another group of
  // the same session, is never in an orphaned group while the test lives.
  Job job = Job::start(probe(), {"say", "up", "sleep", "600000"}, 2, nullptr);
  ASSERT_TRUE(job.wait_for_output(1, "up\n", kDeadline));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(::getpgid(job.pid(r)), job.pid(r)) << "rank " << r;
    EXPECT_NE(::getpgid(job.pid(r)), ::getpgrp()) << "rank " << r;
    EXPECT_EQ(::getsid(job.pid(r)), ::getsid(0)) << "rank " << r;
  }
}

TEST(ProcHelper, MissingProgramThrows) {
  EXPECT_THROW(Job::start("/nonexistent/program", {}, 2, nullptr),
               std::system_error);
  EXPECT_THROW(Job::start("no-such-program-on-path-jaccl", {}, 1, nullptr),
               std::system_error);
}

TEST(ProcHelper, FreeLoopbackPort) {
  int port = free_loopback_port();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

// ---------------------------------------------------------- rank environment

TEST(Launcher, RankEnvironment) {
  ProcResult r = launch(cmd(4, {}, {"env"}));
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  auto envs = rank_envs(r.output);
  ASSERT_EQ(envs.size(), 4u) << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    auto& env = envs[rank];
    EXPECT_EQ(env["JACCL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["JACCL_SIZE"], "4");
    const std::string& coord = env["JACCL_COORDINATOR"];
    ASSERT_EQ(coord.rfind("127.0.0.1:", 0), 0u) << coord;
    ASSERT_TRUE(all_digits(coord.substr(10))) << coord;
    int port = std::stoi(coord.substr(10));
    EXPECT_GT(port, 0);
    EXPECT_LT(port, 65536);
    const std::string& token = env["JACCL_TOKEN"];
    EXPECT_EQ(token.size(), 32u) << token;
    EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos)
        << token;
    EXPECT_EQ(env["JACCL_TOKEN"], envs[0]["JACCL_TOKEN"]);
    EXPECT_EQ(env["JACCL_COORDINATOR"], envs[0]["JACCL_COORDINATOR"]);
    EXPECT_EQ(env.count("JACCL_SIDE_CHANNEL"), 0u);
    // Rank 0 alone inherits the coordinator's socket.
    if (rank == 0) {
      EXPECT_TRUE(all_digits(env["JACCL_COORDINATOR_FD"]))
          << env["JACCL_COORDINATOR_FD"];
    } else {
      EXPECT_EQ(env.count("JACCL_COORDINATOR_FD"), 0u) << "rank " << rank;
    }
  }
}

TEST(Launcher, CoordinatorPortIsHeldFromTheStartAndRankZeroServesIt) {
  // The ranks wait for a file before they touch jaccl: meanwhile the port
  // jaccl-run chose must already be taken (a port that was free "a moment
  // ago", bound only when rank 0 got that far, was free for anyone here to
  // take), and once they go, rank 0 serves the star on that socket.
  TempDir dir;
  const std::string go = dir / "go";
  Job job = Job::start(launcher(),
                       {"-n", "2", "-v", "--env", "STAR_GO_FILE=" + go, "--env",
                        "JACCL_TIMEOUT=60", "--", worker_path("star_worker")},
                       1, nullptr);
  ASSERT_TRUE(job.wait_for_output(0, "coordinator 127.0.0.1:", kDeadline))
      << job.output(0);
  std::smatch m;
  const std::string out = job.output(0);
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex("coordinator 127\\.0\\.0\\.1:([0-9]+)")))
      << out;
  EXPECT_EQ(loopback_bind_errno(std::stoi(m[1].str())), EADDRINUSE)
      << "the coordinator's port was free while the ranks started";
  std::ofstream(go).put('\n');
  auto res = job.wait(kDeadline);
  ASSERT_EQ(res.size(), 1u);
  EXPECT_TRUE(res[0].exited_ok()) << res[0].describe() << "\n" << res[0].output;
  EXPECT_NE(res[0].output.find("[0] LISTENING"), std::string::npos)
      << res[0].output;
  EXPECT_NE(res[0].output.find("[0] OK"), std::string::npos) << res[0].output;
  EXPECT_NE(res[0].output.find("[1] OK"), std::string::npos) << res[0].output;
}

TEST(Launcher, AnInheritedCoordinatorFdReachesNoRank) {
  // Ours (a jaccl-run inside a rank, say) names nothing the ranks hold.
  ProcResult r = launch(cmd(2, {"--coordinator", "127.0.0.1:2345"}, {"env"}),
                        {{"JACCL_COORDINATOR_FD", "3"}});
  ASSERT_TRUE(r.exited_ok()) << r.output;
  for (auto& [rank, env] : rank_envs(r.output)) {
    EXPECT_EQ(env.count("JACCL_COORDINATOR_FD"), 0u) << "rank " << rank;
  }
}

TEST(Launcher, TokenDiffersBetweenRuns) {
  ProcResult a = launch(cmd(1, {}, {"env"}));
  ProcResult b = launch(cmd(1, {}, {"env"}));
  ASSERT_TRUE(a.exited_ok() && b.exited_ok()) << a.output << b.output;
  auto ta = rank_envs(a.output)[0]["JACCL_TOKEN"];
  auto tb = rank_envs(b.output)[0]["JACCL_TOKEN"];
  EXPECT_EQ(ta.size(), 32u);
  EXPECT_NE(ta, tb);
}

TEST(Launcher, EnvOptionPassesThrough) {
  ProcResult r = launch(cmd(2, {"--env", "JACCL_LOG=debug", "--env", "FOO=a=b"},
                            {"env", "getenv", "FOO"}));
  ASSERT_TRUE(r.exited_ok()) << r.output;
  auto envs = rank_envs(r.output);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(envs[rank]["JACCL_LOG"], "debug");
    EXPECT_NE(r.output.find("[" + std::to_string(rank) + "] FOO=a=b\n"),
              std::string::npos)
        << r.output;
  }
}

TEST(Launcher, SideChannelSetsNoCoordinator) {
  // Even an inherited coordinator must not reach the ranks.
  ProcResult r =
      launch(cmd(3, {"--side-channel", "file:///tmp/jaccl-sc"}, {"env"}),
             {{"JACCL_COORDINATOR", "10.1.2.3:4"}});
  ASSERT_TRUE(r.exited_ok()) << r.output;
  auto envs = rank_envs(r.output);
  ASSERT_EQ(envs.size(), 3u);
  for (auto& [rank, env] : envs) {
    EXPECT_EQ(env["JACCL_SIDE_CHANNEL"], "file:///tmp/jaccl-sc");
    EXPECT_EQ(env.count("JACCL_COORDINATOR"), 0u) << "rank " << rank;
    EXPECT_EQ(env["JACCL_RANK"], std::to_string(rank));
  }
}

TEST(Launcher, CoordinatorOverrideAndNoToken) {
  ProcResult r =
      launch(cmd(2, {"--coordinator", "10.0.0.7:2345", "--no-token"}, {"env"}),
             {{"JACCL_TOKEN", kUnsetEnv}});
  ASSERT_TRUE(r.exited_ok()) << r.output;
  auto envs = rank_envs(r.output);
  ASSERT_EQ(envs.size(), 2u);
  for (auto& [rank, env] : envs) {
    EXPECT_EQ(env["JACCL_COORDINATOR"], "10.0.0.7:2345");
    EXPECT_EQ(env.count("JACCL_TOKEN"), 0u) << "rank " << rank;
  }
}

TEST(Launcher, ProgramFoundOnPath) {
  ProcResult r = launch({"-n", "2", "--", "sh", "-c", "echo r$JACCL_RANK"});
  ASSERT_TRUE(r.exited_ok()) << r.output;
  EXPECT_NE(r.output.find("[0] r0\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[1] r1\n"), std::string::npos) << r.output;
}

// ------------------------------------------------------------------- output

// Checks that output holds, for every rank below `ranks` and every kind,
// launcher_probe's lines 0..n-1 of `len` chars, each whole, prefixed with
// its rank, in order, and nothing else.
void expect_probe_lines(const std::string& output, int ranks,
                        const std::vector<std::string>& kinds, int n,
                        size_t len) {
  std::map<std::pair<int, std::string>, int> next;  // (rank, kind) -> index
  int count = 0;
  for (const auto& line : lines_of(output)) {
    int rank;
    std::string rest;
    ASSERT_TRUE(split_prefix(line, rank, rest)) << "unprefixed: " << line;
    std::string kind = rest.substr(0, rest.find(' '));
    const bool known =
        std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
    ASSERT_TRUE(known) << "mangled: " << line;
    int& i = next[{rank, kind}];
    ASSERT_EQ(rest, probe_line(kind, rank, i, len)) << "mangled: " << line;
    ++i;
    ++count;
  }
  EXPECT_EQ(count, ranks * n * static_cast<int>(kinds.size()));
}

TEST(Launcher, HeavyOutputLinesStayIntact) {
  constexpr int kRanks = 4, kLines = 3000;
  ProcResult r = launch(cmd(kRanks, {},
                            {"lines", std::to_string(kLines), "150", "errlines",
                             std::to_string(kLines), "150"}));
  ASSERT_TRUE(r.exited_ok()) << r.describe();
  expect_probe_lines(r.output, kRanks, {"line", "errline"}, kLines, 150);
}

// jaccl-run's stdout is a pipe nobody reads until `go` exists. Two ranks
// write kStalledLines lines, more than the pipe holds, and exit, so
// jaccl-run is left flushing its queue; then it gets `sig`, and after that
// the reader comes back. stops: whether sig should end jaccl-run (waited for
// up to the deadline) or not (it must still run 300 ms after it: an exit
// the signal caused comes at once, and a slow machine can only hide one).
constexpr int kStalledLines = 3000;
struct StalledFlush {
  bool set_up = false;  // the ranks ran, ended, and jaccl-run got sig
  bool gone_while_stalled = false;  // jaccl-run ended before the reader
  ProcResult result;
  std::string rank_lines;  // result.output without jaccl-run's own lines
};
StalledFlush signal_the_last_flush(int sig, bool stops) {
  const std::string base =
      ::testing::TempDir() + "jaccl-last-flush-" + std::to_string(::getpid());
  const std::string done = base + "-done", go = base + "-go";
  std::remove(done.c_str());
  std::remove(go.c_str());
  auto args =
      cmd(2, {"-v"},
          {"lines", std::to_string(kStalledLines), "100", "await", done});
  std::vector<std::string> sh_args{"-c",
                                   "\"$0\" \"$@\" | { while [ ! -e '" + go +
                                       "' ]; do sleep 0.05; done; cat; }",
                                   launcher()};
  sh_args.insert(sh_args.end(), args.begin(), args.end());
  Job job = Job::start("/bin/sh", sh_args, 1, nullptr);
  StalledFlush f;
  job.wait_for_output(0, "jaccl-run: rank 1 is pid ", kDeadline);
  auto pids = launcher_pids(job.output(0));
  pid_t launcher_pid = -1;
  if (pids.size() == 2) {
    std::ifstream status("/proc/" + std::to_string(pids[0]) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("PPid:", 0) == 0) {
        launcher_pid = static_cast<pid_t>(std::stol(line.substr(5)));
      }
    }
  }
  std::ofstream(done).put('\n');
  if (launcher_pid > 0 && all_gone(pids)) {
    // Lets jaccl-run reap the ranks and reach its last flush; without the
    // pause the tests still pass, they only might not exercise that flush.
    std::this_thread::sleep_for(300ms);
    f.set_up = ::kill(launcher_pid, sig) == 0;
    if (f.set_up && !stops) {
      std::this_thread::sleep_for(300ms);
    }
    f.gone_while_stalled = f.set_up && (stops ? all_gone({launcher_pid})
                                              : !pid_alive(launcher_pid));
  }
  std::ofstream(go).put('\n');
  f.result = job.wait_one(0, kDeadline);
  std::remove(done.c_str());
  std::remove(go.c_str());
  for (const auto& line : lines_of(f.result.output)) {
    if (line.rfind("jaccl-run: ", 0) != 0) {  // our stderr is in there too
      f.rank_lines += line + "\n";
    }
  }
  return f;
}

TEST(Launcher, ALateSigchldDropsNoLinesWhileTheReaderStalls) {
  // As when a rank was reaped before its SIGCHLD was read: only a signal
  // that stops the job may cut the last flush.
  StalledFlush f = signal_the_last_flush(SIGCHLD, /*stops=*/false);
  ASSERT_TRUE(f.set_up) << f.result.output;
  EXPECT_FALSE(f.gone_while_stalled);
  ASSERT_TRUE(f.result.exited_ok()) << f.result.describe();
  expect_probe_lines(f.rank_lines, 2, {"line"}, kStalledLines, 100);
}

TEST(Launcher, SigtermEndsTheLastFlushWhileTheReaderStalls) {
  // A user who stops jaccl-run is not kept waiting for a stalled reader.
  StalledFlush f = signal_the_last_flush(SIGTERM, /*stops=*/true);
  ASSERT_TRUE(f.set_up) << f.result.output;
  EXPECT_TRUE(f.gone_while_stalled) << f.result.output;
  EXPECT_LT(count_of(f.rank_lines, "\n"), 2 * kStalledLines);
}

TEST(Launcher, StdoutAndStderrStaySeparate) {
  // sh -c '"$0" "$@" 2>/dev/null' jaccl-run ...: only stdout survives.
  auto args = cmd(2, {}, {"say", "to-out", "err", "to-err"});
  std::vector<std::string> sh_args{"-c", "\"$0\" \"$@\" 2>/dev/null",
                                   launcher()};
  sh_args.insert(sh_args.end(), args.begin(), args.end());
  ProcResult out_only = run("/bin/sh", sh_args, {}, kDeadline);
  ASSERT_TRUE(out_only.exited_ok()) << out_only.output;
  EXPECT_NE(out_only.output.find("[1] to-out\n"), std::string::npos);
  EXPECT_EQ(out_only.output.find("to-err"), std::string::npos);

  sh_args[1] = "\"$0\" \"$@\" >/dev/null";
  ProcResult err_only = run("/bin/sh", sh_args, {}, kDeadline);
  ASSERT_TRUE(err_only.exited_ok()) << err_only.output;
  EXPECT_NE(err_only.output.find("[0] to-err\n"), std::string::npos);
  EXPECT_EQ(err_only.output.find("to-out"), std::string::npos);
}

TEST(Launcher, PartialLastLineIsFlushed) {
  ProcResult r = launch(cmd(2, {}, {"say", "whole", "partial", "tail"}));
  ASSERT_TRUE(r.exited_ok()) << r.output;
  for (const auto& line : lines_of(r.output)) {
    EXPECT_TRUE(line.rfind("[0] ", 0) == 0 || line.rfind("[1] ", 0) == 0)
        << line;
  }
  EXPECT_NE(r.output.find("[0] tail\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[1] tail\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[1] whole\n"), std::string::npos) << r.output;
}

TEST(Launcher, StalledStdoutDoesNotStallSupervision) {
  // jaccl-run's stdout is a pipe nobody reads until `go` exists (its
  // stderr is ours). Rank 0 writes far more than a pipe holds, then lets
  // rank 1 fail; jaccl-run must keep reading, see the failure and stop
  // rank 0 while its own stdout is still stalled.
  const std::string base =
      ::testing::TempDir() + "jaccl-stall-" + std::to_string(::getpid());
  const std::string wrote = base + "-wrote", go = base + "-go";
  std::remove(wrote.c_str());
  std::remove(go.c_str());
  auto args = cmd(2, {"-v"},
                  {"if-rank", "0", "lines", "20000", "100", "if-rank", "0",
                   "touch", wrote, "if-rank", "1", "await", wrote, "if-rank",
                   "1", "exit", "7", "sleep", "600000"});
  std::vector<std::string> sh_args{
      "-c",
      "\"$0\" \"$@\" | { while [ ! -e '" + go +
          "' ]; do sleep 0.05; done; cat >/dev/null; }",
      launcher()};
  sh_args.insert(sh_args.end(), args.begin(), args.end());
  Job job = Job::start("/bin/sh", sh_args, 1, nullptr);
  const bool stopped = job.wait_for_output(
      0, "rank 1 exited with code 7; stopping 1 rank(s)", kDeadline);
  const std::string out = job.output(0);
  auto pids = launcher_pids(out);
  const bool rank0_gone = pids.size() == 2 && all_gone({pids[0]});
  std::ofstream(go).put('\n');
  ProcResult r = job.wait_one(0, kDeadline);
  std::remove(wrote.c_str());
  std::remove(go.c_str());
  EXPECT_TRUE(stopped) << out;
  EXPECT_EQ(pids.size(), 2u) << out;
  EXPECT_TRUE(rank0_gone) << "rank 0 still runs while stdout is stalled";
  EXPECT_NE(r.output.find("rank 0 was killed by signal 15"), std::string::npos)
      << r.output;
}

TEST(Launcher, NoPrefix) {
  ProcResult r = launch(cmd(2, {"--no-prefix"}, {"say", "plain"}));
  ASSERT_TRUE(r.exited_ok()) << r.output;
  EXPECT_EQ(r.output, "plain\nplain\n");
}

// ------------------------------------------------------------------ binding

// jaccl-run under `taskset -c 0,1` (so the test means the same on any
// machine with two CPUs or more); each rank prints its allowed CPUs.
std::map<int, std::string> rank_cpus(const std::vector<std::string>& opts,
                                     int n, ProcResult& r) {
  std::vector<std::string> args{"-c", "0,1", launcher(), "-n",
                                std::to_string(n)};
  args.insert(args.end(), opts.begin(), opts.end());
  for (const char* a :
       {"--", "sh", "-c", "grep ^Cpus_allowed_list: /proc/self/status"}) {
    args.emplace_back(a);
  }
  r = run("/usr/bin/taskset", args, {}, kDeadline);
  std::map<int, std::string> out;
  for (const std::string& line : lines_of(r.output)) {
    int rank = -1;
    char list[64] = {};
    if (std::sscanf(line.c_str(), "[%d] Cpus_allowed_list: %63s", &rank,
                    list) == 2) {
      out[rank] = list;
    }
  }
  return out;
}

bool two_cpus() {
  return ::sysconf(_SC_NPROCESSORS_ONLN) >= 2;
}

TEST(Launcher, BindsEachRankToItsShareOfOurCpus) {
  if (!two_cpus()) {
    GTEST_SKIP() << "needs two CPUs";
  }
  ProcResult r;
  auto cpus = rank_cpus({}, 2, r);
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  EXPECT_EQ(cpus, (std::map<int, std::string>{{0, "0"}, {1, "1"}})) << r.output;
  // One rank gets every CPU; an explicit --bind-to cpus is the same.
  cpus = rank_cpus({"--bind-to", "cpus"}, 1, r);
  ASSERT_TRUE(r.exited_ok()) << r.output;
  EXPECT_EQ(cpus, (std::map<int, std::string>{{0, "0-1"}})) << r.output;
}

TEST(Launcher, MoreRanksThanCpusOrBindToNoneLeaveRanksUnbound) {
  if (!two_cpus()) {
    GTEST_SKIP() << "needs two CPUs";
  }
  ProcResult r;
  auto cpus = rank_cpus({}, 3, r);
  ASSERT_TRUE(r.exited_ok()) << r.output;
  EXPECT_EQ(cpus,
            (std::map<int, std::string>{{0, "0-1"}, {1, "0-1"}, {2, "0-1"}}))
      << r.output;
  cpus = rank_cpus({"--bind-to", "none"}, 2, r);
  ASSERT_TRUE(r.exited_ok()) << r.output;
  EXPECT_EQ(cpus, (std::map<int, std::string>{{0, "0-1"}, {1, "0-1"}}))
      << r.output;
}

TEST(Launcher, BindToCpusWithMoreRanksThanCpusIsAUsageError) {
  if (!two_cpus()) {
    GTEST_SKIP() << "needs two CPUs";
  }
  ProcResult r;
  auto cpus = rank_cpus({"--bind-to", "cpus"}, 3, r);
  EXPECT_EQ(r.exit_code, 2) << r.describe() << "\n" << r.output;
  EXPECT_TRUE(cpus.empty()) << "no rank may start:\n" << r.output;
  EXPECT_NE(r.output.find("--bind-to cpus: 3 ranks but only 2 CPU(s)"),
            std::string::npos)
      << r.output;
  ProcResult bad = launch(cmd(2, {"--bind-to", "cores"}, {"say", "x"}));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--bind-to"), std::string::npos) << bad.output;
}

TEST(Launcher, DryRunShowsEachRanksCpus) {
  if (!two_cpus()) {
    GTEST_SKIP() << "needs two CPUs";
  }
  ProcResult r =
      run("/usr/bin/taskset",
          {"-c", "0,1", launcher(), "-n", "2", "--dry-run", "--", "true"}, {},
          kDeadline);
  ASSERT_TRUE(r.exited_ok()) << r.output;
  EXPECT_NE(r.output.find("true  (bound to CPUs 0)\n"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("true  (bound to CPUs 1)\n"), std::string::npos)
      << r.output;
}

// Bound to a CPU each, two ranks still have two CPUs between them: the
// planes count the union of the ranks' masks, not one rank's (which would
// make every bound job yield at each wait as if it shared one core). Under
// `taskset -c 0` they share one CPU and say so.
TEST(Launcher, BoundRanksCountTheCpusTheyHaveBetweenThem) {
  if (!two_cpus()) {
    GTEST_SKIP() << "needs two CPUs";
  }
  auto job = [](const std::string& cpus, const std::string& plane) {
    return run("/usr/bin/taskset",
               {"-c",
                cpus,
                launcher(),
                "-n",
                "2",
                "--env",
                "JACCL_LOG=info",
                "--env",
                "JACCL_TRANSPORT=" + plane,
                "--",
                tool_path("jaccl-bench"),
                "-q",
                "-t",
                plane,
                "-o",
                "all_sum",
                "-b",
                "8",
                "-e",
                "8",
                "-w",
                "1",
                "-n",
                "10"},
               {}, kDeadline);
  };
  ProcResult r = job("0,1", "shm");
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("2 ranks on 2 CPU(s) between them,"),
            std::string::npos)
      << r.output;
  r = job("0", "shm");
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("2 ranks on 1 CPU(s) between them (oversubscribed)"),
            std::string::npos)
      << r.output;
  r = job("0,1", "tcp");
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("2 ranks on this host, on 2 CPU(s) between them"),
            std::string::npos)
      << r.output;
}

// ------------------------------------------------------------------ failure

TEST(Launcher, AllRanksSucceed) {
  // A rank that finishes early does not stop the others.
  ProcResult r = launch(
      cmd(3, {}, {"if-rank", "0", "exit", "0", "sleep", "200", "say", "done"}));
  EXPECT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("[1] done\n"), std::string::npos);
  EXPECT_NE(r.output.find("[2] done\n"), std::string::npos);
}

TEST(Launcher, FailingRankExitCodeStopsTheOthers) {
  ProcResult r =
      launch(cmd(3, {"-v"}, {"if-rank", "1", "exit", "7", "sleep", "600000"}));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 7) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("jaccl-run: rank 1 exited with code 7"),
            std::string::npos)
      << r.output;
  auto pids = launcher_pids(r.output);
  EXPECT_EQ(pids.size(), 3u) << r.output;
  EXPECT_TRUE(all_gone(pids));
}

TEST(Launcher, FailingRankSignalGives128PlusSignal) {
  ProcResult r = launch(cmd(
      2, {"-v"},
      {"if-rank", "0", "signal", std::to_string(SIGUSR1), "sleep", "600000"}));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGUSR1) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("jaccl-run: rank 0 was killed by signal " +
                          std::to_string(SIGUSR1)),
            std::string::npos)
      << r.output;
  auto pids = launcher_pids(r.output);
  EXPECT_EQ(pids.size(), 2u) << r.output;
  EXPECT_TRUE(all_gone(pids));
}

// A rank killed by a signal cannot unlink its libfabric shm regions; the
// launcher that reaped it removes them. The control: the same worker run
// alone leaves its region.
TEST(Launcher, AKilledRanksLibfabricShmRegionsAreRemoved) {
  ASSERT_TRUE(jaccl::detail::ofi::built())
      << "this build has no libfabric: install libfabric-dev";
  TempDir dir;
  auto env = clean_rank_env(0, 1);
  env["TEST_SC_DIR"] = dir / "sc";
  env["TEST_OFI_PROVIDER"] = "shm";
  ProcResult alone = run(worker_path("ofi_node"), {"die"}, env, kDeadline);
  const std::string line = line_of(alone.output, "pid=");
  ASSERT_FALSE(line.empty()) << alone.describe() << "\n" << alone.output;
  const pid_t pid = std::stoi(line.substr(4));
  const size_t left = shm_regions_of(pid).size();
  EXPECT_GT(left, 0u) << "the killed worker left no region: " << alone.output;
  EXPECT_EQ(jaccl::detail::ofi::remove_shm_regions(pid),
            static_cast<int>(left));
  EXPECT_TRUE(shm_regions_of(pid).empty());

  env.erase("JACCL_RANK");
  env.erase("JACCL_SIZE");
  ProcResult r =
      run(launcher(), {"-n", "1", "-v", "--", worker_path("ofi_node"), "die"},
          env, kDeadline);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.describe() << "\n" << r.output;
  const auto pids = rank_pids_by_rank(r.output);
  ASSERT_EQ(pids.count(0), 1u) << r.output;
  EXPECT_EQ(shm_regions_of(pids.at(0)), std::vector<std::string>{}) << r.output;
  EXPECT_NE(r.output.find("rank 0: removed"), std::string::npos) << r.output;
}

TEST(Launcher, RankIgnoringSigtermIsKilledAfterGrace) {
  // Rank 0 ignores SIGTERM and only then lets rank 1 fail.
  std::string ready = ::testing::TempDir() + "jaccl-launcher-ready-" +
                      std::to_string(::getpid());
  std::remove(ready.c_str());
  ProcResult r = launch(cmd(2, {"-v", "--grace", "0.2"},
                            {"if-rank", "0", "ignore", "15", "if-rank", "0",
                             "touch", ready, "if-rank", "1", "await", ready,
                             "if-rank", "1", "exit", "5", "sleep", "600000"}));
  std::remove(ready.c_str());
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 5) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("rank 0 was killed by signal 9"), std::string::npos)
      << r.output;
  auto pids = launcher_pids(r.output);
  EXPECT_EQ(pids.size(), 2u) << r.output;
  EXPECT_TRUE(all_gone(pids));
}

TEST(Launcher, TimeoutExits124) {
  ProcResult r =
      launch(cmd(2, {"-v", "--timeout", "0.5"}, {"sleep", "600000"}));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 124) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("timeout"), std::string::npos) << r.output;
  auto pids = launcher_pids(r.output);
  EXPECT_EQ(pids.size(), 2u) << r.output;
  EXPECT_TRUE(all_gone(pids));
}

TEST(Launcher, MissingProgramExits127) {
  ProcResult r = launch({"-n", "2", "--", "/nonexistent/jaccl-program"});
  EXPECT_EQ(r.exit_code, 127) << r.output;
}

// ----------------------------------------------------------------- elastic

// --elastic: a rank that SIGKILLs itself does not stop the others. They
// outlive it (each waits for the file it touched just before dying), keep
// their output, and the job ends when they have exited, with the dead
// rank's status and a line naming who finished and who died.
TEST(Launcher, ElasticSurvivorsFinishAfterARankKillsItself) {
  TempDir dir;
  const std::string dying = dir / "dying";
  ProcResult r = launch(
      cmd(4, {"-v", "--elastic"},
          {"pid", "if-rank", "2", "touch", dying, "if-rank", "2", "signal", "9",
           "await", dying, "sleep", "200", "say", "carried on"}));
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.describe() << "\n" << r.output;
  for (int rank : {0, 1, 3}) {
    EXPECT_NE(r.output.find("[" + std::to_string(rank) + "] carried on\n"),
              std::string::npos)
        << r.output;
  }
  EXPECT_EQ(r.output.find("[2] carried on"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("jaccl-run: rank 2 was killed by signal 9 (SIGKILL); "
                          "--elastic: the other 3 running rank(s) carry on"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("jaccl-run: elastic job ended: ranks 0, 1, 3 "
                          "finished (exit 0); rank 2 was killed by signal 9 "
                          "(SIGKILL)\n"),
            std::string::npos)
      << r.output;
  // Nobody was stopped: no SIGTERM went out.
  EXPECT_EQ(r.output.find("stopping"), std::string::npos) << r.output;
  auto pids = launcher_pids(r.output);
  EXPECT_EQ(pids.size(), 4u) << r.output;
  EXPECT_TRUE(all_gone(pids));
}

// The job's status is the first failure's, whatever fails after it; each
// outcome is named once, ranks grouped.
TEST(Launcher, ElasticStatusIsTheFirstFailuresAndEveryOutcomeIsNamed) {
  TempDir dir;
  const std::string go = dir / "go";
  Job job = Job::start(
      launcher(),
      cmd(5, {"--elastic"},
          {"if-rank", "1", "exit", "3", "await", go, "if-rank", "3", "signal",
           "9", "if-rank", "4", "signal", "9", "say", "done"}),
      1, nullptr);
  // Ranks 3 and 4 die only once jaccl-run has reported rank 1's exit.
  ASSERT_TRUE(job.wait_for_output(0, "rank 1 exited with code 3", kDeadline))
      << job.output(0);
  std::ofstream(go).put('\n');
  ProcResult r = job.wait_one(0, kDeadline);
  EXPECT_EQ(r.exit_code, 3) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("[0] done\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[2] done\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("jaccl-run: elastic job ended: ranks 0, 2 finished "
                          "(exit 0); rank 1 exited with code 3; ranks 3, 4 "
                          "were killed by signal 9 (SIGKILL)\n"),
            std::string::npos)
      << r.output;
}

TEST(Launcher, ElasticJobThatLosesNobodyExits0) {
  ProcResult r = launch(cmd(3, {"--elastic"}, {"say", "hi"}));
  EXPECT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("jaccl-run: elastic job ended: ranks 0-2 finished "
                          "(exit 0)\n"),
            std::string::npos)
      << r.output;
}

// A signal to jaccl-run still ends every rank, elastic or not.
TEST(Launcher, ElasticJobStillStopsOnASignal) {
  Job job = start_and_wait_for_pids(
      cmd(3, {"-v", "--elastic"}, {"pid", "sleep", "600000"}), 3);
  auto pids = rank_pids(job.output(0));
  ASSERT_EQ(pids.size(), 3u) << job.output(0);
  job.kill(0, SIGTERM);
  ProcResult r = job.wait_one(0, kDeadline);
  EXPECT_EQ(r.term_signal, SIGTERM) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("elastic job ended: no rank finished; ranks 0-2 "
                          "were killed by signal 15 (SIGTERM)"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(all_gone(pids));
}

// ------------------------------------------------------------------ limits

// With many ranks the open-file limit bites first: it is named, with what to
// raise, before any rank starts (jaccl-run's two pipes per rank) or as soon
// as a rank finds it short (rank 0's connection to every rank), never as a
// hang or a vague timeout. `ulimit -n` in a shell sets both soft and hard.
TEST(Launcher, TooFewOpenFilesForTheRanksPipesIsNamed) {
  ProcResult r = run("/bin/sh",
                     {"-c",
                      "ulimit -n 48; exec \"$0\" -n 40 -- \"$1\" say "
                      "rank-started",
                      launcher(), probe()},
                     {}, kDeadline);
  EXPECT_EQ(r.exit_code, 1) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("jaccl-run: cannot start 40 rank(s): jaccl-run "
                          "needs about"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(hard limit 48): raise the open-file limit, e.g. "
                          "ulimit -n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("rank-started"), std::string::npos) << r.output;
}

TEST(Launcher, TooFewOpenFilesForTheControlMeshIsNamed) {
  TempDir dir;
  ProcResult r =
      run("/bin/sh",
          {"-c",
           "ulimit -n 100; exec \"$0\" -n 40 --no-prefix --side-channel "
           "\"file://$1\" -- "
           "\"$2\"",
           launcher(), dir.path(), std::string(JACCL_EXAMPLES_DIR) + "/hello"},
          {}, kDeadline);
  EXPECT_NE(r.exit_code, 0) << r.describe() << "\n" << r.output;
  // A one-host group of up to 128 ranks keeps a control connection between
  // every pair (shrink needs them), so whichever rank checks first is named.
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex("rank [0-9]+: the TCP data plane \\(39 connections "
                           "to peers\\) needs about")))
      << r.output;
  EXPECT_NE(r.output.find("hard limit 100): raise the open-file limit"),
            std::string::npos)
      << r.output;
}

// JACCL_LOG as NCCL's users spell NCCL_DEBUG, and a level that is none.
TEST(Launcher, LogLevelIgnoresCaseAndAnUnknownOneIsNamed) {
  const std::string hello = std::string(JACCL_EXAMPLES_DIR) + "/hello";
  ProcResult upper =
      launch({"-n", "2", "--env", "JACCL_LOG=INFO", "--", hello});
  ASSERT_TRUE(upper.exited_ok()) << upper.describe() << "\n" << upper.output;
  EXPECT_NE(upper.output.find("[jaccl info pid"), std::string::npos)
      << upper.output;
  ProcResult bad =
      launch({"-n", "2", "--env", "JACCL_LOG=verbose", "--", hello});
  ASSERT_TRUE(bad.exited_ok()) << bad.describe() << "\n" << bad.output;
  for (const char* rank : {"[0] ", "[1] "}) {
    EXPECT_NE(bad.output.find(std::string(rank) + "[jaccl warn pid"),
              std::string::npos)
        << bad.output;
  }
  EXPECT_NE(bad.output.find("JACCL_LOG='verbose' is not a level (off, error, "
                            "warn, info, debug, trace or 0-5); logging at "
                            "warn"),
            std::string::npos)
      << bad.output;
  EXPECT_EQ(bad.output.find("[jaccl info pid"), std::string::npos)
      << bad.output;
}

// ------------------------------------------------------------------ signals

TEST(Launcher, SignalsAreForwardedAndNothingIsLeft) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    SCOPED_TRACE(sigabbrev_np(sig));
    Job job =
        start_and_wait_for_pids(cmd(3, {"-v"}, {"pid", "sleep", "600000"}), 3);
    auto pids = rank_pids(job.output(0));
    ASSERT_EQ(pids.size(), 3u) << job.output(0);
    job.kill(0, sig);
    ProcResult r = job.wait_one(0, kDeadline);
    EXPECT_FALSE(r.timed_out) << r.output;
    // jaccl-run ends by the same signal, after the ranks died of it.
    EXPECT_EQ(r.term_signal, sig) << r.describe() << "\n" << r.output;
    for (int rank = 0; rank < 3; ++rank) {
      EXPECT_NE(r.output.find("rank " + std::to_string(rank) +
                              " was killed by signal " + std::to_string(sig)),
                std::string::npos)
          << r.output;
    }
    EXPECT_TRUE(all_gone(pids));
  }
}

TEST(Launcher, SigtermWithStubbornRanksStillLeavesNothing) {
  Job job = start_and_wait_for_pids(
      cmd(2, {"--grace", "0.2"}, {"ignore", "15", "pid", "sleep", "600000"}),
      2);
  auto pids = rank_pids(job.output(0));
  ASSERT_EQ(pids.size(), 2u);
  job.kill(0, SIGTERM);
  ProcResult r = job.wait_one(0, kDeadline);
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.term_signal, SIGTERM) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("SIGKILL"), std::string::npos) << r.output;
  EXPECT_TRUE(all_gone(pids));
}

TEST(Launcher, SigkilledLauncherLeavesNoRanks) {
  Job job = start_and_wait_for_pids(cmd(3, {}, {"pid", "sleep", "600000"}), 3);
  auto pids = rank_pids(job.output(0));
  ASSERT_EQ(pids.size(), 3u);
  job.kill(0, SIGKILL);
  ProcResult r = job.wait_one(0, kDeadline);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_TRUE(all_gone(pids));
}

// -------------------------------------------------------------------- usage

TEST(Launcher, UsageErrorsExit2) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"--", probe()},
      {"-n", "0", "--", probe()},
      {"-n", "-1", "--", probe()},
      {"-n", "two", "--", probe()},
      {"-n", "2"},
      {"-n", "2", "--"},
      {"-n", "2", "--env", "NOEQUALS", "--", probe()},
      {"-n", "2", "--bogus-option", "--", probe()},
      {"-n", "2", "--side-channel", "file:///x", "--coordinator", "h:1", "--",
       probe()},
  };
  for (const auto& args : bad) {
    ProcResult r = launch(args);
    std::string joined;
    for (const auto& a : args) {
      joined += a + " ";
    }
    EXPECT_EQ(r.exit_code, 2) << "args: " << joined << "\n" << r.output;
  }
}

TEST(Launcher, HelpExits0) {
  ProcResult r = launch({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("--side-channel"), std::string::npos);
}

TEST(Launcher, ProgramWithoutDoubleDash) {
  ProcResult r = launch({"-n", "2", probe(), "say", "-n"});
  ASSERT_TRUE(r.exited_ok()) << r.output;
  EXPECT_NE(r.output.find("[1] -n\n"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace jaccl::test
