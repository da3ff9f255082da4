// Copyright 2026 the jaccl authors.
// How many TCP sockets in LISTEN state a process owns (its /proc/<pid>/fd
// against /proc/net/tcp and tcp6): tests check that set-up leaves no port
// open. No gtest, so worker programs use it too.
#pragma once

#include <sys/types.h>

namespace jaccl::test {

// pid 0: this process.
int listen_sockets_of(pid_t pid = 0);

}  // namespace jaccl::test
