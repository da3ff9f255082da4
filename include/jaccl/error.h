// Copyright 2026 the jaccl authors.
// The one error hierarchy of jaccl: every failure the library reports is a
// jaccl::Error with a kind, so callers can catch precisely by kind or by class.
#pragma once

#include <stdexcept>
#include <string>

namespace jaccl {

enum class ErrorKind {
  Config,    // what the user asked for is invalid or incomplete
  Timeout,   // a deadline expired (bootstrap, connect, an operation)
  PeerLost,  // a peer died, closed its connection or missed its heartbeat
  Protocol,  // a peer sent something that does not follow the protocol
  Io,        // the OS refused (bind, resolve, mmap, ...)
  Usage,     // the API was called wrongly (bad dtype, size, peer, ...)
  Internal,  // a bug in jaccl
};

const char* to_string(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what)
      : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& w) : Error(ErrorKind::Config, w) {}
};
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& w) : Error(ErrorKind::Timeout, w) {}
};
class PeerLostError : public Error {
 public:
  explicit PeerLostError(const std::string& w)
      : Error(ErrorKind::PeerLost, w) {}
};
class ProtocolError : public Error {
 public:
  explicit ProtocolError(const std::string& w)
      : Error(ErrorKind::Protocol, w) {}
};
class IoError : public Error {
 public:
  explicit IoError(const std::string& w) : Error(ErrorKind::Io, w) {}
};
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& w) : Error(ErrorKind::Usage, w) {}
};

}  // namespace jaccl
