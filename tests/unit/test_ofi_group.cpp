// Copyright 2026 the jaccl authors.
// The ofi transport at group level, small enough for the sanitizer runs
// (scripts/sanitize.sh): the whole assembly (jaccl::init with
// JACCL_TRANSPORT=ofi: the plan, OfiNet, the endpoint adapter, the network
// group, liveness) with threads as ranks over an in-process side channel,
// every collective at a few sizes over tcp;ofi_rxm (on the loopback
// interface) and shm, mesh and ring; ranks that call different ops; and a
// short multi-process job (tests/workers/fault_worker, built with the same
// sanitizer) whose rank is SIGKILLed mid-all_sum. The full matrix runs in
// test_conformance / test_faults (plain build only).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jaccl/jaccl.h"
#include "support/fixtures.h"
#include "support/group_kinds.h"
#include "support/proc.h"
#include "support/thread_ranks.h"
#include "transport/ofi/ofi_fabric.h"

namespace jaccl::detail {
namespace {

using namespace std::chrono_literals;

#define REQUIRE_OFI()                                          \
  ASSERT_TRUE(ofi::built())                                    \
      << "this build has no libfabric: install libfabric-dev " \
         "(scripts/setup.sh) and reconfigure"

struct Case {
  std::string name;
  std::string provider;  // tcp;ofi_rxm (domain lo) | shm
  int n;
  int wires;
  bool ring;               // JACCL_RING: the ring at every size
  bool register_ = false;  // JACCL_OFI_FORCE_REGISTER
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

Config rank_config(const Case& c, int r) {
  Config cfg;
  cfg.set_rank(r)
      .set_size(c.n)
      .set_transport("ofi")
      .set_ofi_provider(c.provider)
      .set_ofi_force_register(c.register_)
      .set_wires(c.wires)
      .set_interface("127.0.0.1")
      .set_timeout(60s)
      .set_op_timeout(120s);
  cfg.prefer_ring(c.ring);
  if (c.provider.rfind("tcp", 0) == 0) {
    cfg.set_devices(test::loopback_devices(c.n));
  }
  return cfg;
}

// Runs f(rank, group) on one thread per rank (support/thread_ranks.h).
std::vector<std::string> run_ranks(const Case& c,
                                   const std::function<void(int, Group&)>& f) {
  return test::run_thread_ranks(
      c.n, [&](int r) { return rank_config(c, r); }, f);
}

// Small integers: exact in float32 under any summation order.
float value(int rank, size_t i, int salt) {
  return static_cast<float>(static_cast<int>((rank * 7 + i * 3 + salt) % 11) -
                            5);
}

std::vector<float> input(int rank, size_t count, int salt) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) {
    v[i] = value(rank, i, salt);
  }
  return v;
}

// Every op on one rank at `count` float32 elements, each result checked
// against the reference; returns the first mismatch ("" = all good).
std::string check_all_ops(Group& g, size_t count, int salt) {
  const int n = g.size(), me = g.rank();
  const size_t bytes = count * sizeof(float);
  const std::string at = " (count " + std::to_string(count) + ")";
  auto in = input(me, count, salt);
  std::vector<float> out(count);
  enum Kind { Sum, Max, Min };
  struct Red {
    const char* name;
    void (Group::*op)(const void*, void*, size_t, int);
    Kind kind;
  };
  for (const Red& red : {Red{"all_sum", &Group::all_sum, Sum},
                         Red{"all_max", &Group::all_max, Max},
                         Red{"all_min", &Group::all_min, Min}}) {
    std::fill(out.begin(), out.end(), -100.0f);
    (g.*red.op)(in.data(), out.data(), bytes, Float32);
    for (size_t i = 0; i < count; ++i) {
      float want = value(0, i, salt);
      for (int r = 1; r < n; ++r) {
        const float v = value(r, i, salt);
        want = red.kind == Sum   ? want + v
               : red.kind == Max ? std::max(want, v)
                                 : std::min(want, v);
      }
      if (out[i] != want) {
        return std::string(red.name) + at + " element " + std::to_string(i) +
               ": " + std::to_string(out[i]) + ", want " + std::to_string(want);
      }
    }
  }
  // In place.
  std::vector<float> io = in;
  g.all_sum(io.data(), io.data(), bytes, Float32);
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) {
      want += value(r, i, salt);
    }
    if (io[i] != want) {
      return "in-place all_sum" + at + " element " + std::to_string(i);
    }
  }
  std::vector<float> gathered(count * static_cast<size_t>(n), -100.0f);
  g.all_gather(in.data(), gathered.data(), bytes);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      if (gathered[static_cast<size_t>(r) * count + i] != value(r, i, salt)) {
        return "all_gather" + at + " from rank " + std::to_string(r) +
               " element " + std::to_string(i);
      }
    }
  }
  // sum_scatter: n chunks of count; rank `me` gets the sum of chunk `me`.
  std::vector<float> chunks(count * static_cast<size_t>(n));
  for (size_t i = 0; i < chunks.size(); ++i) {
    chunks[i] = value(me, i, salt + 1);
  }
  std::fill(out.begin(), out.end(), -100.0f);
  g.sum_scatter(chunks.data(), out.data(), bytes, Float32);
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) {
      want += value(r, static_cast<size_t>(me) * count + i, salt + 1);
    }
    if (out[i] != want) {
      return "sum_scatter" + at + " element " + std::to_string(i);
    }
  }
  const int root = n - 1;
  std::vector<float> b = me == root ? input(root, count, salt + 2)
                                    : std::vector<float>(count, -100.0f);
  g.broadcast(b.data(), bytes, root);
  if (b != input(root, count, salt + 2)) {
    return "broadcast" + at + " from rank " + std::to_string(root);
  }
  // send/recv around the ring (even ranks send first).
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<float> got(count, -100.0f);
  if (me % 2 == 0) {
    g.send(in.data(), bytes, next);
    g.recv(got.data(), bytes, prev);
  } else {
    g.recv(got.data(), bytes, prev);
    g.send(in.data(), bytes, next);
  }
  if (got != input(prev, count, salt)) {
    return "recv" + at + " from rank " + std::to_string(prev);
  }
  g.barrier();
  return "";
}

