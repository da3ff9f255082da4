// Copyright 2026 the jaccl authors.
// Fault behaviour over real processes (tests/workers/fault_worker): a rank
// SIGKILLed mid-collective, a rank that never starts, stray connections to a
// data port, a rank without a listening socket, concurrent shared-memory
// jobs, ranks in different IPC namespaces, ranks calling different
// collectives. Deadlines only bound hangs; nothing here asserts a duration.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/handshake.h"
#include "support/fixtures.h"
#include "support/listen_sockets.h"
#include "support/proc.h"
#include "transport/ofi/shm_lock_rescue.h"
#include "transport/ofi/shm_regions.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using jaccl::test::all_output;
using jaccl::test::Job;
using jaccl::test::kUnsetEnv;
using jaccl::test::line_of;
using jaccl::test::listen_sockets_of;
using jaccl::test::ProcResult;
using jaccl::test::TempDir;
using Env = std::map<std::string, std::string>;

// Environment of one rank: a clean JACCL_* set plus the caller's extras.
Env rank_env(int rank, int size, int port, const std::string& transport,
             const Env& extra = {}) {
  Env e = jaccl::test::coordinator_rank_env(rank, size, port, transport);
  for (const auto& [k, v] : extra)
    e[k] = v;
  return e;
}

std::string worker() {
  return jaccl::test::worker_path("fault_worker");
}

void touch(const std::string& path) {
  std::ofstream(path) << "go";
}

std::set<std::string> jaccl_shm_entries() {
  std::set<std::string> s;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("jaccl-", 0) == 0)
      s.insert(name);
  }
  return s;
}

// ---- a rank SIGKILLed inside an all_sum loop --------------------------------

struct KillCase {
  std::string name;
  int n;
  std::string transport;
  bool ring;
  bool factory;  // user-factory side channel (liveness must not need the star)
  int victim;
  std::string heartbeat;  // JACCL_HEARTBEAT_TIMEOUT ("" = default)
  // ofi:shm: before the victim dies, a process takes the lock of every shm
  // region of this rank and is SIGKILLed holding them (-1: none).
  int stuck = -1;
};
void PrintTo(const KillCase& c, std::ostream* os) {
  *os << c.name;
}

class KillRank : public ::testing::TestWithParam<KillCase> {};

// Leaves the lock of each of owner's libfabric shm regions held by a
// process SIGKILLed inside it, as a rank killed while queueing a message
// leaves one. Returns how many.
int leave_shm_locks_held(pid_t owner) {
  std::vector<std::pair<void*, pthread_spinlock_t*>> maps;
  for (const std::string& name : jaccl::detail::ofi::shm_regions(owner)) {
    const int fd = ::shm_open(("/" + name).c_str(), O_RDWR, 0);
    if (fd < 0)
      continue;
    void* map =
        ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED)
      continue;
    pthread_spinlock_t* lock = jaccl::detail::ofi::shm_region_lock(map, owner);
    if (lock == nullptr) {
      ::munmap(map, 4096);
      continue;
    }
    maps.emplace_back(map, lock);
  }
  int p[2];
  if (maps.empty() || ::pipe(p) != 0)
    return 0;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(p[0]);
    for (auto& [map, lock] : maps)
      pthread_spin_lock(lock);
    char c = 'L';
    (void)!::write(p[1], &c, 1);
    for (;;)
      ::pause();
  }
  ::close(p[1]);
  pollfd pfd{p[0], POLLIN, 0};
  char c = 0;
  const bool locked =
      ::poll(&pfd, 1, 10000) == 1 && ::read(p[0], &c, 1) == 1 && c == 'L';
  ::close(p[0]);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  for (auto& [map, lock] : maps)
    ::munmap(map, 4096);
  return locked ? static_cast<int>(maps.size()) : 0;
}

