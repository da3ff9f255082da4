// Copyright 2026 the jaccl authors.
#include "transport/shm_handoff.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "common/error.h"
#include "common/log.h"
#include "transport/control_block.h"

namespace jaccl::detail {

namespace {

constexpr uint64_t kHelloMagic = 0x3130484d534a0a6aull;  // "j\nJSMH01"
constexpr uint64_t kGrantMagic = 0x3130474d534a0a6aull;  // "j\nJSMG01"
constexpr uint32_t kVersion = 1;
constexpr size_t kHelloLen = 8 + 4 + 4 + 16;
constexpr size_t kGrantLen = 8 + 8;
// Unauthenticated connections held at once beyond the members still
// expected: a flood of strays cannot pin descriptors; the oldest goes first
// (members send their hello at once).
constexpr size_t kMaxPending = 64;

using ShmHello = std::array<uint8_t, kHelloLen>;

sockaddr_un abstract_addr(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);  // sun_path[0] = 0: abstract
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

bool peer_cred(int fd, ucred* c) {
  socklen_t l = sizeof(*c);
  return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, c, &l) == 0;
}

// Why the process at the other end is refused ("" if it is not).
std::string cred_problem(int fd, pid_t want_pid) {
  ucred c{};
  if (!peer_cred(fd, &c)) {
    return std::string("SO_PEERCRED failed: ") + std::strerror(errno);
  }
  if (c.uid != ::geteuid()) {
    return "its uid " + std::to_string(c.uid) + " is not ours (" +
           std::to_string(::geteuid()) + ")";
  }
  if (want_pid != 0 && c.pid != want_pid) {
    return "its pid " + std::to_string(c.pid) + " is not the expected " +
           std::to_string(want_pid);
  }
  return "";
}

void throw_if_failed(const FailureState* state) {
  if (state != nullptr) {
    state->throw_if_failed();
  }
}

bool same_secret(const uint8_t* a, const HandoffSecret& b) {
  uint8_t diff = 0;  // constant time: no early exit on the first mismatch
  for (size_t i = 0; i < b.size(); ++i) {
    diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  }
  return diff == 0;
}

ShmHello encode_shm_hello(int rank, const HandoffSecret& secret) {
  ShmHello h{};
  const int32_t r = rank;
  std::memcpy(h.data(), &kHelloMagic, 8);
  std::memcpy(h.data() + 8, &kVersion, 4);
  std::memcpy(h.data() + 12, &r, 4);
  std::memcpy(h.data() + 16, secret.data(), secret.size());
  return h;
}

struct Pending {
  Fd fd;
  ShmHello buf{};
  size_t got = 0;
  bool drop = false;
};

// Index in members of the rank this complete hello proves, or -1 (why set).
int judge(const Pending& p, const HandoffSecret& secret,
          const std::vector<HandoffPeer>& members,
          const std::vector<bool>& done, std::string* why) {
  uint64_t magic = 0;
  uint32_t version = 0;
  int32_t rank = -1;
  std::memcpy(&magic, p.buf.data(), 8);
  std::memcpy(&version, p.buf.data() + 8, 4);
  std::memcpy(&rank, p.buf.data() + 12, 4);
  if (magic != kHelloMagic || version != kVersion) {
    *why = "not a jaccl shared-memory hello";
    return -1;
  }
  if (!same_secret(p.buf.data() + 16, secret)) {
    *why = "wrong secret (claims rank " + std::to_string(rank) + ")";
    return -1;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].rank != rank) {
      continue;
    }
    if (done[i]) {
      *why = "rank " + std::to_string(rank) + " already has the segment";
      return -1;
    }
    *why = cred_problem(p.fd.get(), members[i].pid);
    return why->empty() ? static_cast<int>(i) : -1;
  }
  *why = "rank " + std::to_string(rank) + " is not a member of this host";
  return -1;
}

bool send_grant(int fd, int seg_fd, uint64_t bytes) {
  std::array<uint8_t, kGrantLen> g{};
  std::memcpy(g.data(), &kGrantMagic, 8);
  std::memcpy(g.data() + 8, &bytes, 8);
  iovec iov{g.data(), g.size()};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl;
  msg.msg_controllen = sizeof(ctl);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &seg_fd, sizeof(int));
  // 16 bytes into a fresh socket's empty buffer: one call or a broken peer.
  ssize_t k;
  do {
    k = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (k < 0 && errno == EINTR);
  return k == static_cast<ssize_t>(g.size());
}

}  // namespace

