// Copyright 2026 the jaccl authors.
// The one formatting helper for errors: every throw site in jaccl goes through
// raise(), so messages read alike and always say who, where and what.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jaccl/error.h"

namespace jaccl::detail {

struct ErrorContext {
  int rank = -1;        // the rank reporting (-1: unknown / not yet known)
  int peer = -1;        // the other rank involved, if any
  std::string address;  // host:port, path, URI ... involved, if any
  int sys_errno = 0;    // errno of the failing call, if any
};

// "[jaccl] rank 2: <what> (peer rank 3, address 10.0.0.1:4000): <strerror>"
std::string format_error(std::string_view what, const ErrorContext& ctx = {});

// "2, 5, 7": ranks for a message, at most 16 listed ("... and 4 more").
std::string rank_list(const std::vector<int>& ranks);
// "rank 3" or "ranks 2, 5, 7".
std::string ranks_phrase(const std::vector<int>& ranks);

[[noreturn]] void raise(ErrorKind kind, std::string_view what,
                        const ErrorContext& ctx = {});

// Throws an already formatted message as the concrete class of kind.
[[noreturn]] void throw_error(ErrorKind kind, const std::string& message);

// A message written by a subgroup, with its member numbers turned into job
// ranks: every "rank N" and "ranks N, M, ..." (also capitalized) whose N is
// a member (N < names.size()) becomes names[N]; "and K more" is a count and
// stays.
std::string rename_ranks(std::string_view text, const std::vector<int>& names);

// Throws a std::exception_ptr's exception again as a jaccl::Error: a
// jaccl::Error passes through; anything else becomes kind with its what().
[[noreturn]] void rethrow_as_error(std::exception_ptr e, ErrorKind kind,
                                   std::string_view context,
                                   const ErrorContext& ctx = {});

}  // namespace jaccl::detail
