// Copyright 2026 the jaccl authors.
// Conformance over real processes on loopback: each case launches N copies of
// tests/workers/conformance for one (N, transport, algorithm, wires, side
// channel) combination; every rank runs the whole op x dtype x size matrix
// against its own reference and prints one SUMMARY line.
//
// Matrix: the full one (14 dtypes x {0, 1, 7, 1000, 1003, 20011} elements x
// {out of place, in place} for all_sum/max/min, all_gather, sum_scatter;
// float specials; sizes around the mesh/ring switch; unaligned buffers;
// 4 MiB + 3 for a few dtypes; broadcast from 3 roots; send/recv in a ring and
// between every ordered pair; barrier; all_to_all and all_to_allv with block
// sizes of every element size class, empty and odd blocks, one large skewed
// block, unaligned buffers, usage errors and mismatched counts) at N in
// {1, 2, 3, 4, 8}; a reduced one
// for the extra N=8 variant; 64 MiB float32 all_sum once per transport. The
// shm runs at N in {1, 2, 3, 4, 8} go once per JACCL_SHM_STRATEGY, and each
// rank's results must be bit-identical across the strategies.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/fixtures.h"
#include "support/netns.h"
#include "support/proc.h"

namespace {

using namespace std::chrono_literals;
using jaccl::test::Job;
using jaccl::test::kUnsetEnv;
using jaccl::test::ProcResult;
using jaccl::test::TempDir;

struct Launch {
  std::string name;
  int n = 2;
  std::string transport = "tcp";  // tcp | shm | auto | ofi
  std::string provider = "";      // ofi: JACCL_OFI_PROVIDER
  bool ring = false;
  int wires = 2;
  std::string matrix = "full";  // full | reduced | big
  bool side_dir = false;        // bootstrap through the worker's file factory
  std::map<std::string, std::string> extra = {};
};

void PrintTo(const Launch& l, std::ostream* os) {
  *os << l.name;
}

std::string expected_backend(const Launch& l) {
  if (l.n == 1)
    return "single";
  const std::string algo = l.ring ? "-ring" : "-mesh";
  if (l.transport == "ofi")
    return "ofi(" + l.provider + ")" + algo;
  if (l.transport != "tcp")
    return "shm";
  return "tcp" + algo;
}

// Runs the job; when rank 0 lost the race for the "free" coordinator port,
// starts again on another one. Returns the results of the last attempt.
std::vector<ProcResult> run_launch(const Launch& l, const TempDir& dir) {
  for (int attempt = 0;; ++attempt) {
    const int port = jaccl::test::free_loopback_port();
    const std::string run_dir = dir.path() + "/run" + std::to_string(attempt);
    std::filesystem::create_directories(run_dir + "/side");
    auto env = [&](int rank) {
      std::map<std::string, std::string> e = {
          {"JACCL_RANK", std::to_string(rank)},
          {"JACCL_SIZE", std::to_string(l.n)},
          {"JACCL_COORDINATOR", l.side_dir
                                    ? std::string(kUnsetEnv)
                                    : "127.0.0.1:" + std::to_string(port)},
          {"JACCL_TRANSPORT", l.transport},
          {"JACCL_RING", l.ring ? "1" : kUnsetEnv},
          {"JACCL_WIRES", std::to_string(l.wires)},
          {"JACCL_TIMEOUT", "60"},
          {"JACCL_OP_TIMEOUT", "120"},
          {"JACCL_TOKEN", kUnsetEnv},
          {"JACCL_SIDE_CHANNEL", kUnsetEnv},
          {"JACCL_LISTEN", kUnsetEnv},
          {"JACCL_IBV_DEVICES", kUnsetEnv},
          {"JACCL_SHM_BUDGET", kUnsetEnv},
          {"JACCL_OFI_PROVIDER",
           l.provider.empty() ? std::string(kUnsetEnv) : l.provider},
          {"JACCL_OFI_FORCE_REGISTER", kUnsetEnv},
          {"JACCL_SHM_STRATEGY", kUnsetEnv},
          {"CONF_MATRIX", l.matrix},
          {"CONF_DIR", run_dir},
          {"TEST_SIDE_DIR", l.side_dir ? run_dir + "/side" : kUnsetEnv},
      };
      for (const auto& [k, v] : l.extra)
        e[k] = v;
      return e;
    };
    Job job = Job::start(jaccl::test::worker_path("conformance"), {}, l.n, env);
    const auto until = std::chrono::steady_clock::now() + 200s;
    bool port_taken = false;
    while (std::chrono::steady_clock::now() < until) {
      bool all = true;
      for (int r = 0; r < l.n; ++r)
        all = all && job.finished(r);
      if (all)
        break;
      if (!l.side_dir && job.finished(0) &&
          job.output(0).find("ddress already in use") != std::string::npos) {
        port_taken = true;
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    if (port_taken && attempt < 3) {
      continue;  // ~Job kills the ranks still waiting for the coordinator
    }
    return job.wait(1s);
  }
}

class Conformance : public ::testing::TestWithParam<Launch> {};

TEST_P(Conformance, EveryRankMatchesTheReference) {
  const Launch& l = GetParam();
  TempDir dir;
  auto results = run_launch(l, dir);
  ASSERT_EQ(static_cast<int>(results.size()), l.n);
  const std::string backend = expected_backend(l);
  for (int r = 0; r < l.n; ++r) {
    const ProcResult& res = results[static_cast<size_t>(r)];
    const std::string summary = "SUMMARY rank=" + std::to_string(r) +
                                " size=" + std::to_string(l.n) +
                                " backend=" + backend + " ";
    EXPECT_TRUE(res.exited_ok())
        << "rank " << r << ": " << res.describe() << "\n"
        << res.output;
    EXPECT_NE(res.output.find(summary), std::string::npos)
        << "rank " << r << " (want '" << summary << "'):\n"
        << res.output;
    EXPECT_NE(res.output.find(" failures=0"), std::string::npos)
        << "rank " << r << ":\n"
        << res.output;
  }
}

// The shared-memory group with each strategy (JACCL_SHM_STRATEGY: auto
// measures and switches, cached, stream-stage, stream and direct force
// one): every rank matches the reference bitwise under each, and each
// rank's results are bit-identical across them (the digest of every result
// it checked).
class ShmStrategies : public ::testing::TestWithParam<int> {};

TEST_P(ShmStrategies, BitIdenticalUnderEveryStrategy) {
  const int n = GetParam();
  std::map<std::string, std::vector<std::string>> digests;
  for (const char* strategy :
       {"auto", "cached", "stream-stage", "stream", "direct"}) {
    Launch l{std::string("Shm_N") + std::to_string(n) + "_" + strategy,
             n,
             "shm",
             "",
             false,
             2,
             "full",
             false,
             {{"JACCL_SHM_STRATEGY", strategy}, {"JACCL_LOG", "info"}}};
    TempDir dir;
    auto results = run_launch(l, dir);
    ASSERT_EQ(static_cast<int>(results.size()), n);
    for (int r = 0; r < n; ++r) {
      const ProcResult& res = results[static_cast<size_t>(r)];
      const std::string summary =
          jaccl::test::line_of(res.output, "SUMMARY rank=");
      EXPECT_TRUE(res.exited_ok())
          << strategy << ", rank " << r << ": " << res.describe() << "\n"
          << res.output;
      EXPECT_NE(summary.find(" backend=" + expected_backend(l) + " "),
                std::string::npos)
          << strategy << ", rank " << r << ":\n"
          << res.output;
      EXPECT_NE(summary.find(" failures=0 "), std::string::npos)
          << strategy << ", rank " << r << ":\n"
          << res.output;
      if (r == 0 && n > 1) {  // the host's first rank logs what it chose
        EXPECT_NE(res.output.find(std::string("strategy ") + strategy + "\n"),
                  std::string::npos)
            << res.output;
      }
      const size_t at = summary.find(" digest=");
      ASSERT_NE(at, std::string::npos) << res.output;
      digests[strategy].push_back(summary.substr(at + 8));
    }
  }
  EXPECT_EQ(digests["cached"], digests["auto"]);
  EXPECT_EQ(digests["stream-stage"], digests["auto"]);
  EXPECT_EQ(digests["stream"], digests["auto"]);
  EXPECT_EQ(digests["direct"], digests["auto"]);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmStrategies,
                         ::testing::Values(1, 2, 3, 4, 8));

Launch tcp(bool ring, int n, int wires, std::string matrix) {
  return {std::string(ring ? "TcpRing" : "TcpMesh") + "_N" + std::to_string(n) +
              "_W" + std::to_string(wires) +
              (matrix == "full" ? "" : "_" + matrix),
          n,
          "tcp",
          "",
          ring,
          wires,
          matrix};
}
Launch mesh(int n, int wires, std::string matrix = "full") {
  return tcp(false, n, wires, std::move(matrix));
}
Launch ring(int n, int wires, std::string matrix = "full") {
  return tcp(true, n, wires, std::move(matrix));
}
std::vector<Launch> launches() {
  std::vector<Launch> v;
  v.push_back({"Single_Tcp", 1, "tcp"});
  // Shm at N in {1, 2, 3, 4, 8}: ShmStrategies (each strategy once).
  for (int n : {2, 3, 4}) {
    v.push_back(mesh(n, 1));
    v.push_back(mesh(n, 3));
    v.push_back(ring(n, 1));
    v.push_back(ring(n, 3));
  }
  v.push_back(mesh(8, 2));
  v.push_back(ring(8, 3));
  v.push_back(ring(8, 1, "reduced"));
  // Variants: auto picks shm on one host; tiny shm slots force chunking;
  // a job token; the user-factory side channel (no coordinator at all).
  v.push_back({"Auto_N3", 3, "auto"});
  v.push_back({"Shm_N3_Budget1MiB",
               3,
               "shm",
               "",
               false,
               2,
               "full",
               false,
               {{"JACCL_SHM_BUDGET", "1"}}});
  v.push_back({"TcpRing_N3_Token",
               3,
               "tcp",
               "",
               true,
               2,
               "reduced",
               false,
               {{"JACCL_TOKEN", "conformance-secret"}}});
  v.push_back({"Factory_TcpMesh_N3", 3, "tcp", "", false, 2, "full", true});
  v.push_back({"Factory_TcpRing_N4", 4, "tcp", "", true, 3, "reduced", true});
  v.push_back({"Factory_Shm_N4", 4, "shm", "", false, 2, "full", true});
  // 64 MiB float32 all_sum, once per transport.
  v.push_back({"Big_TcpMesh_N3", 3, "tcp", "", false, 2, "big"});
  v.push_back({"Big_TcpRing_N4_W3", 4, "tcp", "", true, 3, "big"});
  v.push_back({"Big_Shm_N4", 4, "shm", "", false, 2, "big"});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Matrix, Conformance, ::testing::ValuesIn(launches()),
                         [](const ::testing::TestParamInfo<Launch>& info) {
                           return info.param.name;
                         });

// The same matrix with every pair forced through libfabric
// (JACCL_TRANSPORT=ofi) over the two software providers, and with the
// registration path forced on (JACCL_OFI_FORCE_REGISTER=1). Kept smaller
// than the TCP matrix: every N, both algorithms, 1-3 wires, but not every
// combination.
Launch ofi(const std::string& provider, bool ring, int n, int wires,
           std::string matrix = "full", bool reg = false) {
  std::string tag = provider == "shm" ? "Shm" : "TcpRxm";
  Launch l{"Ofi" + tag + (ring ? "Ring" : "Mesh") + "_N" + std::to_string(n) +
               "_W" + std::to_string(wires) +
               (matrix == "full" ? "" : "_" + matrix) + (reg ? "_Reg" : ""),
           n,
           "ofi",
           provider,
           ring,
           wires,
           matrix};
  if (reg)
    l.extra["JACCL_OFI_FORCE_REGISTER"] = "1";
  return l;
}

std::vector<Launch> ofi_launches() {
  std::vector<Launch> v;
  for (const std::string p : {"tcp;ofi_rxm", "shm"}) {
    v.push_back(ofi(p, false, 2, 1));
    v.push_back(ofi(p, true, 2, 2));
    v.push_back(ofi(p, true, 3, 3));
    v.push_back(ofi(p, false, 3, 2, "reduced"));
    v.push_back(ofi(p, false, 4, 2));
    v.push_back(ofi(p, true, 4, 1, "reduced"));
    v.push_back(ofi(p, false, 8, 1, "reduced"));
    v.push_back(ofi(p, true, 8, 2, "reduced"));
    v.push_back(ofi(p, true, 3, 2, "reduced", /*reg=*/true));
    v.push_back(ofi(p, false, 2, 1, "full", /*reg=*/true));
  }
  v.push_back({"Single_Ofi", 1, "ofi", "tcp;ofi_rxm"});
  v.push_back(
      {"Big_OfiTcpRxmRing_N4_W2", 4, "ofi", "tcp;ofi_rxm", true, 2, "big"});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Ofi, Conformance, ::testing::ValuesIn(ofi_launches()),
                         [](const ::testing::TestParamInfo<Launch>& info) {
                           return info.param.name;
                         });

// The matrix over tcp;ofi_rxm between two network namespaces joined by a
// veth pair: even ranks here, odd ranks in the new namespace, so every
// mesh pair and ring neighbour of different parity crosses the link. The
// device matrix (JACCL_IBV_DEVICES) names each rank's end of the pair as
// its libfabric domain (the tcp provider's domains are interfaces);
// JACCL_IFNAME puts the control connections on the same link; the ranks
// bootstrap through a file side channel both namespaces can see.
class OfiNetns : public ::testing::TestWithParam<bool> {};

TEST_P(OfiNetns, TcpRxmAcrossAVethPair) {
  const bool ring = GetParam();
  jaccl::test::Netns net;
  if (!net.ok())
    GTEST_SKIP() << "cannot make a network namespace: " << net.why();
  const int n = 4;
  TempDir dir;
  auto side_of = [](int r) { return r % 2; };  // 0: here, 1: the namespace
  const std::string devices = dir.path() + "/devices.json";
  {
    std::ofstream f(devices);
    f << "[";
    for (int r = 0; r < n; ++r) {
      f << (r ? "," : "") << "[";
      for (int p = 0; p < n; ++p) {
        f << (p ? "," : "")
          << (p == r
                  ? std::string("null")
                  : "\"" + (side_of(r) ? net.ns_if() : net.host_if()) + "\"");
      }
      f << "]";
    }
    f << "]\n";
  }
  const std::string w = jaccl::test::worker_path("conformance");
  const std::vector<std::string> sh = {
      "-c",
      "if [ -n \"$CONF_NETNS\" ]; then exec ip netns exec \"$CONF_NETNS\" "
      "'" +
          w + "'; fi; exec '" + w + "'"};
  Job job = Job::start("/bin/sh", sh, n, [&](int r) {
    const bool there = side_of(r) == 1;
    return std::map<std::string, std::string>{
        {"JACCL_RANK", std::to_string(r)},
        {"JACCL_SIZE", std::to_string(n)},
        {"JACCL_COORDINATOR", kUnsetEnv},
        {"JACCL_SIDE_CHANNEL", "file://" + dir.path()},
        {"JACCL_JOB", "ofi-veth"},  // the directory is this test's own
        {"JACCL_IFNAME", there ? net.ns_ip() : net.host_ip()},
        {"JACCL_IBV_DEVICES", devices},
        {"JACCL_TRANSPORT", "ofi"},
        {"JACCL_OFI_PROVIDER", "tcp;ofi_rxm"},
        {"JACCL_OFI_FORCE_REGISTER", kUnsetEnv},
        {"JACCL_RING", ring ? "1" : kUnsetEnv},
        {"JACCL_WIRES", "2"},
        {"JACCL_TIMEOUT", "60"},
        {"JACCL_OP_TIMEOUT", "120"},
        {"JACCL_TOKEN", kUnsetEnv},
        {"JACCL_LISTEN", kUnsetEnv},
        {"JACCL_SHM_BUDGET", kUnsetEnv},
        {"JACCL_SHM_STRATEGY", kUnsetEnv},
        {"JACCL_LOG", "info"},
        {"CONF_MATRIX", "full"},
        {"CONF_DIR", dir.path()},
        {"CONF_NETNS", there ? net.name() : kUnsetEnv},
        {"TEST_SIDE_DIR", kUnsetEnv},
    };
  });
  auto rs = job.wait(240s);
  ASSERT_EQ(static_cast<int>(rs.size()), n);
  const std::string backend =
      std::string("ofi(tcp;ofi_rxm)") + (ring ? "-ring" : "-mesh");
  for (int r = 0; r < n; ++r) {
    const ProcResult& res = rs[static_cast<size_t>(r)];
    const bool there = side_of(r) == 1;
    const std::string summary = jaccl::test::line_of(res.output, "SUMMARY ");
    EXPECT_TRUE(res.exited_ok())
        << "rank " << r << ": " << res.describe() << "\n"
        << res.output;
    EXPECT_NE(summary.find("rank=" + std::to_string(r) + " size=" +
                           std::to_string(n) + " backend=" + backend + " "),
              std::string::npos)
        << "rank " << r << ":\n"
        << res.output;
    EXPECT_NE(summary.find(" failures=0"), std::string::npos)
        << "rank " << r << ":\n"
        << res.output;
    // libfabric carried the data on this rank's end of the veth pair, the
    // control connections listened there too.
    EXPECT_NE(res.output.find("ofi data plane ready (" + std::to_string(n) +
                              " ranks, provider tcp;ofi_rxm, domain " +
                              (there ? net.ns_if() : net.host_if()) + ","),
              std::string::npos)
        << "rank " << r << ":\n"
        << res.output;
    EXPECT_NE(res.output.find("listening on " +
                              (there ? net.ns_ip() : net.host_ip()) + ":"),
              std::string::npos)
        << "rank " << r << ":\n"
        << res.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Ofi, OfiNetns, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Ring" : "Mesh";
                         });

}  // namespace
