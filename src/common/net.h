// Copyright 2026 the jaccl authors.
// TCP socket helpers. Every call that can block takes a Deadline and reports
// failures through detail::raise with the address and peer involved.
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/deadline.h"
#include "common/error.h"

namespace jaccl::detail {

// Owning file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset(std::exchange(o.fd_, -1));
    }
    return *this;
  }
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;  // name, IPv4 or IPv6 (without brackets)
  uint16_t port = 0;
  std::string str() const;  // "host:port" or "[v6]:port"
};

// Parses "host:port" / "[v6]:port". what names the source for the error
// (e.g. "JACCL_COORDINATOR"); a missing or bad port is a Config error.
HostPort parse_host_port(std::string_view s, std::string_view what);

struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  std::string str() const;
};

// Resolves to the first usable address; failure is an Io error naming it.
SockAddr resolve(const HostPort& hp, int rank = -1);

// A listening socket (SO_REUSEADDR, non-blocking, close-on-exec). Port 0
// picks an ephemeral port. "Address in use" is an Io error naming it.
// before_listen(fd), if given, runs between bind() and listen(): options set
// there (TCP_NODELAY, SO_SNDBUF, ...) are copied by Linux to every accepted
// socket, the first one included.
Fd listen_tcp(const SockAddr& addr, int backlog, int rank = -1,
              const std::function<void(int)>& before_listen = {});

// The local/remote address of a connected or bound socket.
SockAddr local_address(int fd);
SockAddr peer_address(int fd);
uint16_t port_of(const SockAddr& a);
std::string host_of(const SockAddr& a);

// One non-blocking connect attempt bounded by dl; returns an invalid Fd and
// sets err (errno) on a refusal or unreachable peer, so callers can retry.
Fd try_connect(const SockAddr& addr, const Deadline& dl, int* err);

// Connects, retrying with capped exponential backoff (10 ms .. max_backoff,
// each wait drawn from its upper half so that many dialers spread out)
// until dl. on_retry(attempt, errno) runs before each retry (for an info log
// line). Expiry is a Timeout error naming the address and the last errno,
// with what_on_timeout as its text ("could not connect within <timeout>" if
// empty). Running out of descriptors or kernel memory (out_of_resources) is
// an Io error at once, saying what to raise.
template <class OnRetry>
Fd connect_with_retry(const SockAddr& addr, const Deadline& dl,
                      const ErrorContext& ctx, OnRetry on_retry,
                      const std::string& what_on_timeout = "",
                      Millis max_backoff = Millis(1000));

// What to raise when a socket call failed for want of a resource: EMFILE
// (this process's open-file limit), ENFILE (fs.file-max), EADDRNOTAVAIL
// (local ports), ENOBUFS/ENOMEM (kernel memory); "" for other errors.
std::string resource_hint(int err);
// EMFILE, ENFILE, ENOBUFS, ENOMEM: retrying at once will not help.
bool out_of_resources(int err);

void set_nonblocking(int fd);
void set_nodelay(int fd);
// Keepalive so a vanished host is noticed on an idle connection:
// idle/interval in seconds. user_timeout_ms sets TCP_USER_TIMEOUT (how long
// sent data may stay unacknowledged): -1 derives it from the keepalive
// parameters, 0 leaves it unset. Leave it unset on data links: Linux also
// aborts a connection whose peer advertises a zero window for that long, so
// a receiver busy computing for a while would kill the link.
void set_keepalive(int fd, int idle_s, int interval_s, int count,
                   int user_timeout_ms = -1);
// SO_SNDBUF (the kernel doubles it for its own bookkeeping); turns off the
// send buffer's autotuning for this socket.
void set_send_buffer(int fd, int bytes);
// SO_SNDBUF as the kernel keeps it (twice the request, capped); 0 on error.
int send_buffer(int fd);

// Blocking-style transfers on non-blocking sockets, bounded by dl. EOF or
// reset is PeerLost, expiry Timeout, others Io; errors carry ctx.
void send_all(int fd, const void* buf, size_t n, const Deadline& dl,
              const ErrorContext& ctx);
void recv_all(int fd, void* buf, size_t n, const Deadline& dl,
              const ErrorContext& ctx);

// poll() bounded by dl (and by cap_ms if >= 0), retrying EINTR with the time
// left. Returns the number of ready descriptors, 0 when dl or the cap ran
// out, or -1 with errno set.
int poll_until(pollfd* fds, size_t n, const Deadline& dl, int cap_ms = -1);

// Sends a frame (head, then body) on a non-blocking socket from byte *done
// on, until it is all sent or the socket is full (*done tells which).
// Returns 0, or the errno of a broken connection (EPIPE for a 0-byte send).
int send_frame_some(int fd, std::span<const uint8_t> head, const char* body,
                    size_t body_len, size_t* done);

// Largest count passed to one send()/recv(): the kernel caps one call near
// 2 GiB (upstream hit a 1 GiB limit), so big buffers go in slices.
inline constexpr size_t kMaxIoSlice = size_t(1) << 28;

// ---- implementation of the template ------------------------------------

void sleep_for_retry(int attempt, const Deadline& dl,
                     Millis max_backoff = Millis(1000));
[[noreturn]] void raise_connect_failure(const SockAddr& addr,
                                        const Deadline& dl,
                                        const ErrorContext& ctx, int err,
                                        const std::string& what_on_timeout);

template <class OnRetry>
Fd connect_with_retry(const SockAddr& addr, const Deadline& dl,
                      const ErrorContext& ctx, OnRetry on_retry,
                      const std::string& what_on_timeout, Millis max_backoff) {
  int last_err = 0;
  for (int attempt = 0;; ++attempt) {
    int err = 0;
    Fd fd = try_connect(addr, dl, &err);
    if (fd.valid()) {
      return fd;
    }
    last_err = err;
    if (dl.expired() || out_of_resources(err)) {
      break;
    }
    on_retry(attempt, err);
    sleep_for_retry(attempt, dl, max_backoff);
    if (dl.expired()) {
      break;
    }
  }
  raise_connect_failure(addr, dl, ctx, last_err, what_on_timeout);
}

}  // namespace jaccl::detail
