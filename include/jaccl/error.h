// Copyright 2026 the jaccl authors.
// The one error hierarchy of jaccl: every failure the library reports is a
// jaccl::Error with a kind, so callers can catch precisely by kind or by class,
// and with fields (the reporting rank, the ranks involved, the address, the
// errno) so a program can act on a failure without parsing its message.
#pragma once

#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace jaccl {

enum class ErrorKind {
  Config,    // what the user asked for is invalid or incomplete
  Timeout,   // a deadline expired (bootstrap, connect, an operation)
  PeerLost,  // a peer died, closed its connection or missed its heartbeat
  Protocol,  // a peer sent something that does not follow the protocol
  Io,        // the OS refused (bind, resolve, mmap, ...)
  Usage,     // the API was called wrongly (bad dtype, size, peer, ...)
  // Elastic groups (Group::abort, revoke, shrink; docs/failures.md):
  Aborted,   // this rank aborted the group (Group::abort)
  Revoked,   // a member revoked the group (Group::revoke); peers() names it
  Excluded,  // the other members declared this rank failed and left it out
  Internal,  // a bug in jaccl (always the last kind)
};

const char* to_string(ErrorKind kind) noexcept;

// What an error is made of; Error::what() is built from it:
//   <context>[jaccl] rank <rank>: <detail> (peer rank <peer>, address
//   <address>): <strerror(sys_errno)> (relayed by rank <relayed_by>)
// with every empty part left out. Ranks are job ranks, also in a split
// child's errors.
struct ErrorInfo {
  int rank = -1;  // the rank that reports the error (-1: unknown)
  int peer = -1;  // the rank on the other end of what failed (-1: none)
  // Every rank the error involves, each once: peer (first, when set), every
  // rank the detail names and relayed_by.
  std::vector<int> peers;
  std::string address;  // host:port, path, URI ... involved, if any
  int sys_errno = 0;    // errno of the failing call, if any
  // For a failure another rank reported ("rank 2 reported: ..."): the rank
  // that passed it on, when that is not the rank that reported it (-1).
  int relayed_by = -1;
  // The detail as a template: "{i}" is peers[i], "{i,j-k}" the list of
  // peers[i] and peers[j..k] ("2, 5, 7", at most 16 shown, then "and N
  // more"); "{{" and "}}" are literal braces.
  std::string detail;
  // What the caller was doing, put before the message as is
  // ("jaccl_torch: allreduce failed: ").
  std::string context;
};

class Error : public std::runtime_error {
 public:
  // A message as given (no fields; detail() is the message).
  Error(ErrorKind kind, const std::string& what);
  // A message built from info.
  Error(ErrorKind kind, ErrorInfo info);

  ErrorKind kind() const noexcept { return kind_; }
  // -1 when unknown.
  int rank() const noexcept { return info_->rank; }
  // -1 when none.
  int peer() const noexcept { return info_->peer; }
  const std::vector<int>& peers() const noexcept { return info_->peers; }
  const std::string& address() const noexcept { return info_->address; }
  // 0 when none.
  int sys_errno() const noexcept { return info_->sys_errno; }
  // The detail with its ranks filled in, without the "[jaccl] rank N: "
  // prefix, the peer/address note and the OS error.
  std::string detail() const;
  const ErrorInfo& info() const noexcept { return *info_; }
  // False for an error made from a message alone.
  bool structured() const noexcept { return structured_; }

 private:
  ErrorKind kind_;
  bool structured_;
  std::shared_ptr<const ErrorInfo> info_;  // shared: copies must not throw
};

class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& w) : Error(ErrorKind::Config, w) {}
  explicit ConfigError(ErrorInfo i) : Error(ErrorKind::Config, std::move(i)) {}
};
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& w) : Error(ErrorKind::Timeout, w) {}
  explicit TimeoutError(ErrorInfo i)
      : Error(ErrorKind::Timeout, std::move(i)) {}
};
class PeerLostError : public Error {
 public:
  explicit PeerLostError(const std::string& w)
      : Error(ErrorKind::PeerLost, w) {}
  explicit PeerLostError(ErrorInfo i)
      : Error(ErrorKind::PeerLost, std::move(i)) {}
};
class ProtocolError : public Error {
 public:
  explicit ProtocolError(const std::string& w)
      : Error(ErrorKind::Protocol, w) {}
  explicit ProtocolError(ErrorInfo i)
      : Error(ErrorKind::Protocol, std::move(i)) {}
};
class IoError : public Error {
 public:
  explicit IoError(const std::string& w) : Error(ErrorKind::Io, w) {}
  explicit IoError(ErrorInfo i) : Error(ErrorKind::Io, std::move(i)) {}
};
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& w) : Error(ErrorKind::Usage, w) {}
  explicit UsageError(ErrorInfo i) : Error(ErrorKind::Usage, std::move(i)) {}
};
class AbortedError : public Error {
 public:
  explicit AbortedError(const std::string& w) : Error(ErrorKind::Aborted, w) {}
  explicit AbortedError(ErrorInfo i)
      : Error(ErrorKind::Aborted, std::move(i)) {}
};
class RevokedError : public Error {
 public:
  explicit RevokedError(const std::string& w) : Error(ErrorKind::Revoked, w) {}
  explicit RevokedError(ErrorInfo i)
      : Error(ErrorKind::Revoked, std::move(i)) {}
};
class ExcludedError : public Error {
 public:
  explicit ExcludedError(const std::string& w)
      : Error(ErrorKind::Excluded, w) {}
  explicit ExcludedError(ErrorInfo i)
      : Error(ErrorKind::Excluded, std::move(i)) {}
};

// An error of the concrete class of kind (ConfigError for Config, ...;
// Error for Internal) made from info.
std::exception_ptr make_error(ErrorKind kind, ErrorInfo info);

// e with `context` put before its message, of e's class and with its fields
// ("jaccl_torch: allreduce failed: [jaccl] rank 1: ...").
std::exception_ptr with_context(const Error& e, const std::string& context);

}  // namespace jaccl
