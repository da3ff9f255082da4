// Copyright 2026 the jaccl authors.
// The operating-system limits jaccl-run meets with many ranks, checked
// before they bite and named when they do: open files (two pipes per rank
// here, three per remote rank) and processes (one per rank).
#pragma once

#include <cstddef>
#include <string>

namespace jaccl::run {

// Makes sure we can hold `more` descriptors beyond those open now: raises
// the soft RLIMIT_NOFILE toward the hard one when short. Returns "" when
// there is room, else a sentence naming the limit and what to raise.
std::string ensure_fd_room(size_t more);

// For a failed pipe2/clone/socket: which limit errno `err` points to and
// what to raise (" (...)"), or "" when it points to none.
std::string limit_hint(int err);

}  // namespace jaccl::run
