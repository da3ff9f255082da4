// Copyright 2026 the jaccl authors.
// The TCP data plane: cards, listen address, topology, the acceptor, the
// liveness monitor (threads as ranks over an InProcessHub) and, with real
// processes (tests/workers/transport_node), strays, JACCL_LISTEN=0, SIGKILL
// and SIGSTOP. Deadlines only keep a broken build from hanging; nothing
// asserts timings.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bootstrap/in_process.h"
#include "bootstrap/side_channel.h"
#include "common/handshake.h"
#include "common/net.h"
#include "support/listen_sockets.h"
#include "support/proc.h"
#include "transport/interfaces.h"
#include "transport/liveness.h"
#include "transport/tcp_card.h"
#include "transport/tcp_connect.h"
#include "transport/tcp_endpoint.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;
using namespace jaccl::detail;

// ---- threads as ranks -------------------------------------------------------

struct RankOutcome {
  ControlBlock conns;
  std::exception_ptr error;
  std::string what;
};

// Runs setup_tcp on n threads; tweak(rank, cfg) adjusts each rank's config.
template <class Tweak>
std::vector<RankOutcome> setup_threads(int n, Tweak tweak) {
  auto hub = InProcessHub::create(n, Millis(30000));
  std::vector<RankOutcome> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Config cfg;
      cfg.set_rank(r).set_size(n).set_timeout(Millis(30000));
      tweak(r, cfg);
      try {
        SideChannel sc(r, n, 0, hub->for_rank(r), "in-process", Millis(30000),
                       false);
        out[static_cast<size_t>(r)].conns = setup_tcp(cfg, sc);
      } catch (const std::exception& e) {
        out[static_cast<size_t>(r)].error = std::current_exception();
        out[static_cast<size_t>(r)].what = e.what();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return out;
}

// Sends (me, peer, wire) on every wire, then reads and checks what came in.
void exchange_on_every_wire(std::vector<RankOutcome>& ranks) {
  auto dl = Deadline::after(Millis(20000));
  for (auto& r : ranks) {
    for (int p = 0; p < r.conns.size; ++p) {
      auto& ws = r.conns.wires[static_cast<size_t>(p)];
      for (size_t w = 0; w < ws.size(); ++w) {
        int32_t msg[3] = {r.conns.rank, p, static_cast<int32_t>(w)};
        send_all(ws[w].get(), msg, sizeof(msg), dl, {});
      }
    }
  }
  for (auto& r : ranks) {
    for (int p = 0; p < r.conns.size; ++p) {
      auto& ws = r.conns.wires[static_cast<size_t>(p)];
      for (size_t w = 0; w < ws.size(); ++w) {
        int32_t msg[3] = {};
        recv_all(ws[w].get(), msg, sizeof(msg), dl, {});
        EXPECT_EQ(msg[0], p);
        EXPECT_EQ(msg[1], r.conns.rank);
        EXPECT_EQ(msg[2], static_cast<int>(w));
      }
    }
  }
}

class TcpSetupSizes : public ::testing::TestWithParam<int> {};

TEST_P(TcpSetupSizes, EveryExpectedWireExistsAndWorks) {
  const int n = GetParam();
  const int wires = 2;
  // Every rank lives in this process: about 3 * n * n descriptors.
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < static_cast<rlim_t>(3 * n * n + 512)) {
    GTEST_SKIP() << "RLIMIT_NOFILE " << lim.rlim_cur << " too small for " << n
                 << " ranks in one process";
  }
  auto ranks = setup_threads(n, [&](int, Config& c) { c.set_wires(wires); });
  for (int r = 0; r < n; ++r) {
    ASSERT_FALSE(ranks[static_cast<size_t>(r)].error)
        << "rank " << r << ": " << ranks[static_cast<size_t>(r)].what;
    auto& c = ranks[static_cast<size_t>(r)].conns;
    ASSERT_EQ(c.rank, r);
    ASSERT_EQ(c.wires.size(), static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) {
      size_t expect = p == r                                           ? 0
                      : n <= 16                                        ? wires
                      : ((r - p + n) % n == 1 || (p - r + n) % n == 1) ? wires
                                                                       : 1;
      ASSERT_EQ(c.wires[static_cast<size_t>(p)].size(), expect)
          << "rank " << r << " peer " << p;
      for (auto& fd : c.wires[static_cast<size_t>(p)]) {
        EXPECT_TRUE(fd.valid());
      }
    }
    EXPECT_EQ(static_cast<bool>(c.keepalive), n > 1);
  }
  exchange_on_every_wire(ranks);
  for (auto& r : ranks) {
    EXPECT_FALSE(r.conns.state->failed());
  }
  // Normal destruction: GOODBYEs, so nobody records a failure.
  std::vector<std::shared_ptr<FailureState>> states;
  for (auto& r : ranks) {
    states.push_back(r.conns.state);
  }
  ranks.clear();
  for (size_t r = 0; r < states.size(); ++r) {
    EXPECT_FALSE(states[r]->failed()) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, TcpSetupSizes,
                         ::testing::Values(1, 2, 3, 8, 20, 64));

TEST(TcpSetup, OneRankWithoutListenerStillConnects) {
  auto ranks = setup_threads(4, [](int r, Config& c) { c.set_listen(r != 2); });
  for (auto& r : ranks) {
    ASSERT_FALSE(r.error) << r.what;
  }
  exchange_on_every_wire(ranks);
}

TEST(TcpSetup, TwoRanksWithoutListenerIsAConfigErrorNamingBoth) {
  auto ranks = setup_threads(
      4, [](int r, Config& c) { c.set_listen(r != 1 && r != 3); });
  for (auto& r : ranks) {
    ASSERT_TRUE(r.error);
    EXPECT_THROW(std::rethrow_exception(r.error), ConfigError);
    EXPECT_NE(r.what.find("ranks 1, 3 both have JACCL_LISTEN=0"),
              std::string::npos)
        << r.what;
  }
}

TEST(TcpSetup, BadInterfaceIsAConfigErrorNamingIt) {
  auto ranks =
      setup_threads(2, [](int, Config& c) { c.set_interface("nosuchif9"); });
  for (auto& r : ranks) {
    ASSERT_TRUE(r.error);
    EXPECT_THROW(std::rethrow_exception(r.error), ConfigError);
    EXPECT_NE(r.what.find("nosuchif9"), std::string::npos) << r.what;
  }
}

TEST(TcpSetup, TokenIsUsedOnEveryConnection) {
  auto ranks = setup_threads(
      3, [](int, Config& c) { c.set_token("s3cret").set_wires(1); });
  for (auto& r : ranks) {
    ASSERT_FALSE(r.error) << r.what;
  }
  exchange_on_every_wire(ranks);
}

// Through jaccl::init: the transport hands its links to the collectives.
TEST(TcpSetup, InitBuildsAWorkingGroup) {
  const int n = 3;
  auto hub = InProcessHub::create(n, Millis(30000));
  std::vector<std::string> errors(n);
  std::vector<float> sums(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        Config cfg;
        cfg.set_rank(r).set_size(n).set_transport("tcp").set_all_gather_factory(
            hub->factory());
        auto g = init(cfg, true);
        float in = static_cast<float>(r + 1), out = 0;
        g->all_sum(&in, &out, sizeof(float), Float32);
        sums[static_cast<size_t>(r)] = out;
        g->barrier();
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(sums[static_cast<size_t>(r)], 6.0f) << "rank " << r;
  }
}

TEST(TcpSetup, UnknownTransportIsAConfigError) {
  Config cfg;
  cfg.set_rank(0).set_size(1).set_transport("rdma").set_all_gather(
      [](const char* src, char* dst, size_t n) { std::memcpy(dst, src, n); });
  EXPECT_THROW(init(cfg, true), ConfigError);
}

// ---- listen address ---------------------------------------------------------

TEST(ListenAddress, Rule) {
  Config c;
  c.set_rank(0).set_size(1);
  EXPECT_EQ(choose_listen_address(c).host, "127.0.0.1");
  c.set_interface("lo");
  EXPECT_EQ(choose_listen_address(c).host, "127.0.0.1");
  c.set_interface("127.0.0.5");
  EXPECT_EQ(choose_listen_address(c).host, "127.0.0.5");
  c.set_interface("");
  c.set_coordinator("127.0.0.1:1234");
  EXPECT_EQ(choose_listen_address(c).host, "127.0.0.1");
  c.set_interface("nosuchif9");
  try {
    choose_listen_address(c);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("JACCL_IFNAME='nosuchif9'"),
              std::string::npos)
        << e.what();
  }
}