TEST_P(KillRank, SurvivorsThrowPeerLostNamingIt) {
  const KillCase& c = GetParam();
  if (c.stuck >= 0 && !jaccl::detail::ofi::shm_lock_rescue_enabled())
    GTEST_SKIP() << "no shm lock rescue in this build or for this libfabric: "
                    "a survivor would hang";
  TempDir dir;
  const auto shm_before = jaccl_shm_entries();
  const int port = jaccl::test::free_loopback_port();
  Job job = Job::start(worker(), {"loop"}, c.n, [&](int r) {
    Env x = {{"JACCL_RING", c.ring ? "1" : kUnsetEnv}};
    if (c.factory)
      x["TEST_SIDE_DIR"] = dir / "side";
    if (!c.heartbeat.empty())
      x["JACCL_HEARTBEAT_TIMEOUT"] = c.heartbeat;
    return rank_env(r, c.n, port, c.transport, x);
  });
  for (int r = 0; r < c.n; ++r) {
    ASSERT_TRUE(job.wait_for_output(r, "LOOPING", 60s))
        << "rank " << r << " never got going:\n"
        << all_output(job.wait(1s));
  }
  if (c.stuck >= 0) {
    ASSERT_GT(leave_shm_locks_held(job.pid(c.stuck)), 0)
        << "rank " << c.stuck << " has no shm region whose lock jaccl knows";
  }
  job.kill(c.victim, SIGKILL);
  // Far below JACCL_OP_TIMEOUT (600 s): a survivor that hangs fails here.
  auto rs = job.wait(60s);
  const std::string all = all_output(rs);
  EXPECT_EQ(rs[c.victim].term_signal, SIGKILL) << all;
  const std::string victim = "rank " + std::to_string(c.victim);
  for (int r = 0; r < c.n; ++r) {
    if (r == c.victim)
      continue;
    const ProcResult& p = rs[r];
    EXPECT_FALSE(p.timed_out) << "rank " << r << " hung\n" << all;
    EXPECT_EQ(p.exit_code, 3) << "rank " << r << "\n" << all;
    std::string err = line_of(p.output, "ERROR ");
    EXPECT_EQ(err.rfind("ERROR PeerLost PeerLostError | ", 0), 0u)
        << "rank " << r << ": " << err << "\n"
        << all;
    EXPECT_NE(err.find(victim), std::string::npos)
        << "rank " << r << " does not name " << victim << ": " << err;
    // The group refuses more work with the original error, and its
    // destruction does not hang.
    std::string what = err.substr(err.find(" | ") + 3);
    std::istringstream lines(p.output);
    int again = 0;
    for (std::string l; std::getline(lines, l);) {
      if (l.rfind("AGAIN ", 0) != 0)
        continue;
      ++again;
      EXPECT_EQ(l, "AGAIN PeerLost | " + what) << "rank " << r << "\n" << all;
    }
    EXPECT_EQ(again, 2) << all;
    EXPECT_NE(p.output.find("DESTROYED"), std::string::npos) << all;
  }
  if (c.transport == "shm") {
    // Whatever this job created is gone (other jobs' set-up is transient:
    // look a few times).
    std::set<std::string> left;
    for (int i = 0; i < 20; ++i) {
      left.clear();
      for (const auto& e : jaccl_shm_entries()) {
        if (!shm_before.count(e))
          left.insert(e);
      }
      if (left.empty())
        break;
      std::this_thread::sleep_for(100ms);
    }
    EXPECT_TRUE(left.empty()) << "left in /dev/shm: " << *left.begin();
  }
  if (c.transport == "ofi:shm") {
    // libfabric's shm provider cannot unlink a SIGKILLed rank's regions
    // (/dev/shm/<pid>:d:e): remove them, so a later process that gets the
    // pid back is not blamed for them.
    const std::string prefix = std::to_string(job.pid(c.victim)) + ":";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
      if (e.path().filename().string().rfind(prefix, 0) == 0)
        fs::remove(e.path(), ec);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, KillRank,
    ::testing::Values(
        KillCase{"TcpMesh_N3_Kill1", 3, "tcp", false, false, 1, ""},
        KillCase{"TcpMesh_N3_Kill0_NoHeartbeat", 3, "tcp", false, false, 0,
                 "0"},
        KillCase{"TcpRing_N4_Kill2", 4, "tcp", true, false, 2, ""},
        KillCase{"TcpFactory_N3_Kill2", 3, "tcp", false, true, 2, ""},
        KillCase{"Shm_N3_Kill1", 3, "shm", false, false, 1, ""},
        KillCase{"Shm_N4_Kill0_NoHeartbeat", 4, "shm", false, false, 0, "0"},
        KillCase{"ShmFactory_N3_Kill2", 3, "shm", false, true, 2, ""},
        KillCase{"OfiTcpRxmMesh_N3_Kill1", 3, "ofi:tcp;ofi_rxm", false, false,
                 1, ""},
        KillCase{"OfiShmRing_N4_Kill2", 4, "ofi:shm", true, false, 2, ""},
        // Rank 2's region lock left held by a killed process: rank 1
        // spins in fi_tsend toward it and rank 2 in its own progress until
        // the failure frees it (seen when a victim died inside the lock).
        KillCase{"OfiShmRing_N3_Kill0_LockLeftHeld", 3, "ofi:shm", true, false,
                 0, "", 2}),
    [](const auto& info) { return info.param.name; });

// ---- a rank that stops answering (SIGSTOP: no EOF, only silence) ---------

class FrozenRank : public ::testing::TestWithParam<std::string> {};

TEST_P(FrozenRank, SurvivorsDeclareItLostByHeartbeat) {
  const std::string transport = GetParam();
  const int n = 3, victim = 1;
  const int port = jaccl::test::free_loopback_port();
  Job job = Job::start(worker(), {"loop"}, n, [&](int r) {
    return rank_env(r, n, port, transport, {{"JACCL_HEARTBEAT_TIMEOUT", "2"}});
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(job.wait_for_output(r, "LOOPING", 60s)) << job.output(r);
  }
  job.kill(victim, SIGSTOP);
  std::vector<ProcResult> rs;
  for (int r = 0; r < n; ++r) {
    if (r != victim)
      rs.push_back(job.wait_one(r, 60s));
  }
  job.kill(victim, SIGKILL);
  for (const ProcResult& p : rs) {
    EXPECT_FALSE(p.timed_out) << p.output;
    std::string err = line_of(p.output, "ERROR ");
    EXPECT_EQ(err.rfind("ERROR PeerLost PeerLostError | ", 0), 0u) << p.output;
    EXPECT_NE(err.find("rank " + std::to_string(victim)), std::string::npos)
        << err;
    EXPECT_NE(p.output.find("DESTROYED"), std::string::npos) << p.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, FrozenRank,
                         ::testing::Values("tcp", "shm", "ofi:tcp;ofi_rxm"));

// ---- a rank that never starts ----------------------------------------------

struct MissingCase {
  std::string name;
  std::string transport;
  int missing;
};
void PrintTo(const MissingCase& c, std::ostream* os) {
  *os << c.name;
}

class MissingRank : public ::testing::TestWithParam<MissingCase> {};

TEST_P(MissingRank, OthersTimeOutNamingIt) {
  const MissingCase& c = GetParam();
  const int n = 3;
  const int port = jaccl::test::free_loopback_port();
  // n - 1 processes; process i is rank i, skipping the missing one.
  auto real = [&](int i) { return i < c.missing ? i : i + 1; };
  Job job = Job::start(worker(), {"once"}, n - 1, [&](int i) {
    return rank_env(real(i), n, port, c.transport, {{"JACCL_TIMEOUT", "3"}});
  });
  auto rs = job.wait(60s);
  const std::string all = all_output(rs);
  const std::string missing = "rank " + std::to_string(c.missing);
  for (int i = 0; i < n - 1; ++i) {
    EXPECT_FALSE(rs[i].timed_out) << all;
    EXPECT_EQ(rs[i].exit_code, 3) << all;
    std::string err = line_of(rs[i].output, "ERROR ");
    EXPECT_EQ(err.rfind("ERROR Timeout TimeoutError | ", 0), 0u)
        << "rank " << real(i) << ": " << err << "\n"
        << all;
    EXPECT_NE(err.find(missing), std::string::npos)
        << "rank " << real(i) << " does not name " << missing << ": " << err;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, MissingRank,
    ::testing::Values(MissingCase{"Tcp_MissingLast", "tcp", 2},
                      MissingCase{"Shm_MissingLast", "shm", 2},
                      MissingCase{"Tcp_MissingRank0", "tcp", 0},
                      MissingCase{"Shm_MissingMiddle", "shm", 1}),
    [](const auto& info) { return info.param.name; });

// ---- stray connections to a data port during set-up
// --------------------------

int connect_to(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) !=
      0) {
    return -1;
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  return fd;
}

// host:port from the "listening on H:P" log line ("[::1]:P" for IPv6).
bool parse_listen(const std::string& out, std::string* host, int* port) {
  std::smatch m;
  static const std::regex re(R"(listening on \[?([^ \]]+)\]?:(\d+))");
  if (!std::regex_search(out, m, re))
    return false;
  *host = m[1];
  *port = std::stoi(m[2]);
  return true;
}

class StrayConnections : public ::testing::TestWithParam<bool> {};

TEST_P(StrayConnections, JobCompletes) {
  using namespace jaccl::detail;
  const bool with_token = GetParam();
  const std::string token = "stray-test-token";
  const int n = 3;
  TempDir dir;
  Job job = Job::start(worker(), {"once"}, n, [&](int r) {
    Env x = {{"TEST_SIDE_DIR", dir / "side"},
             {"TEST_HOLD_FILE", dir / "hold"},
             {"JACCL_LOG", "info"},
             {"JACCL_TRANSPORT", "tcp"}};
    if (with_token)
      x["JACCL_TOKEN"] = token;
    return rank_env(r, n, 1, "tcp", x);
  });
  std::vector<int> open_fds;
  std::vector<std::thread> fakes;
  std::vector<std::string> verdicts(n * 8);
  for (int r = 0; r < n; ++r) {
    // Held inside the card exchange: listening, nobody connected yet.
    ASSERT_TRUE(job.wait_for_output(r, "HELD", 30s)) << job.output(r);
    std::string host;
    int port = 0;
    ASSERT_TRUE(parse_listen(job.output(r), &host, &port)) << job.output(r);
    auto raw = [&](const std::string& bytes) {
      int fd = connect_to(host, port);
      ASSERT_GE(fd, 0) << host << ":" << port;
      if (!bytes.empty())
        (void)!::write(fd, bytes.data(), bytes.size());
      open_fds.push_back(fd);  // left open until the job is done
    };
    raw("GET / HTTP/1.0\r\n\r\n");  // not jaccl
    raw("");                        // connects, says nothing
    raw(std::string(reinterpret_cast<const char*>(&kMagic), 4));  // half hello
    // Well-formed hellos that must be turned away: wrong size, a rank out of
    // range, another job; with a token, every other rank's real slot with
    // the right job fingerprint but without the token.
    std::vector<Hello> hellos = {
        {Channel::Data, (r + 1) % n, 99, 0, token_fingerprint(""), {}},
        {Channel::Control, 7, n, 0, token_fingerprint(""), {}},
        {Channel::Control, (r + 1) % n, n, 0, 0xdeadbeefull, {}}};
    if (with_token) {
      for (int p = 0; p < n; ++p) {
        if (p == r)
          continue;
        hellos.push_back({Channel::Control, p, n, 0, token_fingerprint(token),
                          random_nonce()});
        hellos.push_back(
            {Channel::Data, p, n, 0, token_fingerprint(token), random_nonce()});
      }
    }
    for (size_t k = 0; k < hellos.size(); ++k) {
      std::string* verdict = &verdicts[static_cast<size_t>(r) * 8 + k];
      // Connected here, so the fakes are queued before any real dial.
      const int fd = connect_to(host, port);
      fakes.emplace_back([=] {
        if (fd < 0) {
          *verdict = "connect failed";
          return;
        }
        try {
          client_handshake(fd, hellos[k], with_token ? "wrong-token" : "",
                           Deadline::after(Millis(20000)), {});
          *verdict = "ACCEPTED";
        } catch (const jaccl::Error& e) {
          *verdict = e.what();
        }
        ::close(fd);
      });
    }
  }
  std::this_thread::sleep_for(200ms);  // lets the fakes send their hellos
  touch(dir / "hold");
  auto rs = job.wait(60s);
  for (auto& t : fakes)
    t.join();
  for (int fd : open_fds)
    ::close(fd);
  const std::string all = all_output(rs);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(rs[r].exited_ok()) << all;
    EXPECT_NE(
        rs[r].output.find("OK rank=" + std::to_string(r) + " backend=tcp-mesh"),
        std::string::npos)
        << all;
  }
  for (const auto& v : verdicts) {
    EXPECT_NE(v, "ACCEPTED") << "a fake hello was accepted\n" << all;
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, StrayConnections, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "WithToken" : "NoToken";
                         });

// ---- JACCL_LISTEN=0 on one rank -------------------------------------------

class ListenZero : public ::testing::TestWithParam<std::string> {};

TEST_P(ListenZero, RankHasNoListeningSocketAndJobWorks) {
  const std::string transport = GetParam();
  const int n = 3, quiet = 2;
  TempDir dir;
  Job job = Job::start(worker(), {"once"}, n, [&](int r) {
    Env x = {{"TEST_SIDE_DIR", dir / "side"},
             {"TEST_HOLD_FILE", dir / "hold"},
             {"TEST_RELEASE_FILE", dir / "release"},
             {"JACCL_LOG", "info"}};
    if (r == quiet)
      x["JACCL_LISTEN"] = "0";
    return rank_env(r, n, 1, transport, x);
  });
  // During set-up: the listeners are held in the card exchange, the quiet
  // rank has logged that it does not listen and waits for their cards.
  for (int r = 0; r < n; ++r) {
    if (r != quiet)
      ASSERT_TRUE(job.wait_for_output(r, "HELD", 30s));
  }
  ASSERT_TRUE(job.wait_for_output(quiet, "not listening", 30s))
      << job.output(quiet);
  EXPECT_EQ(listen_sockets_of(job.pid(quiet)), 0);
  EXPECT_GE(listen_sockets_of(job.pid(0)), 1);  // the probe sees listeners
  touch(dir / "hold");
  // Running (set-up done, before the collectives).
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(job.wait_for_output(r, "HOLDING", 30s)) << job.output(r);
  }
  EXPECT_EQ(listen_sockets_of(job.pid(quiet)), 0);
  touch(dir / "release");
  auto rs = job.wait(60s);
  const std::string all = all_output(rs);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(rs[r].exited_ok()) << all;
    EXPECT_NE(rs[r].output.find("OK rank=" + std::to_string(r)),
              std::string::npos)
        << all;
  }
  EXPECT_EQ(line_of(rs[quiet].output, "SETUP_MAX_LISTEN"), "SETUP_MAX_LISTEN 0")
      << all;
  EXPECT_EQ(line_of(rs[quiet].output, "LISTEN_NOW"), "LISTEN_NOW 0") << all;
}

