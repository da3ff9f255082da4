// Copyright 2026 the jaccl authors.
// The built-in side channels (in-process, file://, redis://, mpi://) and the
// ZeroMQ example, against the conformance suite and real parts: a real
// directory, a real redis-server, real mpirun.
//
// Redis: JACCL_TEST_REDIS=host:port names a server (scripts/
// redis-test-server.sh start); without it the test starts its own
// redis-server. No redis-server installed is a failure, not a skip.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/file_channel.h"
#include "bootstrap/in_process.h"
#include "bootstrap/mpi_channel.h"
#include "bootstrap/redis_channel.h"
#include "bootstrap/uri.h"
#include "support/fixtures.h"
#include "support/proc.h"
#include "support/side_channel_conformance.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;
using detail::Millis;
namespace fs = std::filesystem;
namespace c = conformance;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v)
    s += x + "\n";
  return s;
}

// ---- helpers ----------------------------------------------------------------

AllGatherFactory uri_factory(const std::string& uri, const std::string& job,
                             Millis timeout) {
  return [=](int rank, int size) {
    return detail::make_side_channel_from_uri(
        {uri, rank, size, job, "", timeout});
  };
}

ThreadedTarget uri_target(const std::string& name, const std::string& uri) {
  return {name, [uri](int, Millis timeout) {
            return uri_factory(uri, unique_job("conf"), timeout);
          }};
}

// Runs `calls` verified all-gathers per rank for several groups at once
// (threads); group g uses salt 1000*g so any mixing shows.
std::vector<std::string> run_groups(const std::vector<AllGatherFactory>& groups,
                                    int size, int calls) {
  const int total = static_cast<int>(groups.size()) * size;
  auto errors = run_ranks(total, [&](int t) {
    int g = t / size, rank = t % size;
    auto fn = groups[g](rank, size);
    for (int k = 0; k < calls; ++k) {
      c::gather_and_verify(fn, rank, size, 40, 1000 * g + k,
                           "group " + std::to_string(g));
    }
  });
  std::vector<std::string> out;
  for (int t = 0; t < total; ++t) {
    if (errors[t]) {
      try {
        std::rethrow_exception(errors[t]);
      } catch (const std::exception& e) {
        out.push_back(e.what());
      }
    }
  }
  return out;
}

