// Copyright 2026 the jaccl authors.
// Rank 0's half of the TCP star. One epoll loop serves every socket (the
// listener, half-open handshakes, the ranks) and owns the call's deadline, so
// a slow or dead rank never delays reading or writing the others, and the
// work per wake-up follows the sockets that are ready, not the job's size (a
// poll set rebuilt per wake-up made connecting 4096 ranks quadratic). The
// replies are in tcp_star_reply.cpp.
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "bootstrap/tcp_star_listener.h"
#include "bootstrap/tcp_star_server.h"
#include "common/error.h"
#include "common/log.h"

namespace jaccl::detail::star {

namespace {

// No Nagle delay on the handshake's and the replies' small writes; room for
// a reply in one send rather than one per window's worth, each waiting for
// the rank to be scheduled (the kernel caps it at wmem_max).
void accepted_options(int fd) {
  set_nodelay(fd);
  set_send_buffer(fd, kSocketBuffer);
}

}  // namespace

Server::Server(const TcpStarOptions& o)
    : o_(o),
      address_(parse_host_port(o.address, "JACCL_COORDINATOR").str()),
      job_(token_fingerprint(o.token)),
      conns_(static_cast<size_t>(o.size)),
      connected_(static_cast<size_t>(o.size)),
      host_key_(shared_host_key()),
      shared_(address_, o.timeout.count() > 0
                            ? std::min(o.timeout, kSharedLinger)
                            : kSharedLinger) {
  const std::string who =
      "the coordinator of " + std::to_string(o.size) + " ranks at " + address_;
  ensure_fd_room(static_cast<size_t>(o.size) + kStrayRoom, who, 0);
  ep_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep_.valid()) {
    raise(ErrorKind::Io, "epoll_create1 failed",
          {.rank = 0, .sys_errno = errno});
  }
  drops_before_ = read_listen_drops();
  // Bind now so a taken port or a bad host fails init, not the first call.
  // Accepted sockets inherit the listener's options: two system calls fewer
  // per rank on the thread every connection waits for.
  listener_ = coordinator_listener(
      resolve(parse_host_port(o.address, "JACCL_COORDINATOR"), 0),
      listen_backlog(o.size), accepted_options, &inherited_);
  arm(listener_.get(), kListenerTag, EPOLLIN);
  listener_armed_ = true;
  if (o.size >= kReserveFdsFrom) {
    // Its accepted sockets, and as many again: thread-ranks of this
    // process dialing it (a table of 2 * size pointers is nothing beside
    // them). After listen(): the ranks may dial meanwhile. Not for small
    // jobs, whose table grows once at most: growing it costs a grace
    // period too.
    reserve_fd_table(ep_.get(), 2 * static_cast<size_t>(o.size) + kStrayRoom);
  }
  const std::string note = backlog_note(o.size, read_listen_sysctls());
  if (!note.empty()) {
    JACCL_LOG(Info, "coordinator " << address_ << ": " << note);
  }
  JACCL_LOG(Debug, "coordinator listening at " << address_ << " for "
                                               << o_.size - 1 << " ranks");
}

void Server::arm(int fd, uint64_t tag, uint32_t events, int op) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  if (::epoll_ctl(ep_.get(), op, fd, &ev) != 0) {
    raise(ErrorKind::Io, "epoll_ctl failed",
          {.rank = 0, .address = address_, .sys_errno = errno});
  }
}

// Rank r's socket is watched for exactly `events` (0: not at all).
void Server::watch(int r, uint32_t events) {
  Conn& c = conns_[r];
  if (c.armed != events) {
    arm(c.fd.get(), kRankTag | static_cast<uint64_t>(r), events, EPOLL_CTL_MOD);
    c.armed = events;
  }
}

void Server::watch_listener(bool on) {
  if (listener_.valid() && on != listener_armed_) {
    arm(listener_.get(), kListenerTag, on ? uint32_t{EPOLLIN} : 0u,
        EPOLL_CTL_MOD);
    listener_armed_ = on;
  }
}