class OfiGroup : public ::testing::TestWithParam<Case> {};

// 1 element, around the mesh/ring switch (64-256 KiB per rank) and a
// little over 1 MiB (several 512 KiB ring pieces, an odd tail).
TEST_P(OfiGroup, EveryCollectiveMatchesTheReference) {
  REQUIRE_OFI();
  const Case& c = GetParam();
  std::vector<std::string> backends(static_cast<size_t>(c.n));
  std::vector<std::string> bad(static_cast<size_t>(c.n));
  auto errors = run_ranks(c, [&](int r, Group& g) {
    backends[static_cast<size_t>(r)] = g.backend_name();
    int salt = 0;
    for (size_t count :
         {size_t{1}, size_t{1000}, size_t{70001}, size_t{(1 << 18) + 3}}) {
      std::string why = check_all_ops(g, count, salt++);
      if (!why.empty()) {
        bad[static_cast<size_t>(r)] = why;
        return;
      }
    }
  });
  const std::string want =
      "ofi(" + c.provider + ")-" + (c.ring ? "ring" : "mesh");
  for (int r = 0; r < c.n; ++r) {
    const auto ur = static_cast<size_t>(r);
    EXPECT_EQ(errors[ur], "") << "rank " << r;
    EXPECT_EQ(bad[ur], "") << "rank " << r;
    EXPECT_EQ(backends[ur], want) << "rank " << r;
  }
}

TEST_P(OfiGroup, DifferentOpsAreAProtocolErrorOnEveryRank) {
  REQUIRE_OFI();
  const Case& c = GetParam();
  if (c.provider == "shm") {
    // A failed rank closes its endpoints (cancelling what is posted into
    // user memory) while its peers may still inject into it. The shm
    // provider maps an endpoint's region once per process, so with threads
    // as ranks that close unmaps what a sibling thread writes into (a
    // fault seen here about once in 10 runs); ranks in separate processes
    // each map it on their own. Faults/Mismatch.OfiShm* run this across
    // processes.
    GTEST_SKIP() << "ofi shm: covered across processes by Faults/Mismatch";
  }
  std::vector<std::string> again(static_cast<size_t>(c.n));
  auto errors = run_ranks(c, [&](int r, Group& g) {
    std::vector<float> in(4096, 1.0f), out(4096 * static_cast<size_t>(c.n));
    try {
      // Connected, in step. It can still fail here on a rank that is
      // finishing it while its peers, done, already meet the mismatch and
      // relay it (a collective may complete on one rank and fail on
      // another): the probe below applies then too.
      g.all_sum(in.data(), out.data(), 64, Float32);
      if (r == 1) {
        g.all_gather(in.data(), out.data(), in.size() * sizeof(float));
      } else {
        g.all_sum(in.data(), out.data(), in.size() * sizeof(float), Float32);
      }
    } catch (const Error&) {
      // The failed group refuses more work (with an error, not a hang).
      try {
        g.all_sum(in.data(), out.data(), 64, Float32);
      } catch (const Error& e2) {
        again[static_cast<size_t>(r)] = e2.what();
      }
      throw;
    }
  });
  for (int r = 0; r < c.n; ++r) {
    const auto ur = static_cast<size_t>(r);
    EXPECT_NE(errors[ur], "") << "rank " << r << " saw no error";
    EXPECT_NE(again[ur], "")
        << "rank " << r << " took more work after: " << errors[ur];
  }
  // A rank that sees the other op's header says so (the others may learn
  // of it as the failure relayed to them).
  bool protocol = false;
  for (const auto& e : errors) {
    protocol = protocol || (e.rfind("Protocol: ", 0) == 0 &&
                            e.find("all_gather") != std::string::npos);
  }
  EXPECT_TRUE(protocol) << errors[0] << "\n" << errors[c.n - 1];
}

