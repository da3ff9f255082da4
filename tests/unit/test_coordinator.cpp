// Copyright 2026 the jaccl authors.
// The default TCP star coordinator, over real loopback sockets: real worker
// processes (tests/workers/star_worker.cpp) for jobs, threads of this process
// for stray clients and the cases that need a precise order of events.
// Deadlines only keep a broken build from hanging; nothing asserts timings.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/side_channel.h"
#include "bootstrap/tcp_star.h"
#include "bootstrap/tcp_star_shared.h"
#include "common/handshake.h"
#include "common/net.h"
#include "support/proc.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;
using detail::Millis;

constexpr auto kJobDeadline = 60s;  // never reached unless something is broken

using RankEnv = std::map<int, std::map<std::string, std::string>>;

struct StarJob {
  int port;
  std::string address;
  Job job;
};

// n star_worker processes; common env for all, per_rank on top.
// wrap: a shell command run for every rank instead of the worker, which
// it finds in $0 (say, to start one rank in another namespace).
StarJob start_job(int n, const std::map<std::string, std::string>& common,
                  const RankEnv& per_rank = {}, const std::string& wrap = "") {
  int port = free_loopback_port();
  std::string address = "127.0.0.1:" + std::to_string(port);
  const std::string worker = worker_path("star_worker");
  auto job =
      Job::start(wrap.empty() ? worker : "/bin/sh",
                 wrap.empty() ? std::vector<std::string>{}
                              : std::vector<std::string>{"-c", wrap, worker},
                 n, [&](int rank) {
                   std::map<std::string, std::string> e{
                       {"JACCL_RANK", std::to_string(rank)},
                       {"JACCL_SIZE", std::to_string(n)},
                       {"JACCL_COORDINATOR", address},
                       {"JACCL_TOKEN", kUnsetEnv},
                       {"JACCL_TIMEOUT", "60"},
                       {"STAR_MODE", kUnsetEnv},
                       {"STAR_SIZES", kUnsetEnv},
                       {"STAR_GO_FILE", kUnsetEnv},
                       {"STAR_DELAY_MS", kUnsetEnv},
                   };
                   for (const auto& [k, v] : common)
                     e[k] = v;
                   if (auto it = per_rank.find(rank); it != per_rank.end()) {
                     for (const auto& [k, v] : it->second)
                       e[k] = v;
                   }
                   return e;
                 });
  return {port, address, std::move(job)};
}

void expect_all_ok(const std::vector<ProcResult>& res) {
  for (size_t r = 0; r < res.size(); ++r) {
    EXPECT_TRUE(res[r].exited_ok() &&
                res[r].output.find("OK") != std::string::npos)
        << "rank " << r << ": " << res[r].describe() << "\n"
        << res[r].output;
  }
}

// The rank exited 3 with a jaccl error of this kind whose text has needle.
void expect_error(const std::vector<ProcResult>& res, int rank,
                  const std::string& kind, const std::string& needle) {
  const ProcResult& p = res[static_cast<size_t>(rank)];
  EXPECT_EQ(p.exit_code, 3) << "rank " << rank << ": " << p.describe() << "\n"
                            << p.output;
  EXPECT_NE(p.output.find("ERROR " + kind + ":"), std::string::npos)
      << "rank " << rank << " output:\n"
      << p.output;
  EXPECT_NE(p.output.find(needle), std::string::npos)
      << "rank " << rank << " should mention '" << needle << "':\n"
      << p.output;
}

void run_ok(int n, const std::string& sizes, const RankEnv& per_rank = {}) {
  auto sj = start_job(n, {{"STAR_SIZES", sizes}}, per_rank);
  expect_all_ok(sj.job.wait(kJobDeadline));
}

// ---- jobs that complete ---------------------------------------------------

TEST(CoordinatorGather, TwoRanks) {
  run_ok(2, "0,1,200,201,1048576");
}

TEST(CoordinatorGather, ThreeRanks) {
  run_ok(3, "0,1,200,201,1048576");
}

TEST(CoordinatorGather, EightRanks) {
  run_ok(8, "0,1,200,201,1048576");
}

TEST(CoordinatorGather, SixtyFourRanks) {
  run_ok(64, "0,1,200,201,4096");
}

TEST(CoordinatorGather, WorkersStartBeforeRankZero) {
  run_ok(3, "0,200,1048576", {{0, {{"STAR_DELAY_MS", "700"}}}});
}

TEST(CoordinatorGather, WithToken) {
  auto sj = start_job(4, {{"JACCL_TOKEN", "s3cret"}, {"STAR_SIZES", "1,201"}});
  expect_all_ok(sj.job.wait(kJobDeadline));
}

// ---- failures ---------------------------------------------------------------

TEST(CoordinatorFailure, MissingRankTimesOutNamingIt) {
  auto sj = start_job(3, {{"JACCL_TIMEOUT", "3"}, {"STAR_SIZES", "8"}},
                      {{2, {{"STAR_MODE", "absent"}}}});
  auto res = sj.job.wait(kJobDeadline);
  const std::string needle =
      "waiting for rank 2 to connect to coordinator " + sj.address;
  expect_error(res, 0, "Timeout", needle);
  expect_error(res, 1, "Timeout", needle);
}

TEST(CoordinatorFailure, KilledRankIsNamedFast) {
  // The configured timeout is far beyond the test's deadline: only a prompt
  // PeerLost lets the survivors exit in time.
  auto sj = start_job(4, {{"JACCL_TIMEOUT", "300"}, {"STAR_SIZES", "8,8"}},
                      {{2, {{"STAR_MODE", "hang-after-first"}}}});
  ASSERT_TRUE(sj.job.wait_for_output(2, "READY", kJobDeadline))
      << sj.job.output(2);
  sj.job.kill(2, SIGKILL);
  auto res = sj.job.wait(kJobDeadline);
  EXPECT_EQ(res[2].term_signal, SIGKILL);
  for (int r : {0, 1, 3}) {
    expect_error(res, r, "PeerLost", "rank 2 closed its connection");
  }
}