// Waits for events until dl (and at most cap_ms); returns how many.
int Server::wait_events(const Deadline& dl, int cap_ms) {
  for (;;) {
    int k = ::epoll_wait(ep_.get(), events_.data(),
                         static_cast<int>(events_.size()), dl.poll_ms(cap_ms));
    if (k >= 0) {
      return k;
    }
    if (errno != EINTR) {
      raise(ErrorKind::Io, "epoll_wait failed",
            {.rank = 0, .address = address_, .sys_errno = errno});
    }
  }
}

void Server::serve(const char* src, char* dst, size_t n) {
  const Deadline dl = Deadline::after(o_.timeout);
  if (n != 0) {
    std::memmove(dst, src, n);  // in-place callers pass src == dst
  }
  if (lost_rank_ >= 0) {
    fail(ErrorKind::PeerLost,
         rank_ref(lost_rank_) +
             " lost its connection to the coordinator after all-gather #" +
             std::to_string(seq_ - 1) + " (it exited or crashed?)");
  }
  complete_ = 0;
  for (int r = 1; r < o_.size; ++r) {
    Conn& c = conns_[r];
    c.req_have = c.have = 0;
    c.n = 0;
    c.complete = false;
    if (c.fd.valid()) {
      watch(r, EPOLLIN);
    }
  }
  const auto t0 = Clock::now();
  while (connected_count_ < o_.size - 1 || complete_ < o_.size - 1) {
    if (dl.expired()) {
      fail(ErrorKind::Timeout, timeout_message());
    }
    // Wake at least once a second to expire stale handshakes.
    const int k = wait_events(dl, pending_.empty() ? -1 : 1000);
    bool accept_ready = false;
    for (int i = 0; i < k; ++i) {
      const uint64_t tag = events_[static_cast<size_t>(i)].data.u64;
      const uint64_t v = tag & ~kTagMask;
      if ((tag & kTagMask) == kRankTag) {
        read_request(static_cast<int>(v), dst, n);
      } else if ((tag & kTagMask) == kPendingTag) {
        auto it = pending_.find(v);
        if (it != pending_.end()) {
          // A rank sends its request right behind its proof: read it now
          // rather than after another wait.
          if (const int r = advance(it); r > 0) {
            read_request(r, dst, n);
          }
        }
      } else {
        accept_ready = true;
      }
    }
    expire_pending();
    if (accept_ready) {
      accept_pending();
    }
    watch_listener(pending_.size() < pending_room());
  }
  check_sizes(n);
  JACCL_LOG(Debug, "coordinator " << address_ << ": every rank's part of "
                                  << call_name() << " in after " << ms_since(t0)
                                  << " ms");
  if (listener_.valid()) {
    // Everyone is here: stop accepting, free the port.
    listener_.reset();
    pending_.clear();
    refused_.clear();
    const std::string drops = listen_drop_hint(drops_before_, o_.size);
    JACCL_LOG(Debug, "coordinator " << address_ << ": all " << o_.size - 1
                                    << " ranks connected and sent "
                                    << call_name() << " after " << ms_since(t0)
                                    << " ms");
    if (!drops.empty()) {
      JACCL_LOG(Info, "coordinator " << address_ << ": " << drops);
    }
  }
  const auto t1 = Clock::now();
  send_result(dst, n * static_cast<size_t>(o_.size), dl);
  JACCL_LOG(Debug, "coordinator "
                       << address_ << ": sent the result of " << call_name()
                       << " (" << n * static_cast<size_t>(o_.size)
                       << " bytes) to " << o_.size - 1 << " ranks in "
                       << ms_since(t1) << " ms");
}

Detail Server::timeout_message() {
  std::vector<int> missing, waiting;
  for (int r = 1; r < o_.size; ++r) {
    if (!conns_[r].fd.valid()) {
      missing.push_back(r);
    } else if (!conns_[r].complete) {
      waiting.push_back(r);
    }
  }
  Detail what = timeout_text() + " waiting for ";
  if (!missing.empty()) {
    what += ranks_ref(missing) + " to connect to coordinator " + address_;
    for (int r : missing) {
      auto it = refused_.find(r);
      if (it != refused_.end()) {
        what += "; " + it->second;
      }
    }
    const std::string drops = listen_drop_hint(drops_before_, o_.size);
    if (!drops.empty()) {
      what += "; " + drops;
    }
    if (!waiting.empty()) {
      what += ", and for ";
    }
  }
  if (!waiting.empty()) {
    what += ranks_ref(waiting) + " to join " + call_name() +
            " at coordinator " + address_;
  }
  return what;
}