// A crashed run leaves its records (snapshot taken before its clean-up);
// a new run with the same job id must not read them, whatever the start
// order, and must clean up both.
void stale_leftover_test(
    const std::function<AllGatherFn(int, int)>& make,
    const std::function<std::shared_ptr<detail::RendezvousStore>()>& store) {
  constexpr int kSize = 4;
  std::vector<AllGatherFn> fns(kSize);
  auto errors = run_ranks(kSize, [&](int r) {
    fns[r] = make(r, kSize);
    c::gather_and_verify(fns[r], r, kSize, 40, 500, "old run");
  });
  for (auto& e : errors)
    ASSERT_FALSE(e);
  // What a run that crashed in call #1 leaves: epoch and call #0 records.
  auto s = store();
  auto keys = s->list();
  auto values = s->get(keys);
  ASSERT_FALSE(keys.empty());
  errors = run_ranks(kSize, [&](int r) {
    for (int k = 1; k < 3; ++k)
      c::gather_and_verify(fns[r], r, kSize, 40, 500 + k, "old run");
  });
  for (auto& e : errors)
    ASSERT_FALSE(e);
  fns.clear();  // a clean end removes everything
  EXPECT_EQ(join(s->list()), "") << "records left after a clean end";

  // Restore the "crashed" run's records, plus stale hellos.
  for (size_t i = 0; i < keys.size(); ++i) {
    if (values[i])
      s->put(keys[i], *values[i]);
  }
  for (int r = 1; r < kSize; ++r)
    s->put("hello/" + std::to_string(r), "00000000deadbeef");

  // New run, same job id, rank 0 last: ranks 1.. see the stale epoch first.
  errors = run_ranks(kSize, [&](int r) {
    if (r == 0)
      std::this_thread::sleep_for(300ms);
    auto fn = make(r, kSize);
    for (int k = 0; k < 3; ++k)
      c::gather_and_verify(fn, r, kSize, 40, 900 + k, "new run");
  });
  for (int r = 0; r < kSize; ++r) {
    if (errors[r]) {
      try {
        std::rethrow_exception(errors[r]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    }
  }
  EXPECT_EQ(join(s->list()), "")
      << "stale or current records left after the new run";
}

// ---- URIs and job ids
// ---------------------------------------------------------

TEST(SideChannelUri, ParsesEveryScheme) {
  auto t = detail::parse_side_channel_uri("tcp://10.0.0.1:4000");
  EXPECT_EQ(t.scheme, detail::SideChannelScheme::Tcp);
  EXPECT_EQ(t.host, "10.0.0.1");
  EXPECT_EQ(t.port, 4000);
  auto v6 = detail::parse_side_channel_uri("tcp://[::1]:5");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.port, 5);
  auto f = detail::parse_side_channel_uri("file:///shared/jaccl/");
  EXPECT_EQ(f.scheme, detail::SideChannelScheme::File);
  EXPECT_EQ(f.path, "/shared/jaccl");
  auto r = detail::parse_side_channel_uri("redis://kv.example");
  EXPECT_EQ(r.scheme, detail::SideChannelScheme::Redis);
  EXPECT_EQ(r.host, "kv.example");
  EXPECT_EQ(r.port, 6379);
  EXPECT_EQ(r.prefix, "jaccl");
  auto ra = detail::parse_side_channel_uri("redis://bob:s3cret@h:7000/a/b/");
  EXPECT_EQ(ra.user, "bob");
  EXPECT_EQ(ra.password, "s3cret");
  EXPECT_EQ(ra.port, 7000);
  EXPECT_EQ(ra.prefix, "a/b");
  EXPECT_EQ(detail::parse_side_channel_uri("mpi://").scheme,
            detail::SideChannelScheme::Mpi);
}

TEST(SideChannelUri, ErrorsAreConfigErrorsNamingTheUri) {
  for (const char* bad :
       {"tcp://host", "tcp://host:0", "tcp://host:99999", "tcp://:4000",
        "file://relative/dir", "file://", "redis://h:x", "mpi://host",
        "carrier-pigeon://coop", "/no/scheme"}) {
    try {
      detail::parse_side_channel_uri(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  try {
    detail::parse_side_channel_uri("zmq://x");
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("file:///"), std::string::npos)
        << "should list the supported schemes: " << e.what();
  }
}

TEST(SideChannelUri, PasswordsAreNeverShown) {
  EXPECT_EQ(detail::redact_uri("redis://bob:s3cret@h:1/p"),
            "redis://bob:***@h:1/p");
  EXPECT_EQ(detail::redact_uri("redis://:s3cret@h"), "redis://:***@h");
  try {
    detail::parse_side_channel_uri("redis://:s3cret@h:bad");
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos);
  }
}

TEST(SideChannelUri, RankOutOfRangeNamesTheUri) {
  TempDir d;
  std::string uri = "file://" + d.path();
  try {
    detail::make_side_channel_from_uri({uri, 4, 4, "j", "", 1000ms});
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(uri), std::string::npos) << e.what();
  }
}

TEST(SideChannelUri, MissingSharedDirectoryIsAConfigError) {
  try {
    detail::make_side_channel_from_uri(
        {"file:///nonexistent-jaccl-dir/x", 0, 2, "j", "", 1000ms});
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-jaccl-dir/x"),
              std::string::npos)
        << e.what();
  }
}

TEST(SideChannelJob, JobEnvThenTokenHashThenDefault) {
  EXPECT_EQ(detail::job_id("train-7", "tok"), "train-7");
  std::string a = detail::job_id("", "secret-token");
  EXPECT_EQ(a.size(), 17u);
  EXPECT_EQ(a[0], 't');
  EXPECT_EQ(a.find("secret"), std::string::npos);
  EXPECT_EQ(a, detail::job_id("", "secret-token"));
  EXPECT_NE(a, detail::job_id("", "other-token"));
  EXPECT_EQ(detail::job_id("", ""), "default");
  for (const char* bad : {"a/b", "..", ".hidden", "sp ace"}) {
    EXPECT_THROW(detail::job_id(bad, ""), ConfigError) << bad;
  }
}

// ---- conformance
// ----------------------------------------------------------------

