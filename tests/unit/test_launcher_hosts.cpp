// Copyright 2026 the jaccl authors.
// jaccl-run's multi-host planning, run for real: --hosts and hostfiles
// (mlx.launch JSON, "host slots=N" text) seen through --dry-run, their
// errors, and the remote-rank protocol through a stand-in for ssh that
// runs the remote command here (no root needed; the real sshd tests are in
// test_launcher_ssh.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "support/launcher_output.h"
#include "support/proc.h"
#include "transport/ofi/ofi_fabric.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;

// Runs the remote command with sh here: ssh's argv ends HOST COMMAND.
constexpr const char* kLocalSsh =
    "/bin/sh -c 'exec /bin/sh -c \"$2\"' fake-ssh";

ProcResult launch(const std::vector<std::string>& args) {
  return run(tool_path("jaccl-run"), args, {}, 60s);
}

std::vector<std::string> with_program(std::vector<std::string> args) {
  args.push_back("--");
  args.push_back("/opt/prog");
  args.push_back("arg one");
  return args;
}

// The dry-run line of each rank: rank -> "on HOST: command".
std::map<int, std::string> dry_lines(const std::string& out) {
  std::map<int, std::string> m;
  for (const auto& line : lines_of(out)) {
    if (line.rfind("rank ", 0) == 0) {
      size_t sp = line.find(' ', 5);
      m[std::stoi(line.substr(5, sp - 5))] = line.substr(sp + 1);
    }
  }
  return m;
}

std::string write(const TempDir& dir, const std::string& name,
                  const std::string& text) {
  std::ofstream(dir / name) << text;
  return dir / name;
}

TEST(LauncherHosts, RanksFillHostsInOrder) {
  ProcResult r =
      launch(with_program({"--dry-run", "--hosts",
                           "10.9.0.1,root@10.9.0.2:2,10.9.0.3", "-n", "3"}));
  ASSERT_TRUE(r.exited_ok()) << r.output;
  auto lines = dry_lines(r.output);
  ASSERT_EQ(lines.size(), 3u) << r.output;
  EXPECT_EQ(lines[0].rfind("on 10.9.0.1: ssh -o BatchMode=yes 10.9.0.1 ", 0),
            0u)
      << lines[0];
  EXPECT_EQ(lines[1].rfind("on root@10.9.0.2: ", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("on root@10.9.0.2: ", 0), 0u) << lines[2];
  for (auto& [rank, line] : lines) {
    EXPECT_NE(line.find("export JACCL_RANK=" + std::to_string(rank) + ";"),
              std::string::npos)
        << line;
    EXPECT_NE(line.find("export JACCL_SIZE=3;"), std::string::npos) << line;
    EXPECT_NE(line.find("export JACCL_COORDINATOR=10.9.0.1:"),
              std::string::npos)
        << line;
    EXPECT_NE(line.find("/opt/prog"), std::string::npos) << line;
  }
  // Without -n every slot gets a rank.
  ProcResult all = launch(
      with_program({"--dry-run", "--hosts", "10.9.0.1,10.9.0.2:2,10.9.0.3"}));
  ASSERT_TRUE(all.exited_ok()) << all.output;
  EXPECT_EQ(dry_lines(all.output).size(), 4u) << all.output;
  EXPECT_EQ(dry_lines(all.output)[3].rfind("on 10.9.0.3: ", 0), 0u);
}

TEST(LauncherHosts, MoreRanksThanSlotsIsAnError) {
  ProcResult r = launch(
      with_program({"--dry-run", "--hosts", "10.9.0.1:2,10.9.0.2", "-n", "4"}));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("-n 4 is more ranks than the 3 slots of the hosts "
                          "(10.9.0.1:2, 10.9.0.2:1)"),
            std::string::npos)
      << r.output;
}

