// Copyright 2026 the jaccl authors.
#include "common/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <random>
#include <thread>

#include "common/random.h"

namespace jaccl::detail {

void Fd::reset(int fd) {
  if (fd_ >= 0) {
    ::close(fd_);
  }
  fd_ = fd;
}

std::string HostPort::str() const {
  if (host.find(':') != std::string::npos) {
    return "[" + host + "]:" + std::to_string(port);
  }
  return host + ":" + std::to_string(port);
}

HostPort parse_host_port(std::string_view s, std::string_view what) {
  auto bad = [&](const std::string& why) {
    raise(ErrorKind::Config, std::string(what) + "='" + std::string(s) +
                                 "' is not host:port (" + why + ")");
  };
  HostPort hp;
  std::string_view port_part;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos) {
      bad("unterminated '['");
    }
    hp.host = std::string(s.substr(1, close - 1));
    if (close + 1 >= s.size() || s[close + 1] != ':') {
      bad("missing port");
    }
    port_part = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string_view::npos) {
      bad("missing port");
    }
    if (s.find(':') != colon) {
      bad("IPv6 addresses need brackets: [addr]:port");
    }
    hp.host = std::string(s.substr(0, colon));
    port_part = s.substr(colon + 1);
  }
  if (hp.host.empty()) {
    bad("missing host");
  }
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port_part.data(),
                                   port_part.data() + port_part.size(), value);
  if (port_part.empty() || ec != std::errc() ||
      ptr != port_part.data() + port_part.size() || value > 65535) {
    bad("bad port '" + std::string(port_part) + "'");
  }
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

std::string SockAddr::str() const {
  HostPort hp{host_of(*this), port_of(*this)};
  return hp.str();
}

uint16_t port_of(const SockAddr& a) {
  if (a.ss.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_port);
  }
  if (a.ss.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_port);
  }
  return 0;
}

std::string host_of(const SockAddr& a) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (a.ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr,
              buf, sizeof(buf));
  } else if (a.ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6,
              &reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr, buf,
              sizeof(buf));
  }
  return buf;
}

SockAddr resolve(const HostPort& hp, int rank) {
  // A numeric address needs no resolver: glibc's getaddrinfo asks the
  // kernel for the host's interfaces (a netlink dump) on every call, which
  // thousands of ranks dialing one coordinator paid each.
  SockAddr out;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.ss);
  if (::inet_pton(AF_INET, hp.host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(hp.port);
    out.len = sizeof(sockaddr_in);
    return out;
  }
  if (::inet_pton(AF_INET6, hp.host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(hp.port);
    out.len = sizeof(sockaddr_in6);
    return out;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port = std::to_string(hp.port);
  int rc = ::getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    raise(ErrorKind::Io,
          std::string("cannot resolve host '") + hp.host +
              "': " + ::gai_strerror(rc),
          {.rank = rank, .address = hp.str()});
  }
  // Prefer IPv4 when both exist: loopback names resolve to both and peers
  // usually listen on the v4 one.
  addrinfo* pick = res;
  for (addrinfo* p = res; p != nullptr; p = p->ai_next) {
    if (p->ai_family == AF_INET) {
      pick = p;
      break;
    }
  }
  std::memcpy(&out.ss, pick->ai_addr, pick->ai_addrlen);
  out.len = pick->ai_addrlen;
  ::freeaddrinfo(res);
  return out;
}

Fd listen_tcp(const SockAddr& addr, int backlog, int rank,
              const std::function<void(int)>& before_listen) {
  Fd fd(::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                 0));
  if (!fd.valid()) {
    raise(ErrorKind::Io, "socket() failed",
          {.rank = rank, .address = addr.str(), .sys_errno = errno});
  }
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) !=
      0) {
    int e = errno;
    raise(ErrorKind::Io,
          e == EADDRINUSE ? "cannot listen: address already in use"
                          : "cannot bind listening socket",
          {.rank = rank, .address = addr.str(), .sys_errno = e});
  }
  if (before_listen) {
    before_listen(fd.get());
  }
  if (::listen(fd.get(), backlog) != 0) {
    raise(ErrorKind::Io, "listen() failed",
          {.rank = rank, .address = addr.str(), .sys_errno = errno});
  }
  return fd;
}

