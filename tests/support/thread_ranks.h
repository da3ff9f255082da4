// Copyright 2026 the jaccl authors.
// Threads as ranks: one thread per rank, each with its own jaccl::init over
// an in-process side channel (bootstrap/in_process.h), for group-level
// tests small enough for the sanitizer runs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jaccl/jaccl.h"

namespace jaccl::test {

// config(r): rank r's configuration; the harness sets its rank, the size n
// and the in-process all-gather factory. body(r, group) runs on rank r's
// thread. Returns each rank's error ("Kind: what"; "" = none). The groups
// are destroyed only once every rank is done: libfabric's shm provider maps
// an endpoint's region once per process, so closing one rank's endpoint
// while a sibling thread still injects into it faults (ranks in separate
// processes, every real job, each map it on their own).
std::vector<std::string> run_thread_ranks(
    int n, const std::function<Config(int)>& config,
    const std::function<void(int, Group&)>& body);

// body(r, *groups[r]) on one thread per rank of groups already made (by
// hand: support/group_kinds.h); each rank's error as above.
std::vector<std::string> run_on_groups(
    const std::vector<std::shared_ptr<Group>>& groups,
    const std::function<void(int, Group&)>& body);

}  // namespace jaccl::test