TEST(SideChannelConformance, InProcessHub) {
  ThreadedTarget t{
      "in-process", [](int size, Millis timeout) {
        return detail::InProcessHub::create(size, timeout)->factory();
      }};
  auto failures = run_threaded_conformance(t);
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST(SideChannelConformance, SharedDirectory) {
  TempDir d;
  auto failures =
      run_threaded_conformance(uri_target("file", "file://" + d.path()));
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST(SideChannelConformance, TcpStarThroughUri) {
  ThreadedTarget t{"tcp", [](int, Millis timeout) {
                     std::string uri = "tcp://127.0.0.1:" +
                                       std::to_string(free_loopback_port());
                     return uri_factory(uri, "", timeout);
                   }};
  auto failures = run_threaded_conformance(t);
  EXPECT_TRUE(failures.empty()) << join(failures);
}

// tcp:// hands init the star's view as the default coordinator does (a
// SideChannel then reads its frames where they arrived); a file:// channel
// has none.
TEST(SideChannelUri, TcpOffersTheStarsViewAndFileNone) {
  TempDir d;
  EXPECT_FALSE(detail::make_side_channel_fns_from_uri(
                   {"file://" + d.path(), 1, 2, "j", "", 5000ms})
                   .view);
  const std::string uri =
      "tcp://127.0.0.1:" + std::to_string(free_loopback_port());
  std::vector<detail::GatherFns> fns(2);
  for (int r = 0; r < 2; ++r)
    fns[r] =
        detail::make_side_channel_fns_from_uri({uri, r, 2, "", "", 5000ms});
  EXPECT_FALSE(fns[0].view);  // rank 0 holds the result itself
  ASSERT_TRUE(fns[1].view);
  const char mine[2][4] = {{'a', 'b', 'c', 'd'}, {'w', 'x', 'y', 'z'}};
  std::string viewed;
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        if (r == 0) {
          char all[8];
          fns[0].fn(mine[0], all, 4);
          if (std::string(all, 8) != "abcdwxyz")
            errors[0] = "rank 0 gathered " + std::string(all, 8);
        } else {
          const char* at = fns[1].view(mine[1], 4);
          viewed.assign(at, 8);
        }
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks)
    t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(viewed, "abcdwxyz");
}

TEST(SideChannelConformance, Redis) {
  REQUIRE_REDIS();
  auto failures = run_threaded_conformance(uri_target("redis", redis_uri()));
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST(SideChannelConformance, MpiUnderMpirun) {
  ASSERT_TRUE(detail::mpi_channel_built())
      << "this build has no MPI side channel: install libopenmpi-dev "
         "openmpi-bin (scripts/setup.sh) and reconfigure";
  ASSERT_TRUE(on_path("mpirun")) << "mpirun not found: run scripts/setup.sh";
  auto res = run("mpirun",
                 {"--oversubscribe", "--allow-run-as-root", "-n", "4",
                  worker_path("sc_mpi")},
                 {{"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},
                  {"OMPI_MCA_rmaps_base_oversubscribe", "1"}},
                 180s);
  ASSERT_TRUE(res.exited_ok()) << res.describe() << "\n" << res.output;
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(res.output.find("sc_mpi rank " + std::to_string(r) + " of 4 ok"),
              std::string::npos)
        << res.output;
  }
}

// ---- file://
// ------------------------------------------------------------------

TEST(FileSideChannel, ConcurrentJobsInOneDirectoryDoNotMix) {
  TempDir d;
  std::string uri = "file://" + d.path();
  auto failures = run_groups(
      {uri_factory(uri, "job-a", 20000ms), uri_factory(uri, "job-b", 20000ms),
       uri_factory(uri, "job-c", 20000ms)},
      4, 10);
  EXPECT_TRUE(failures.empty()) << join(failures);
  EXPECT_TRUE(fs::is_empty(d.path())) << "job directories left behind";
}

TEST(FileSideChannel, StaleLeftoverOfSameJobIdIsNeverRead) {
  TempDir d;
  stale_leftover_test(
      [&](int r, int s) {
        return detail::make_file_channel({d.path(), "same", r, s, 20000ms});
      },
      [&] { return detail::make_file_store(d.path(), "same", -1); });
}

TEST(FileSideChannel, TimeoutNamesMissingRanksAndDirectory) {
  TempDir d;
  auto f = uri_factory("file://" + d.path(), "lonely", 300ms);
  auto errors = run_ranks(3, [&](int r) {
    if (r == 2)
      return;
    auto fn = f(r, 4);
    char in = 0, out[4];
    fn(&in, out, 1);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r]);
    try {
      std::rethrow_exception(errors[r]);
    } catch (const TimeoutError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find(d.path()), std::string::npos) << m;
      EXPECT_NE(m.find("ranks 2, 3"), std::string::npos) << m;
    }
  }
}

// ---- redis://
// -------------------------------------------------------------------

TEST(RedisSideChannel, ConcurrentJobsUnderOnePrefixDoNotMix) {
  REQUIRE_REDIS();
  std::string uri = redis_uri("mix-" + unique_job("p"));
  auto failures = run_groups(
      {uri_factory(uri, "job-a", 20000ms), uri_factory(uri, "job-b", 20000ms),
       uri_factory(uri, "job-c", 20000ms)},
      4, 10);
  EXPECT_TRUE(failures.empty()) << join(failures);
}