SockAddr local_address(int fd) {
  SockAddr a;
  a.len = sizeof(a.ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len);
  return a;
}

SockAddr peer_address(int fd) {
  SockAddr a;
  a.len = sizeof(a.ss);
  ::getpeername(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len);
  return a;
}

Fd try_connect(const SockAddr& addr, const Deadline& dl, int* err) {
  Fd fd(::socket(addr.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                 0));
  if (!fd.valid()) {
    *err = errno;
    return Fd();
  }
  int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.ss),
                     addr.len);
  if (rc == 0) {
    return fd;
  }
  if (errno != EINPROGRESS) {
    *err = errno;
    return Fd();
  }
  // Cap one attempt so a black-holed SYN is retried rather than waited on
  // for the kernel's full SYN timeout.
  pollfd p{fd.get(), POLLOUT, 0};
  if (poll_until(&p, 1, dl, 2000) <= 0) {
    *err = ETIMEDOUT;
    return Fd();
  }
  int so_err = 0;
  socklen_t len = sizeof(so_err);
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_err, &len);
  if (so_err != 0) {
    *err = so_err;
    return Fd();
  }
  return fd;
}

int poll_until(pollfd* fds, size_t n, const Deadline& dl, int cap_ms) {
  for (;;) {
    int k = ::poll(fds, static_cast<nfds_t>(n), dl.poll_ms(cap_ms));
    if (k < 0 && errno == EINTR) {
      if (dl.expired()) {
        return 0;
      }
      continue;
    }
    return k;
  }
}

