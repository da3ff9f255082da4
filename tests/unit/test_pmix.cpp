// Copyright 2026 the jaccl authors.
// The pmix:// side channel: its URI, the errors it gives outside a PMIx job,
// the strict error under srun without PMIx, and real jobs under Open MPI's
// mpirun (its PMIx server) that never call MPI: the side-channel conformance
// suite, a fence that a rank never joins, the conformance job through
// jaccl::init.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "bootstrap/pmix_channel.h"
#include "bootstrap/uri.h"
#include "jaccl/jaccl.h"
#include "support/fixtures.h"
#include "support/proc.h"
#include "support/slurm_cluster.h"

namespace jaccl::test {
namespace {

using namespace std::chrono_literals;

int count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Sets (or unsets, value nullptr) a variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
      had_ = true;
    }
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(PmixUri, ParsesAndTakesNoHostOrPath) {
  EXPECT_EQ(detail::parse_side_channel_uri("pmix://").scheme,
            detail::SideChannelScheme::Pmix);
  EXPECT_EQ(detail::parse_side_channel_uri("PMIX://").scheme,
            detail::SideChannelScheme::Pmix);
  for (const char* bad : {"pmix://host", "pmix:///path"}) {
    try {
      detail::parse_side_channel_uri(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(PmixUri, OutsideAPmixJobIsAConfigErrorSayingHowToLaunch) {
  ScopedEnv ns("PMIX_NAMESPACE", nullptr);
  EXPECT_FALSE(detail::pmix_launcher_present());
  int rank = -1, size = 0;
  EXPECT_FALSE(detail::pmix_rank_size(&rank, &size));
  try {
    detail::make_side_channel_from_uri({"pmix://", -1, 0, "", "", 1000ms});
    ADD_FAILURE() << "pmix:// was built without a PMIx launcher";
  } catch (const ConfigError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("pmix://"), std::string::npos) << what;
    if (detail::pmix_channel_built()) {
      EXPECT_NE(what.find("srun --mpi=pmix"), std::string::npos) << what;
      EXPECT_NE(what.find("PMIX_NAMESPACE"), std::string::npos) << what;
    } else {
      EXPECT_NE(what.find("libpmix-dev"), std::string::npos) << what;
    }
  }
}

TEST(PmixConfig, StrictErrorUnderSrunWithoutPmixSaysWhatToSet) {
  ScopedEnv a("JACCL_RANK", nullptr), b("JACCL_SIZE", nullptr),
      c("JACCL_COORDINATOR", nullptr), d("MLX_JACCL_COORDINATOR", nullptr),
      e("JACCL_SIDE_CHANNEL", nullptr), f("PMIX_NAMESPACE", nullptr),
      g("SLURM_PROCID", "1"), h("SLURM_NTASKS", "2"),
      i("OMPI_COMM_WORLD_RANK", nullptr), j("PMI_RANK", nullptr);
  Config cfg = Config::from_env();
  EXPECT_EQ(cfg.get_rank(), 1);
  EXPECT_EQ(cfg.get_size(), 2);
  std::string why = cfg.invalid_reason();
  EXPECT_NE(why.find("no way to bootstrap"), std::string::npos) << why;
  EXPECT_NE(why.find("under srun"), std::string::npos) << why;
  EXPECT_NE(why.find(detail::pmix_channel_built() ? "srun --mpi=pmix"
                                                  : "libpmix-dev"),
            std::string::npos)
      << why;
}

TEST(PmixConfig, NoHintOutsideSrun) {
  ScopedEnv a("JACCL_RANK", "0"), b("JACCL_SIZE", "2"),
      c("JACCL_COORDINATOR", nullptr), d("MLX_JACCL_COORDINATOR", nullptr),
      e("JACCL_SIDE_CHANNEL", nullptr), f("PMIX_NAMESPACE", nullptr),
      g("SLURM_PROCID", nullptr);
  std::string why = Config::from_env().invalid_reason();
  EXPECT_NE(why.find("no way to bootstrap"), std::string::npos) << why;
  EXPECT_EQ(why.find("srun"), std::string::npos) << why;
}

#define REQUIRE_PMIX_MPIRUN()                                        \
  ASSERT_TRUE(detail::pmix_channel_built())                          \
      << "this build has no PMIx side channel: install libpmix-dev " \
         "(scripts/setup.sh) and reconfigure";                       \
  ASSERT_TRUE(on_path("mpirun")) << "mpirun missing: run scripts/setup.sh"

ProcResult mpirun(int n, const std::vector<std::string>& xs,
                  const std::vector<std::string>& prog) {
  std::vector<std::string> args{"--allow-run-as-root", "--oversubscribe", "-n",
                                std::to_string(n)};
  for (const auto& x : xs) {
    args.push_back("-x");
    args.push_back(x);
  }
  args.insert(args.end(), prog.begin(), prog.end());
  return run("mpirun", args, launcher_job_env({}), 180s);
}

TEST(PmixUnderMpirun, SideChannelConformanceSuite) {
  REQUIRE_PMIX_MPIRUN();
  auto r = mpirun(4, {}, {worker_path("sc_pmix")});
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(
        r.output.find("sc_pmix rank " + std::to_string(rank) + " of 4 ok"),
        std::string::npos)
        << r.output;
  }
}

TEST(PmixUnderMpirun, FenceARankNeverJoinsTimesOutNamingTheChannel) {
  REQUIRE_PMIX_MPIRUN();
  TempDir dir;
  auto r = mpirun(3, {}, {worker_path("sc_pmix"), "stall", dir.path()});
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    std::string line =
        line_of(r.output, "sc_pmix rank " + std::to_string(rank) + " timeout:");
    ASSERT_NE(line, "") << r.output;
    EXPECT_NE(line.find("pmix://"), std::string::npos) << line;
    EXPECT_NE(line.find("fence"), std::string::npos) << line;
    // The call after the timeout failed at once, naming the first failure.
    std::string again = line_of(
        r.output, "sc_pmix rank " + std::to_string(rank) + " after timeout:");
    EXPECT_NE(again.find("unusable after an earlier failure"),
              std::string::npos)
        << r.output;
  }
}

TEST(PmixUnderMpirun, ConformanceJobWithoutMpiCalls) {
  REQUIRE_PMIX_MPIRUN();
  TempDir shared;
  // JACCL_LOG=debug shows where rank and size came from: PMIx, not MPI.
  auto r = mpirun(3,
                  {"JACCL_SIDE_CHANNEL=pmix://", "CONF_MATRIX=reduced",
                   "CONF_DIR=" + shared.path(), "JACCL_LOG=debug"},
                  {worker_path("conformance")});
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    std::string line =
        line_of(r.output, "SUMMARY rank=" + std::to_string(rank) + " size=3");
    ASSERT_NE(line, "") << r.output;
    EXPECT_NE(line.find("failures=0"), std::string::npos) << line;
    EXPECT_NE(r.output.find("pmix side channel: rank " + std::to_string(rank) +
                            " of 3 in namespace"),
              std::string::npos)
        << r.output;
  }
}

TEST(PmixUnderMpirun, ChosenWhenNothingIsNamed) {
  REQUIRE_PMIX_MPIRUN();
  TempDir shared;
  auto r = mpirun(
      3, {"CONF_MATRIX=reduced", "CONF_DIR=" + shared.path(), "JACCL_LOG=info"},
      {worker_path("conformance")});
  ASSERT_TRUE(r.exited_ok()) << r.describe() << "\n" << r.output;
  EXPECT_EQ(count(r.output, "SUMMARY rank="), 3) << r.output;
  EXPECT_EQ(count(r.output, "using side channel pmix://"), 3) << r.output;
}

}  // namespace
}  // namespace jaccl::test
