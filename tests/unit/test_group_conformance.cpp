// Copyright 2026 the jaccl authors.
// One conformance suite for every group kind, in one process with threads
// as ranks: the same checks (support/group_conformance.h) and the same
// assertions for TCP mesh, TCP ring, shared memory, hierarchical, and
// libfabric over tcp;ofi_rxm and over shm -- every op (every ReduceOp and
// the rooted ops too), every dtype, in place and out of place, usage
// errors, zero bytes.
//
// The kinds come from jaccl::init over an in-process side channel (the
// real assembly behind the public handle), except the hierarchical group:
// in one process every rank is on one host, so it is assembled from its
// parts as make_group assembles it (support/group_kinds.h). Across
// processes, hosts and side channels the same checks run in
// test_conformance and test_hier (tests/workers/conformance.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "jaccl/jaccl.h"
#include "support/fixtures.h"
#include "support/group_conformance.h"
#include "support/group_kinds.h"
#include "support/thread_ranks.h"
#include "transport/ofi/ofi_fabric.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;
using group_conformance::Ctx;

constexpr int kRanks = 3;

struct Kind {
  std::string name;
  int size = kRanks;
  std::string backend;  // what every rank's backend_name() says
  // jaccl::init kinds: rank r's configuration (the harness adds rank, size
  // and the side channel).
  std::function<Config(int)> config;
  // The hierarchical kind, assembled: rank -> host.
  std::vector<int> host_of;
  std::string ofi_provider;  // ofi kinds: skipped when it is not here
};
void PrintTo(const Kind& k, std::ostream* os) {
  *os << k.name;
}

Config base_config(const std::string& transport) {
  Config cfg;
  cfg.set_transport(transport)
      .set_interface("127.0.0.1")
      .set_timeout(60s)
      .set_op_timeout(60s);
  return cfg;
}

Kind tcp_kind(bool ring) {
  return {.name = ring ? "TcpRing" : "TcpMesh",
          .backend = ring ? "tcp-ring" : "tcp-mesh",
          .config = [ring](int) {
            Config cfg = base_config("tcp");
            cfg.set_wires(2).prefer_ring(ring);
            return cfg;
          }};
}

Kind ofi_kind(const std::string& name, const std::string& provider) {
  return {.name = name,
          .backend = "ofi(" + provider + ")-mesh",
          .config =
              [provider](int) {
                Config cfg = base_config("ofi");
                cfg.set_ofi_provider(provider).set_wires(2);
                if (provider.rfind("tcp", 0) == 0) {
                  cfg.set_devices(loopback_devices(kRanks));
                }
                return cfg;
              },
          .ofi_provider = provider};
}

std::vector<Kind> kinds() {
  return {
      tcp_kind(false),
      tcp_kind(true),
      {.name = "Shm",
       .backend = "shm",
       .config = [](int) { return base_config("shm"); }},
      // Hosts {0, 2}, {1, 4} and {3}: members not consecutive, a host of
      // one rank.
      {.name = "Hier",
       .size = 5,
       .backend = "shm+tcp",
       .host_of = {0, 1, 0, 2, 1}},
      ofi_kind("OfiTcpRxm", "tcp;ofi_rxm"),
      ofi_kind("OfiShm", "shm"),
  };
}

// Why this machine cannot run kind k ("" = it can).
std::string unavailable(const Kind& k) {
  if (k.ofi_provider.empty()) {
    return "";
  }
  if (!detail::ofi::built()) {
    return "this build has no libfabric (install libfabric-dev, reconfigure)";
  }
  std::string have;
  for (const std::string& p : detail::ofi::available_providers()) {
    if (p == k.ofi_provider) {
      return "";
    }
    have += (have.empty() ? "" : ", ") + p;
  }
  return "libfabric provider " + k.ofi_provider +
         " is not available here (fi_info offers: " + have + ")";
}

// What one rank saw.
struct Report {
  std::string error;   // "Kind: what" of an exception ("" none)
  std::string during;  // the check it came from
  std::vector<std::string> failures;
  long checks = 0;
  std::string backend;
  int rank = -1, size = -1;
};

