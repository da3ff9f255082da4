// Copyright 2026 the jaccl authors.
// Growing a group (Group::grow, Config::set_join / JACCL_JOIN): the kv://
// store, members and newcomers as threads over a factory, then real
// processes (tests/workers/elastic_worker): kill a rank (rank 0 too, two at
// once), shrink, start replacements, grow back and check every op, on TCP,
// shm, ofi (tcp;ofi_rxm) and the hierarchical plane (two hosts of IPC
// namespaces), over kv:// and file://; newcomers of the wrong size or a stale
// generation fail at once, saying so. Deadlines only bound hangs.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/in_process.h"
#include "bootstrap/kv_store.h"
#include "jaccl/error.h"
#include "jaccl/jaccl.h"
#include "support/fixtures.h"
#include "support/ipc_hosts.h"
#include "support/proc.h"
#include "support/rank_list.h"

namespace {

using namespace std::chrono_literals;
using jaccl::test::all_output;
using jaccl::test::has_rank;
using jaccl::test::Job;
using jaccl::test::line_of;
using jaccl::test::rank_list;
using Env = std::map<std::string, std::string>;

// ---- the kv:// store
// ----------------------------------------------------------

TEST(KvStore, PutGetListRemoveAcrossNamespaces) {
  jaccl::detail::KvServer server("127.0.0.1:0", "secret");
  auto a = jaccl::detail::make_kv_store(server.address(), "job.a", "secret",
                                        5000ms, 0);
  auto b = jaccl::detail::make_kv_store(server.address(), "job.b", "secret",
                                        5000ms, 1);
  a->put("x", "1");
  a->put("y", std::string(100000, 'z'));
  b->put("x", "2");
  auto got = a->get({"x", "y", "missing"});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].value_or("?"), "1");
  EXPECT_EQ(got[1].value_or("?").size(), 100000u);
  EXPECT_FALSE(got[2].has_value());
  EXPECT_EQ(b->get({"x"})[0].value_or("?"), "2");
  EXPECT_EQ(a->list(), (std::vector<std::string>{"x", "y"}));
  a->remove({"x", "y"});
  EXPECT_TRUE(a->list().empty());
  EXPECT_EQ(server.keys(), 1u);
}

TEST(KvStore, AnotherTokenIsRefusedNamingTheStore) {
  jaccl::detail::KvServer server("127.0.0.1:0", "secret");
  try {
    jaccl::detail::make_kv_store(server.address(), "job", "other", 5000ms, 2);
    FAIL() << "a client with another token was admitted";
  } catch (const jaccl::Error& e) {
    EXPECT_NE(std::string(e.what()).find(server.address()), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("another job"), std::string::npos)
        << e.what();
  }
}

// ---- members and newcomers as threads, meeting through a factory ----------

std::shared_ptr<jaccl::Group> member_group(
    const std::shared_ptr<jaccl::detail::InProcessHub>& hub, int rank,
    int size) {
  jaccl::Config cfg;
  cfg.set_rank(rank).set_size(size).set_transport("tcp").set_timeout(10s);
  cfg.set_all_gather(hub->for_rank(rank));
  return jaccl::init(cfg, true);
}