TEST(LauncherHosts, JsonHostfileGivesDevicesEnvsRingAndCoordinator) {
  TempDir dir;
  const std::string f = write(dir, "hosts.json", R"({
    "backend": "jaccl-ring",
    "envs": ["MLX_METAL_FAST_SYNCH=1", "SHARED=from-file"],
    "hosts": [
      {"ssh": "node-a", "ips": ["192.168.7.1"], "rdma": [null, "rdma_en2"]},
      {"ssh": "node-b", "ips": ["192.168.7.2"], "rdma": ["rdma_en3", null]}
    ]})");
  ProcResult r = launch(with_program(
      {"--dry-run", "--hostfile", f, "--env", "SHARED=from-flag"}));
  ASSERT_TRUE(r.exited_ok()) << r.output;
  auto lines = dry_lines(r.output);
  ASSERT_EQ(lines.size(), 2u) << r.output;
  EXPECT_EQ(lines[1].rfind("on node-b: ", 0), 0u) << lines[1];
  const std::string& l = lines[1];
  EXPECT_NE(l.find("export JACCL_COORDINATOR=192.168.7.1:"), std::string::npos)
      << l;
  EXPECT_NE(l.find("export JACCL_RING=1;"), std::string::npos) << l;
  EXPECT_NE(l.find("export MLX_METAL_FAST_SYNCH=1;"), std::string::npos) << l;
  // --env comes after the hostfile's envs, so it wins.
  EXPECT_LT(l.find("export SHARED=from-file;"),
            l.find("export SHARED=from-flag;"))
      << l;
  // The rows of the device matrix, written to a file there.
  EXPECT_NE(l.find(R"([[null,"rdma_en2"],["rdma_en3",null]])"),
            std::string::npos)
      << l;
  EXPECT_NE(l.find("JACCL_IBV_DEVICES"), std::string::npos) << l;
}

TEST(LauncherHosts, BareJsonArrayAndTextHostfile) {
  TempDir dir;
  const std::string json = write(
      dir, "list.json",
      R"([{"ssh": "10.9.0.1"}, {"ssh": "10.9.0.1"}, {"ssh": "10.9.0.2", "slots": 2}])");
  ProcResult a = launch(with_program({"--dry-run", "--hostfile", json}));
  ASSERT_TRUE(a.exited_ok()) << a.output;
  auto la = dry_lines(a.output);
  ASSERT_EQ(la.size(), 4u) << a.output;
  EXPECT_EQ(la[1].rfind("on 10.9.0.1: ", 0), 0u);
  EXPECT_EQ(la[3].rfind("on 10.9.0.2: ", 0), 0u);

  const std::string text =
      write(dir, "hostfile",
            "# comment\n10.9.0.1 slots=3 max_slots=8\n\n  10.9.0.2   # one\n");
  ProcResult b = launch(with_program({"--dry-run", "--hostfile", text}));
  ASSERT_TRUE(b.exited_ok()) << b.output;
  auto lb = dry_lines(b.output);
  ASSERT_EQ(lb.size(), 4u) << b.output;
  EXPECT_EQ(lb[2].rfind("on 10.9.0.1: ", 0), 0u);
  EXPECT_EQ(lb[3].rfind("on 10.9.0.2: ", 0), 0u);
}

TEST(LauncherHosts, BadHostfilesAreNamed) {
  TempDir dir;
  struct Case {
    std::string name, text, expect;
  };
  const std::vector<Case> cases = {
      {"a.json", "{\"hosts\": [", "is not valid JSON"},
      {"b.json", R"({"hosts": [{"ips": ["1.2.3.4"]}]})",
       "host 0: needs \"ssh\""},
      {"c.json", R"({"backend": "ring", "hosts": [{"ssh": "h"}]})",
       "backend 'ring' is not one jaccl-run starts"},
      {"d.json",
       R"({"hosts": [{"ssh": "h1", "rdma": [null, "x"]}, {"ssh": "h2", "rdma": ["x"]}]})",
       "host 1: \"rdma\" must list one entry per host (2)"},
      {"e.json",
       R"({"hosts": [{"ssh": "h1", "rdma": ["x", "y"]}, {"ssh": "h2", "rdma": ["x", null]}]})",
       "host 0: \"rdma\" entry 0 (itself) must be null"},
      {"f.json", R"({"envs": ["1BAD=x"], "hosts": [{"ssh": "h"}]})",
       "is not K=V"},
      {"g.txt", "h1 slots=2\nh2 slot=2\n", "g.txt:2: unknown field 'slot'"},
      {"h.txt", "h1 slots=0\n", "h.txt:1: slots must be a positive integer"},
      {"i.txt", "# nothing\n", "lists no hosts"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string f = write(dir, c.name, c.text);
    ProcResult r = launch(with_program({"--dry-run", "--hostfile", f}));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << r.output;
  }
  ProcResult missing =
      launch(with_program({"--dry-run", "--hostfile", dir / "nope"}));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("cannot read the hostfile " + dir / "nope"),
            std::string::npos)
      << missing.output;
}

