// Copyright 2026 the jaccl authors.
#include "bootstrap/tcp_star_listener.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "common/env.h"
#include "common/log.h"

namespace jaccl::detail {

namespace {

// Whether a socket bound to `own` receives the connections made to `want`:
// the same port, and the same address or every address (an IPv6 one takes
// IPv4 connections too).
bool serves(const SockAddr& own, const SockAddr& want) {
  const std::string host = host_of(own);
  return port_of(own) == port_of(want) &&
         (host == host_of(want) || host == "::" ||
          (host == "0.0.0.0" && want.ss.ss_family == AF_INET));
}

// Why fd cannot serve a star ("" if it may; *own: where it listens).
std::string unusable(int fd, SockAddr* own, int* err) {
  if (::fcntl(fd, F_GETFD) < 0) {
    *err = errno;
    return "it is not an open descriptor in this process (the launcher's "
           "socket was not inherited)";
  }
  int listening = 0, protocol = 0;
  socklen_t len = sizeof(listening);
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0) {
    *err = errno;
    return errno == ENOTSOCK ? "it is not a socket" : "getsockopt failed";
  }
  len = sizeof(protocol);
  if (::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) != 0 ||
      protocol != IPPROTO_TCP) {
    return "it is not a TCP socket";
  }
  if (!listening) {
    return "it is a TCP socket that is not listening";
  }
  own->len = sizeof(own->ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&own->ss), &own->len) !=
      0) {
    *err = errno;
    return "getsockname failed";
  }
  return "";
}

// Binds the coordinator's address. A port in use says whose it is and
// what to do: it came from JACCL_COORDINATOR (or a launcher that chose it
// on another host, as jaccl-run --hosts does), not from this program.
Fd bind_coordinator(const SockAddr& addr, int backlog,
                    const std::function<void(int)>& options) {
  try {
    return listen_tcp(addr, backlog, 0, options);
  } catch (const Error& e) {
    if (e.sys_errno() != EADDRINUSE) {
      throw;
    }
    std::rethrow_exception(with_context(
        e, "the coordinator's port " + std::to_string(port_of(addr)) +
               " is taken on this host (another job's rank 0, or a process "
               "that still holds it); choose a free one in "
               "JACCL_COORDINATOR (jaccl-run: --coordinator HOST:PORT, or "
               "run again for a new one): "));
  }
}

}  // namespace

Fd coordinator_listener(const SockAddr& addr, int backlog,
                        const std::function<void(int)>& options,
                        bool* inherited) {
  const char* text = env_get(EnvVar::CoordinatorFd);
  *inherited = text != nullptr;
  if (text == nullptr) {
    return bind_coordinator(addr, backlog, options);
  }
  const std::string var = std::string("JACCL_COORDINATOR_FD=") + text;
  char* end = nullptr;
  errno = 0;
  const long fd = std::strtol(text, &end, 10);
  if (*text < '0' || *text > '9' || *end != '\0' || errno != 0 ||
      fd > INT_MAX) {
    raise(ErrorKind::Config, var + ": not a file descriptor number",
          {.rank = 0, .address = addr.str()});
  }
  int err = 0;
  SockAddr own;
  std::string why = unusable(static_cast<int>(fd), &own, &err);
  if (why.empty() && !serves(own, addr)) {
    why = "it listens at " + own.str();
  }
  if (!why.empty()) {
    // The variable travels to every process the program starts, the socket
    // does not (or the star is another one: a tcp:// side channel's, a
    // nested job's): not for this star.
    JACCL_LOG(Info, var << " is not a socket listening at " << addr.str()
                        << " (" << why
                        << (err != 0 ? std::string(": ") + std::strerror(err)
                                     : std::string())
                        << "): binding " << addr.str() << " instead");
    *inherited = false;
    try {
      return bind_coordinator(addr, backlog, options);
    } catch (const Error& e) {
      std::rethrow_exception(
          with_context(e, var + " named no socket listening there (" + why +
                              "), so rank 0 bound the address itself: "));
    }
  }
  // Not into the program's own children; a duplicate per star, so that
  // closing one leaves the socket listening for the next.
  ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  Fd dup(::fcntl(static_cast<int>(fd), F_DUPFD_CLOEXEC, 3));
  if (!dup.valid()) {
    raise(ErrorKind::Io, var + ": cannot duplicate it",
          {.rank = 0, .address = addr.str(), .sys_errno = errno});
  }
  ::fcntl(dup.get(), F_SETFL, ::fcntl(dup.get(), F_GETFL) | O_NONBLOCK);
  if (options) {
    options(dup.get());
  }
  // listen() again only sets the queue's length.
  if (::listen(dup.get(), backlog) != 0) {
    raise(ErrorKind::Io, var + ": listen() failed",
          {.rank = 0, .address = addr.str(), .sys_errno = errno});
  }
  return dup;
}

}  // namespace jaccl::detail