TEST(CoordinatorFailure, KilledRankZeroIsNamed) {
  auto sj = start_job(3, {{"JACCL_TIMEOUT", "300"}, {"STAR_SIZES", "8,8"}},
                      {{0, {{"STAR_MODE", "hang-after-first"}}}});
  ASSERT_TRUE(sj.job.wait_for_output(0, "READY", kJobDeadline))
      << sj.job.output(0);
  sj.job.kill(0, SIGKILL);
  auto res = sj.job.wait(kJobDeadline);
  for (int r : {1, 2}) {
    expect_error(res, r, "PeerLost", "coordinator (rank 0)");
  }
}

TEST(CoordinatorFailure, RankExitingMidGatherIsNamed) {
  auto sj = start_job(3, {{"JACCL_TIMEOUT", "300"}, {"STAR_SIZES", "8,8,8"}},
                      {{1, {{"STAR_MODE", "exit-after-first"}}}});
  auto res = sj.job.wait(kJobDeadline);
  EXPECT_EQ(res[1].exit_code, 0) << res[1].output;
  expect_error(res, 0, "PeerLost", "rank 1 closed its connection");
  expect_error(res, 2, "PeerLost", "rank 1 closed its connection");
}

TEST(CoordinatorFailure, SizeMismatchIsTheSameErrorEverywhere) {
  // 1 MiB, so the odd rank is still blocked sending when rank 0 answers.
  auto sj =
      start_job(3, {{"JACCL_TIMEOUT", "300"}, {"STAR_SIZES", "200,1048576"}},
                {{1, {{"STAR_MODE", "mismatch-n"}}}});
  auto res = sj.job.wait(kJobDeadline);
  for (int r : {0, 1, 2}) {
    expect_error(res, r, "Protocol", "rank 1 passed 1048577 bytes");
    expect_error(res, r, "Protocol", "ranks 0, 2 passed 1048576 bytes");
  }
}

TEST(CoordinatorFailure, WrongTokenWorkerIsRefused) {
  auto sj = start_job(
      3,
      {{"JACCL_TOKEN", "s3cret"}, {"JACCL_TIMEOUT", "3"}, {"STAR_SIZES", "8"}},
      {{2, {{"JACCL_TOKEN", "wrong"}}}});
  auto res = sj.job.wait(kJobDeadline);
  expect_error(res, 2, "Config", "JACCL_TOKEN");
  expect_error(res, 0, "Timeout", "waiting for rank 2 to connect");
  expect_error(res, 1, "Timeout", "waiting for rank 2 to connect");
}

// ---- stray clients ----------------------------------------------------------

detail::Fd dial(const std::string& address) {
  auto addr = detail::resolve(detail::parse_host_port(address, "test"));
  return detail::connect_with_retry(addr, detail::Deadline::after(30s), {},
                                    [](int, int) {});
}

// True if the server closes the connection (EOF or reset) within 20 s.
bool server_drops(int fd) {
  auto dl = detail::Deadline::after(20s);
  char buf[256];
  while (!dl.expired()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, dl.poll_ms()) <= 0) {
      continue;
    }
    ssize_t k = ::recv(fd, buf, sizeof(buf), 0);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
      return true;
    }
  }
  return false;
}

