// Copyright 2026 the jaccl authors.
#include "common/error.h"

#include <cstring>
#include <exception>
#include <memory>
#include <utility>

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
    case ErrorKind::Aborted:
      return "Aborted";
    case ErrorKind::Revoked:
      return "Revoked";
    case ErrorKind::Excluded:
      return "Excluded";
    case ErrorKind::Internal:
      return "Internal";
  }
  return "Unknown";
}

namespace {

std::shared_ptr<const ErrorInfo> text_only(const std::string& what) {
  auto info = std::make_shared<ErrorInfo>();
  info->detail = detail::escape_detail(what);
  return info;
}

// Throws the concrete subclass of kind, so catch (PeerLostError&) works.
template <class Arg>
[[noreturn]] void throw_of_kind(ErrorKind kind, Arg&& arg) {
  switch (kind) {
    case ErrorKind::Config:
      throw ConfigError(std::forward<Arg>(arg));
    case ErrorKind::Timeout:
      throw TimeoutError(std::forward<Arg>(arg));
    case ErrorKind::PeerLost:
      throw PeerLostError(std::forward<Arg>(arg));
    case ErrorKind::Protocol:
      throw ProtocolError(std::forward<Arg>(arg));
    case ErrorKind::Io:
      throw IoError(std::forward<Arg>(arg));
    case ErrorKind::Usage:
      throw UsageError(std::forward<Arg>(arg));
    case ErrorKind::Aborted:
      throw AbortedError(std::forward<Arg>(arg));
    case ErrorKind::Revoked:
      throw RevokedError(std::forward<Arg>(arg));
    case ErrorKind::Excluded:
      throw ExcludedError(std::forward<Arg>(arg));
    case ErrorKind::Internal:
      break;
  }
  throw Error(kind, std::forward<Arg>(arg));
}

template <class Arg>
std::exception_ptr ptr_of_kind(ErrorKind kind, Arg&& arg) {
  try {
    throw_of_kind(kind, std::forward<Arg>(arg));
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace

Error::Error(ErrorKind kind, const std::string& what)
    : std::runtime_error(what),
      kind_(kind),
      structured_(false),
      info_(text_only(what)) {}

Error::Error(ErrorKind kind, ErrorInfo info)
    : std::runtime_error(detail::format_error(info)),
      kind_(kind),
      structured_(true),
      info_(std::make_shared<const ErrorInfo>(std::move(info))) {}

std::string Error::detail() const {
  return detail::render_detail(info_->detail, info_->peers);
}

std::exception_ptr make_error(ErrorKind kind, ErrorInfo info) {
  return ptr_of_kind(kind, std::move(info));
}

std::exception_ptr with_context(const Error& e, const std::string& context) {
  if (!e.structured()) {
    return ptr_of_kind(e.kind(), context + e.what());
  }
  ErrorInfo info = e.info();
  info.context = context + info.context;
  return make_error(e.kind(), std::move(info));
}

namespace detail {

ErrorInfo error_info(const Detail& what, const ErrorContext& ctx) {
  Detail d;
  if (ctx.peer >= 0) {
    d.mention(ctx.peer);
  }
  d += what;
  ErrorInfo info;
  info.rank = ctx.rank;
  info.peer = ctx.peer;
  info.peers = d.ranks();
  info.address = ctx.address;
  info.sys_errno = ctx.sys_errno;
  info.detail = d.pattern();
  return info;
}

std::string format_error(const ErrorInfo& info) {
  std::string out = info.context + "[jaccl] ";
  if (info.rank >= 0) {
    out += "rank " + std::to_string(info.rank) + ": ";
  }
  out += render_detail(info.detail, info.peers);
  bool paren = false;
  auto sep = [&] {
    out += paren ? ", " : " (";
    paren = true;
  };
  if (info.peer >= 0) {
    sep();
    out += "peer rank " + std::to_string(info.peer);
  }
  if (!info.address.empty()) {
    sep();
    out += "address " + info.address;
  }
  if (paren) {
    out += ")";
  }
  if (info.sys_errno != 0) {
    out += std::string(": ") + std::strerror(info.sys_errno);
  }
  if (info.relayed_by >= 0) {
    out += " (relayed by rank " + std::to_string(info.relayed_by) + ")";
  }
  return out;
}

std::string format_error(const Detail& what, const ErrorContext& ctx) {
  return format_error(error_info(what, ctx));
}

[[noreturn]] void raise(ErrorKind kind, const Detail& what,
                        const ErrorContext& ctx) {
  throw_of_kind(kind, error_info(what, ctx));
}

std::exception_ptr error_ptr(ErrorKind kind, const Detail& what,
                             const ErrorContext& ctx) {
  return make_error(kind, error_info(what, ctx));
}

[[noreturn]] void throw_error(ErrorKind kind, ErrorInfo info) {
  throw_of_kind(kind, std::move(info));
}

[[noreturn]] void throw_error(ErrorKind kind, const std::string& msg) {
  throw_of_kind(kind, msg);
}

ErrorInfo renamed(ErrorInfo info, const std::vector<int>& names) {
  auto job = [&](int m) {
    return m >= 0 && static_cast<size_t>(m) < names.size()
               ? names[static_cast<size_t>(m)]
               : m;
  };
  info.rank = job(info.rank);
  info.peer = job(info.peer);
  info.relayed_by = job(info.relayed_by);
  // The detail's placeholders index peers: its text is never read.
  for (int& r : info.peers) {
    r = job(r);
  }
  return info;
}

[[noreturn]] void throw_renamed(const Error& e, const std::vector<int>& names) {
  if (!e.structured()) {
    throw_of_kind(e.kind(), std::string(e.what()));  // no fields to rename
  }
  throw_of_kind(e.kind(), renamed(e.info(), names));
}

[[noreturn]] void rethrow_as_error(std::exception_ptr e, ErrorKind kind,
                                   const Detail& context,
                                   const ErrorContext& ctx) {
  try {
    std::rethrow_exception(e);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& ex) {
    raise(kind, context + ": " + ex.what(), ctx);
  } catch (...) {
    raise(kind, context + ": unknown exception", ctx);
  }
}

}  // namespace detail
}  // namespace jaccl