void Server::accept_pending() {
  for (int i = 0; i < kAcceptBatch && pending_.size() < pending_room(); ++i) {
    SockAddr from;
    from.len = sizeof(from.ss);
    int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&from.ss),
                       &from.len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      const int e = errno;
      if (e == EINTR || e == ECONNABORTED || e == EPROTO) {
        continue;
      }
      if (out_of_resources(e)) {
        // The listener stays readable: waiting would spin until the
        // deadline and then blame the ranks.
        fail(ErrorKind::Io, "the coordinator at " + address_ +
                                " cannot accept more connections with " +
                                std::to_string(connected_count_) + " of " +
                                std::to_string(o_.size - 1) +
                                " ranks connected (" + std::strerror(e) +
                                "): " + resource_hint(e));
      }
      if (e != EAGAIN && e != EWOULDBLOCK) {
        JACCL_LOG(Warn, "coordinator " << address_ << ": accept failed: "
                                       << std::strerror(e));
      }
      return;
    }
    if (inherited_) {
      accepted_options(fd);  // may have connected before they were set
    }
    const uint64_t id = next_pending_++;
    arm(fd, kPendingTag | id, EPOLLIN);
    pending_.emplace(id, Pending{Fd(fd), from.str(), ServerHandshake(o_.token),
                                 Clock::now()});
  }
}

void Server::expire_pending() {
  const auto limit = std::min(
      kHandshakeLimit, o_.timeout.count() > 0 ? o_.timeout : kHandshakeLimit);
  const auto now = Clock::now();
  // Ids grow with accept time: the oldest come first.
  while (!pending_.empty() && now - pending_.begin()->second.since > limit) {
    JACCL_LOG(Info, "coordinator " << address_ << ": dropped a connection from "
                                   << pending_.begin()->second.from
                                   << " that did not finish the handshake");
    pending_.erase(pending_.begin());
  }
}

int Server::advance(std::map<uint64_t, Pending>::iterator it) {
  Pending& p = it->second;
  auto st = p.hs.on_readable(p.fd.get());
  if (st == ServerHandshake::State::NeedHello ||
      st == ServerHandshake::State::NeedProof) {
    return 0;
  }
  Pending mine = std::move(p);
  pending_.erase(it);
  return admit(mine, st);
}

namespace {

// A refused client may have sent its request behind its proof: read what
// is there and send FIN first, so that closing does not reset the
// connection (which can destroy the verdict before the client reads it).
void close_gently(Fd& fd) {
  char sink[4096];
  for (int i = 0; i < 64; ++i) {
    if (::recv(fd.get(), sink, sizeof(sink), MSG_DONTWAIT) <= 0) {
      break;
    }
  }
  ::shutdown(fd.get(), SHUT_WR);
  fd.reset();
}

}  // namespace

int Server::admit(Pending& p, ServerHandshake::State st) {
  const Hello& h = p.hs.hello();
  // A real rank of this job (decoded hello) is worth a warning and a note
  // in the eventual timeout; strangers only an info line.
  const bool ours = h.channel == Channel::Coordinator && h.size == o_.size &&
                    h.rank >= 1 && h.rank < o_.size;
  if (st == ServerHandshake::State::Failed) {
    std::string why = p.hs.failure();
    if (ours) {
      if (why.rfind("closed", 0) == 0) {
        why += " (the rank gave up: does it have another JACCL_TOKEN?)";
      }
      refused_[h.rank] = "a connection claiming " + rank_ref(h.rank) +
                         " from " + p.from + " failed the handshake: " + why;
      JACCL_LOG(Warn,
                "coordinator " << address_ << ": " << refused_[h.rank].str());
    } else {
      JACCL_LOG(Info, "coordinator " << address_
                                     << ": dropped a connection from " << p.from
                                     << ": " << why);
    }
    close_gently(p.fd);
    return 0;
  }
  const Detail why = admission_problem(h, o_.size, job_, connected_);
  try {
    send_verdict(p.fd.get(), why.empty(), why,
                 Deadline::after(kSmallSendBudget), {.rank = 0});
  } catch (const Error& e) {
    JACCL_LOG(Info, "coordinator " << address_ << ": connection from " << p.from
                                   << " went away: " << e.what());
    return 0;
  }
  if (!why.empty()) {
    JACCL_LOG(Warn, "coordinator " << address_ << ": refused a connection "
                                   << "from " << p.from << ": " << why.str());
    if (ours && !connected_[h.rank]) {
      refused_[h.rank] = "a connection claiming " + rank_ref(h.rank) +
                         " from " + p.from + " was refused: " + why;
    }
    close_gently(p.fd);
    return 0;
  }
  Conn& c = conns_[h.rank];
  c.fd = std::move(p.fd);
  c.from = p.from;
  // Registered under its pending tag until now.
  arm(c.fd.get(), kRankTag | static_cast<uint64_t>(h.rank), EPOLLIN,
      EPOLL_CTL_MOD);
  c.armed = EPOLLIN;  // TCP_NODELAY and SO_SNDBUF: from the listener
  connected_[h.rank] = true;
  ++connected_count_;
  refused_.erase(h.rank);
  JACCL_LOG(Trace, "coordinator " << address_ << ": rank " << h.rank
                                  << " connected from " << c.from);
  return h.rank;
}