Fd handoff_listen(const std::string& name, int backlog, int rank) {
  ErrorContext ctx{.rank = rank, .address = "@" + name};
  if (name.empty() || name.size() > 100) {
    raise(ErrorKind::Internal, "bad hand-off socket name", ctx);
  }
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    ctx.sys_errno = errno;
    raise(ErrorKind::Io, "cannot create a unix socket", ctx);
  }
  socklen_t len = 0;
  sockaddr_un a = abstract_addr(name, &len);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0 ||
      ::listen(fd.get(), backlog) != 0) {
    ctx.sys_errno = errno;
    raise(ErrorKind::Io, "cannot listen on the shared-memory hand-off socket",
          ctx);
  }
  return fd;
}

void handoff_serve(int listen_fd, const std::string& name, int seg_fd,
                   uint64_t bytes, const HandoffSecret& secret,
                   const std::vector<HandoffPeer>& members, int rank,
                   const Deadline& dl, const FailureState* state) {
  const ErrorContext ctx{.rank = rank, .address = "@" + name};
  std::vector<bool> done(members.size(), false);
  size_t left = members.size();
  std::vector<Pending> pending;
  std::vector<pollfd> fds;
  auto drop = [&](Pending& p, const std::string& why) {
    JACCL_LOG(Info, "rank " << rank << ": dropped a connection to @" << name
                            << ": " << why);
    p.drop = true;
  };
  while (left > 0) {
    throw_if_failed(state);
    fds.assign({pollfd{listen_fd, POLLIN, 0},
                pollfd{state ? state->wake_fd() : -1, POLLIN, 0}});
    for (const Pending& p : pending) {
      fds.push_back(pollfd{p.fd.get(), POLLIN, 0});
    }
    int k = poll_until(fds.data(), fds.size(), dl);
    if (k < 0) {
      ErrorContext c = ctx;
      c.sys_errno = errno;
      raise(ErrorKind::Io, "poll() failed while handing over shared memory", c);
    }
    if (k == 0) {
      if (!dl.expired()) {
        continue;
      }
      std::vector<int> missing;
      for (size_t i = 0; i < members.size(); ++i) {
        if (!done[i]) {
          missing.push_back(members[i].rank);
        }
      }
      ErrorContext c = ctx;
      c.peer = missing.front();
      raise(ErrorKind::Timeout,
            "timed out after " + format_duration(dl.total()) + " waiting for " +
                ranks_ref(missing) + " to collect the shared-memory segment",
            c);
    }
    if (fds[1].revents != 0) {
      throw_if_failed(state);
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending& p = pending[i];
      if (fds[2 + i].revents == 0) {
        continue;
      }
      ssize_t n = ::recv(p.fd.get(), p.buf.data() + p.got, kHelloLen - p.got,
                         MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        continue;
      }
      if (n <= 0) {
        drop(p, "closed before its hello");
        continue;
      }
      p.got += static_cast<size_t>(n);
      if (p.got < kHelloLen) {
        continue;
      }
      std::string why;
      int m = judge(p, secret, members, done, &why);
      if (m < 0) {
        drop(p, why);
        continue;
      }
      p.drop = true;  // served or not, this connection is finished
      if (!send_grant(p.fd.get(), seg_fd, bytes)) {
        JACCL_LOG(Info, "rank " << rank << ": could not hand the segment to "
                                << "rank " << members[size_t(m)].rank << ": "
                                << std::strerror(errno));
        continue;
      }
      done[static_cast<size_t>(m)] = true;
      --left;
    }
    std::erase_if(pending, [](const Pending& p) { return p.drop; });
    if ((fds[0].revents & POLLIN) == 0) {
      continue;
    }
    for (;;) {
      Fd c(
          ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!c.valid()) {
        if (errno == EINTR || errno == ECONNABORTED) {
          continue;
        }
        break;  // EAGAIN, or out of descriptors: retry on the next round
      }
      // Another uid is dropped before it can say anything; the pid is
      // checked once the hello names the rank it claims.
      std::string why = cred_problem(c.get(), 0);
      if (!why.empty()) {
        JACCL_LOG(Info, "rank " << rank << ": dropped a connection to @" << name
                                << ": " << why);
        continue;
      }
      // Room for every member at once (128 ranks connect in one burst) plus
      // kMaxPending strays; past that the oldest silent one goes.
      if (pending.size() >= left + kMaxPending) {
        pending.erase(pending.begin());
      }
      pending.push_back(Pending{std::move(c)});
    }
  }
}