TEST(GrowThreads, NewcomerTakesTheNextRankAndOpsAreRight) {
  const int n = 3, grown_n = 4;
  auto hub = jaccl::detail::InProcessHub::create(n, 10000ms);
  auto grow_hub = jaccl::detail::InProcessHub::create(grown_n, 10000ms);
  std::vector<int> sums(grown_n, -1), gens(grown_n, -1);
  std::vector<std::string> errors(grown_n);
  std::vector<std::thread> ts;
  for (int r = 0; r < grown_n; ++r) {
    ts.emplace_back([&, r] {
      try {
        std::shared_ptr<jaccl::Group> g;
        if (r < n) {
          auto m = member_group(hub, r, n);
          g = m->grow(grown_n, grow_hub->factory());
        } else {
          jaccl::Config cfg;
          cfg.set_rank(r).set_size(grown_n).set_transport("tcp");
          cfg.set_timeout(10s).set_join(1);
          cfg.set_all_gather_factory(grow_hub->factory());
          g = jaccl::init(cfg, true);
        }
        int x = g->rank() + 1;
        g->all_sum(&x, &sums[static_cast<size_t>(r)], sizeof(int),
                   jaccl::Int32);
        gens[static_cast<size_t>(r)] = g->generation();
      } catch (const jaccl::Error& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ts)
    t.join();
  for (int r = 0; r < grown_n; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(sums[static_cast<size_t>(r)], 10) << "rank " << r;
    EXPECT_EQ(gens[static_cast<size_t>(r)], 1) << "rank " << r;
  }
}

TEST(GrowThreads, NewcomerOfAnotherGenerationIsNamedOnEveryRank) {
  const int n = 2, grown_n = 3;
  auto hub = jaccl::detail::InProcessHub::create(n, 10000ms);
  auto grow_hub = jaccl::detail::InProcessHub::create(grown_n, 10000ms);
  std::vector<std::string> errors(grown_n);
  std::vector<std::thread> ts;
  for (int r = 0; r < grown_n; ++r) {
    ts.emplace_back([&, r] {
      try {
        if (r < n) {
          member_group(hub, r, n)->grow(grown_n, grow_hub->factory());
        } else {
          jaccl::Config cfg;
          cfg.set_rank(r).set_size(grown_n).set_transport("tcp");
          cfg.set_timeout(10s).set_join(5);  // the group is at 0
          cfg.set_all_gather_factory(grow_hub->factory());
          jaccl::init(cfg, true);
        }
        errors[static_cast<size_t>(r)] = "no error";
      } catch (const jaccl::Error& e) {
        errors[static_cast<size_t>(r)] =
            std::string(jaccl::to_string(e.kind())) + " " + e.what();
      }
    });
  }
  for (auto& t : ts)
    t.join();
  for (int r = 0; r < grown_n; ++r) {
    const std::string& e = errors[static_cast<size_t>(r)];
    EXPECT_EQ(e.rfind("Config ", 0), 0u) << "rank " << r << ": " << e;
    EXPECT_NE(e.find("rank 2 came for generation 5"), std::string::npos)
        << "rank " << r << ": " << e;
  }
}

TEST(GrowThreads, GrowWithFailedRanksOrNoChannelIsAUsageError) {
  auto hub = jaccl::detail::InProcessHub::create(1, 10000ms);
  auto g = member_group(hub, 0, 1);
  try {
    g->grow(1);
    FAIL() << "grow to the same size returned";
  } catch (const jaccl::Error& e) {
    EXPECT_EQ(e.kind(), jaccl::ErrorKind::Usage) << e.what();
  }
  try {
    g->grow(2);  // no factory, no grow channel
    FAIL() << "grow without a channel returned";
  } catch (const jaccl::Error& e) {
    EXPECT_EQ(e.kind(), jaccl::ErrorKind::Config) << e.what();
    EXPECT_NE(std::string(e.what()).find("JACCL_GROW_CHANNEL"),
              std::string::npos)
        << e.what();
  }
}

// ---- real processes
// -----------------------------------------------------------

std::string worker() {
  return jaccl::test::worker_path("elastic_worker");
}

struct GrowCase {
  std::string plane;    // tcp, shm, ofi, hier
  std::string channel;  // kv, file
  std::vector<int> victims;
};

// The start of a plane's backend name, as the GROWN line shows it.
std::string backend_of(const std::string& plane) {
  return plane == "hier" ? "shm+" : plane;
}

void PrintTo(const GrowCase& c, std::ostream* os) {
  *os << c.plane << " " << c.channel << " kill " << rank_list(c.victims);
}

class ElasticGrow : public ::testing::TestWithParam<GrowCase> {};

TEST_P(ElasticGrow, ReplacementsJoinAndEveryOpIsRight) {
  const GrowCase& c = GetParam();
  const int n = 4;
  // hier: ranks 0,1 on one host, 2,3 on the other; a replacement starts on
  // the host its victim was on, so the grown group spans both again.
  std::unique_ptr<jaccl::test::IpcHosts> hosts;
  if (c.plane == "hier") {
    hosts = std::make_unique<jaccl::test::IpcHosts>(2);
    if (!hosts->error().empty())
      GTEST_SKIP() << hosts->error();
  }
  auto host_of = [&](int r) { return r < n / 2 ? 0 : 1; };
  auto launch = [&](int count, const std::function<int(int)>& host,
                    const std::function<Env(int)>& env) {
    if (!hosts)
      return Job::start(worker(), {"grow"}, count, env);
    std::vector<int> on;
    for (int i = 0; i < count; ++i)
      on.push_back(host(i));
    return jaccl::test::start_on_hosts(*hosts, on, worker(), {"grow"}, env);
  };
  const int port = jaccl::test::free_loopback_port();
  const std::string transport = c.plane == "tcp"   ? "tcp"
                                : c.plane == "ofi" ? "ofi:tcp;ofi_rxm"
                                                   : "auto";
  jaccl::test::TempDir dir;
  std::unique_ptr<jaccl::detail::KvServer> kv;
  std::string channel = "file://" + dir.path();
  if (c.channel == "kv") {
    kv = std::make_unique<jaccl::detail::KvServer>("127.0.0.1:0", "");
    channel = "kv://" + kv->address();
  }
  const std::string job_id = jaccl::test::unique_job("grow");
  auto common = [&](Env e) {
    e["JACCL_TIMEOUT"] = "20";
    e["JACCL_OP_TIMEOUT"] = "60";
    e["JACCL_GROW_CHANNEL"] = channel;
    e["JACCL_JOB"] = job_id;
    // As coordinator_rank_env spells "ofi:<provider>", for the newcomers.
    const bool ofi = transport.rfind("ofi:", 0) == 0;
    e["JACCL_TRANSPORT"] = ofi ? "ofi" : transport;
    if (ofi)
      e["JACCL_OFI_PROVIDER"] = transport.substr(4);
    return e;
  };
  Job job = launch(n, host_of, [&](int r) {
    Env e = common(jaccl::test::coordinator_rank_env(r, n, port, transport));
    e["ELASTIC_VICTIMS"] = rank_list(c.victims);
    e["ELASTIC_SEED"] = "7";
    return e;
  });
  int survivor = 0;
  while (std::find(c.victims.begin(), c.victims.end(), survivor) !=
         c.victims.end())
    ++survivor;
  ASSERT_TRUE(job.wait_for_output(survivor, "SHRUNK", 60s))
      << job.output(survivor);
  // A newcomer: no rank, no size (one replacement), generation 1.
  auto newcomer = [&](int) {
    Env e = common(jaccl::test::clean_rank_env(0, 1));
    e["JACCL_RANK"] = jaccl::test::kUnsetEnv;
    e["JACCL_SIZE"] = jaccl::test::kUnsetEnv;
    e["JACCL_JOIN"] = "1";
    return e;
  };
  // One started for another size fails at once, saying why.
  {
    Job bad = launch(1, host_of, [&](int r) {
      Env e = newcomer(r);
      e["JACCL_SIZE"] = "7";
      return e;
    });
    auto rs = bad.wait(60s);
    EXPECT_EQ(rs[0].exit_code, 3) << rs[0].output;
    EXPECT_NE(rs[0].output.find("UNEXPECTED Config | "), std::string::npos)
        << rs[0].output;
    EXPECT_NE(rs[0].output.find("started for a group of 7 ranks"),
              std::string::npos)
        << rs[0].output;
    EXPECT_NE(rs[0].output.find("members grow to 4"), std::string::npos)
        << rs[0].output;
  }
  const int k = static_cast<int>(c.victims.size());
  auto victim_host = [&](int i) {
    return host_of(c.victims[static_cast<size_t>(i)]);
  };
  Job joiners = launch(k, victim_host, [&](int i) {
    Env e = newcomer(i);
    if (k > 1) {  // several newcomers name their ranks
      e["JACCL_RANK"] = std::to_string(n - k + i);
      e["JACCL_SIZE"] = std::to_string(n);
    }
    return e;
  });
  auto rs = job.wait(120s);
  auto js = joiners.wait(60s);
  const std::string all = all_output(rs) + all_output(js);
  for (int r = 0; r < n; ++r) {
    if (std::find(c.victims.begin(), c.victims.end(), r) != c.victims.end()) {
      EXPECT_EQ(rs[r].term_signal, SIGKILL) << "rank " << r << "\n" << all;
      continue;
    }
    EXPECT_TRUE(rs[r].exited_ok()) << "rank " << r << "\n" << all;
    const std::string g = line_of(rs[r].output, "GROWN ");
    EXPECT_EQ(g.rfind("GROWN 4 ", 0), 0u) << g << "\n" << all;
    EXPECT_NE(g.find(" gen=1 "), std::string::npos) << g;
    EXPECT_NE(g.find(" members=0,1,2,3"), std::string::npos) << g;
  }
  for (int i = 0; i < k; ++i) {
    EXPECT_TRUE(js[i].exited_ok()) << "newcomer " << i << "\n" << all;
    const std::string g = line_of(js[i].output, "GROWN ");
    EXPECT_EQ(g.rfind("GROWN 4 ", 0), 0u) << g << "\n" << all;
    EXPECT_NE(g.find(" rank=" + std::to_string(n - k + i)), std::string::npos)
        << g;
  }
  // The grown group is on the plane, members and newcomers alike.
  const std::string on = "GROWN 4 " + backend_of(c.plane);
  for (int r = 0; r < n; ++r) {
    if (rs[r].exited_ok()) {
      EXPECT_EQ(line_of(rs[r].output, "GROWN ").rfind(on, 0), 0u) << all;
    }
  }
  for (int i = 0; i < k; ++i) {
    EXPECT_EQ(line_of(js[i].output, "GROWN ").rfind(on, 0), 0u) << all;
  }
  // A newcomer for the generation that is done: stale, said at once.
  Job stale = launch(1, host_of, newcomer);
  auto ss = stale.wait(60s);
  EXPECT_EQ(ss[0].exit_code, 3) << ss[0].output;
  EXPECT_NE(ss[0].output.find("a stale joiner"), std::string::npos)
      << ss[0].output;
  EXPECT_NE(ss[0].output.find("JACCL_JOIN=2"), std::string::npos)
      << ss[0].output;
}

INSTANTIATE_TEST_SUITE_P(Planes, ElasticGrow,
                         ::testing::Values(GrowCase{"tcp", "kv", {0}},
                                           GrowCase{"shm", "kv", {2}},
                                           GrowCase{"shm", "file", {0}},
                                           GrowCase{"tcp", "file", {0, 2}},
                                           GrowCase{"ofi", "kv", {1}},
                                           GrowCase{"hier", "kv", {0}},
                                           GrowCase{"hier", "file", {1, 2}}),
                         [](const auto& info) {
                           const GrowCase& c = info.param;
                           std::string s = c.plane + "_" + c.channel + "_kill";
                           for (int v : c.victims)
                             s += std::to_string(v);
                           return s;
                         });

// ---- jaccl-run --elastic --restart ----------------------------------------

// The environment of a jaccl-run under test: nothing of ours leaks in.
Env launcher_env(const Env& extra) {
  Env e = jaccl::test::clean_rank_env(0, 1);
  e["JACCL_RANK"] = jaccl::test::kUnsetEnv;
  e["JACCL_SIZE"] = jaccl::test::kUnsetEnv;
  e["JACCL_TIMEOUT"] = "20";
  e["JACCL_OP_TIMEOUT"] = "60";
  for (const auto& [k, v] : extra)
    e[k] = v;
  return e;
}

std::vector<std::string> launch_args(int n,
                                     const std::vector<std::string>& opts,
                                     const std::string& mode) {
  std::vector<std::string> a{"-n", std::to_string(n)};
  a.insert(a.end(), opts.begin(), opts.end());
  a.push_back("--");
  a.push_back(worker());
  a.push_back(mode);
  return a;
}

class ElasticRestart : public ::testing::TestWithParam<std::string> {};

// Rank 0 (the TCP coordinator of the job's init) dies; jaccl-run starts a
// replacement, which joins the survivors' grow through the store jaccl-run
// hosts; the job ends well.
TEST_P(ElasticRestart, ReplacementOfRankZeroJoinsTheGrow) {
  const std::string transport = GetParam();
  auto r =
      jaccl::test::run(jaccl::test::tool_path("jaccl-run"),
                       launch_args(4, {"--elastic", "--restart", "1"}, "grow"),
                       launcher_env({{"ELASTIC_VICTIMS", "0"},
                                     {"ELASTIC_SEED", "5"},
                                     {"JACCL_TRANSPORT", transport}}),
                       120s);
  EXPECT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  EXPECT_EQ(jaccl::test::count_of(r.output, "GROWN 4 "), 4) << r.output;
  EXPECT_EQ(jaccl::test::count_of(r.output, " gen=1 "), 4) << r.output;
  EXPECT_NE(r.output.find("--restart: replacement 1 of 1"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("joins grow generation 1"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("ranks 0-3 finished (exit 0); 1 replacement(s) "
                          "started (--restart)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Planes, ElasticRestart,
                         ::testing::Values("tcp", "auto"),
                         [](const auto& info) { return info.param; });

TEST(ElasticRestartOptions, RestartNeedsElastic) {
  auto r = jaccl::test::run(jaccl::test::tool_path("jaccl-run"),
                            launch_args(2, {"--restart", "1"}, "grow"),
                            launcher_env({}), 30s);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--elastic"), std::string::npos) << r.output;
}

// The soak: 4 ranks, 50 kill-restart-grow cycles under jaccl-run; ranks 0
// and 1 live through all of them, and their descriptors and RSS stay flat
// (the worker checks; ELASTIC_RSS_SLACK_KIB bounds the RSS).
TEST(ElasticSoak, FiftyKillRestartGrowCycles) {
  const int cycles = 50;
  auto r = jaccl::test::run(
      jaccl::test::tool_path("jaccl-run"),
      launch_args(4, {"--elastic", "--restart", std::to_string(cycles)},
                  "soak"),
      launcher_env({{"ELASTIC_CYCLES", std::to_string(cycles)},
                    {"ELASTIC_RSS_SLACK_KIB", "8192"},
                    {"JACCL_HEARTBEAT_TIMEOUT", "2"}}),
      240s);
  EXPECT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  EXPECT_EQ(jaccl::test::count_of(r.output, "SOAK_END gen=50 "), 4) << r.output;
  EXPECT_EQ(jaccl::test::count_of(r.output, "] SOAK "), 2) << r.output;
  EXPECT_NE(r.output.find(std::to_string(cycles) +
                          " replacement(s) started (--restart)"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;
}

}  // namespace