class GroupConformance : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    const std::string why = unavailable(GetParam());
    if (!why.empty()) {
      GTEST_SKIP() << GetParam().name << ": " << why;
    }
  }

  // check(ctx) on every rank of a fresh group of this kind; then the same
  // assertions for every kind.
  void run(const std::function<void(Ctx&)>& check) {
    const Kind& k = GetParam();
    TempDir dir;
    std::vector<Report> reps(static_cast<size_t>(k.size));
    auto body = [&](int r, Group& g) {
      Report& rep = reps[static_cast<size_t>(r)];
      rep.backend = g.backend_name();
      rep.rank = g.rank();
      rep.size = g.size();
      Ctx c{.g = g,
            .rank = g.rank(),
            .size = g.size(),
            .dir = dir.path(),
            .on_fail = [&rep](const std::string& f) {
              rep.failures.push_back(f);
            }};
      try {
        check(c);
      } catch (...) {
        rep.during = c.current;
        rep.checks = c.checks;
        throw;
      }
      rep.checks = c.checks;
    };
    std::vector<std::string> errors;
    if (k.host_of.empty()) {
      errors = run_thread_ranks(k.size, k.config, body);
    } else {
      errors = run_on_groups(hier_groups(k.host_of), body);
    }
    for (int r = 0; r < k.size; ++r) {
      const Report& rep = reps[static_cast<size_t>(r)];
      const std::string who = k.name + " rank " + std::to_string(r);
      EXPECT_EQ(errors[static_cast<size_t>(r)], "")
          << who << " during " << rep.during;
      for (const std::string& f : rep.failures) {
        ADD_FAILURE() << who << ": " << f;
      }
      EXPECT_GT(rep.checks, 0) << who << " checked nothing";
      EXPECT_EQ(rep.backend, k.backend) << who;
      EXPECT_EQ(rep.rank, r) << who;
      EXPECT_EQ(rep.size, k.size) << who;
    }
  }
};

// Element counts: empty, one, odd, a few pieces.
const std::vector<size_t> kCounts = {0, 1, 7, 1003};

TEST_P(GroupConformance, ReductionsOfEveryDtypeInAndOutOfPlace) {
  run([](Ctx& c) {
    group_conformance::check_gen_period(c);
    group_conformance::run_reductions(c, kCounts);
  });
}

TEST_P(GroupConformance, AllReduceWithEveryOpOfEveryDtypeInAndOutOfPlace) {
  run([](Ctx& c) { group_conformance::run_all_reduce_ops(c, kCounts); });
}

TEST_P(GroupConformance, ReduceGatherScatterFromEveryRoot) {
  run([](Ctx& c) { group_conformance::run_rooted(c, {0, 1, 1003}); });
}

TEST_P(GroupConformance, AllGatherAndSumScatterOfEveryDtypeInAndOutOfPlace) {
  run([](Ctx& c) { group_conformance::run_gather_scatter(c, kCounts); });
}

TEST_P(GroupConformance, MeshRingSwitchOddAddressesAgreementAndFourMiB) {
  run([](Ctx& c) {
    group_conformance::run_edges(c);
    group_conformance::run_big(c, false);
  });
}

TEST_P(GroupConformance, BroadcastSendRecvAndBarrier) {
  run([](Ctx& c) {
    group_conformance::run_point_to_point(c, {0, 1, 7, 1003, 70001}, {1, 1003});
    group_conformance::check_barrier(c, 3);
  });
}

TEST_P(GroupConformance, AllToAllAndAllToAllv) {
  run([](Ctx& c) { group_conformance::run_all_to_all(c, false); });
}

TEST_P(GroupConformance, UsageErrorsMoveNoBytesAndLeaveTheGroupWorking) {
  run([](Ctx& c) { group_conformance::run_usage_errors(c); });
}

TEST_P(GroupConformance, ZeroByteOpsReturnAtOnceWithoutThePeers) {
  run([](Ctx& c) { group_conformance::run_zero_bytes(c); });
}

INSTANTIATE_TEST_SUITE_P(Kinds, GroupConformance, ::testing::ValuesIn(kinds()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace jaccl::test