INSTANTIATE_TEST_SUITE_P(Faults, ListenZero, ::testing::Values("tcp", "shm"));

// ---- two shared-memory jobs at once -----------------------------------------

TEST(Faults, TwoShmJobsDoNotSeeEachOther) {
  const int n = 3;
  std::vector<Job> jobs;
  for (int j = 0; j < 2; ++j) {
    const int port = jaccl::test::free_loopback_port();
    jobs.push_back(Job::start(worker(), {"once"}, n, [=](int r) {
      return rank_env(r, n, port, "shm",
                      {{"FAULT_ITERS", "300"},
                       {"FAULT_BYTES", "65536"},
                       {"FAULT_SALT", std::to_string(1000 * (j + 1))}});
    }));
  }
  for (int j = 0; j < 2; ++j) {
    auto rs = jobs[j].wait(120s);
    const std::string all = all_output(rs);
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(rs[r].exited_ok()) << "job " << j << "\n" << all;
      EXPECT_NE(
          rs[r].output.find("OK rank=" + std::to_string(r) + " backend=shm"),
          std::string::npos)
          << all;
    }
  }
}

// ---- ranks in different IPC namespaces
// -----------------------------------------

class IpcNamespace : public ::testing::TestWithParam<std::string> {};

TEST_P(IpcNamespace, AutoMixesShmWithTcpAndShmIsRefused) {
  const std::string transport = GetParam();
  auto probe = jaccl::test::run("unshare", {"--ipc", "true"}, {}, 10s);
  if (!probe.exited_ok()) {
    GTEST_SKIP() << "unshare --ipc is not permitted here: " << probe.describe()
                 << ": " << probe.output;
  }
  const int n = 3, other = 2;
  const int port = jaccl::test::free_loopback_port();
  const std::string script = "if [ \"$JACCL_RANK\" = " + std::to_string(other) +
                             " ]; then exec unshare --ipc '" + worker() +
                             "' once; else exec '" + worker() + "' once; fi";
  Job job = Job::start("/bin/sh", {"-c", script}, n,
                       [&](int r) { return rank_env(r, n, port, transport); });
  auto rs = job.wait(60s);
  const std::string all = all_output(rs);
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(rs[r].timed_out) << all;
    if (transport == "auto") {
      EXPECT_TRUE(rs[r].exited_ok()) << all;
      // Ranks 0 and 1 share memory, rank 2 is reached over TCP.
      EXPECT_NE(rs[r].output.find("OK rank=" + std::to_string(r) +
                                  " backend=shm+tcp"),
                std::string::npos)
          << all;
      continue;
    }
    EXPECT_EQ(rs[r].exit_code, 3) << all;
    std::string err = line_of(rs[r].output, "ERROR ");
    EXPECT_EQ(err.rfind("ERROR Config ConfigError | ", 0), 0u) << all;
    // The co-located ranks name the one in the other namespace; that one
    // names the first rank it cannot share memory with.
    const std::string named = "rank " + std::to_string(r == other ? 0 : other);
    EXPECT_NE(err.find(named), std::string::npos)
        << "rank " << r << " should name " << named << ": " << err;
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, IpcNamespace,
                         ::testing::Values("auto", "shm"));

