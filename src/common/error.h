// Copyright 2026 the jaccl authors.
// The one formatting helper for errors: every throw site in jaccl goes through
// raise(), so messages read alike and always say who, where and what. A
// message names ranks through its fields and rank_ref()/ranks_ref() (see
// error_detail.h), never as typed-in numbers, so a split child can report
// job ranks.
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "common/error_detail.h"
#include "jaccl/error.h"

namespace jaccl::detail {

struct ErrorContext {
  int rank = -1;        // the rank reporting (-1: unknown / not yet known)
  int peer = -1;        // the other rank involved, if any
  std::string address;  // host:port, path, URI ... involved, if any
  int sys_errno = 0;    // errno of the failing call, if any
};

// The fields of an error about `what` in ctx: peers is ctx.peer (first) and
// every rank what names.
ErrorInfo error_info(const Detail& what, const ErrorContext& ctx = {});

// "[jaccl] rank 2: <what> (peer rank 3, address 10.0.0.1:4000): <strerror>"
std::string format_error(const ErrorInfo& info);
std::string format_error(const Detail& what, const ErrorContext& ctx = {});

[[noreturn]] void raise(ErrorKind kind, const Detail& what,
                        const ErrorContext& ctx = {});
// What raise would throw, as an exception_ptr.
std::exception_ptr error_ptr(ErrorKind kind, const Detail& what,
                             const ErrorContext& ctx = {});

// Throws info or an already formatted message as the concrete class of kind.
[[noreturn]] void throw_error(ErrorKind kind, ErrorInfo info);
[[noreturn]] void throw_error(ErrorKind kind, const std::string& message);

// info of a split child with its member numbers (rank, peer, peers) turned
// into job ranks: member m (m < names.size()) becomes names[m].
ErrorInfo renamed(ErrorInfo info, const std::vector<int>& names);
// Throws e again, of its class, with renamed() fields (a message-only
// error as it is: its text is never parsed).
[[noreturn]] void throw_renamed(const Error& e, const std::vector<int>& names);

// Throws a std::exception_ptr's exception again as a jaccl::Error: a
// jaccl::Error passes through; anything else becomes kind with its what().
[[noreturn]] void rethrow_as_error(std::exception_ptr e, ErrorKind kind,
                                   const Detail& context,
                                   const ErrorContext& ctx = {});

}  // namespace jaccl::detail
