// Copyright 2026 the jaccl authors.
// jaccl-run's closing line under --elastic: which ranks finished and how
// each of the others ended, ranks grouped ("ranks 0-5, 7 finished (exit 0);
// rank 6 was killed by signal 9 (SIGKILL) on node2").
#pragma once

#include <string>
#include <vector>

#include "run/spawn.h"

namespace jaccl::run {

// "rank 3", "ranks 0-2, 5, 7-9".
std::string ranks_text(const std::vector<int>& ranks);

// How one rank ended, from its wait status: "exited with code 3", "was
// killed by signal 9 (SIGKILL)"; a remote rank's shell reports a signal
// as 128+N, read back here; "on HOST" for remote ranks; a remote rank that
// never started "could not start on host HOST".
std::string rank_outcome(const Rank& r);

// "ranks 0, 2 finished (exit 0); rank 1 was killed by signal 9 (SIGKILL)".
std::string elastic_summary(const std::vector<Rank>& ranks);

}  // namespace jaccl::run
