// Copyright 2026 the jaccl authors.
#include "common/error.h"

#include <cstring>
#include <exception>
#include <sstream>

namespace jaccl {

const char* to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::Config:
      return "Config";
    case ErrorKind::Timeout:
      return "Timeout";
    case ErrorKind::PeerLost:
      return "PeerLost";
    case ErrorKind::Protocol:
      return "Protocol";
    case ErrorKind::Io:
      return "Io";
    case ErrorKind::Usage:
      return "Usage";
    case ErrorKind::Internal:
      return "Internal";
  }
  return "Unknown";
}

namespace detail {

std::string format_error(std::string_view what, const ErrorContext& ctx) {
  std::ostringstream out;
  out << "[jaccl] ";
  if (ctx.rank >= 0) {
    out << "rank " << ctx.rank << ": ";
  }
  out << what;
  bool paren = false;
  auto sep = [&] {
    out << (paren ? ", " : " (");
    paren = true;
  };
  if (ctx.peer >= 0) {
    sep();
    out << "peer rank " << ctx.peer;
  }
  if (!ctx.address.empty()) {
    sep();
    out << "address " << ctx.address;
  }
  if (paren) {
    out << ")";
  }
  if (ctx.sys_errno != 0) {
    out << ": " << std::strerror(ctx.sys_errno);
  }
  return out.str();
}

std::string rank_list(const std::vector<int>& ranks) {
  constexpr size_t kShown = 16;
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < kShown; ++i) {
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > kShown) {
    out += " and " + std::to_string(ranks.size() - kShown) + " more";
  }
  return out;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

namespace {
template <class E>
[[noreturn]] void throw_as(const std::string& msg) {
  throw E(msg);
}
}  // namespace

[[noreturn]] void raise(ErrorKind kind, std::string_view what,
                        const ErrorContext& ctx) {
  std::string msg = format_error(what, ctx);
  // Throw the concrete subclass so catch (PeerLostError&) works.
  switch (kind) {
    case ErrorKind::Config:
      throw_as<ConfigError>(msg);
    case ErrorKind::Timeout:
      throw_as<TimeoutError>(msg);
    case ErrorKind::PeerLost:
      throw_as<PeerLostError>(msg);
    case ErrorKind::Protocol:
      throw_as<ProtocolError>(msg);
    case ErrorKind::Io:
      throw_as<IoError>(msg);
    case ErrorKind::Usage:
      throw_as<UsageError>(msg);
    case ErrorKind::Internal:
      break;
  }
  throw Error(kind, msg);
}

[[noreturn]] void rethrow_as_error(std::exception_ptr e, ErrorKind kind,
                                   std::string_view context,
                                   const ErrorContext& ctx) {
  try {
    std::rethrow_exception(e);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& ex) {
    raise(kind, std::string(context) + ": " + ex.what(), ctx);
  } catch (...) {
    raise(kind, std::string(context) + ": unknown exception", ctx);
  }
}

}  // namespace detail
}  // namespace jaccl
