// Copyright 2026 the jaccl authors.
// What jaccl-run will start: one SpawnSpec per rank, here or through ssh,
// built from the options (and the hosts) before anything runs.
#pragma once

#include <string>
#include <vector>

#include "run/options.h"
#include "run/spawn.h"

namespace jaccl::run {

struct RankPlan {
  SpawnSpec spec;
  bool remote = false;
  std::string host;     // ssh destination (remote ranks)
  std::string display;  // the command, for --dry-run
};

struct JobPlan {
  std::vector<RankPlan> ranks;
  std::string coordinator;  // "" with --side-channel
  // The coordinator's listening socket rank 0 inherits (-1: none, rank 0
  // binds the address); ours to close once rank 0 has it.
  int coordinator_fd = -1;
  std::string summary;  // for -v
};

// Throws std::runtime_error (HostsError, ...) naming what is wrong; `code`
// is the exit status to use then (127/126: program not found).
JobPlan plan_job(const Options& opt, int& code);

}  // namespace jaccl::run