TEST(LauncherHosts, LoopbackCoordinatorOnlyWhenEveryRankIsThere) {
  ProcResult mixed =
      launch(with_program({"--dry-run", "--hosts", "localhost,10.9.0.2"}));
  EXPECT_EQ(mixed.exit_code, 1) << mixed.output;
  EXPECT_NE(mixed.output.find("the first host 'localhost' has the loopback "
                              "address 127.0.0.1"),
            std::string::npos)
      << mixed.output;
  ProcResult alone =
      launch(with_program({"--dry-run", "--hosts", "localhost:2"}));
  ASSERT_TRUE(alone.exited_ok()) << alone.output;
  EXPECT_NE(alone.output.find("JACCL_COORDINATOR=127.0.0.1:"),
            std::string::npos);
  ProcResult given =
      launch(with_program({"--dry-run", "--hosts", "localhost,10.9.0.2",
                           "--coordinator", "10.9.0.9:4000"}));
  ASSERT_TRUE(given.exited_ok()) << given.output;
  EXPECT_NE(given.output.find("JACCL_COORDINATOR=10.9.0.9:4000;"),
            std::string::npos);
}

TEST(LauncherHosts, UsageErrors) {
  EXPECT_EQ(launch(with_program({"--hosts", "a", "--hostfile", "f"})).exit_code,
            2);
  EXPECT_EQ(launch(with_program({"--dry-run", "--hosts", "a:zero"})).exit_code,
            1);
  EXPECT_EQ(
      launch(with_program({"--dry-run", "--hosts", "-oProxy=x"})).exit_code, 1);
  ProcResult ssh = launch(
      with_program({"--hosts", "10.9.0.1", "--ssh", "/nonexistent/ssh -x"}));
  EXPECT_EQ(ssh.exit_code, 127) << ssh.output;
  EXPECT_NE(ssh.output.find("/nonexistent/ssh (--ssh)"), std::string::npos);
}

// ------------------------------------------ the remote protocol, here

TEST(LauncherHosts, RemoteRanksThroughAStandInSsh) {
  TempDir cwd;
  ProcResult r = launch(
      {"--hosts", "10.9.0.1:2,10.9.0.2", "--ssh", kLocalSsh, "--cwd",
       cwd.path(), "-v", "--", worker_path("launcher_probe"), "env", "cwd",
       // rank 2 fails once the others have printed
       "if-rank", "0", "touch", cwd / "r0", "if-rank", "1", "touch", cwd / "r1",
       "if-rank", "2", "await", cwd / "r0", "if-rank", "2", "await", cwd / "r1",
       "if-rank", "2", "exit", "9", "sleep", "600000"});
  EXPECT_EQ(r.exit_code, 9) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("rank 2 exited with code 9 on 10.9.0.2"),
            std::string::npos)
      << r.output;
  auto envs = rank_envs(r.output);
  ASSERT_EQ(envs.size(), 3u) << r.output;
  for (auto& [rank, env] : envs) {
    EXPECT_EQ(env["JACCL_TOKEN"].size(), 32u) << r.output;
    EXPECT_EQ(env["JACCL_TOKEN"], envs[0]["JACCL_TOKEN"]);
    EXPECT_EQ(env["JACCL_RANK"], std::to_string(rank));
    EXPECT_NE(r.output.find("[" + std::to_string(rank) + "] cwd=" + cwd.path()),
              std::string::npos);
  }
  // The start line of the remote shell is not part of the output.
  EXPECT_EQ(r.output.find("jaccl-run-remote-started"), std::string::npos)
      << r.output;
}