// The handshake as a client; returns the error text ("" when accepted).
std::string try_handshake(const std::string& address, detail::Hello h,
                          const std::string& token) {
  auto fd = dial(address);
  h.nonce = detail::random_nonce();
  try {
    detail::client_handshake(fd.get(), h, token, detail::Deadline::after(20s),
                             {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

detail::Hello hello(int rank, int size, const std::string& token,
                    detail::Channel ch = detail::Channel::Coordinator) {
  detail::Hello h;
  h.channel = ch;
  h.rank = rank;
  h.size = size;
  h.job = detail::token_fingerprint(token);
  return h;
}

TEST(CoordinatorStray, StraysDoNotDisturbTheJob) {
  const std::string token = "s3cret";
  auto go = std::filesystem::temp_directory_path() /
            ("jaccl-star-go-" + std::to_string(::getpid()));
  std::filesystem::remove(go);
  // Ranks 1 and 2 wait for the go file, so every stray reaches rank 0 first.
  auto sj = start_job(3,
                      {{"JACCL_TOKEN", token},
                       {"STAR_SIZES", "0,200,1048576"},
                       {"JACCL_TIMEOUT", "60"}},
                      {{1, {{"STAR_GO_FILE", go.string()}}},
                       {2, {{"STAR_GO_FILE", go.string()}}}});
  ASSERT_TRUE(sj.job.wait_for_output(0, "LISTENING", kJobDeadline));
  const std::string& a = sj.address;

  // Connections that stay open, idle or half-way, through the whole job.
  auto idle = dial(a);
  auto partial = dial(a);
  auto hb = detail::encode_hello(hello(1, 3, token));
  ASSERT_EQ(::send(partial.get(), hb.data(), 20, MSG_NOSIGNAL), 20);

  {
    auto fd = dial(a);
    std::string junk(1000, '\0');
    for (size_t i = 0; i < junk.size(); ++i)
      junk[i] = static_cast<char>(std::rand());
    ::send(fd.get(), junk.data(), junk.size(), MSG_NOSIGNAL);
    EXPECT_TRUE(server_drops(fd.get())) << "random bytes";
  }
  {
    auto fd = dial(a);
    auto bad = detail::encode_hello(hello(1, 3, token));
    bad[0] ^= 0xff;
    ::send(fd.get(), bad.data(), bad.size(), MSG_NOSIGNAL);
    EXPECT_TRUE(server_drops(fd.get())) << "wrong magic";
  }
  {
    auto fd = dial(a);
    std::string get = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    ::send(fd.get(), get.data(), get.size(), MSG_NOSIGNAL);
    EXPECT_TRUE(server_drops(fd.get())) << "HTTP GET";
  }
  {
    auto fd = dial(a);
    ::shutdown(fd.get(), SHUT_WR);  // connects and hangs up at once
    EXPECT_TRUE(server_drops(fd.get())) << "immediate close";
  }
  EXPECT_NE(try_handshake(a, hello(1, 3, "wrong"), "wrong").find("JACCL_TOKEN"),
            std::string::npos);
  EXPECT_NE(try_handshake(a, hello(1, 3, ""), "").find("JACCL_TOKEN"),
            std::string::npos);
  EXPECT_NE(try_handshake(a, hello(7, 3, token), token).find("out of range"),
            std::string::npos);
  EXPECT_NE(try_handshake(a, hello(0, 3, token), token).find("out of range"),
            std::string::npos);
  EXPECT_NE(try_handshake(a, hello(1, 4, token), token).find("job size 4"),
            std::string::npos);
  EXPECT_NE(try_handshake(a, hello(1, 3, token, detail::Channel::Data), token)
                .find("not a data listener"),
            std::string::npos);

  {
    std::FILE* f = std::fopen(go.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  auto res = sj.job.wait(kJobDeadline);
  std::filesystem::remove(go);
  expect_all_ok(res);
}

// A rank-0 or rank-r star running on a thread of this process.
struct StarThread {
  std::thread t;
  std::exception_ptr error;
  std::vector<char> out;

  void start(detail::TcpStarOptions o, std::vector<char> in) {
    t = std::thread([this, o, in] {
      try {
        auto fn = detail::make_tcp_star(o);
        out.resize(in.size() * static_cast<size_t>(o.size));
        fn(in.data(), out.data(), in.size());
      } catch (...) {
        error = std::current_exception();
      }
    });
  }
  std::string join() {
    t.join();
    if (!error)
      return "";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      return e.what();
    }
  }
};

TEST(CoordinatorStray, DuplicateRankIsRefused) {
  // Without a token anyone who speaks the protocol may take a free rank, so
  // the order matters: the real rank 1 (this test) first, then its double.
  const int port = free_loopback_port();
  const std::string a = "127.0.0.1:" + std::to_string(port);
  detail::TcpStarOptions o{0, 3, a, "", Millis(60000)};
  auto r0 = detail::make_tcp_star(o);  // bound before anyone dials
  std::vector<char> out0(3 * 4);
  std::exception_ptr err0;
  std::thread t0([&] {
    try {
      r0("r0r0", out0.data(), 4);
    } catch (...) {
      err0 = std::current_exception();
    }
  });

  auto one = dial(a);
  auto h1 = hello(1, 3, "");
  h1.nonce = detail::random_nonce();
  auto dl = detail::Deadline::after(30s);
  ASSERT_NO_THROW(detail::client_handshake(one.get(), h1, "", dl, {}));
  EXPECT_NE(try_handshake(a, hello(1, 3, ""), "").find("already connected"),
            std::string::npos);

  StarThread r2;
  r2.start({2, 3, a, "", Millis(60000)}, {'r', '2', 'r', '2'});
  auto req = detail::star::encode_request(4);
  detail::send_all(one.get(), req.data(), req.size(), dl, {});
  detail::send_all(one.get(), "r1r1", 4, dl, {});
  std::array<uint8_t, detail::star::kReplyBytes> head{};
  detail::recv_all(one.get(), head.data(), head.size(), dl, {});
  std::string why;
  auto h = detail::star::decode_reply(head, &why);
  ASSERT_TRUE(h) << why;
  ASSERT_EQ(h->status, detail::star::Status::Ok);
  ASSERT_EQ(h->length, 12u);
  std::string got(12, '\0');
  detail::recv_all(one.get(), got.data(), got.size(), dl, {});
  EXPECT_EQ(got, "r0r0r1r1r2r2");
  EXPECT_EQ(r2.join(), "");
  t0.join();
  EXPECT_FALSE(err0);
  EXPECT_EQ(std::string(out0.begin(), out0.end()), "r0r0r1r1r2r2");
}

// A rank sends its first request right behind its handshake proof, before
// the verdict. A refused one must still read the refusal's reason, also
// when its request is too large to be sent before the verdict comes.
TEST(CoordinatorStray, RefusedRankReadsTheReasonPastItsRequest) {
  const int port = free_loopback_port();
  const std::string a = "127.0.0.1:" + std::to_string(port);
  detail::TcpStarOptions o{0, 2, a, "", Millis(60000)};
  auto r0 = detail::make_tcp_star(o);  // bound before anyone dials
  std::vector<char> out0(2);
  std::exception_ptr err0;
  std::thread t0([&] {
    try {
      r0("0", out0.data(), 1);
    } catch (...) {
      err0 = std::current_exception();
    }
  });
  const std::vector<char> big(size_t(16) << 20, 'b');  // past any buffer
  StarThread other_size;
  other_size.start({1, 3, a, "", Millis(60000)}, big);
  std::string err = other_size.join();
  EXPECT_NE(err.find("rejected"), std::string::npos) << err;
  EXPECT_NE(err.find("job size 3"), std::string::npos) << err;

  auto one = dial(a);  // the real rank 1, admitted before its double
  auto h1 = hello(1, 2, "");
  h1.nonce = detail::random_nonce();
  auto dl = detail::Deadline::after(30s);
  ASSERT_NO_THROW(detail::client_handshake(one.get(), h1, "", dl, {}));
  StarThread twin;
  twin.start({1, 2, a, "", Millis(60000)}, big);
  err = twin.join();
  EXPECT_NE(err.find("rejected"), std::string::npos) << err;
  EXPECT_NE(err.find("already connected"), std::string::npos) << err;

  auto req = detail::star::encode_request(1);
  detail::send_all(one.get(), req.data(), req.size(), dl, {});
  detail::send_all(one.get(), "1", 1, dl, {});
  std::array<uint8_t, detail::star::kReplyBytes> head{};
  detail::recv_all(one.get(), head.data(), head.size(), dl, {});
  std::string why;
  auto h = detail::star::decode_reply(head, &why);
  ASSERT_TRUE(h) << why;
  ASSERT_EQ(h->length, 2u);
  t0.join();
  EXPECT_FALSE(err0);
  EXPECT_EQ(std::string(out0.begin(), out0.end()), "01");
}

// A rank without a token sends its proof with its hello; a coordinator
// with one refuses it, and the rank says which side lacks the token.
TEST(CoordinatorStray, TokenlessRankAtATokenCoordinatorNamesTheToken) {
  const int port = free_loopback_port();
  const std::string a = "127.0.0.1:" + std::to_string(port);
  auto r0 = detail::make_tcp_star({0, 2, a, "s3cret", Millis(60000)});
  std::thread serve([&] {
    try {
      std::vector<char> out(2);
      r0("0", out.data(), 1);
    } catch (...) {
    }
  });
  StarThread none;
  none.start({1, 2, a, "", Millis(60000)}, {'1'});
  const std::string err = none.join();
  EXPECT_NE(err.find("expects a job token (JACCL_TOKEN)"), std::string::npos)
      << err;
  StarThread real;  // ends rank 0's call
  real.start({1, 2, a, "s3cret", Millis(60000)}, {'1'});
  EXPECT_EQ(real.join(), "");
  serve.join();
}

// ---- init-time errors and small cases --------------------------------------

TEST(CoordinatorInit, AddressInUseNamesTheAddress) {
  auto taken = detail::listen_tcp(
      detail::resolve(detail::parse_host_port("127.0.0.1:0", "test")), 4);
  const std::string a =
      "127.0.0.1:" +
      std::to_string(detail::port_of(detail::local_address(taken.get())));
  try {
    detail::make_tcp_star({0, 2, a, "", Millis(5000)});
    FAIL() << "bound a port that is in use";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(a), std::string::npos) << what;
    EXPECT_NE(what.find("in use"), std::string::npos) << what;
    // Whose port it is and what to do: it came from the caller's setting.
    const std::string port = a.substr(a.rfind(':') + 1);
    EXPECT_NE(
        what.find("the coordinator's port " + port + " is taken on this host"),
        std::string::npos)
        << what;
    EXPECT_NE(what.find("choose a free one in JACCL_COORDINATOR"),
              std::string::npos)
        << what;
    EXPECT_EQ(e.sys_errno(), EADDRINUSE) << what;
  }
}

// JACCL_COORDINATOR_FD (what jaccl-run hands rank 0), set for one test:
// read when rank 0's star is made, on this thread, before any rank thread
// starts, and unset again however the test ends.
struct CoordinatorFdEnv {
  explicit CoordinatorFdEnv(const std::string& v) {
    ::setenv("JACCL_COORDINATOR_FD", v.c_str(), 1);
  }
  ~CoordinatorFdEnv() { ::unsetenv("JACCL_COORDINATOR_FD"); }
};

detail::Fd loopback_listener(std::string* address) {
  auto fd = detail::listen_tcp(
      detail::resolve(detail::parse_host_port("127.0.0.1:0", "test")), 4);
  *address = "127.0.0.1:" +
             std::to_string(detail::port_of(detail::local_address(fd.get())));
  return fd;
}

// errno of binding 127.0.0.1 at address's port as rank 0 does.
int bind_errno(const std::string& address) {
  return loopback_bind_errno(std::stoi(address.substr(address.rfind(':') + 1)));
}

// A two-rank gather through a star whose rank 0 is made here.
void gather_two(const std::string& a) {
  auto r0 = detail::make_tcp_star({0, 2, a, "", 60s});
  StarThread r1;
  r1.start({1, 2, a, "", 60s}, {'b'});
  char out[2] = {};
  r0("a", out, 1);
  EXPECT_EQ(r1.join(), "");
  EXPECT_EQ(std::string(out, 2), "ab");
  EXPECT_EQ(std::string(r1.out.begin(), r1.out.end()), "ab");
}

TEST(CoordinatorInherited, RankZeroServesTheSocketItWasHandedAndKeepsIt) {
  std::string a;
  auto held = loopback_listener(&a);
  // Our copy stands for the launcher's, which it closes once rank 0 runs.
  const int fd = ::fcntl(held.get(), F_DUPFD, 10);
  ASSERT_GE(fd, 0);
  ::fcntl(fd, F_SETFD, 0);  // as inherited across exec
  held = detail::Fd();
  CoordinatorFdEnv env(std::to_string(fd));
  gather_two(a);
  // The socket outlives that star: a second one in this process serves on
  // it again, and the port stays taken in between.
  EXPECT_EQ(bind_errno(a), EADDRINUSE);
  gather_two(a);
  EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC)
      << "the launcher's socket would leak into the program's children";
  ::close(fd);
}

TEST(CoordinatorInherited, WhatIsNoSocketListeningThereIsLeftAlone) {
  // The variable reaches processes the socket does not (the program's own
  // children, a nested job's rank 0) and stars of other addresses (a
  // tcp:// side channel's): each binds its own address and works.
  std::string other;
  auto elsewhere = loopback_listener(&other);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  auto not_listening = detail::Fd(::socket(AF_INET, SOCK_STREAM, 0));
  auto udp = detail::Fd(::socket(AF_INET, SOCK_DGRAM, 0));
  const int closed = ::fcntl(pipe_fds[0], F_DUPFD, 100);
  ::close(closed);
  for (int fd :
       {elsewhere.get(), closed, pipe_fds[0], udp.get(), not_listening.get()}) {
    SCOPED_TRACE("JACCL_COORDINATOR_FD=" + std::to_string(fd));
    CoordinatorFdEnv env(std::to_string(fd));
    const std::string a = "127.0.0.1:" + std::to_string(free_loopback_port());
    gather_two(a);
  }
  // And the socket listening elsewhere still listens there.
  EXPECT_EQ(bind_errno(other), EADDRINUSE);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

TEST(CoordinatorInherited, AnAddressInUseSaysWhatTheVariableNamed) {
  // The socket was meant for this star but did not arrive (a wrapper
  // changed the variable): binding then finds the address taken, and the
  // error says both.
  std::string a;
  auto taken = loopback_listener(&a);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  CoordinatorFdEnv env(std::to_string(pipe_fds[0]));
  try {
    detail::make_tcp_star({0, 2, a, "", Millis(5000)});
    ADD_FAILURE() << "bound an address in use";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("JACCL_COORDINATOR_FD=" + std::to_string(pipe_fds[0]) +
                        " named no socket listening there (it is not a "
                        "socket)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("in use"), std::string::npos) << what;
    EXPECT_NE(what.find(a), std::string::npos) << what;
  }
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

TEST(CoordinatorInherited, AValueThatIsNoDescriptorNumberIsAConfigError) {
  const std::string a = "127.0.0.1:" + std::to_string(free_loopback_port());
  for (const std::string value : {"7x", "-3", "99999999999", " 4"}) {
    CoordinatorFdEnv env(value);
    try {
      detail::make_tcp_star({0, 2, a, "", Millis(5000)});
      ADD_FAILURE() << "JACCL_COORDINATOR_FD=" << value << " was taken";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("JACCL_COORDINATOR_FD=" + value +
                          ": not a file descriptor number"),
                std::string::npos)
          << what;
      EXPECT_EQ(e.info().rank, 0) << what;
    }
  }
  // None of it bound the address meanwhile.
  EXPECT_EQ(bind_errno(a), 0);
}

TEST(CoordinatorInit, UnresolvableHostNamesTheAddress) {
  try {
    detail::make_tcp_star(
        {0, 2, "no-such-host.invalid:5000", "", Millis(5000)});
    FAIL() << "resolved an invalid host";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-host.invalid:5000"),
              std::string::npos)
        << e.what();
  }
}

TEST(CoordinatorInit, MissingPortIsAConfigError) {
  EXPECT_THROW(detail::make_tcp_star({0, 2, "127.0.0.1", "", Millis(5000)}),
               ConfigError);
  EXPECT_THROW(detail::make_tcp_star({1, 2, "localhost", "", Millis(5000)}),
               ConfigError);
}

TEST(CoordinatorInit, SizeOneUsesNoSockets) {
  // An unresolvable address proves nothing is bound or dialled.
  auto fn =
      detail::make_tcp_star({0, 1, "no-such-host.invalid:1", "", Millis(1000)});
  char out[5] = {};
  fn("abcd", out, 4);
  EXPECT_STREQ(out, "abcd");
  fn(nullptr, nullptr, 0);
}

TEST(CoordinatorInit, RankZeroAloneTimesOutNamingEveryone) {
  const int port = free_loopback_port();
  const std::string a = "127.0.0.1:" + std::to_string(port);
  StarThread r0;
  r0.start({0, 3, a, "", Millis(1500)}, {'x'});
  std::string what = r0.join();
  EXPECT_NE(what.find("timed out after 1.5 s waiting for ranks 1, 2 to "
                      "connect to coordinator " +
                      a),
            std::string::npos)
      << what;
  // And later calls repeat the failure instead of waiting again.
}

TEST(CoordinatorInit, WorkerAloneTimesOutNamingTheCoordinator) {
  const int port = free_loopback_port();
  const std::string a = "127.0.0.1:" + std::to_string(port);
  auto fn = detail::make_tcp_star({1, 2, a, "", Millis(1000)});
  char out[2];
  try {
    fn("x", out, 1);
    FAIL() << "no coordinator, yet the call returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("waiting for the coordinator"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(a), std::string::npos) << e.what();
  }
  EXPECT_THROW(fn("x", out, 1), TimeoutError);  // poisoned, not retried
}

// Thread-ranks of one process share a lobby while the coordinator is not
// up: one probes, the others wait for it, and all of them dial once a probe
// gets through.
TEST(CoordinatorLobby, ThreadRanksStartedBeforeRankZeroAllConnect) {
  const int n = 48;
  const std::string a = "127.0.0.1:" + std::to_string(free_loopback_port());
  std::vector<StarThread> ranks(n);
  for (int r = 1; r < n; ++r) {
    ranks[r].start({r, n, a, "", Millis(30000)}, {static_cast<char>(r)});
  }
  std::this_thread::sleep_for(300ms);  // they find nobody listening
  ranks[0].start({0, n, a, "", Millis(30000)}, {0});
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(ranks[r].join(), "") << "rank " << r;
    for (int q = 0; q < n; ++q) {
      ASSERT_EQ(ranks[r].out[q], static_cast<char>(q)) << r << " " << q;
    }
  }
}

TEST(CoordinatorLobby, ARankGivingUpHandsTheProbeOn) {
  const std::string a = "127.0.0.1:" + std::to_string(free_loopback_port());
  // Rank 1 probes first and gives up; rank 2, waiting on it, must take over.
  StarThread early, waiting, late, r0;
  early.start({1, 3, a, "", Millis(300)}, {'1'});
  std::this_thread::sleep_for(50ms);
  waiting.start({2, 3, a, "", Millis(30000)}, {'2'});
  const std::string what = early.join();
  EXPECT_NE(what.find("waiting for the coordinator"), std::string::npos)
      << what;
  EXPECT_NE(what.find(a), std::string::npos) << what;
  late.start({1, 3, a, "", Millis(30000)}, {'1'});
  r0.start({0, 3, a, "", Millis(30000)}, {'0'});
  for (StarThread* t : {&waiting, &late, &r0}) {
    ASSERT_EQ(t->join(), "");
    EXPECT_EQ(std::string(t->out.begin(), t->out.end()), "012");
  }
}

// A rank lost while the coordinator's second thread writes its reply (the
// upper half of the ranks, once the replies add up to more than the bytes
// kept in flight) is named to every rank at the next call.
TEST(CoordinatorReply, RankLostDuringALargeResultIsNamedAtTheNextCall) {
  const int size = 8;
  const size_t n = 2 << 20;  // 16 MiB results (past the socket buffers)
  const int gone = size - 1;
  const std::string a = "127.0.0.1:" + std::to_string(free_loopback_port());
  auto noise = [](int r, size_t len) {  // not worth coding
    std::vector<char> p(len);
    std::mt19937 gen(static_cast<unsigned>(r) + 1);
    for (auto& c : p) {
      c = static_cast<char>(gen());
    }
    return p;
  };
  std::vector<std::string> first(size), second(size);
  std::vector<std::thread> ts;
  for (int r = 0; r < gone; ++r) {
    ts.emplace_back([&, r] {
      try {
        auto fn = detail::make_tcp_star({r, size, a, "", 60s});
        std::vector<char> out(n * size);
        auto in = noise(r, n);
        fn(in.data(), out.data(), n);
        try {
          fn(in.data(), out.data(), n);
          second[r] = "returned";
        } catch (const PeerLostError& e) {
          second[r] = e.what();
        }
      } catch (const std::exception& e) {
        first[r] = e.what();
      }
    });
  }
  // The last rank by hand: it takes a little of its reply, then goes while
  // rank 0 still has more to write (a small receive buffer holds it up).
  auto addr = detail::resolve(detail::parse_host_port(a, "test"));
  auto dl = detail::Deadline::after(60s);
  auto fd = detail::connect_with_retry(addr, dl, {}, [](int, int) {});
  const int small = 4096;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  detail::Hello h;
  h.rank = gone;
  h.size = size;
  h.nonce = detail::random_nonce();
  detail::client_handshake(fd.get(), h, "", dl, {});
  auto req = detail::star::encode_request(n);
  detail::send_all(fd.get(), req.data(), req.size(), dl, {});
  auto in = noise(gone, n);
  detail::send_all(fd.get(), in.data(), n, dl, {});
  std::array<uint8_t, detail::star::kReplyBytes> head{};
  detail::recv_all(fd.get(), head.data(), head.size(), dl, {});
  std::this_thread::sleep_for(200ms);
  fd.reset();  // unread bytes: a reset
  for (auto& t : ts) {
    t.join();
  }
  for (int r = 0; r < gone; ++r) {
    EXPECT_EQ(first[r], "") << "rank " << r;
    EXPECT_NE(second[r].find("rank " + std::to_string(gone) + " lost"),
              std::string::npos)
        << "rank " << r << ": " << second[r];
  }
}

// ---- shared replies (tcp_star_shared.h) ------------------------------------

// Rank 0 writes a large result once into shared memory; a rank that says
// it can open it (rank 0's key) gets a reference, one from elsewhere (any
// other key) the bytes, and a rank of this library takes either.
TEST(CoordinatorShared, RanksWithRankZerosKeyGetAReferenceTheOthersTheBytes) {
  namespace s = detail::star;
  const int size = 4;
  const size_t n = 32 << 10;  // results of 128 KiB: past kShareFrom
  const std::string a = "127.0.0.1:" + std::to_string(free_loopback_port());
  auto part = [&](int r, int call) {
    std::vector<char> p(n);
    std::mt19937 gen(static_cast<unsigned>(r * 10 + call));
    for (auto& c : p) {
      c = static_cast<char>(gen());
    }
    return p;
  };
  auto whole = [&](int call) {
    std::vector<char> w;
    for (int r = 0; r < size; ++r) {
      auto p = part(r, call);
      w.insert(w.end(), p.begin(), p.end());
    }
    return w;
  };
  // Ranks 0 and 1 through make_tcp_star, two calls each.
  std::vector<std::vector<char>> got0(2), got1(2);
  std::vector<std::string> err(2);
  std::vector<std::thread> ts;
  auto r0 = detail::make_tcp_star({0, size, a, "", 60s});
  for (int r : {0, 1}) {
    ts.emplace_back([&, r] {
      try {
        auto fn = r == 0 ? r0 : detail::make_tcp_star({r, size, a, "", 60s});
        auto& got = r == 0 ? got0 : got1;
        for (int call = 0; call < 2; ++call) {
          got[call].resize(n * size);
          fn(part(r, call).data(), got[call].data(), n);
        }
      } catch (const std::exception& e) {
        err[r] = e.what();
      }
    });
  }
  // Rank 2 with rank 0's key, rank 3 with another, by hand.
  const uint64_t mine = s::shared_host_key();
  ASSERT_NE(mine, 0u) << "this host has no key (boot id, pid namespace)";
  auto dl = detail::Deadline::after(60s);
  std::map<int, detail::Fd> fds;
  for (int r : {2, 3}) {
    fds[r] = dial(a);
    auto h = hello(r, size, "");
    h.nonce = detail::random_nonce();
    detail::client_handshake(fds[r].get(), h, "", dl, {});
  }
  s::SharedReader reader;
  uint64_t first_key = 0;
  for (int call = 0; call < 2; ++call) {
    for (int r : {2, 3}) {
      auto req = s::encode_request(n, 0, r == 2 ? mine : mine ^ 2);
      detail::send_all(fds[r].get(), req.data(), req.size(), dl, {});
      detail::send_all(fds[r].get(), part(r, call).data(), n, dl, {});
    }
    for (int r : {2, 3}) {
      std::array<uint8_t, s::kReplyBytes> head{};
      detail::recv_all(fds[r].get(), head.data(), head.size(), dl, {});
      std::string why;
      auto h = s::decode_reply(head, &why);
      ASSERT_TRUE(h) << why;
      ASSERT_EQ(h->status, s::Status::Ok);
      std::vector<char> out(n * size);
      if (r == 3) {
        EXPECT_EQ(h->flags, 0u);
        ASSERT_EQ(h->length, n * size);
        detail::recv_all(fds[r].get(), out.data(), out.size(), dl, {});
      } else {
        ASSERT_EQ(h->flags, s::kShared);
        std::vector<uint8_t> body(h->length);
        detail::recv_all(fds[r].get(), body.data(), body.size(), dl, {});
        auto ref = s::decode_shared_ref(body, &why);
        ASSERT_TRUE(ref) << why;
        EXPECT_EQ(ref->pid, static_cast<uint32_t>(::getpid()));  // rank 0's
        EXPECT_EQ(ref->length, n * size);
        // A result no larger than the first reuses its segment.
        if (call == 0) {
          first_key = ref->key;
        } else {
          EXPECT_EQ(ref->key, first_key);
        }
        reader.read(*ref, out.data(), {.rank = 2});
      }
      EXPECT_TRUE(out == whole(call)) << "rank " << r << ", call " << call;
    }
  }
  for (auto& t : ts) {
    t.join();
  }
  for (int r : {0, 1}) {
    EXPECT_EQ(err[r], "") << "rank " << r;
  }
  for (int call = 0; call < 2; ++call) {
    EXPECT_TRUE(got0[call] == whole(call)) << "rank 0, call " << call;
    EXPECT_TRUE(got1[call] == whole(call)) << "rank 1, call " << call;
  }
}

// Ranks open a shared result through rank 0's descriptor: a star closing
// right after its last call waits until the ranks told of it have mapped
// it, or a rank that reads its reply late would find nothing to open.
TEST(CoordinatorShared, AClosingStarWaitsForItsRanksToMapTheLastResult) {
  namespace s = detail::star;
  const size_t n = 64 << 10;
  const std::string a = "127.0.0.1:" + std::to_string(free_loopback_port());
  std::atomic<bool> closed{false};
  std::string err0;
  auto r0 = detail::make_tcp_star({0, 2, a, "", 60s});
  std::thread t0([&] {
    try {
      std::vector<char> in(n, 'a'), out(2 * n);
      r0(in.data(), out.data(), n);
      r0 = nullptr;  // the star closes
    } catch (const std::exception& e) {
      err0 = e.what();
    }
    closed = true;
  });
  auto dl = detail::Deadline::after(60s);
  auto fd = dial(a);
  auto h = hello(1, 2, "");
  h.nonce = detail::random_nonce();
  detail::client_handshake(fd.get(), h, "", dl, {});
  auto req = s::encode_request(n, 0, s::shared_host_key());
  detail::send_all(fd.get(), req.data(), req.size(), dl, {});
  const std::vector<char> mine(n, 'b');
  detail::send_all(fd.get(), mine.data(), n, dl, {});
  std::array<uint8_t, s::kReplyBytes> head{};
  detail::recv_all(fd.get(), head.data(), head.size(), dl, {});
  std::string why;
  auto rh = s::decode_reply(head, &why);
  ASSERT_TRUE(rh) << why;
  ASSERT_EQ(rh->flags, s::kShared);
  std::vector<uint8_t> body(rh->length);
  detail::recv_all(fd.get(), body.data(), body.size(), dl, {});
  std::this_thread::sleep_for(300ms);  // rank 0 closes meanwhile
  EXPECT_FALSE(closed) << "the star closed before its rank mapped the result";
  auto ref = s::decode_shared_ref(body, &why);
  ASSERT_TRUE(ref) << why;
  std::vector<char> out(2 * n);
  s::SharedReader reader;
  EXPECT_NO_THROW(reader.read(*ref, out.data(), {.rank = 1}));
  t0.join();
  EXPECT_EQ(err0, "");
  EXPECT_EQ(std::string(out.begin(), out.begin() + n), std::string(n, 'a'));
  EXPECT_EQ(std::string(out.begin() + n, out.end()), std::string(n, 'b'));
}

// A reference whose process is gone names rank 0's exit; one whose
// descriptor is not the memfd it names is an IoError naming the path.
TEST(CoordinatorShared, AReferenceNobodyBacksIsNamed) {
  namespace s = detail::star;
  const pid_t child = ::fork();
  if (child == 0) {
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  s::SharedRef ref{static_cast<uint32_t>(child), 3, 0xabc, 8192, 64, 64};
  std::vector<char> out(64);
  s::SharedReader reader;
  try {
    reader.read(ref, out.data(), {.rank = 1});
    ADD_FAILURE() << "read a result from an exited process";
  } catch (const PeerLostError& e) {
    EXPECT_NE(std::string(e.what()).find("coordinator (rank 0, pid " +
                                         std::to_string(child) + ") exited"),
              std::string::npos)
        << e.what();
  }
  ref.pid = static_cast<uint32_t>(::getpid());
  ref.fd = 0;  // stdin: not the memfd
  try {
    reader.read(ref, out.data(), {.rank = 1});
    ADD_FAILURE() << "read a result through the wrong descriptor";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/proc/" + std::to_string(::getpid()) +
                                         "/fd/0"),
              std::string::npos)
        << e.what();
  }
}

// A rank in another pid namespace (a container of its own) cannot open
// rank 0's memfd through /proc: its key differs, so it gets the results
// over TCP while the ranks beside rank 0 read them from shared memory.
// The name of the mapping of this process that holds `at` ("" if none),
// from /proc/self/maps.
std::string mapping_of(const void* at) {
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) {
    return "";
  }
  const auto a = reinterpret_cast<uintptr_t>(at);
  char line[4096];
  std::string name;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    int used = 0;
    if (std::sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &used) >= 2 &&
        a >= lo && a < hi) {
      name = std::string(line + used);
      break;
    }
  }
  std::fclose(f);
  return name;
}

