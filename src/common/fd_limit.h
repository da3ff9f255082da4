// Copyright 2026 the jaccl authors.
// The open-file limit, checked before many descriptors are opened (rank 0's
// connection to every rank, jaccl-run's pipes to every rank) so that it is
// named with what to raise instead of failing half-way.
#pragma once

#include <sys/resource.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace jaccl::detail {

// Makes room for `more` descriptors, plus `slack`, beyond those open now:
// raises the soft RLIMIT_NOFILE (never past the hard one) when it is short.
// Returns "" when there is room, else "needs about N open files (for_what)
// but this process may open M (hard limit H): raise ..." for the caller to
// put its own subject before.
std::string fd_room_shortfall(size_t more, size_t slack,
                              std::string_view for_what = {});

// A limit as ulimit prints it ("unlimited" or the number).
std::string limit_text(rlim_t v);

}  // namespace jaccl::detail