// ---- cards and topology
// -------------------------------------------------------

TEST(TcpCard, RoundTripAndValidation) {
  TcpCard c = local_card(3, 2);
  c.addresses = {"10.0.0.3"};
  c.port = 41234;
  TcpCard d = decode_card(encode_card(c), 3, 0);
  EXPECT_EQ(d.addresses, c.addresses);
  EXPECT_EQ(d.port, c.port);
  EXPECT_EQ(d.wires, 2);
  EXPECT_EQ(d.boot_id, c.boot_id);
  EXPECT_EQ(d.ipc_ns, c.ipc_ns);
  EXPECT_FALSE(d.boot_id.empty());
  EXPECT_FALSE(d.ipc_ns.empty());
  EXPECT_GT(c.cpus, 0);
  EXPECT_EQ(d.cpus, c.cpus);
  EXPECT_EQ(d.hostname, c.hostname);
  EXPECT_EQ(d.net_ns, c.net_ns);
  // Decoded beside a card of another host and of this one (whose identity
  // text it shares): the same fields either way.
  TcpCard other = c;
  other.hostname = "elsewhere";
  other.boot_id = "another-boot";
  other.net_ns = "";
  for (const TcpCard* like : {&other, &d}) {
    TcpCard e = decode_card(encode_card(c), 3, 0, like);
    EXPECT_EQ(e.hostname, c.hostname);
    EXPECT_EQ(e.boot_id, c.boot_id);
    EXPECT_EQ(e.ipc_ns, c.ipc_ns);
    EXPECT_EQ(e.net_ns, c.net_ns);
    TcpCard f = decode_card(encode_card(other), 3, 0, like);
    EXPECT_EQ(f.hostname.str(), "elsewhere");
    EXPECT_EQ(f.boot_id.str(), "another-boot");
    EXPECT_TRUE(f.net_ns.empty());
    EXPECT_EQ(f.ipc_ns, c.ipc_ns);
  }
  // Address lists: shared with the card beside where they read the same,
  // decoded afresh where they do not.
  other.addresses = {"10.0.0.3", "192.168.1.3"};
  TcpCard same = decode_card(encode_card(c), 3, 0, &d);
  EXPECT_EQ(&same.addresses.list(), &d.addresses.list());
  TcpCard longer = decode_card(encode_card(other), 3, 0, &d);
  EXPECT_EQ(longer.addresses.list(),
            (std::vector<std::string>{"10.0.0.3", "192.168.1.3"}));
  TcpCard shorter = decode_card(encode_card(c), 3, 0, &longer);
  EXPECT_EQ(shorter.addresses.list(), std::vector<std::string>{"10.0.0.3"});
  EXPECT_NE(&shorter.addresses.list(), &longer.addresses.list());
  EXPECT_TRUE(shorter.ofi.empty());
  c.cpu_mask.bits[0] = 0x5;
  c.cpu_mask.bits[2] = uint64_t{1} << 63;
  c.cpu_mask.beyond = 9;
  d = decode_card(encode_card(c), 3, 0);
  EXPECT_EQ(
      std::memcmp(d.cpu_mask.bits, c.cpu_mask.bits, sizeof(c.cpu_mask.bits)),
      0);
  EXPECT_EQ(d.cpu_mask.beyond, 9u);
  EXPECT_TRUE(d.wires_set);
  EXPECT_FALSE(
      decode_card(encode_card(local_card(3, 2, false)), 3, 0).wires_set);
  auto bad = [](std::string bytes, int from) {
    try {
      decode_card(bytes, from, 0);
    } catch (const ProtocolError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(bad("garbage", 5).find("rank 5 published a malformed TCP card"),
            std::string::npos);
  EXPECT_NE(bad(encode_card(c), 4).find("claims to be rank 3"),
            std::string::npos);
  // Cut short anywhere, a byte too many, or an older jaccl's JSON card:
  // refused with a reason, never read past the end.
  const std::string good = encode_card(c);
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_NE(bad(good.substr(0, cut), 3).find("malformed TCP card"),
              std::string::npos)
        << cut;
  }
  EXPECT_NE(bad(good + "x", 3).find("bytes after its end"), std::string::npos);
  EXPECT_NE(bad("{\"v\":1,\"rank\":3}", 3).find("one jaccl version"),
            std::string::npos);
  {
    std::string huge = good;  // the hostname's length past the end
    const size_t at = 21 + 8 * CpuMask::kWords + 4;
    huge[at] = '\xff';
    huge[at + 1] = '\xff';
    EXPECT_NE(bad(huge, 3).find("cut short"), std::string::npos);
  }
  c.cpus = -2;
  EXPECT_NE(bad(encode_card(c), 3).find("cpus -2 out of range"),
            std::string::npos);
  c.cpus = 2;
  c.wires = 0;
  EXPECT_NE(bad(encode_card(c), 3).find("wires 0 out of range"),
            std::string::npos);
  c.wires = 2;
  c.ofi = {"0a1b", ""};
  EXPECT_EQ(decode_card(encode_card(c), 3, 0).ofi, c.ofi);
  c.addresses = {"not-an-ip"};
  EXPECT_NE(bad(encode_card(c), 3).find("not a numeric IP"), std::string::npos);
}

// Two wire threads per rank only where the host has a CPU for each, decided
// from the cards alone.
TEST(Topology, DefaultWiresFollowEachHostsCpus) {
  // (boot id, IPC namespace, cpus) per rank, no rank choosing its wires.
  using R = std::tuple<std::string, std::string, int>;
  auto cards = [](std::vector<R> ranks) {
    std::vector<TcpCard> v;
    for (const auto& [boot, ipc, cpus] : ranks) {
      TcpCard c;
      c.rank = static_cast<int>(v.size());
      c.boot_id = boot;
      c.ipc_ns = ipc;
      c.cpus = cpus;
      c.wires = 2;
      c.wires_set = false;
      v.push_back(c);
    }
    return v;
  };
  EXPECT_EQ(default_tcp_wires(cards({{"a", "i", 2}, {"a", "i", 2}})), 1);
  EXPECT_EQ(default_tcp_wires(cards({{"a", "i", 4}, {"a", "i", 4}})), 2);
  EXPECT_EQ(default_tcp_wires(cards({{"a", "i", 2}, {"b", "i", 2}})), 2);
  // One crowded kernel is enough: every rank must get the same answer.
  EXPECT_EQ(
      default_tcp_wires(cards({{"a", "i", 8}, {"b", "i", 2}, {"b", "i", 2}})),
      1);
  // Hierarchical: only each shared-memory host's first rank drives wires;
  // two such hosts (IPC namespaces) on one kernel are two leaders.
  auto four = cards({{"a", "i", 4},
                     {"a", "i", 4},
                     {"a", "i", 4},
                     {"a", "i", 4},
                     {"b", "i", 4}});
  EXPECT_EQ(default_tcp_wires(four), 1);
  EXPECT_EQ(default_tcp_wires(four, /*leaders_only=*/true), 2);
  auto two_hosts_one_kernel =
      cards({{"a", "i", 2}, {"a", "i", 2}, {"a", "j", 2}, {"a", "j", 2}});
  EXPECT_EQ(default_tcp_wires(two_hosts_one_kernel, true), 1);
  // Cards that do not say their CPUs do not constrain.
  EXPECT_EQ(default_tcp_wires(cards({{"a", "i", 0}, {"a", "i", 0}})), 2);
  // A rank that chose its wires (or an older jaccl's card, which always
  // used its `wires`) decides for all: the cards already agree on the number.
  auto chosen = cards({{"a", "i", 2}, {"a", "i", 2}});
  chosen[1].wires_set = true;
  EXPECT_EQ(default_tcp_wires(chosen), 2);
  chosen[0].wires = chosen[1].wires = 3;
  EXPECT_EQ(default_tcp_wires(chosen), 3);
}

TEST(Topology, WiresAndDirection) {
  EXPECT_EQ(data_wires_between(0, 1, 8, 3), 3);
  EXPECT_EQ(data_wires_between(0, 5, 8, 3), 3);
  EXPECT_EQ(data_wires_between(0, 1, 20, 3), 3);
  EXPECT_EQ(data_wires_between(0, 19, 20, 3), 3);
  EXPECT_EQ(data_wires_between(0, 5, 20, 3), 1);
  EXPECT_EQ(data_wires_between(4, 4, 20, 3), 0);
  std::vector<char> all{1, 1, 1};
  EXPECT_TRUE(dials(2, 0, all));
  EXPECT_FALSE(dials(0, 2, all));
  std::vector<char> two_silent{1, 1, 0};
  EXPECT_TRUE(dials(2, 0, two_silent));
  EXPECT_FALSE(dials(0, 2, two_silent));
  std::vector<char> zero_silent{0, 1, 1};
  EXPECT_TRUE(dials(0, 2, zero_silent));
  EXPECT_FALSE(dials(2, 0, zero_silent));
  EXPECT_NO_THROW(check_listen_pairs(two_silent, 0));
  EXPECT_THROW(check_listen_pairs({0, 1, 0}, 0), ConfigError);
}

// ---- the acceptor: strays and duplicates
// -------------------------------------

TEST(TcpAcceptor, DropsStraysAndDuplicatesAndStillCompletes) {
  const std::string token = "tok";
  Fd listener = listen_tcp(resolve(HostPort{"127.0.0.1", 0}), 64);
  uint16_t port = port_of(local_address(listener.get()));
  // Rank 2 of 3 expects 2 data wires + control from rank 0, 1 + control
  // from rank 1.
  TcpAcceptor acc(2, 3, std::move(listener), token, {2, 1, -1},
                  Deadline::after(Millis(20000)));
  std::atomic<bool> stop{false};
  auto dl = Deadline::after(Millis(10000));
  uint64_t job = token_fingerprint(token);
  auto hello = [&](Channel ch, int rank, int wire, int size = 3) {
    return Hello{ch, rank, size, wire, job, random_nonce()};
  };
  auto dial = [&](const Hello& h, const std::string& tok) {
    return dial_peer({"127.0.0.1"}, port, h, tok, dl, stop, -1);
  };
  auto rejected_with = [&](const Hello& h, const std::string& tok) {
    try {
      Fd fd = dial(h, tok);
      return std::string("accepted");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  // Garbage, and a connection that says nothing.
  int err = 0;
  Fd junk = try_connect(resolve(HostPort{"127.0.0.1", port}), dl, &err);
  ASSERT_TRUE(junk.valid());
  const char http[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_GT(::send(junk.get(), http, sizeof(http), MSG_NOSIGNAL), 0);
  Fd silent = try_connect(resolve(HostPort{"127.0.0.1", port}), dl, &err);
  ASSERT_TRUE(silent.valid());

  Fd w00 = dial(hello(Channel::Data, 0, 0), token);
  ASSERT_TRUE(w00.valid());
  EXPECT_NE(rejected_with(hello(Channel::Data, 0, 0), token)
                .find("duplicate wire 0 from rank 0"),
            std::string::npos);
  EXPECT_NE(
      rejected_with(hello(Channel::Data, 1, 1), token).find("out of range"),
      std::string::npos);
  EXPECT_NE(rejected_with(hello(Channel::Data, 7, 0), token)
                .find("rank 7 is not a peer"),
            std::string::npos);
  EXPECT_NE(rejected_with(hello(Channel::Data, 2, 0), token)
                .find("rank 2 is not a peer"),
            std::string::npos);
  EXPECT_NE(
      rejected_with(hello(Channel::Data, 0, 1, 4), token).find("group size 4"),
      std::string::npos);
  EXPECT_NE(rejected_with(hello(Channel::Data, 0, 1), "wrong").find("token"),
            std::string::npos);
  EXPECT_NE(rejected_with(hello(Channel::Coordinator, 0, 0), token)
                .find("coordinator connection"),
            std::string::npos);

  std::vector<Fd> rest;
  rest.push_back(dial(hello(Channel::Data, 0, 1), token));
  rest.push_back(dial(hello(Channel::Control, 0, 0), token));
  rest.push_back(dial(hello(Channel::Data, 1, 0), token));
  EXPECT_NE(rejected_with(hello(Channel::Control, 0, 0), token)
                .find("duplicate control"),
            std::string::npos);
  rest.push_back(dial(hello(Channel::Control, 1, 0), token));
  for (auto& fd : rest) {
    EXPECT_TRUE(fd.valid());
  }
  EXPECT_TRUE(acc.wait());
  EXPECT_TRUE(acc.missing().empty());
  EXPECT_GE(acc.rejected(), 8);
  EXPECT_TRUE(acc.data()[0][0].valid());
  EXPECT_TRUE(acc.data()[0][1].valid());
  EXPECT_TRUE(acc.data()[1][0].valid());
  EXPECT_TRUE(acc.control()[0].valid());
  EXPECT_TRUE(acc.control()[1].valid());
}

TEST(TcpSetup, TimeoutNamesTheMissingRanks) {
  // Rank 1's listener accepts nothing: a rank that is in the card exchange
  // but never serves. Simulated with an acceptor that expects nobody.
  Fd listener = listen_tcp(resolve(HostPort{"127.0.0.1", 0}), 64);
  TcpAcceptor acc(0, 3, std::move(listener), "", {-1, 1, 1},
                  Deadline::after(Millis(300)));
  EXPECT_FALSE(acc.wait());
  EXPECT_EQ(acc.missing(), (std::vector<int>{1, 2}));
}

// Rank 0 sets up for real; rank 1 only publishes a card (listening on a
// socket nobody serves, or not listening) and never connects.
// The higher rank of a pair dials the lower one (where it listens): a mute
// peer that listens is dialed by rank 1 under test; one that does not
// listen is the rank 1 that rank 0 under test waits for.
std::string setup_against_mute_peer(bool peer_listens) {
  const int me = peer_listens ? 1 : 0;
  const int peer = 1 - me;
  auto hub = InProcessHub::create(2, Millis(30000));
  Fd mute = listen_tcp(resolve(HostPort{"127.0.0.1", 0}), 64);
  std::string what = "no error";
  std::thread mute_rank([&] {
    SideChannel sc(peer, 2, 0, hub->for_rank(peer), "in-process", Millis(30000),
                   false);
    TcpCard card = local_card(peer, 2);
    if (peer_listens) {
      card.addresses = {"127.0.0.1"};
      card.port = port_of(local_address(mute.get()));
    }
    sc.all_gather_bytes(encode_card(card));
  });
  try {
    Config cfg;
    cfg.set_rank(me).set_size(2).set_timeout(Millis(1000));
    SideChannel sc(me, 2, 0, hub->for_rank(me), "in-process", Millis(30000),
                   false);
    auto conns = setup_tcp(cfg, sc);
  } catch (const TimeoutError& e) {
    what = e.what();
  } catch (const std::exception& e) {
    what = std::string("wrong error: ") + e.what();
  }
  mute_rank.join();
  return what;
}

TEST(TcpSetup, TimeoutNamesTheRankWeCannotReach) {
  std::string what = setup_against_mute_peer(true);
  EXPECT_NE(what.find("could not connect to rank 0"), std::string::npos)
      << what;
}

TEST(TcpSetup, TimeoutNamesTheRankThatNeverDialed) {
  std::string what = setup_against_mute_peer(false);
  EXPECT_NE(what.find("no connection arrived from rank 1"), std::string::npos)
      << what;
}

// ---- liveness monitor over socketpairs
// ----------------------------------------

struct Mesh {
  std::vector<std::shared_ptr<FailureState>> states;
  std::vector<std::unique_ptr<LivenessMonitor>> monitors;
};

// n monitors, every pair joined by a socketpair. raw[r][p]: sockets kept by
// the test instead of a monitor for ranks listed in `manual`.
Mesh make_mesh(int n, Millis hb, std::set<int> manual,
               std::vector<std::vector<Fd>>* raw) {
  std::vector<std::vector<Fd>> ctl(static_cast<size_t>(n));
  for (auto& v : ctl) {
    v.resize(static_cast<size_t>(n));
  }
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      int sv[2];
      EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
      set_nonblocking(sv[0]);
      set_nonblocking(sv[1]);
      ctl[static_cast<size_t>(a)][static_cast<size_t>(b)] = Fd(sv[0]);
      ctl[static_cast<size_t>(b)][static_cast<size_t>(a)] = Fd(sv[1]);
    }
  }
  Mesh m;
  if (raw) {
    raw->resize(static_cast<size_t>(n));
  }
  for (int r = 0; r < n; ++r) {
    m.states.push_back(std::make_shared<FailureState>());
    if (manual.count(r)) {
      (*raw)[static_cast<size_t>(r)] = std::move(ctl[static_cast<size_t>(r)]);
      m.monitors.push_back(nullptr);
    } else {
      m.monitors.push_back(std::make_unique<LivenessMonitor>(
          r, std::move(ctl[static_cast<size_t>(r)]), m.states.back(), hb));
    }
  }
  return m;
}

std::string wait_failure(FailureState& st, Millis limit = Millis(20000)) {
  auto until = Clock::now() + limit;
  while (!st.failed() && Clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  if (!st.failed()) {
    return "no failure";
  }
  try {
    st.throw_if_failed();
  } catch (const Error& e) {
    return std::string(to_string(e.kind())) + ": " + e.what();
  }
  return "not a jaccl::Error";
}

TEST(Liveness, AbortReachesEveryPeerWithTheRootCause) {
  auto m = make_mesh(3, Millis(10000), {}, nullptr);
  try {
    raise(ErrorKind::Protocol, "checksum mismatch", {.rank = 1});
  } catch (...) {
    m.states[1]->fail(std::current_exception());
  }
  for (int r : {0, 2}) {
    std::string got = wait_failure(*m.states[static_cast<size_t>(r)]);
    EXPECT_NE(got.find("Protocol: "), std::string::npos) << got;
    EXPECT_NE(got.find("rank 1 reported: checksum mismatch"), std::string::npos)
        << got;
  }
}

// The root's wording is about itself: on the other ranks "this rank" must
// read as the root, and a peer note naming the reader goes.
TEST(Liveness, RelayedTextNamesTheRootNotTheReader) {
  auto m = make_mesh(3, Millis(10000), {}, nullptr);
  try {
    raise(ErrorKind::Protocol,
          "operation mismatch: this rank called all_gather of 8 bytes but "
          "rank 2 called all_sum of 8 bytes (this rank's op #3)",
          {.rank = 1, .peer = 2});
  } catch (...) {
    m.states[1]->fail(std::current_exception());
  }
  const std::string said =
      "rank 1 reported: operation mismatch: rank 1 called all_gather of 8 "
      "bytes but rank 2 called all_sum of 8 bytes (rank 1's op #3)";
  std::string got0 = wait_failure(*m.states[0]);
  EXPECT_EQ(got0.rfind("Protocol: ", 0), 0u) << got0;
  EXPECT_NE(got0.find(said + " (peer rank 2)"), std::string::npos) << got0;
  std::string got2 = wait_failure(*m.states[2]);
  EXPECT_EQ(got2.rfind("Protocol: ", 0), 0u) << got2;
  EXPECT_NE(got2.find(said), std::string::npos) << got2;
  EXPECT_EQ(got2.find("peer rank 2"), std::string::npos) << got2;
  for (const std::string& got : {got0, got2}) {
    EXPECT_EQ(got.find("this rank"), std::string::npos) << got;
  }
}

// A peer note naming the reader and an address keeps the address.
TEST(Liveness, RelayedPeerNoteKeepsItsAddress) {
  auto m = make_mesh(2, Millis(10000), {}, nullptr);
  try {
    raise(ErrorKind::Io, "lost this rank's link to rank 0",
          {.rank = 1, .peer = 0, .address = "10.0.0.1:4000"});
  } catch (...) {
    m.states[1]->fail(std::current_exception());
  }
  std::string got = wait_failure(*m.states[0]);
  EXPECT_EQ(got.rfind("Io: ", 0), 0u) << got;
  EXPECT_NE(got.find("rank 1 reported: lost rank 1's link to rank 0 "
                     "(address 10.0.0.1:4000)"),
            std::string::npos)
      << got;
}

// The ABORT carries the root's fields, not its text: every reader's error
// names the root and the root's peer among its peers, with the root's
// address and errno, and the reader as the reporting rank.
TEST(Liveness, RelayedErrorKeepsTheRootsFields) {
  auto m = make_mesh(3, Millis(10000), {}, nullptr);
  try {
    raise(ErrorKind::Io, "lost this rank's link to " + rank_ref(2),
          {.rank = 1,
           .peer = 2,
           .address = "10.0.0.1:4000",
           .sys_errno = ECONNRESET});
  } catch (...) {
    m.states[1]->fail(std::current_exception());
  }
  for (int r : {0, 2}) {
    wait_failure(*m.states[static_cast<size_t>(r)]);
    try {
      m.states[static_cast<size_t>(r)]->throw_if_failed();
      ADD_FAILURE() << "rank " << r << " did not fail";
    } catch (const IoError& e) {
      EXPECT_EQ(e.rank(), r);
      EXPECT_EQ(e.peer(), r == 2 ? -1 : 2) << e.what();  // not the reader
      // (and the rank that relayed it, when it came the long way)
      const std::set<int> peers(e.peers().begin(), e.peers().end());
      EXPECT_TRUE(peers.count(1) && peers.count(2)) << e.what();
      EXPECT_EQ(e.address(), "10.0.0.1:4000");
      EXPECT_EQ(e.sys_errno(), ECONNRESET);
      const std::string d = e.detail();
      EXPECT_EQ(d.rfind("rank 1 reported", 0), 0u) << d;
      EXPECT_TRUE(d.ends_with(": lost rank 1's link to rank 2")) << d;
    }
  }
}

TEST(Liveness, GoodbyeIsNotAFailure) {
  auto m = make_mesh(3, Millis(10000), {}, nullptr);
  m.monitors[1].reset();
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(m.states[0]->failed());
  EXPECT_FALSE(m.states[2]->failed());
}

TEST(Liveness, CloseWithoutGoodbyeIsPeerLost) {
  std::vector<std::vector<Fd>> raw;
  auto m = make_mesh(3, Millis(10000), {2}, &raw);
  raw[2].clear();  // rank 2 "dies": its sockets close, no GOODBYE
  for (int r : {0, 1}) {
    std::string got = wait_failure(*m.states[static_cast<size_t>(r)]);
    EXPECT_NE(got.find("PeerLost: "), std::string::npos) << got;
    EXPECT_NE(got.find("rank 2"), std::string::npos) << got;
  }
}

TEST(Liveness, SilentPeerIsPeerLost) {
  std::vector<std::vector<Fd>> raw;
  auto m = make_mesh(2, Millis(400), {1}, &raw);  // rank 1 never speaks
  std::string got = wait_failure(*m.states[0]);
  EXPECT_NE(got.find("no heartbeat from rank 1 for 400 ms"), std::string::npos)
      << got;
}

TEST(Liveness, MalformedFrameIsAProtocolError) {
  std::vector<std::vector<Fd>> raw;
  auto m = make_mesh(2, Millis(0), {1}, &raw);
  const char junk[16] = "not a frame....";
  ASSERT_EQ(::send(raw[1][0].get(), junk, sizeof(junk), MSG_NOSIGNAL),
            static_cast<ssize_t>(sizeof(junk)));
  std::string got = wait_failure(*m.states[0]);
  EXPECT_NE(got.find("Protocol: "), std::string::npos) << got;
  EXPECT_NE(got.find("rank 1 sent a malformed control frame"),
            std::string::npos)
      << got;
}

// ---- real processes
// -------------------------------------------------------------

class ProcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("jaccl_tcp_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "sc");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Job start(int n, std::vector<std::string> args,
            std::function<void(int, std::map<std::string, std::string>&)>
                extra = nullptr) {
    return Job::start(worker_path("transport_node"), args, n, [=, this](int r) {
      std::map<std::string, std::string> env{
          {"JACCL_RANK", std::to_string(r)},
          {"JACCL_SIZE", std::to_string(n)},
          {"JACCL_TIMEOUT", "30"},
          {"TEST_SC_DIR", (dir_ / "sc").string()},
          {"JACCL_COORDINATOR", kUnsetEnv},
          {"JACCL_IFNAME", kUnsetEnv},
          {"JACCL_LISTEN", kUnsetEnv},
      };
      if (extra) {
        extra(r, env);
      }
      return env;
    });
  }
  // Every rank of the job exits 0 (within 60 s); their results.
  static std::vector<ProcResult> wait_all_ok(Job& job) {
    auto res = job.wait(60s);
    for (size_t r = 0; r < res.size(); ++r) {
      EXPECT_TRUE(res[r].exited_ok())
          << "rank " << r << ": " << res[r].describe() << "\n"
          << res[r].output;
    }
    return res;
  }
  // Every rank of a "hold" job has its group.
  static void wait_connected(const Job& job) {
    for (int r = 0; r < job.size(); ++r) {
      ASSERT_TRUE(job.wait_for_output(r, "CONNECTED", 30s))
          << "rank " << r << ": " << job.output(r);
    }
  }
  // Each survivor fails with PeerLost, its message containing `names`.
  static void expect_peer_lost(Job& job, std::initializer_list<int> survivors,
                               const std::string& names) {
    for (int r : survivors) {
      auto res = job.wait_one(r, 30s);
      EXPECT_EQ(res.exit_code, 3) << res.describe() << "\n" << res.output;
      EXPECT_NE(res.output.find("FAILED PeerLost"), std::string::npos)
          << res.output;
      EXPECT_NE(res.output.find(names), std::string::npos) << res.output;
    }
  }
  std::string hold_file() const { return (dir_ / "go").string(); }
  void release() const { std::ofstream(hold_file()) << "go"; }

  std::filesystem::path dir_;
};

TEST_F(ProcTest, ListenZeroRankOpensNoPortAndSetupWorks) {
  auto job = start(3, {"check"}, [&](int r, auto& env) {
    if (r == 1)
      env["JACCL_LISTEN"] = "0";
    if (r == 0)
      env["TEST_HOLD_FILE"] = hold_file();
    env["JACCL_LOG"] = "info";
  });
  // While rank 0 is held, ranks 1 and 2 sit in the card exchange with their
  // listeners (if any) open.
  ASSERT_TRUE(job.wait_for_output(1, "not listening", 20s)) << job.output(1);
  ASSERT_TRUE(job.wait_for_output(2, "listening on", 20s)) << job.output(2);
  EXPECT_EQ(listen_sockets_of(job.pid(1)), 0);
  EXPECT_EQ(listen_sockets_of(job.pid(2)), 1);  // the method sees listeners
  release();
  auto res = wait_all_ok(job);
  for (int r = 0; r < 3; ++r) {
    // After set-up nobody keeps a port open.
    EXPECT_NE(res[static_cast<size_t>(r)].output.find("LISTEN_SOCKETS 0"),
              std::string::npos);
    EXPECT_NE(res[static_cast<size_t>(r)].output.find("OK"), std::string::npos);
  }
}

TEST_F(ProcTest, StrayConnectionsDoNotDisturbSetup) {
  auto job = start(3, {"check"}, [&](int r, auto& env) {
    env["JACCL_TOKEN"] = "secret";
    env["JACCL_LOG"] = "info";
    if (r == 0)
      env["TEST_HOLD_FILE"] = hold_file();
  });
  // Rank 2 is dialed by everyone; learn its port from its log line.
  ASSERT_TRUE(job.wait_for_output(2, "listening on", 20s)) << job.output(2);
  std::smatch m;
  std::string out = job.output(2);
  ASSERT_TRUE(
      std::regex_search(out, m, std::regex("listening on ([0-9.]+):(\\d+)")))
      << out;
  SockAddr addr =
      resolve(HostPort{m[1], static_cast<uint16_t>(std::stoi(m[2]))});

  auto dl = Deadline::after(Millis(20000));
  int err = 0;
  Fd garbage = try_connect(addr, dl, &err);
  ASSERT_TRUE(garbage.valid());
  const char http[] = "GET / HTTP/1.0\r\n\r\n";
  ::send(garbage.get(), http, sizeof(http), MSG_NOSIGNAL);
  Fd silent = try_connect(addr, dl, &err);  // says nothing, stays open
  ASSERT_TRUE(silent.valid());
  uint64_t job_fp = token_fingerprint("secret");
  std::vector<std::string> client_errors(3);
  std::vector<std::thread> strays;
  std::vector<std::pair<Hello, std::string>> tries = {
      {Hello{Channel::Data, 0, 3, 0, job_fp, random_nonce()}, "wrong"},
      {Hello{Channel::Data, 7, 3, 0, job_fp, random_nonce()}, "secret"},
      {Hello{Channel::Data, 2, 3, 0, job_fp, random_nonce()}, "secret"},
  };
  for (size_t i = 0; i < tries.size(); ++i) {
    strays.emplace_back([&, i] {
      Fd fd = try_connect(addr, dl, &err);
      try {
        client_handshake(fd.get(), tries[i].first, tries[i].second, dl, {});
        client_errors[i] = "accepted";
      } catch (const Error& e) {
        client_errors[i] = e.what();
      }
    });
  }
  std::this_thread::sleep_for(200ms);  // let the strays queue up first
  release();
  for (auto& t : strays) {
    t.join();
  }
  auto res = wait_all_ok(job);
  // No stray gets in. A stray whose handshake the acceptor reached is told
  // why; one still queued when every real connection has arrived is simply
  // closed with the listener (which one happens depends on scheduling).
  const char* reasons[] = {"token", "rank 7 is not a peer",
                           "rank 2 is not a peer"};
  for (size_t i = 0; i < tries.size(); ++i) {
    const std::string& e = client_errors[i];
    EXPECT_NE(e, "accepted");
    bool rejected = e.find("rejected") != std::string::npos ||
                    e.find("token") != std::string::npos;
    bool closed = e.find("connection") != std::string::npos;
    EXPECT_TRUE(rejected || closed) << e;
    if (rejected) {
      EXPECT_NE(e.find(reasons[i]), std::string::npos) << e;
    }
  }
}

TEST_F(ProcTest, SigkillOfARankIsPeerLostNamingIt) {
  auto job = start(3, {"hold", "60"});
  ASSERT_NO_FATAL_FAILURE(wait_connected(job));
  job.kill(1, SIGKILL);
  expect_peer_lost(job, {0, 2}, "rank 1");
}

TEST_F(ProcTest, StoppedRankMissesHeartbeats) {
  auto job = start(3, {"hold", "60"}, [](int, auto& env) {
    env["JACCL_HEARTBEAT_TIMEOUT"] = "2";
  });
  ASSERT_NO_FATAL_FAILURE(wait_connected(job));
  job.kill(2, SIGSTOP);
  expect_peer_lost(job, {0, 1}, "no heartbeat from rank 2");
  job.kill(2, SIGKILL);
  job.kill(2, SIGCONT);
}

// ---- the per-message send buffer (tcp_endpoint.cpp) -----------------------

// One end of a connected loopback TCP pair; `other` keeps the far end.
Fd loopback_pair(Fd& other) {
  Fd lis(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(::bind(lis.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(::listen(lis.get(), 1), 0);
  EXPECT_EQ(::getsockname(lis.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  Fd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(::connect(c.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  other = Fd(::accept4(lis.get(), nullptr, nullptr, SOCK_CLOEXEC));
  EXPECT_TRUE(other.valid());
  return c;
}

// What the kernel keeps for SO_SNDBUF = bytes (twice that, capped).
int applied(int bytes) {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  set_send_buffer(s.get(), bytes);
  return send_buffer(s.get());
}

// Whole messages: half their size, from the floor up to twice the set-up
// buffer; ring pieces: the set-up buffer.
TEST(TcpLink, WholeMessagesSendWithHalfTheirSizeOfBufferPiecesWithTheCap) {
  constexpr int kCap = 512 << 10;
  if (applied(128 << 10) == applied(256 << 10) ||
      applied(256 << 10) == applied(kCap)) {
    GTEST_SKIP() << "net.core.wmem_max caps SO_SNDBUF below 512 KiB here";
  }
  Fd far;
  Fd s = loopback_pair(far);
  const int fd = ::dup(s.get());  // the same socket, to read its buffer
  set_send_buffer(s.get(), kCap);
  auto link = make_tcp_link(std::move(s), 0, 1, kCap);
  std::vector<char> buf(4 << 20);
  auto post = [&](size_t len, bool whole) {
    Msg m;
    m.prepare(nullptr, buf.data(), len);
    m.whole = whole;
    link->post_send(m);
    link->clear();
    return send_buffer(fd);
  };
  EXPECT_EQ(post(256 << 10, true), applied(128 << 10));
  EXPECT_EQ(post(512 << 10, true), applied(256 << 10));
  // Below the floor the size does not matter: left as it was.
  EXPECT_EQ(post(64 << 10, true), applied(256 << 10));
  EXPECT_EQ(post(1 << 20, true), applied(kCap));
  EXPECT_EQ(post(200 << 10, true), applied(128 << 10));  // the floor
  EXPECT_EQ(post(512 << 10, false), applied(kCap));      // a ring piece
  if (applied(2 * kCap) != applied(kCap)) {              // wmem_max permitting
    EXPECT_EQ(post(2 << 20, true), applied(2 * kCap));
    EXPECT_EQ(post(4 << 20, true), applied(2 * kCap));  // at most twice
    EXPECT_EQ(post(4 << 20, false), applied(kCap));
  }
  ::close(fd);
}

TEST(TcpLink, AnAutotunedSocketKeepsItsBuffer) {
  Fd far;
  Fd s = loopback_pair(far);
  const int fd = ::dup(s.get());
  const int before = send_buffer(fd);
  auto link = make_tcp_link(std::move(s), 0, 1, /*sndbuf=*/0);
  std::vector<char> buf(256 << 10);
  Msg m;
  m.prepare(nullptr, buf.data(), buf.size());
  m.whole = true;
  link->post_send(m);
  link->clear();
  EXPECT_EQ(send_buffer(fd), before);
  ::close(fd);
}

// A small receive reads on: the bytes the peer sent right behind it serve
// the next receive in stream order, even after the peer has closed.
TEST(TcpLink, BytesReadAheadServeTheNextReceive) {
  Fd far;
  Fd s = loopback_pair(far);
  auto link = make_tcp_link(std::move(s), 0, 1, /*sndbuf=*/0);
  std::vector<char> sent(4 + 3000);
  for (size_t i = 0; i < sent.size(); ++i)
    sent[i] = static_cast<char>(i * 7 + 1);
  ASSERT_EQ(::send(far.get(), sent.data(), sent.size(), 0),
            static_cast<ssize_t>(sent.size()));
  far = Fd();  // closed: what follows must come from the read-ahead
  std::vector<char> a(4), b(3000);
  Msg ma;
  ma.prepare(nullptr, a.data(), a.size());
  link->post_recv(ma);
  for (int i = 0; i < 1000 && !ma.done; ++i)
    link->progress("test");
  ASSERT_TRUE(ma.done);
  Msg mb;
  mb.prepare(nullptr, b.data(), b.size());
  link->post_recv(mb);
  EXPECT_TRUE(link->progress("test"));
  EXPECT_TRUE(mb.done);
  EXPECT_EQ(std::string(a.data(), 4), std::string(sent.data(), 4));
  EXPECT_EQ(std::string(b.data(), b.size()),
            std::string(sent.data() + 4, b.size()));
  link->clear();
}

// A headed message's frame: its header, a pad length P and P zeros, so that
// the payload sits at its source's offset mod 64 (the kernel's copies run
// at a fraction of their speed 1-31 bytes off on some CPUs); a receive
// takes any P the sender chose.
TEST(TcpLink, FramesPutThePayloadAtItsSourcesAlignmentMod64) {
  Fd far;
  Fd s = loopback_pair(far);
  auto tx = make_tcp_link(std::move(s), 0, 1, /*sndbuf=*/0);
  Fd far_rx;
  Fd s_rx = loopback_pair(far_rx);
  auto rx = make_tcp_link(std::move(s_rx), 1, 0, /*sndbuf=*/0);
  std::vector<char> src(64 + (40 << 10)), dst(64 + (40 << 10));
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<char>(i * 13 + 5);
  for (size_t len : {size_t(0), size_t(100), size_t(40) << 10}) {
    for (size_t off = 0; off < 64; off += len == 0 ? 64 : 1) {
      std::array<char, kMsgHeaderBytes> hdr{}, got_hdr{};
      hdr.fill(static_cast<char>(off + 1));
      Msg m;
      m.prepare(hdr.data(), src.data() + off, len);
      tx->post_send(m);
      for (int i = 0; i < 100000 && !m.done; ++i)
        tx->progress("test");
      ASSERT_TRUE(m.done);
      const auto at = reinterpret_cast<uintptr_t>(src.data() + off);
      const size_t pad = len == 0 ? 0 : (at - kMsgHeaderBytes - 1) % 64;
      std::vector<char> wire(kMsgHeaderBytes + 1 + pad + len);
      ASSERT_EQ(::recv(far.get(), wire.data(), wire.size(), MSG_WAITALL),
                static_cast<ssize_t>(wire.size()));
      EXPECT_EQ(std::memcmp(wire.data(), hdr.data(), hdr.size()), 0);
      EXPECT_EQ(static_cast<size_t>(wire[kMsgHeaderBytes]), pad) << off;
      EXPECT_EQ(std::string(pad, '\0'),
                std::string(wire.data() + kMsgHeaderBytes + 1, pad));
      EXPECT_EQ(
          std::memcmp(wire.data() + wire.size() - len, src.data() + off, len),
          0);
      // The same bytes into a receive at another alignment.
      ASSERT_EQ(::send(far_rx.get(), wire.data(), wire.size(), 0),
                static_cast<ssize_t>(wire.size()));
      Msg r;
      r.prepare(got_hdr.data(), dst.data() + (off * 7) % 64, len);
      rx->post_recv(r);
      for (int i = 0; i < 100000 && !r.done; ++i) {
        rx->progress("test");
        if (r.hdr_in && !r.accepted)
          rx->accept(r);
      }
      ASSERT_TRUE(r.done) << off;
      EXPECT_EQ(got_hdr, hdr);
      EXPECT_EQ(std::memcmp(dst.data() + (off * 7) % 64, src.data() + off, len),
                0)
          << off;
    }
  }
  tx->clear();
  rx->clear();
}

// A pad length past the bound: the header is handed up first (its check
// names a peer doing another op); accepted, the link says the stream is
// out of step.
TEST(TcpLink, APadPastTheBoundIsAProtocolErrorOnceTheHeaderIsAccepted) {
  Fd far;
  Fd s = loopback_pair(far);
  auto link = make_tcp_link(std::move(s), 0, 1, /*sndbuf=*/0);
  std::vector<char> wire(kMsgHeaderBytes + 1 + 300, 'x');
  wire[kMsgHeaderBytes] = static_cast<char>(200);
  ASSERT_EQ(::send(far.get(), wire.data(), wire.size(), 0),
            static_cast<ssize_t>(wire.size()));
  std::array<char, kMsgHeaderBytes> hdr{};
  std::vector<char> buf(100 << 10);
  Msg m;
  m.prepare(hdr.data(), buf.data(), buf.size());
  link->post_recv(m);
  for (int i = 0; i < 100000 && !m.hdr_in; ++i)
    link->progress("test");
  ASSERT_TRUE(m.hdr_in);
  EXPECT_EQ(std::string(hdr.data(), hdr.size()),
            std::string(kMsgHeaderBytes, 'x'));
  link->progress("test");  // held until the caller has looked
  EXPECT_FALSE(m.done);
  link->accept(m);
  try {
    link->progress("test");
    ADD_FAILURE() << "no error";
  } catch (const ProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("200 bytes of padding"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("peer rank 1"), std::string::npos)
        << e.what();
  }
  link->clear();
}

}  // namespace
}  // namespace jaccl::test