// A SideChannel over the star with its view: at 256 ranks a call's frames
// (64 KiB) reach the ranks as rank 0's shared reply, where they are read in
// place, and every helper still hands back every rank's bytes.
TEST(CoordinatorShared, ASideChannelReadsItsFramesInRankZerosSharedReply) {
  const int size = 256;
  const std::string a = "127.0.0.1:" + std::to_string(free_loopback_port());
  std::vector<std::string> err(size);
  std::string where;  // rank 1's mapping of its frames
  std::vector<std::thread> ts;
  for (int r = 0; r < size; ++r) {
    ts.emplace_back([&, r] {
      try {
        auto fns = detail::make_tcp_star_fns({r, size, a, "", 60s});
        EXPECT_EQ(static_cast<bool>(fns.view), r != 0);
        detail::SideChannel sc(r, size, 7, fns.fn, "test star", 60s, false,
                               fns.view);
        const uint64_t mine = 1000 + static_cast<uint64_t>(r);
        int seen = 0;
        sc.all_gather_each(&mine, sizeof(mine), [&](int q, const char* at) {
          uint64_t v = 0;
          std::memcpy(&v, at, sizeof(v));
          if (v != 1000 + static_cast<uint64_t>(q)) {
            throw std::runtime_error("all_gather_each: rank " +
                                     std::to_string(q) + " gave " +
                                     std::to_string(v));
          }
          if (r == 1 && q == 0) {
            where = mapping_of(at);
          }
          ++seen;
        });
        if (seen != size) {
          throw std::runtime_error("all_gather_each saw " +
                                   std::to_string(seen) + " ranks");
        }
        auto vals = sc.all_gather_value<int32_t>(3 * r);
        for (int q = 0; q < size; ++q) {
          if (vals[static_cast<size_t>(q)] != 3 * q) {
            throw std::runtime_error("all_gather_value at rank " +
                                     std::to_string(q));
          }
        }
        // Past a frame's inline part: the payloads follow in a second call.
        std::vector<char> big(300, static_cast<char>(r));
        auto all = sc.all_gather(big.data(), big.size());
        for (int q = 0; q < size; ++q) {
          for (size_t i = 0; i < big.size(); ++i) {
            if (all[static_cast<size_t>(q) * big.size() + i] !=
                static_cast<char>(q)) {
              throw std::runtime_error("all_gather of 300 bytes at rank " +
                                       std::to_string(q));
            }
          }
        }
        const auto bytes = sc.all_gather_bytes(std::string(
            static_cast<size_t>(r % 7) * 60, static_cast<char>('a' + r % 26)));
        for (int q = 0; q < size; ++q) {
          if (bytes[static_cast<size_t>(q)] !=
              std::string(static_cast<size_t>(q % 7) * 60,
                          static_cast<char>('a' + q % 26))) {
            throw std::runtime_error("all_gather_bytes at rank " +
                                     std::to_string(q));
          }
        }
        sc.leave_barrier();
      } catch (const std::exception& e) {
        err[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ts) {
    t.join();
  }
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(err[static_cast<size_t>(r)], "") << "rank " << r;
  }
  EXPECT_NE(where.find("memfd:jaccl-star-"), std::string::npos)
      << "rank 1 read its frames from: '" << where << "'";
}

TEST(CoordinatorShared, ARankInAnotherPidNamespaceGetsTheBytes) {
  auto probe =
      run("unshare", {"--pid", "--fork", "--mount-proc", "true"}, {}, 10s);
  if (!probe.exited_ok()) {
    GTEST_SKIP() << "unshare --pid is not permitted here: " << probe.describe()
                 << ": " << probe.output;
  }
  const int n = 3;
  auto sj =
      start_job(n, {{"STAR_SIZES", "0,200,65536,1048576,65536"}},
                {{0, {{"JACCL_LOG", "debug"}}}},
                "if [ \"$JACCL_RANK\" = 1 ]; then exec unshare --pid --fork "
                "--mount-proc \"$0\"; else exec \"$0\"; fi");
  auto rs = sj.job.wait(kJobDeadline);
  expect_all_ok(rs);
  // Rank 2 read the large results from rank 0's shared memory.
  EXPECT_NE(rs[0].output.find("'s result in shared memory memfd:jaccl-star-"),
            std::string::npos)
      << rs[0].output;
}

TEST(CoordinatorWire, RoundTripsAndRejectsGarbage) {
  namespace s = detail::star;
  auto rq = s::encode_request(123456789);
  EXPECT_EQ(s::decode_request(rq), 123456789u);
  rq[0] ^= 1;
  EXPECT_FALSE(s::decode_request(rq));

  std::string why;
  auto rp = s::encode_reply({s::Status::Error, ErrorKind::PeerLost, 17});
  auto h = s::decode_reply(rp, &why);
  ASSERT_TRUE(h) << why;
  EXPECT_EQ(h->status, s::Status::Error);
  EXPECT_EQ(h->kind, ErrorKind::PeerLost);
  EXPECT_EQ(h->length, 17u);
  auto huge = s::encode_reply({s::Status::Error, ErrorKind::Io, 1u << 30});
  EXPECT_FALSE(s::decode_reply(huge, &why));
  rp[4] = 7;  // unknown status
  EXPECT_FALSE(s::decode_reply(rp, &why));
  auto both = s::encode_reply(
      {s::Status::Ok, ErrorKind::Internal, 1, s::kCoded | s::kShared});
  EXPECT_FALSE(s::decode_reply(both, &why));

  auto host = s::encode_request(5, s::kAcceptsCoded, 0x1234567890abcdefull);
  EXPECT_EQ(s::decode_request(host), 5u);
  EXPECT_EQ(s::request_flags(host), s::kAcceptsCoded);
  EXPECT_EQ(s::request_host(host), 0x1234567890abcdefull);
}

TEST(CoordinatorWire, SharedReferencesRoundTripAndGarbageIsRefused) {
  namespace s = detail::star;
  s::SharedRef r{4242, 7, 0xab, 8192, 64, 4096};
  std::string why;
  auto d = s::decode_shared_ref(s::encode_shared_ref(r), &why);
  ASSERT_TRUE(d) << why;
  EXPECT_EQ(d->pid, 4242u);
  EXPECT_EQ(d->fd, 7);
  EXPECT_EQ(d->key, 0xabu);
  EXPECT_EQ(d->segment_bytes, 8192u);
  EXPECT_EQ(d->offset, 64u);
  EXPECT_EQ(d->length, 4096u);
  EXPECT_EQ(s::encode_shared_ref(r).size(), s::kSharedRefBytes);
  EXPECT_EQ(s::shared_label(0xab), "jaccl-star-00000000000000ab");

  auto refused = [&](s::SharedRef bad, const std::string& needle) {
    auto b = s::encode_shared_ref(bad);
    std::string w;
    EXPECT_FALSE(s::decode_shared_ref(b, &w)) << needle;
    EXPECT_NE(w.find(needle), std::string::npos) << w;
  };
  auto bad = r;
  bad.length = 8192;  // past the segment's end
  refused(bad, "lies outside");
  bad = r;
  bad.offset = 0;  // over the header
  refused(bad, "lies outside");
  bad = r;
  bad.fd = -1;
  refused(bad, "no process or descriptor");

  auto b = s::encode_shared_ref(r);
  EXPECT_FALSE(s::decode_shared_ref(std::span(b).first(b.size() - 1), &why));
  b[0] ^= 1;
  EXPECT_FALSE(s::decode_shared_ref(b, &why));
}

}  // namespace
}  // namespace jaccl::test
