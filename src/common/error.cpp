// Copyright 2026 the jaccl authors.
#include "common/error.h"

#include <cctype>
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
  throw_error(kind, format_error(what, ctx));
}

std::string rename_ranks(std::string_view text, const std::vector<int>& names) {
  std::string out;
  out.reserve(text.size() + 16);
  size_t i = 0;
  auto is_digit = [&](size_t at) {
    return at < text.size() && text[at] >= '0' && text[at] <= '9';
  };
  // Copies the number at i (renamed when it is a member) and advances i.
  auto number = [&] {
    size_t end = i;
    long v = 0;
    while (is_digit(end)) {
      v = v < 1000000 ? v * 10 + (text[end] - '0') : v;
      ++end;
    }
    if (v < static_cast<long>(names.size())) {
      out += std::to_string(names[static_cast<size_t>(v)]);
    } else {
      out.append(text.substr(i, end - i));
    }
    i = end;
  };
  while (i < text.size()) {
    const bool word_start =
        i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]));
    const std::string_view rest = text.substr(i);
    const bool rank =
        word_start && (rest.starts_with("rank ") || rest.starts_with("Rank "));
    const bool ranks = word_start && (rest.starts_with("ranks ") ||
                                      rest.starts_with("Ranks "));
    if (!rank && !ranks) {
      out += text[i++];
      continue;
    }
    const size_t word = ranks ? 6 : 5;
    out.append(rest.substr(0, word));
    i += word;
    if (!is_digit(i)) {
      continue;
    }
    number();
    // "ranks 1, 2, 5": the list goes on through ", N".
    while (ranks && text.substr(i).starts_with(", ") && is_digit(i + 2)) {
      out += ", ";
      i += 2;
      number();
    }
  }
  return out;
}

[[noreturn]] void throw_error(ErrorKind kind, const std::string& msg) {
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