TEST(RedisSideChannel, StaleLeftoverOfSameJobIdIsNeverRead) {
  REQUIRE_REDIS();
  detail::RedisOptions o;
  o.host = shared_redis().host;
  o.port = shared_redis().port;
  o.prefix = "stale-" + unique_job("p");
  o.job = "same";
  o.timeout = 20000ms;
  stale_leftover_test(
      [&](int r, int s) {
        auto x = o;
        x.rank = r;
        x.size = s;
        return detail::make_redis_channel(x);
      },
      [&] { return detail::make_redis_store(o); });
}

TEST(RedisSideChannel, LostServerIsAnIoErrorNamingIt) {
  ASSERT_TRUE(detail::redis_channel_built())
      << "this build has no Redis side channel: install libhiredis-dev "
         "(scripts/setup.sh) and reconfigure";
  OwnRedis own;
  std::string why = start_redis(&own);
  ASSERT_EQ(why, "") << why;
  std::string server = "127.0.0.1:" + std::to_string(own.port);
  auto f = uri_factory("redis://" + server, "lost", 5000ms);
  std::vector<AllGatherFn> fns(2);
  auto errors = run_ranks(2, [&](int r) {
    fns[r] = f(r, 2);
    c::gather_and_verify(fns[r], r, 2, 8, 1, "before");
  });
  ASSERT_FALSE(errors[0]);
  ASSERT_FALSE(errors[1]);
  own.job->kill(0, SIGKILL);
  own.job->wait(10s);
  errors = run_ranks(
      2, [&](int r) { c::gather_and_verify(fns[r], r, 2, 8, 2, "after"); });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r]);
    try {
      std::rethrow_exception(errors[r]);
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(server), std::string::npos)
          << e.what();
    }
  }
  fns.clear();
}

TEST(RedisSideChannel, UnreachableServerIsAnIoErrorNamingIt) {
  ASSERT_TRUE(detail::redis_channel_built())
      << "this build has no Redis side channel: install libhiredis-dev "
         "(scripts/setup.sh) and reconfigure";
  int port = free_loopback_port();
  try {
    detail::make_side_channel_from_uri(
        {"redis://127.0.0.1:" + std::to_string(port), 0, 2, "x", "", 2000ms});
    ADD_FAILURE();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(port)),
              std::string::npos)
        << e.what();
  }
}

// ---- the ZeroMQ example
// -------------------------------------------------------------

std::string example_path(const std::string& name) {
  return (fs::path(JACCL_TOOLS_DIR).parent_path() / "examples" / name).string();
}

TEST(ZmqExample, SideChannelWithThreeProcesses) {
  std::string prog = example_path("zmq_side_channel");
  ASSERT_TRUE(fs::exists(prog))
      << prog << " was not built: install libzmq3-dev cppzmq-dev "
      << "(scripts/setup.sh) and reconfigure";
  int port = free_loopback_port();
  auto job = Job::start(prog, {"--side-channel-only"}, 3, [&](int r) {
    return std::map<std::string, std::string>{
        {"JACCL_RANK", std::to_string(r)},
        {"JACCL_SIZE", "3"},
        {"ZMQ_SIDE_CHANNEL", "tcp://127.0.0.1:" + std::to_string(port)}};
  });
  auto res = job.wait(60s);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(res[r].exited_ok()) << res[r].describe() << res[r].output;
    EXPECT_NE(res[r].output.find("side channel ok"), std::string::npos)
        << res[r].output;
  }
}

// The same factory through jaccl::init: a group bootstrapped by ZeroMQ.
TEST(ZmqExample, AllSumThroughInitWithThreeProcesses) {
  std::string prog = example_path("zmq_side_channel");
  ASSERT_TRUE(fs::exists(prog))
      << prog << " was not built: install libzmq3-dev cppzmq-dev "
      << "(scripts/setup.sh) and reconfigure";
  int port = free_loopback_port();
  auto job = Job::start(prog, {}, 3, [&](int r) {
    return std::map<std::string, std::string>{
        {"JACCL_RANK", std::to_string(r)},
        {"JACCL_SIZE", "3"},
        {"JACCL_COORDINATOR", kUnsetEnv},
        {"ZMQ_SIDE_CHANNEL", "tcp://127.0.0.1:" + std::to_string(port)}};
  });
  auto res = job.wait(120s);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(res[r].exited_ok()) << res[r].describe() << res[r].output;
    EXPECT_NE(res[r].output.find("all_sum ok (6)"), std::string::npos)
        << res[r].output;
  }
}

}  // namespace
}  // namespace jaccl::test