void Server::read_request(int r, char* dst, size_t n) {
  Conn& c = conns_[r];
  if (c.complete) {
    return;  // an event from before watch(r, 0) in the same batch
  }
  while (!c.complete) {
    // The request's header and what follows of its payload in one system
    // call (rank 0 makes thousands of them per call, one rank after the
    // other). A payload of another size than ours is refused whole by
    // check_sizes, so reading a little of it into rank r's slot is
    // harmless.
    char* slot = dst + static_cast<size_t>(r) * n;
    iovec iov[2];
    size_t parts = 0;
    const size_t head = kRequestBytes - c.req_have;
    if (head > 0) {
      iov[parts++] = {c.req.data() + c.req_have, head};
    }
    if (c.have < n) {
      iov[parts++] = {slot + c.have, std::min(n - c.have, kMaxIoSlice)};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = parts;
    ssize_t k = ::recvmsg(c.fd.get(), &msg, 0);
    const int e = errno;
    if (k < 0 && e == EINTR) {
      continue;
    }
    if (k < 0 && (e == EAGAIN || e == EWOULDBLOCK)) {
      return;
    }
    if (k <= 0) {
      std::string how = k == 0 ? std::string("closed its connection")
                               : std::string("lost its connection (") +
                                     std::strerror(e) + ")";
      fail(ErrorKind::PeerLost, rank_ref(r) + " " + how +
                                    " to the coordinator during " +
                                    call_name() + " (it exited or crashed?)");
    }
    const size_t got = static_cast<size_t>(k);
    c.have += got > head ? got - head : 0;
    if (head > 0) {
      c.req_have += std::min(got, head);
      if (c.req_have == kRequestBytes) {
        auto m = decode_request(c.req);
        if (!m) {
          fail(ErrorKind::Protocol, rank_ref(r) + " sent a malformed request " +
                                        "for " + call_name());
        }
        c.n = *m;
        c.coded_ok = (request_flags(c.req) & kAcceptsCoded) != 0;
        c.host = request_host(c.req);
      }
    }
    // A size other than ours is not read further (check_sizes reports it).
    c.complete = c.req_have == kRequestBytes && (c.n != n || c.have == n);
  }
  ++complete_;
  watch(r, 0);  // nothing more to read in this call
}

void Server::check_sizes(size_t n) {
  std::map<uint64_t, std::vector<int>> by_size;
  by_size[n].push_back(0);
  for (int r = 1; r < o_.size; ++r) {
    by_size[conns_[r].n].push_back(r);
  }
  if (by_size.size() == 1) {
    return;
  }
  Detail what = "ranks disagree on the size of " + call_name() + ": ";
  bool first = true;
  for (const auto& [bytes, ranks] : by_size) {
    what += (first ? "" : "; ") + ranks_ref(ranks) + " passed " +
            std::to_string(bytes) + " bytes";
    first = false;
  }
  fail(ErrorKind::Protocol, what);
}

AllGatherFn make_server(const TcpStarOptions& o) {
  auto server = std::make_shared<Server>(o);
  return [server](const char* src, char* dst, size_t n) {
    server->call(src, dst, n);
  };
}

}  // namespace jaccl::detail::star
