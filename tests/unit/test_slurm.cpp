// Copyright 2026 the jaccl authors.
// Jobs under a real Slurm: each test starts its own single-node cluster
// (munged, slurmctld, slurmd; tests/support/slurm_cluster.h) and stops it.
// Ranks are started by `srun --mpi=pmix` and bootstrap through pmix://, with
// the channel named or chosen by itself; plain `srun` without PMIx gets a
// strict error that says what to set.
#include <gtest/gtest.h>

#include <string>

#include "bootstrap/pmix_channel.h"
#include "support/fixtures.h"
#include "support/proc.h"
#include "support/slurm_cluster.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;

#define REQUIRE_PMIX_BUILT()                                         \
  ASSERT_TRUE(::jaccl::detail::pmix_channel_built())                 \
      << "this build has no PMIx side channel: install libpmix-dev " \
         "(scripts/setup.sh) and reconfigure"

class SlurmJob : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_SLURM_ROOT();
    REQUIRE_PMIX_BUILT();
    cluster_ = std::make_unique<SlurmCluster>();
    ASSERT_EQ(cluster_->error(), "");
  }
  // The conformance job (tests/workers/conformance) on n ranks.
  ProcResult conformance(const std::vector<std::string>& srun_args,
                         std::map<std::string, std::string> env) {
    TempDir shared;
    env["CONF_MATRIX"] = "reduced";
    env["CONF_DIR"] = shared.path();
    auto args = srun_args;
    args.push_back(worker_path("conformance"));
    return cluster_->srun(args, env, 240s);
  }
  std::unique_ptr<SlurmCluster> cluster_;
};

TEST_F(SlurmJob, ConformanceJobThroughPmixUnderSrun) {
  auto r = conformance({"-n", "4", "--mpi=pmix"},
                       {{"JACCL_SIDE_CHANNEL", "pmix://"}});
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    std::string line =
        line_of(r.output, "SUMMARY rank=" + std::to_string(rank) + " size=4");
    ASSERT_NE(line, "") << r.output;
    EXPECT_NE(line.find("failures=0"), std::string::npos) << line;
  }
}

TEST_F(SlurmJob, PmixIsChosenWhenNoSideChannelIsNamed) {
  auto r =
      conformance({"-n", "4", "--mpi=pmix"}, {{"JACCL_SIDE_CHANNEL", kUnsetEnv},
                                              {"JACCL_COORDINATOR", kUnsetEnv},
                                              {"JACCL_LOG", "info"}});
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  EXPECT_EQ(count_of(r.output, "SUMMARY rank="), 4) << r.output;
  EXPECT_EQ(count_of(r.output, "using side channel pmix://"), 4) << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(r.output.find("rank " + std::to_string(rank) +
                            ": no coordinator or side channel named"),
              std::string::npos)
        << r.output;
  }
}

TEST_F(SlurmJob, TheDocsBatchScriptRunsTheJob) {
  // docs/launching.md shows docs/snippets/slurm_job.sh; run as sbatch would,
  // but by bash with the allocation's task count in SLURM_NTASKS (the test
  // cluster has one node, the script asks for two), so its own srun line
  // starts the ranks and pmix:// is chosen by itself.
  TempDir shared;
  auto env = launcher_job_env({{"SLURM_CONF", cluster_->conf()},
                               {"SLURM_NTASKS", "4"},
                               {"CONF_MATRIX", "reduced"},
                               {"CONF_DIR", shared.path()}});
  auto r = run("bash",
               {std::string(JACCL_SOURCE_DIR) + "/docs/snippets/slurm_job.sh",
                worker_path("conformance")},
               env, 240s);
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    std::string line =
        line_of(r.output, "SUMMARY rank=" + std::to_string(rank) + " size=4");
    ASSERT_NE(line, "") << r.output;
    EXPECT_NE(line.find("failures=0"), std::string::npos) << line;
  }
}

// Under srun, Slurm owns the ranks (jaccl-run --elastic does not apply):
// docs/launching.md's recipe for the same behaviour, srun
// --kill-on-bad-exit=0 --wait=0, lets the other tasks finish after one
// SIGKILLs itself, and srun exits 128+9.
TEST_F(SlurmJob, ElasticRecipeLetsTheOtherTasksFinish) {
  TempDir shared;
  const std::string dying = shared / "dying";
  auto r = cluster_->srun(
      {"-n", "3", "--kill-on-bad-exit=0", "--wait=0", "/bin/sh", "-c",
       "if [ \"$SLURM_PROCID\" = 1 ]; then touch " + dying +
           "; kill -9 $$; fi; while [ ! -e " + dying +
           " ]; do sleep 0.05; done; sleep 0.3; echo \"carried on "
           "$SLURM_PROCID\""},
      {}, 120s);
  EXPECT_EQ(r.exit_code, 128 + 9) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("carried on 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("carried on 2"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("carried on 1"), std::string::npos) << r.output;
}

TEST_F(SlurmJob, SrunWithoutPmixSaysWhatToSet) {
  auto r = conformance(
      {"-n", "2", "--mpi=none"},
      {{"JACCL_SIDE_CHANNEL", kUnsetEnv}, {"JACCL_COORDINATOR", kUnsetEnv}});
  EXPECT_FALSE(r.exited_ok()) << r.output;
  EXPECT_EQ(count_of(r.output, "ERROR Config"), 2) << r.output;
  EXPECT_NE(r.output.find("srun --mpi=pmix"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("JACCL_SIDE_CHANNEL"), std::string::npos) << r.output;
}

TEST_F(SlurmJob, SideChannelConformanceUnderSrun) {
  auto r = cluster_->srun({"-n", "4", "--mpi=pmix", worker_path("sc_pmix")}, {},
                          120s);
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(
        r.output.find("sc_pmix rank " + std::to_string(rank) + " of 4 ok"),
        std::string::npos)
        << r.output;
  }
}

TEST_F(SlurmJob, FenceARankNeverJoinsTimesOutNamingTheChannel) {
  TempDir dir;
  auto r = cluster_->srun(
      {"-n", "3", "--mpi=pmix", worker_path("sc_pmix"), "stall", dir.path()},
      {}, 120s);
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    std::string line =
        line_of(r.output, "sc_pmix rank " + std::to_string(rank) + " timeout:");
    ASSERT_NE(line, "") << r.output;
    EXPECT_NE(line.find("pmix://"), std::string::npos) << line;
    EXPECT_NE(line.find("timed out after 1 s"), std::string::npos) << line;
    EXPECT_NE(line.find("PMIx namespace"), std::string::npos) << line;
  }
  EXPECT_NE(r.output.find("sc_pmix rank 2: stayed away"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace jaccl::test