// ---- ranks calling different collectives
// --------------------------------------

struct MismatchCase {
  std::string name;
  std::string transport;
  bool ring;
  std::string bytes;
};
void PrintTo(const MismatchCase& c, std::ostream* os) {
  *os << c.name;
}

class Mismatch : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(Mismatch, ProtocolErrorNotHang) {
  const MismatchCase& c = GetParam();
  const int n = 3, odd = 1;
  const int port = jaccl::test::free_loopback_port();
  Job job = Job::start(worker(), {"mismatch"}, n, [&](int r) {
    return rank_env(r, n, port, c.transport,
                    {{"JACCL_RING", c.ring ? "1" : kUnsetEnv},
                     {"JACCL_OP_TIMEOUT", "20"},
                     {"FAULT_BYTES", c.bytes},
                     {"FAULT_ODD", std::to_string(odd)}});
  });
  auto rs = job.wait(90s);
  const std::string all = all_output(rs);
  int protocol_at_neighbour = 0;
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(rs[r].timed_out) << all;
    EXPECT_EQ(rs[r].exit_code, 3) << "rank " << r << " ended without error\n"
                                  << all;
    std::string err = line_of(rs[r].output, "ERROR ");
    EXPECT_FALSE(err.empty()) << all;
    if (r != odd && err.rfind("ERROR Protocol ProtocolError | ", 0) == 0) {
      ++protocol_at_neighbour;
    }
    EXPECT_NE(rs[r].output.find("DESTROYED"), std::string::npos) << all;
  }
  EXPECT_GE(protocol_at_neighbour, 1) << all;
}

