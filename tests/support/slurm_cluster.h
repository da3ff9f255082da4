// Copyright 2026 the jaccl authors.
// A real single-node Slurm for one test: munged, slurmctld and slurmd started
// by tests/support/slurm-test-cluster.sh in a temporary directory (own munge
// key and socket, free loopback ports, a generated slurm.conf claiming more
// CPUs than the machine has) and stopped by the destructor; a watcher stops
// it as well if the test process dies first.
#pragma once

#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "support/proc.h"

namespace jaccl::test {

class SlurmCluster {
 public:
  explicit SlurmCluster(int cpus = 64);
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // Why there is no cluster ("" when it runs).
  const std::string& error() const { return error_; }
  const std::string& conf() const { return conf_; }
  const std::string& dir() const { return dir_.path(); }

  // srun ARGS... against this cluster. env is added to a clean environment
  // (no JACCL_*, SLURM_*, PMIX_*, OMPI_* of the caller's; JACCL_TIMEOUT 30).
  ProcResult srun(const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env,
                  std::chrono::milliseconds deadline) const;

 private:
  TempDir dir_;
  std::string conf_;
  std::string error_;
};

// The environment a launcher-started job gets from a test: the caller's
// JACCL_* and launcher variables removed, generous deadlines, then extra.
std::map<std::string, std::string> launcher_job_env(
    const std::map<std::string, std::string>& extra);

}  // namespace jaccl::test

// Needs root (slurmd starts jobs as their user): skips with the reason
// elsewhere. A missing slurm-wlm / munge is a failure, not a skip.
#define REQUIRE_SLURM_ROOT()                                            \
  if (::geteuid() != 0) {                                               \
    GTEST_SKIP() << "a test Slurm needs root (slurmd starts the jobs)"; \
  }                                                                     \
  ASSERT_TRUE(::jaccl::test::on_path("slurmctld") &&                    \
              ::jaccl::test::on_path("munged"))                         \
      << "slurm-wlm / munge missing: run scripts/setup.sh"
