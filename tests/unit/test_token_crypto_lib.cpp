// Copyright 2026 the jaccl authors.
// libnettle is opened only when a job token needs it (common/crypto.h): real
// jobs (processes, the TCP coordinator, each data plane, jaccl-run) report
// whether their process maps it after init and one all_sum.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/crypto.h"
#include "support/proc.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kDeadline = 120s;

std::vector<ProcResult> run_job(
    int n, const std::string& transport,
    const std::map<int, std::map<std::string, std::string>>& extra) {
  const int port = free_loopback_port();
  auto job = Job::start(worker_path("crypto_probe"), {}, n, [&](int rank) {
    auto e = coordinator_rank_env(rank, n, port, transport);
    if (auto it = extra.find(rank); it != extra.end()) {
      for (const auto& [k, v] : it->second) {
        e[k] = v;
      }
    }
    return e;
  });
  return job.wait(kDeadline);
}

void expect_job(const std::vector<ProcResult>& res, const std::string& maps) {
  const int n = static_cast<int>(res.size());
  for (const ProcResult& r : res) {
    ASSERT_TRUE(r.exited_ok()) << all_output(res);
    EXPECT_EQ(line_of(r.output, "SUM="),
              "SUM=" + std::to_string(n * (n + 1) / 2))
        << all_output(res);
    EXPECT_EQ(line_of(r.output, "CRYPTO_LIB="), "CRYPTO_LIB=" + maps)
        << all_output(res);
  }
}

class TokenCryptoLib : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenCryptoLib, JobWithoutTokenNeverMapsIt) {
  expect_job(run_job(3, GetParam(), {}), "absent");
}

TEST_P(TokenCryptoLib, JobWithTokenMapsItAndConnects) {
  std::map<std::string, std::string> tok{{"JACCL_TOKEN", "s3cret"}};
  expect_job(run_job(3, GetParam(), {{0, tok}, {1, tok}, {2, tok}}), "mapped");
}

INSTANTIATE_TEST_SUITE_P(Transports, TokenCryptoLib,
                         ::testing::Values("tcp", "shm"));

// One side with a token, the other without: refused both ways, and the
// message says which side lacks it.
TEST(TokenCryptoLibMismatch, OnlyTheClientHasAToken) {
  auto res =
      run_job(2, "tcp",
              {{0, {{"JACCL_TIMEOUT", "3"}}},
               {1, {{"JACCL_TOKEN", "s3cret"}, {"JACCL_TIMEOUT", "3"}}}});
  ASSERT_EQ(res[1].exit_code, 2) << all_output(res);
  EXPECT_NE(res[1].output.find("ERROR Config"), std::string::npos)
      << all_output(res);
  EXPECT_NE(res[1].output.find("the peer has no job token (JACCL_TOKEN)"),
            std::string::npos)
      << all_output(res);
  EXPECT_NE(res[0].exit_code, 0) << all_output(res);
}

TEST(TokenCryptoLibMismatch, OnlyTheServerHasAToken) {
  auto res = run_job(2, "tcp",
                     {{0, {{"JACCL_TOKEN", "s3cret"}, {"JACCL_TIMEOUT", "3"}}},
                      {1, {{"JACCL_TIMEOUT", "3"}}}});
  ASSERT_EQ(res[1].exit_code, 2) << all_output(res);
  EXPECT_NE(res[1].output.find("expects a job token (JACCL_TOKEN)"),
            std::string::npos)
      << all_output(res);
  EXPECT_NE(res[0].exit_code, 0) << all_output(res);
}

// The path of the libnettle this process maps (after a hash loaded it).
std::string crypto_lib_path() {
  detail::sha256("x");
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find('/');
    if (at != std::string::npos &&
        line.find(detail::crypto_library_name()) != std::string::npos) {
      return line.substr(at);
    }
  }
  return "";
}

// With libnettle unreadable (/dev/null mounted over it in a private mount
// namespace), a job with a token fails with a ConfigError naming the file
// and the package; the same job without a token runs.
TEST(TokenCryptoLibMissing, JobWithTokenNamesTheLibrary) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root (a mount namespace)";
  }
  const std::string lib = crypto_lib_path();
  ASSERT_NE(lib, "");
  for (const bool token : {true, false}) {
    const int port = free_loopback_port();
    auto job = Job::start(
        "/usr/bin/unshare",
        {"-m", "/bin/sh", "-c", "mount --bind /dev/null \"$0\" && exec \"$1\"",
         lib, worker_path("crypto_probe")},
        2, [&](int rank) {
          auto e = coordinator_rank_env(rank, 2, port, "tcp");
          e["JACCL_TIMEOUT"] = "5";
          if (token) {
            e["JACCL_TOKEN"] = "s3cret";
          }
          return e;
        });
    auto res = job.wait(kDeadline);
    if (res[0].output.find("mount") != std::string::npos) {
      GTEST_SKIP() << "cannot mount here: " << res[0].output;
    }
    if (!token) {
      expect_job(res, "absent");
      continue;
    }
    for (const ProcResult& r : res) {
      EXPECT_EQ(r.exit_code, 2) << all_output(res);
      EXPECT_NE(r.output.find("ERROR Config"), std::string::npos)
          << all_output(res);
      EXPECT_NE(r.output.find(std::string("cannot load ") +
                              detail::crypto_library_name() +
                              ", which a job token (JACCL_TOKEN) needs"),
                std::string::npos)
          << all_output(res);
      EXPECT_NE(r.output.find("install libnettle8"), std::string::npos)
          << all_output(res);
    }
  }
}

// jaccl-run gives every job a fresh token unless --no-token.
TEST(TokenCryptoLibLauncher, NoTokenJobNeverMapsIt) {
  ProcResult r =
      run(tool_path("jaccl-run"),
          {"-n", "2", "--no-token", "--", worker_path("crypto_probe")},
          {{"JACCL_TOKEN", kUnsetEnv}}, kDeadline);
  ASSERT_TRUE(r.exited_ok()) << r.output;
  EXPECT_EQ(count_of(r.output, "SUM=3"), 2) << r.output;
  EXPECT_EQ(count_of(r.output, "CRYPTO_LIB=absent"), 2) << r.output;
}

TEST(TokenCryptoLibLauncher, DefaultTokenJobMapsIt) {
  ProcResult r = run(tool_path("jaccl-run"),
                     {"-n", "2", "--", worker_path("crypto_probe")},
                     {{"JACCL_TOKEN", kUnsetEnv}}, kDeadline);
  ASSERT_TRUE(r.exited_ok()) << r.output;
  EXPECT_EQ(count_of(r.output, "SUM=3"), 2) << r.output;
  EXPECT_EQ(count_of(r.output, "CRYPTO_LIB=mapped"), 2) << r.output;
}

}  // namespace
}  // namespace jaccl::test