int send_frame_some(int fd, std::span<const uint8_t> head, const char* body,
                    size_t body_len, size_t* done) {
  const size_t total = head.size() + body_len;
  while (*done < total) {
    // What is left; head and body in one call while both are: one
    // segment, not a lone head that wakes the receiver for a few bytes.
    iovec iov[2];
    size_t parts = 0;
    size_t body_from = 0;
    if (*done < head.size()) {
      iov[parts++] = {const_cast<uint8_t*>(head.data()) + *done,
                      head.size() - *done};
    } else {
      body_from = *done - head.size();
    }
    if (body_from < body_len) {
      iov[parts++] = {const_cast<char*>(body) + body_from,
                      std::min(body_len - body_from, kMaxIoSlice)};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = parts;
    const ssize_t k = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (k > 0) {
      *done += static_cast<size_t>(k);
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    } else {
      return k < 0 ? errno : EPIPE;
    }
  }
  return 0;
}

void sleep_for_retry(int attempt, const Deadline& dl, Millis max_backoff) {
  // A cheap generator per thread: thousands of dialers must not retry in
  // lockstep, nor each pay a getrandom() call.
  thread_local std::minstd_rand gen(static_cast<uint32_t>(random_u64()));
  const int cap = static_cast<int>(std::max<long long>(1, max_backoff.count()));
  const int ms = std::min(10 << std::min(attempt, 10), cap);
  const int wait =
      ms / 2 + static_cast<int>(gen() % static_cast<unsigned>(ms - ms / 2 + 1));
  std::this_thread::sleep_for(Millis(dl.poll_ms(wait)));  // never past dl
}

void raise_connect_failure(const SockAddr& addr, const Deadline& dl,
                           const ErrorContext& ctx, int err,
                           const std::string& what_on_timeout) {
  ErrorContext c = ctx;
  c.sys_errno = err;
  if (c.address.empty()) {
    c.address = addr.str();
  }
  const std::string hint = resource_hint(err);
  if (out_of_resources(err)) {
    raise(ErrorKind::Io, "cannot open a connection: " + hint, c);
  }
  std::string what = what_on_timeout.empty() ? "could not connect within " +
                                                   format_duration(dl.total())
                                             : what_on_timeout;
  if (!hint.empty()) {
    what += "; " + hint;
  }
  raise(ErrorKind::Timeout, what, c);
}

bool out_of_resources(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

std::string resource_hint(int err) {
  switch (err) {
    case EMFILE: {
      rlimit rl{};
      std::string now;
      if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        now = rl.rlim_cur == RLIM_INFINITY
                  ? " (now unlimited)"
                  : " (now " + std::to_string(rl.rlim_cur) + ")";
      }
      return "this process ran out of file descriptors: raise the open-file "
             "limit with ulimit -n" +
             now + " or LimitNOFILE= under systemd";
    }
    case ENFILE:
      return "the system ran out of file descriptors: raise fs.file-max";
    case EADDRNOTAVAIL:
      return "no free local port to connect from: widen "
             "net.ipv4.ip_local_port_range or wait for TIME_WAIT sockets "
             "to expire";
    case ENOBUFS:
    case ENOMEM:
      return "the kernel is out of socket memory (net.ipv4.tcp_mem, "
             "net.core.optmem_max)";
    default:
      return "";
  }
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void set_keepalive(int fd, int idle_s, int interval_s, int count,
                   int user_timeout_ms) {
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  if (user_timeout_ms == 0) {
    return;
  }
  unsigned ut =
      user_timeout_ms > 0
          ? static_cast<unsigned>(user_timeout_ms)
          : static_cast<unsigned>((idle_s + interval_s * count) * 1000);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
}

void set_send_buffer(int fd, int bytes) {
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
}

int send_buffer(int fd) {
  int v = 0;
  socklen_t len = sizeof(v);
  return ::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &len) == 0 ? v : 0;
}

namespace {

[[noreturn]] void raise_io(bool sending, int e, const ErrorContext& ctx) {
  ErrorContext c = ctx;
  c.sys_errno = e;
  if (e == EPIPE || e == ECONNRESET || e == ETIMEDOUT || e == EHOSTUNREACH) {
    raise(ErrorKind::PeerLost,
          sending ? "connection lost while sending"
                  : "connection lost while receiving",
          c);
  }
  raise(ErrorKind::Io, sending ? "send failed" : "recv failed", c);
}

void wait_ready(int fd, short events, const Deadline& dl, bool sending,
                size_t done, size_t total, const ErrorContext& ctx) {
  pollfd p{fd, events, 0};
  int n = poll_until(&p, 1, dl);
  if (n < 0) {
    raise_io(sending, errno, ctx);
  }
  if (n == 0) {
    raise(ErrorKind::Timeout,
          std::string("timed out after ") + format_duration(dl.total()) +
              (sending ? " sending " : " receiving ") + std::to_string(done) +
              "/" + std::to_string(total) + " bytes",
          ctx);
  }
  // readable/writable, or an error the next call reports
}

}  // namespace

void send_all(int fd, const void* buf, size_t n, const Deadline& dl,
              const ErrorContext& ctx) {
  const char* p = static_cast<const char*>(buf);
  size_t done = 0;
  while (done < n) {
    ssize_t k =
        ::send(fd, p + done, std::min(n - done, kMaxIoSlice), MSG_NOSIGNAL);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_ready(fd, POLLOUT, dl, true, done, n, ctx);
      continue;
    }
    raise_io(true, k < 0 ? errno : EPIPE, ctx);
  }
}

void recv_all(int fd, void* buf, size_t n, const Deadline& dl,
              const ErrorContext& ctx) {
  char* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < n) {
    ssize_t k = ::recv(fd, p + done, std::min(n - done, kMaxIoSlice), 0);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    if (k == 0) {
      raise(ErrorKind::PeerLost,
            "connection closed by peer after " + std::to_string(done) + "/" +
                std::to_string(n) + " bytes",
            ctx);
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_ready(fd, POLLIN, dl, false, done, n, ctx);
      continue;
    }
    raise_io(false, errno, ctx);
  }
}

}  // namespace jaccl::detail