HandoffConn handoff_connect(const std::string& name, const HandoffPeer& server,
                            int rank) {
  HandoffConn out;
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    out.error = errno;
    return out;
  }
  socklen_t len = 0;
  sockaddr_un a = abstract_addr(name, &len);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    out.error = errno;
    if (errno == EAGAIN || errno == EINTR) {
      out.reach = HandoffConn::Reach::Busy;
    }
    return out;
  }
  // The listener's credentials, captured when it called listen().
  std::string why = cred_problem(fd.get(), server.pid);
  if (!why.empty()) {
    JACCL_LOG(Info, "rank " << rank << ": @" << name << " is not rank "
                            << server.rank << "'s socket: " << why);
    out.error = EPERM;
    return out;
  }
  out.reach = HandoffConn::Reach::Connected;
  out.fd = std::move(fd);
  return out;
}

Fd handoff_receive(HandoffConn& conn, const std::string& name,
                   const HandoffPeer& server, const HandoffSecret& secret,
                   int rank, const Deadline& dl, const FailureState* state,
                   uint64_t* bytes) {
  ErrorContext ctx{.rank = rank, .peer = server.rank, .address = "@" + name};
  for (int attempt = 0; conn.reach != HandoffConn::Reach::Connected;
       ++attempt) {
    if (conn.reach == HandoffConn::Reach::Unreachable) {
      ctx.sys_errno = conn.error;
      raise(ErrorKind::Io, "cannot reach the shared-memory hand-off socket",
            ctx);
    }
    throw_if_failed(state);
    if (dl.expired()) {
      ctx.sys_errno = conn.error;
      raise(ErrorKind::Timeout,
            "timed out after " + format_duration(dl.total()) +
                " connecting to the shared-memory hand-off socket (its "
                "backlog stayed full)",
            ctx);
    }
    sleep_for_retry(attempt, dl);
    conn = handoff_connect(name, server, rank);
  }
  const int fd = conn.fd.get();
  ShmHello h = encode_shm_hello(rank, secret);
  send_all(fd, h.data(), h.size(), dl, ctx);

  std::array<uint8_t, kGrantLen> g{};
  size_t got = 0;
  Fd memfd;
  while (got < g.size()) {
    pollfd fds[2] = {{fd, POLLIN, 0},
                     {state ? state->wake_fd() : -1, POLLIN, 0}};
    int k = poll_until(fds, 2, dl);
    if (k < 0) {
      ctx.sys_errno = errno;
      raise(ErrorKind::Io, "poll() failed while receiving shared memory", ctx);
    }
    if (k == 0) {
      if (!dl.expired()) {
        continue;
      }
      raise(ErrorKind::Timeout,
            "timed out after " + format_duration(dl.total()) + " waiting for " +
                rank_ref(server.rank) +
                " to hand over the shared-memory segment",
            ctx);
    }
    if (fds[1].revents != 0) {
      throw_if_failed(state);
    }
    iovec iov{g.data() + got, g.size() - got};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 4)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl;
    msg.msg_controllen = sizeof(ctl);
    ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      continue;
    }
    // Own every descriptor that arrived before judging anything, so none
    // leaks; only the first one is the segment.
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
         c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
        continue;
      }
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int one = -1;
        std::memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        Fd owned(one);
        if (!memfd.valid()) {
          memfd = std::move(owned);
        }
      }
    }
    if (n < 0) {
      ctx.sys_errno = errno;
      raise(ErrorKind::PeerLost, "hand-off connection failed", ctx);
    }
    if (n == 0) {
      raise(ErrorKind::PeerLost,
            rank_ref(server.rank) +
                " closed the hand-off connection without handing over the "
                "shared-memory segment",
            ctx);
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) {
      raise(ErrorKind::Protocol, "too many descriptors in the hand-off", ctx);
    }
    got += static_cast<size_t>(n);
  }
  uint64_t magic = 0;
  std::memcpy(&magic, g.data(), 8);
  std::memcpy(bytes, g.data() + 8, 8);
  if (magic != kGrantMagic || !memfd.valid()) {
    raise(ErrorKind::Protocol,
          "the hand-off socket did not send a shared-memory segment", ctx);
  }
  return memfd;
}

}  // namespace jaccl::detail
