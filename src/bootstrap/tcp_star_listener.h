// Copyright 2026 the jaccl authors.
// The socket rank 0 serves the TCP star on: its own, bound to
// JACCL_COORDINATOR, or the one a launcher opened before starting it and
// named in JACCL_COORDINATOR_FD. A launcher that picks a free port and lets
// rank 0 bind it later leaves the port free in between (a program's start
// can take seconds), for any other process to take; one that hands its
// listening socket over leaves no such moment, and the ranks that dial
// before rank 0 runs wait in its queue instead of retrying.
#pragma once

#include <functional>

#include "common/net.h"

namespace jaccl::detail {

// A listening socket for `addr` (non-blocking, close-on-exec), with
// `options` applied to it before it accepts: the inherited one when
// JACCL_COORDINATOR_FD names a TCP socket listening at addr, else a new one
// (listen_tcp; said at Info when the variable named something else: the
// variable reaches processes the socket does not, such as the program's own
// children). The inherited descriptor itself stays open, marked
// close-on-exec, for the process's life: each star gets a duplicate, so a
// later init in this process serves on it again. A value that is not a
// descriptor number is a Config error naming the variable. *inherited says
// which socket it is: connections the kernel completed on an inherited one
// before `options` were set on it do not have them.
Fd coordinator_listener(const SockAddr& addr, int backlog,
                        const std::function<void(int)>& options,
                        bool* inherited);

}  // namespace jaccl::detail
