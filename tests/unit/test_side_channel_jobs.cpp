// Copyright 2026 the jaccl authors.
// Whole jobs (bootstrap + collectives) through each built-in side channel,
// launched the way users launch them: jaccl-run --side-channel, and mpirun.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "support/fixtures.h"
#include "support/proc.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;

std::string example(const std::string& name) {
  return std::string(JACCL_EXAMPLES_DIR) + "/" + name;
}

// Runs the all-reduce example on n ranks through jaccl-run with the URI.
ProcResult run_job(const std::string& uri, int n,
                   const std::string& transport) {
  return run(tool_path("jaccl-run"),
             {"-n", std::to_string(n), "--side-channel", uri, "--env",
              "JACCL_TRANSPORT=" + transport, "--env", "JACCL_TIMEOUT=30", "--",
              example("allreduce"), "5000"},
             {}, 120s);
}

class SideChannelJob : public ::testing::TestWithParam<std::string> {};

TEST_P(SideChannelJob, FileChannelCarriesAWholeJob) {
  TempDir dir;
  auto r = run_job("file://" + dir.path(), 3, GetParam());
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  EXPECT_EQ(count_of(r.output, ": OK"), 3) << r.output;
  EXPECT_NE(r.output.find(GetParam() == "shm" ? "over shm" : "over tcp"),
            std::string::npos)
      << r.output;
  // The job's files are gone once the group is done with them.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST_P(SideChannelJob, RedisChannelCarriesAWholeJob) {
  REQUIRE_REDIS();
  auto r = run_job(redis_uri(unique_job("e2e")), 3, GetParam());
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  EXPECT_EQ(count_of(r.output, ": OK"), 3) << r.output;
}

TEST_P(SideChannelJob, MpiChannelCarriesAWholeJobUnderMpirun) {
  ASSERT_TRUE(on_path("mpirun")) << "mpirun missing: run scripts/setup.sh";
  // Rank and size come from MPI: no JACCL_RANK/JACCL_SIZE given.
  auto r = run("mpirun",
               {"--allow-run-as-root", "--oversubscribe", "-n", "3", "-x",
                "JACCL_SIDE_CHANNEL=mpi://", "-x",
                "JACCL_TRANSPORT=" + GetParam(), example("allreduce"), "5000"},
               {{"JACCL_RANK", kUnsetEnv}, {"JACCL_SIZE", kUnsetEnv}}, 120s);
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  EXPECT_EQ(count_of(r.output, ": OK"), 3) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Transports, SideChannelJob,
                         ::testing::Values("tcp", "shm"));

TEST(SideChannelJob, CoordinatorIsNotNeededWithAUri) {
  TempDir dir;
  // No JACCL_COORDINATOR reaches the ranks (jaccl-run sets none with
  // --side-channel), and the job still runs.
  auto r = run(tool_path("jaccl-run"),
               {"-n", "2", "--side-channel", "file://" + dir.path(), "--",
                example("allreduce"), "10"},
               {{"JACCL_COORDINATOR", kUnsetEnv}}, 60s);
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
}

TEST(SideChannelJob, MalformedUriIsAConfigErrorNamingIt) {
  auto r = run(tool_path("jaccl-run"),
               {"-n", "2", "--side-channel", "gopher://x", "--",
                example("allreduce"), "10"},
               {}, 60s);
  EXPECT_FALSE(r.exited_ok());
  EXPECT_NE(r.output.find("gopher://x"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace jaccl::test
