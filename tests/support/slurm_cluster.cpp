// Copyright 2026 the jaccl authors.
#include "support/slurm_cluster.h"

#include <unistd.h>

using namespace std::chrono_literals;

namespace jaccl::test {

namespace {

std::string script() {
  return std::string(JACCL_SOURCE_DIR) + "/tests/support/slurm-test-cluster.sh";
}

}  // namespace

std::map<std::string, std::string> launcher_job_env(
    const std::map<std::string, std::string>& extra) {
  auto e = clean_rank_env(0, 1);
  e["JACCL_RANK"] = kUnsetEnv;
  e["JACCL_SIZE"] = kUnsetEnv;
  for (const char* k :
       {"MLX_RANK", "MLX_WORLD_SIZE", "MLX_JACCL_COORDINATOR", "SLURM_JOB_ID",
        "SLURM_JOBID", "SLURM_STEP_ID", "SLURM_PROCID", "SLURM_NTASKS",
        "SLURM_NNODES", "SLURM_NODELIST", "SLURM_CONF", "PMIX_NAMESPACE",
        "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
        "PMI_SIZE"}) {
    e[k] = kUnsetEnv;
  }
  for (const auto& [k, v] : extra) {
    e[k] = v;
  }
  return e;
}

SlurmCluster::SlurmCluster(int cpus) {
  auto r = run(
      script(),
      {"start", dir_.path(), std::to_string(cpus), std::to_string(::getpid())},
      {{"SLURM_CONF", kUnsetEnv}}, 120s);
  if (!r.exited_ok()) {
    error_ =
        "could not start a test Slurm (" + r.describe() + "):\n" + r.output;
    return;
  }
  conf_ = dir_.path() + "/slurm.conf";
}

SlurmCluster::~SlurmCluster() {
  run(script(), {"stop", dir_.path()}, {}, 60s);
}

ProcResult SlurmCluster::srun(const std::vector<std::string>& args,
                              const std::map<std::string, std::string>& env,
                              std::chrono::milliseconds deadline) const {
  auto e = launcher_job_env(env);
  e["SLURM_CONF"] = conf_;
  return run("srun", args, e, deadline);
}

}  // namespace jaccl::test