INSTANTIATE_TEST_SUITE_P(
    Ofi, OfiGroup,
    ::testing::Values(Case{"TcpRxm_N2_W1", "tcp;ofi_rxm", 2, 1, false},
                      Case{"TcpRxmRing_N3_W2", "tcp;ofi_rxm", 3, 2, true},
                      Case{"TcpRxm_N3_W2_Reg", "tcp;ofi_rxm", 3, 2, false,
                           true},
                      Case{"Shm_N3_W2", "shm", 3, 2, false},
                      Case{"ShmRing_N2_W1_Reg", "shm", 2, 1, true, true}),
    [](const auto& info) { return info.param.name; });

// ---- the device matrix under JACCL_TRANSPORT=auto -------------------------

// A name in MLX's device matrix is a libfabric domain; one no provider
// offers (a macOS hostfile's rdma_en3 on Linux) is refused, naming what
// exists, instead of running without it.
TEST(OfiAuto, UnknownDeviceNameIsAConfigErrorListingTheDomains) {
  const int n = 2;
  Config::DeviceMatrix m = {{{}, {"rdma_en3"}}, {{"rdma_en3"}, {}}};
  auto errors = test::run_thread_ranks(
      n,
      [&](int) {
        Config cfg;
        cfg.set_devices(m).set_timeout(20s);
        return cfg;
      },
      [](int, Group&) {});
  for (int r = 0; r < n; ++r) {
    const std::string& e = errors[static_cast<size_t>(r)];
    EXPECT_EQ(e.rfind("Config: ", 0), 0u) << e;
    EXPECT_NE(e.find("rank " + std::to_string(r)), std::string::npos) << e;
    EXPECT_NE(e.find("names device 'rdma_en3'"), std::string::npos) << e;
    EXPECT_NE(e.find("write null for every entry"), std::string::npos) << e;
    if (ofi::built()) {
      EXPECT_NE(e.find("tcp;ofi_rxm (domain"), std::string::npos) << e;
    }
  }
}

// ---- a rank SIGKILLed mid-all_sum (real processes) ------------------------

class OfiKill : public ::testing::TestWithParam<std::string> {};

TEST_P(OfiKill, SurvivorsThrowPeerLostNamingIt) {
  REQUIRE_OFI();
  const std::string provider = GetParam();
  const int n = 3, victim = 1;
  test::TempDir dir;
  const std::string devices = dir.path() + "/devices.json";
  std::ofstream(devices) << R"([[null,"lo","lo"],["lo",null,"lo"],)"
                         << R"(["lo","lo",null]])"
                         << "\n";
  const int port = test::free_loopback_port();
  test::Job job = test::Job::start(
      test::worker_path("fault_worker"), {"loop"}, n, [&](int r) {
        auto e = test::coordinator_rank_env(r, n, port, "ofi:" + provider);
        e["JACCL_RING"] = provider == "shm" ? "1" : test::kUnsetEnv;
        e["JACCL_IFNAME"] = "127.0.0.1";
        if (provider != "shm") {
          e["JACCL_IBV_DEVICES"] = devices;
        }
        return e;
      });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(job.wait_for_output(r, "LOOPING", 90s))
        << "rank " << r << " never got going:\n"
        << test::all_output(job.wait(1s));
  }
  job.kill(victim, SIGKILL);
  auto rs = job.wait(60s);
  const std::string all = test::all_output(rs);
  EXPECT_EQ(rs[victim].term_signal, SIGKILL) << all;
  for (int r = 0; r < n; ++r) {
    if (r == victim) {
      continue;
    }
    // Exit 3 is the worker's own after PeerLostError; a sanitizer report
    // exits otherwise (or aborts).
    EXPECT_FALSE(rs[r].timed_out) << "rank " << r << " hung\n" << all;
    EXPECT_EQ(rs[r].exit_code, 3) << "rank " << r << "\n" << all;
    const std::string err = test::line_of(rs[r].output, "ERROR ");
    EXPECT_EQ(err.rfind("ERROR PeerLost PeerLostError | ", 0), 0u)
        << "rank " << r << ": " << err << "\n"
        << all;
    EXPECT_NE(err.find("rank " + std::to_string(victim)), std::string::npos)
        << err;
    EXPECT_NE(rs[r].output.find("READY rank=" + std::to_string(r) +
                                " backend=ofi(" + provider + ")"),
              std::string::npos)
        << all;
    EXPECT_NE(rs[r].output.find("DESTROYED"), std::string::npos) << all;
  }
}

INSTANTIATE_TEST_SUITE_P(Ofi, OfiKill, ::testing::Values("tcp;ofi_rxm", "shm"),
                         [](const auto& info) {
                           return std::string(info.param == "shm" ? "Shm"
                                                                  : "TcpRxm");
                         });

}  // namespace
}  // namespace jaccl::detail