INSTANTIATE_TEST_SUITE_P(
    Faults, Mismatch,
    ::testing::Values(MismatchCase{"TcpMesh", "tcp", false, "4096"},
                      MismatchCase{"TcpRing", "tcp", true, "262144"},
                      MismatchCase{"Shm", "shm", false, "4096"},
                      MismatchCase{"ShmLarge", "shm", false, "4194304"},
                      MismatchCase{"OfiMesh", "ofi:tcp;ofi_rxm", false, "4096"},
                      MismatchCase{"OfiRing", "ofi:shm", true, "262144"},
                      MismatchCase{"OfiShmMesh", "ofi:shm", false, "4096"}),
    [](const auto& info) { return info.param.name; });

// ---- ofi providers that do not exist, or differ across ranks --------------

// Every rank runs the worker once with its own JACCL_OFI_PROVIDER; returns
// the ERROR lines.
std::vector<std::string> ofi_setup_errors(
    const std::vector<std::string>& providers) {
  const int n = static_cast<int>(providers.size());
  const int port = jaccl::test::free_loopback_port();
  Job job = Job::start(worker(), {"once"}, n, [&](int r) {
    Env e =
        rank_env(r, n, port, "ofi",
                 {{"JACCL_TIMEOUT", "20"},
                  {"JACCL_OFI_PROVIDER", providers[static_cast<size_t>(r)]}});
    return e;
  });
  auto rs = job.wait(60s);
  std::vector<std::string> errs;
  for (int r = 0; r < n; ++r) {
    EXPECT_FALSE(rs[r].timed_out) << all_output(rs);
    EXPECT_EQ(rs[r].exit_code, 3) << all_output(rs);
    errs.push_back(line_of(rs[r].output, "ERROR "));
  }
  return errs;
}

TEST(Faults, OfiUnknownProviderIsAConfigErrorNamingIt) {
  for (const std::string& err :
       ofi_setup_errors({"nosuchprov", "nosuchprov"})) {
    EXPECT_EQ(err.rfind("ERROR Config ConfigError | ", 0), 0u) << err;
    EXPECT_NE(err.find("nosuchprov"), std::string::npos) << err;
    // ... and lists what fi_getinfo did offer.
    EXPECT_NE(err.find("tcp"), std::string::npos) << err;
  }
}

TEST(Faults, OfiMismatchedProvidersNameBoth) {
  auto errs = ofi_setup_errors({"tcp;ofi_rxm", "shm"});
  int named = 0;
  for (const std::string& err : errs) {
    EXPECT_FALSE(err.empty());
    if (err.rfind("ERROR Config ConfigError | ", 0) == 0 &&
        err.find("tcp") != std::string::npos &&
        err.find("shm") != std::string::npos) {
      ++named;
    }
  }
  // Each rank names both providers (or reports the other's error naming
  // them).
  EXPECT_EQ(named, 2) << errs[0] << "\n" << errs[1];
}

}  // namespace