// --elastic over ssh (a stand-in): a remote rank that SIGKILLs itself is
// named with its host, the ranks on both hosts carry on and finish.
TEST(LauncherHosts, ElasticRemoteRankDiesAndTheOthersFinish) {
  TempDir cwd;
  const std::string dying = cwd / "dying";
  ProcResult r = launch({"--hosts",
                         "10.9.0.1:2,10.9.0.2:2",
                         "--ssh",
                         kLocalSsh,
                         "--cwd",
                         cwd.path(),
                         "--elastic",
                         "--",
                         worker_path("launcher_probe"),
                         "if-rank",
                         "2",
                         "touch",
                         dying,
                         "if-rank",
                         "2",
                         "signal",
                         "9",
                         "await",
                         dying,
                         "sleep",
                         "200",
                         "say",
                         "carried on"});
  EXPECT_EQ(r.exit_code, 128 + 9) << r.describe() << "\n" << r.output;
  for (int rank : {0, 1, 3}) {
    EXPECT_NE(r.output.find("[" + std::to_string(rank) + "] carried on\n"),
              std::string::npos)
        << r.output;
  }
  EXPECT_NE(r.output.find("jaccl-run: elastic job ended: ranks 0, 1, 3 "
                          "finished (exit 0); rank 2 was killed by signal 9 "
                          "(SIGKILL) on 10.9.0.2\n"),
            std::string::npos)
      << r.output;
}

// A host that never starts its rank (a stand-in ssh that hangs for
// 10.9.0.2): under --elastic only that rank is given up at
// --connect-timeout, the others run to their end.
TEST(LauncherHosts, ElasticGivesUpOnlyTheRankOfASilentHost) {
  ProcResult r = launch(
      {"--hosts", "10.9.0.1,10.9.0.2,10.9.0.3", "--ssh",
       "/bin/sh -c 'case \"$1\" in 10.9.0.2) exec sleep 600;; esac; exec "
       "/bin/sh -c \"$2\"' fake-ssh",
       "--connect-timeout", "1", "--elastic", "--",
       worker_path("launcher_probe"), "say", "done"});
  EXPECT_EQ(r.exit_code, 255) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("[0] done\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[2] done\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1: host 10.9.0.2 did not start it within 1 s "
                          "(--connect-timeout)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("jaccl-run: elastic job ended: ranks 0, 2 finished "
                          "(exit 0); rank 1 could not start on host "
                          "10.9.0.2\n"),
            std::string::npos)
      << r.output;
}

// The remote side's shell removes the libfabric shm regions of a rank a
// signal killed (the local case and its control: test_launcher.cpp).
TEST(LauncherHosts, ARemoteKilledRanksShmRegionsAreRemoved) {
  ASSERT_TRUE(jaccl::detail::ofi::built())
      << "this build has no libfabric: install libfabric-dev";
  TempDir cwd;
  ProcResult r =
      launch({"--hosts", "10.9.0.1", "--ssh", kLocalSsh, "--cwd", cwd.path(),
              "--env", "TEST_SC_DIR=" + cwd / "sc", "--env",
              "TEST_OFI_PROVIDER=shm", "--", worker_path("ofi_node"), "die"});
  EXPECT_EQ(r.exit_code, 128 + 9) << r.describe() << "\n" << r.output;
  const auto pids = rank_pids_by_rank(r.output);
  ASSERT_EQ(pids.count(0), 1u) << r.output;
  EXPECT_EQ(shm_regions_of(pids.at(0)), std::vector<std::string>{}) << r.output;
}

TEST(LauncherHosts, MissingRemoteDirectoryIsNamed) {
  ProcResult r = launch({"--hosts", "10.9.0.1", "--ssh", kLocalSsh, "--cwd",
                         "/nonexistent/jaccl-dir", "--", "true"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("rank 0: could not start on host 10.9.0.1"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("no directory /nonexistent/jaccl-dir"),
            std::string::npos)
      << r.output;
}

TEST(LauncherHosts, AnSshThatDropsStdinIsNamed) {
  // The token travels on ssh's stdin; a --ssh that does not pass it on
  // (like ssh -n) is reported as such, not as an unreachable host.
  ProcResult r = launch({"--hosts", "10.9.0.1", "--ssh",
                         "/bin/sh -c 'exec /bin/sh -c \"$2\" </dev/null' x",
                         "--", "true"});
  EXPECT_EQ(r.exit_code, 255) << r.output;
  EXPECT_NE(r.output.find("rank 0: could not start on host 10.9.0.1"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("no job token on stdin"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace jaccl::test
