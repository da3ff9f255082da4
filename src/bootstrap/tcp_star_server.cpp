// Copyright 2026 the jaccl authors.
// Rank 0's half of the TCP star. One epoll loop serves every socket (the
// listener, half-open handshakes, the ranks) and owns the call's deadline, so
// a slow or dead rank never delays reading or writing the others, and the
// work per wake-up follows the sockets that are ready, not the job's size (a
// poll set rebuilt per wake-up made connecting 4096 ranks quadratic). When a
// call fails, rank 0 sends the same error to every connected rank before
// throwing it, so the whole job reports one cause instead of a cascade of
// timeouts.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>

#include "bootstrap/tcp_star.h"
#include "bootstrap/tcp_star_limits.h"
#include "common/error.h"
#include "common/log.h"
#include "common/net.h"

namespace jaccl::detail {

namespace {

using star::kReplyBytes;
using star::kRequestBytes;

// Half-open connections (port scanners, stuck strays) are dropped after this.
constexpr Millis kHandshakeLimit{10000};
// Handshakes in progress beyond the ranks still missing: past this, rank 0
// stops accepting (the kernel's queue holds the rest) until some finish or
// expire, instead of dropping connections that may be ranks.
constexpr size_t kStrayRoom = 256;
// Accepts per wake-up, so handshakes already under way are served between
// the bursts of a mass start.
constexpr int kAcceptBatch = 256;
// Results smaller than this go uncoded (see tcp_star_codec.cpp).
constexpr size_t kCodeFrom = 16 << 10;
// Replies being written at once (see send_result).
constexpr int kInFlight = 64;
// Verdicts and error frames are tiny; never wait long to deliver them.
constexpr Millis kSmallSendBudget{1000};

// epoll tags: the listener, a pending handshake (by id), a rank.
constexpr uint64_t kListenerTag = 0;
constexpr uint64_t kPendingTag = uint64_t(1) << 62;
constexpr uint64_t kRankTag = uint64_t(2) << 62;
constexpr uint64_t kTagMask = uint64_t(3) << 62;

// A reply being written to one rank on a non-blocking socket.
struct Outbox {
  std::array<uint8_t, kReplyBytes> head{};
  const char* body = nullptr;
  size_t body_len = 0;
  size_t done = 0;

  size_t total() const { return kReplyBytes + body_len; }
  bool finished() const { return done == total(); }
  // Between two frames: a new frame (say, an error) may start here.
  bool at_boundary() const { return done == 0 || finished(); }

  // Writes until finished or the socket is full; errno on failure, else 0.
  int pump(int fd) { return send_frame_some(fd, head, body, body_len, &done); }
};

// Rank 0's view of one rank.
struct Conn {
  Fd fd;
  std::string from;    // peer address, for logs
  uint32_t armed = 0;  // epoll events registered
  std::array<uint8_t, kRequestBytes> req{};
  size_t req_have = 0;
  uint64_t n = 0;
  size_t have = 0;
  bool complete = false;  // this call's request read (or its size refused)
  bool coded_ok = false;  // it decodes a coded result
  Outbox out;
  bool lost = false;  // the connection broke while we wrote to it
};

// An accepted connection that has not finished the handshake yet.
struct Pending {
  Fd fd;
  std::string from;
  ServerHandshake hs;
  Clock::time_point since;
};

class Server {
 public:
  explicit Server(const TcpStarOptions& o)
      : o_(o),
        address_(parse_host_port(o.address, "JACCL_COORDINATOR").str()),
        job_(token_fingerprint(o.token)),
        conns_(static_cast<size_t>(o.size)),
        connected_(static_cast<size_t>(o.size)) {
    const std::string who = "the coordinator of " + std::to_string(o.size) +
                            " ranks at " + address_;
    star::ensure_fd_room(static_cast<size_t>(o.size) + kStrayRoom, who, 0);
    ep_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!ep_.valid()) {
      raise(ErrorKind::Io, "epoll_create1 failed",
            {.rank = 0, .sys_errno = errno});
    }
    drops_before_ = star::read_listen_drops();
    // Bind now so a taken port or a bad host fails init, not the first call.
    listener_ =
        listen_tcp(resolve(parse_host_port(o.address, "JACCL_COORDINATOR"), 0),
                   star::listen_backlog(o.size), 0);
    arm(listener_.get(), kListenerTag, EPOLLIN);
    listener_armed_ = true;
    const std::string note =
        star::backlog_note(o.size, star::read_listen_sysctls());
    if (!note.empty()) {
      JACCL_LOG(Info, "coordinator " << address_ << ": " << note);
    }
    JACCL_LOG(Debug, "coordinator listening at " << address_ << " for "
                                                 << o_.size - 1 << " ranks");
  }

  void call(const char* src, char* dst, size_t n) {
    seq_ = calls_++;
    serve(src, dst, n);
  }

 private:
  std::string call_name() const {
    return "all-gather #" + std::to_string(seq_);
  }
  std::string timeout_text() const {
    return "timed out after " + format_duration(o_.timeout);
  }

  void arm(int fd, uint64_t tag, uint32_t events, int op = EPOLL_CTL_ADD) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    if (::epoll_ctl(ep_.get(), op, fd, &ev) != 0) {
      raise(ErrorKind::Io, "epoll_ctl failed",
            {.rank = 0, .address = address_, .sys_errno = errno});
    }
  }
  // Rank r's socket is watched for exactly `events` (0: not at all).
  void watch(int r, uint32_t events) {
    Conn& c = conns_[r];
    if (c.armed != events) {
      arm(c.fd.get(), kRankTag | static_cast<uint64_t>(r), events,
          EPOLL_CTL_MOD);
      c.armed = events;
    }
  }
  void watch_listener(bool on) {
    if (listener_.valid() && on != listener_armed_) {
      arm(listener_.get(), kListenerTag, on ? uint32_t{EPOLLIN} : 0u,
          EPOLL_CTL_MOD);
      listener_armed_ = on;
    }
  }

  // Waits for events until dl (and at most cap_ms); returns how many.
  int wait_events(const Deadline& dl, int cap_ms) {
    for (;;) {
      int k =
          ::epoll_wait(ep_.get(), events_.data(),
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

  void serve(const char* src, char* dst, size_t n) {
    const Deadline dl = Deadline::after(o_.timeout);
    if (n != 0) {
      std::memmove(dst, src, n);  // in-place callers pass src == dst
    }
    if (lost_rank_ >= 0) {
      fail(ErrorKind::PeerLost,
           "rank " + std::to_string(lost_rank_) +
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
            advance(it);
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
                                    << call_name() << " in after "
                                    << ms_since(t0) << " ms");
    if (listener_.valid()) {
      // Everyone is here: stop accepting, free the port.
      listener_.reset();
      pending_.clear();
      refused_.clear();
      const std::string drops = star::listen_drop_hint(drops_before_, o_.size);
      JACCL_LOG(Debug, "coordinator " << address_ << ": all " << o_.size - 1
                                      << " ranks connected and sent "
                                      << call_name() << " after "
                                      << ms_since(t0) << " ms");
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

  static long long ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<Millis>(Clock::now() - t).count();
  }

  // Handshakes we let run at once: one per missing rank, plus room for
  // strays.
  size_t pending_room() const {
    return static_cast<size_t>(o_.size - 1 - connected_count_) + kStrayRoom;
  }

  std::string timeout_message() {
    std::vector<int> missing, waiting;
    for (int r = 1; r < o_.size; ++r) {
      if (!conns_[r].fd.valid()) {
        missing.push_back(r);
      } else if (!conns_[r].complete) {
        waiting.push_back(r);
      }
    }
    std::string what = timeout_text() + " waiting for ";
    if (!missing.empty()) {
      what += ranks_phrase(missing) + " to connect to coordinator " + address_;
      for (int r : missing) {
        auto it = refused_.find(r);
        if (it != refused_.end()) {
          what += "; " + it->second;
        }
      }
      const std::string drops = star::listen_drop_hint(drops_before_, o_.size);
      if (!drops.empty()) {
        what += "; " + drops;
      }
      if (!waiting.empty()) {
        what += ", and for ";
      }
    }
    if (!waiting.empty()) {
      what += ranks_phrase(waiting) + " to join " + call_name() +
              " at coordinator " + address_;
    }
    return what;
  }

  void accept_pending() {
    for (int i = 0; i < kAcceptBatch && pending_.size() < pending_room(); ++i) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
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
      set_nodelay(fd);
      const uint64_t id = next_pending_++;
      arm(fd, kPendingTag | id, EPOLLIN);
      pending_.emplace(id, Pending{Fd(fd), peer_address(fd).str(),
                                   ServerHandshake(o_.token), Clock::now()});
    }
  }

  void expire_pending() {
    const auto limit = std::min(
        kHandshakeLimit, o_.timeout.count() > 0 ? o_.timeout : kHandshakeLimit);
    const auto now = Clock::now();
    // Ids grow with accept time: the oldest come first.
    while (!pending_.empty() && now - pending_.begin()->second.since > limit) {
      JACCL_LOG(Info, "coordinator " << address_
                                     << ": dropped a connection from "
                                     << pending_.begin()->second.from
                                     << " that did not finish the handshake");
      pending_.erase(pending_.begin());
    }
  }

  void advance(std::map<uint64_t, Pending>::iterator it) {
    Pending& p = it->second;
    auto st = p.hs.on_readable(p.fd.get());
    if (st == ServerHandshake::State::NeedHello ||
        st == ServerHandshake::State::NeedProof) {
      return;
    }
    Pending mine = std::move(p);
    pending_.erase(it);
    admit(mine, st);
  }

  void admit(Pending& p, ServerHandshake::State st) {
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
        refused_[h.rank] = "a connection claiming rank " +
                           std::to_string(h.rank) + " from " + p.from +
                           " failed the handshake: " + why;
        JACCL_LOG(Warn, "coordinator " << address_ << ": " << refused_[h.rank]);
      } else {
        JACCL_LOG(Info, "coordinator " << address_
                                       << ": dropped a connection from "
                                       << p.from << ": " << why);
      }
      return;
    }
    std::string why = star::admission_problem(h, o_.size, job_, connected_);
    try {
      send_verdict(p.fd.get(), why.empty(), why,
                   Deadline::after(kSmallSendBudget), {.rank = 0});
    } catch (const Error& e) {
      JACCL_LOG(Info, "coordinator " << address_ << ": connection from "
                                     << p.from << " went away: " << e.what());
      return;
    }
    if (!why.empty()) {
      JACCL_LOG(Warn, "coordinator " << address_ << ": refused a connection "
                                     << "from " << p.from << ": " << why);
      if (ours && !connected_[h.rank]) {
        refused_[h.rank] = "a connection claiming rank " +
                           std::to_string(h.rank) + " from " + p.from +
                           " was refused: " + why;
      }
      return;
    }
    Conn& c = conns_[h.rank];
    c.fd = std::move(p.fd);
    c.from = p.from;
    // Registered under its pending tag until now.
    arm(c.fd.get(), kRankTag | static_cast<uint64_t>(h.rank), EPOLLIN,
        EPOLL_CTL_MOD);
    c.armed = EPOLLIN;
    connected_[h.rank] = true;
    ++connected_count_;
    refused_.erase(h.rank);
    JACCL_LOG(Trace, "coordinator " << address_ << ": rank " << h.rank
                                    << " connected from " << c.from);
  }

  void read_request(int r, char* dst, size_t n) {
    Conn& c = conns_[r];
    if (c.complete) {
      return;  // an event from before watch(r, 0) in the same batch
    }
    while (!c.complete) {
      char* p = nullptr;
      size_t want = 0;
      if (c.req_have < kRequestBytes) {
        p = reinterpret_cast<char*>(c.req.data()) + c.req_have;
        want = kRequestBytes - c.req_have;
      } else {
        p = dst + static_cast<size_t>(r) * n + c.have;
        want = std::min(n - c.have, kMaxIoSlice);
      }
      ssize_t k = ::recv(c.fd.get(), p, want, 0);
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
        fail(ErrorKind::PeerLost, "rank " + std::to_string(r) + " " + how +
                                      " to the coordinator during " +
                                      call_name() + " (it exited or crashed?)");
      }
      if (c.req_have < kRequestBytes) {
        c.req_have += static_cast<size_t>(k);
        if (c.req_have == kRequestBytes) {
          auto m = star::decode_request(c.req);
          if (!m) {
            fail(ErrorKind::Protocol, "rank " + std::to_string(r) +
                                          " sent a malformed request " +
                                          "for " + call_name());
          }
          c.n = *m;
          c.coded_ok = (star::request_flags(c.req) & star::kAcceptsCoded) != 0;
        }
      } else {
        c.have += static_cast<size_t>(k);
      }
      // A size other than ours is not read (check_sizes reports it).
      c.complete = c.req_have == kRequestBytes && (c.n != n || c.have == n);
    }
    ++complete_;
    watch(r, 0);  // nothing more to read in this call
  }

  void check_sizes(size_t n) {
    std::map<uint64_t, std::vector<int>> by_size;
    by_size[n].push_back(0);
    for (int r = 1; r < o_.size; ++r) {
      by_size[conns_[r].n].push_back(r);
    }
    if (by_size.size() == 1) {
      return;
    }
    std::string what = "ranks disagree on the size of " + call_name() + ": ";
    bool first = true;
    for (const auto& [bytes, ranks] : by_size) {
      what += (first ? "" : "; ") + ranks_phrase(ranks) + " passed " +
              std::to_string(bytes) + " bytes";
      first = false;
    }
    fail(ErrorKind::Protocol, what);
  }

  // Pumps rank r's reply; false once it is finished or lost.
  bool pump_result(int r) {
    Conn& c = conns_[r];
    if (int e = c.out.pump(c.fd.get()); e != 0) {
      // Everyone else still gets the result; the loss is reported at the
      // next call, where every rank can hear about it.
      JACCL_LOG(Info, "coordinator " << address_ << ": lost rank " << r
                                     << " while sending the result of "
                                     << call_name() << ": "
                                     << std::strerror(e));
      c.lost = true;
      if (lost_rank_ < 0) {
        lost_rank_ = r;
      }
      watch(r, 0);
      return false;
    }
    if (c.out.finished()) {
      // Not EPOLLIN yet: an early next request would wake us in vain until
      // every reply is out; serve() arms it.
      watch(r, 0);
      return false;
    }
    watch(r, EPOLLOUT);
    return true;
  }

  void send_result(const char* dst, size_t total, const Deadline& dl) {
    auto head = star::encode_reply(
        {star::Status::Ok, ErrorKind::Internal, static_cast<uint64_t>(total)});
    // Coded once for every rank that takes it, when that saves a quarter.
    std::vector<uint8_t> coded;
    const size_t n = total / static_cast<size_t>(o_.size);
    if (total >= kCodeFrom &&
        std::any_of(conns_.begin() + 1, conns_.end(),
                    [](const Conn& c) { return c.coded_ok; })) {
      coded = star::encode_parts(dst, n, total);
      if (coded.size() > total - total / 4) {
        coded.clear();
      }
    }
    const auto coded_head = star::encode_reply(
        {star::Status::Ok, ErrorKind::Internal, coded.size(), star::kCoded});
    if (!coded.empty()) {
      JACCL_LOG(Debug, "coordinator " << address_ << ": " << call_name()
                                      << "'s result coded in " << coded.size()
                                      << " of " << total << " bytes");
    }
    // kInFlight replies at a time, in rank order: the bytes queued in the
    // kernel stay bounded (all at once, 4095 replies of 1 MiB, is 4 GiB of
    // socket memory) and so do the ranks woken at once.
    int next = 1, active = 0;
    auto start_more = [&] {
      while (active < kInFlight && next < o_.size) {
        const int r = next++;
        Conn& c = conns_[r];
        c.out = !coded.empty() && c.coded_ok
                    ? Outbox{coded_head,
                             reinterpret_cast<const char*>(coded.data()),
                             coded.size(), 0}
                    : Outbox{head, dst, total, 0};
        active += pump_result(r) ? 1 : 0;
      }
    };
    start_more();
    while (active > 0) {
      if (dl.expired()) {
        std::vector<int> who;
        for (int r = 1; r < o_.size; ++r) {
          if (!conns_[r].lost && (r >= next || !conns_[r].out.finished())) {
            who.push_back(r);
          }
        }
        fail(ErrorKind::Timeout, timeout_text() + " sending the result of " +
                                     call_name() + " to " + ranks_phrase(who) +
                                     " (they stopped reading)");
      }
      const int k = wait_events(dl, -1);
      for (int i = 0; i < k; ++i) {
        const uint64_t tag = events_[static_cast<size_t>(i)].data.u64;
        const int r = static_cast<int>(tag & ~kTagMask);
        if ((tag & kTagMask) == kRankTag && (conns_[r].armed & EPOLLOUT) != 0 &&
            !pump_result(r)) {
          --active;
        }
      }
      start_more();
    }
  }

  // Tells every connected rank about the failure (best effort, bounded),
  // then throws it here. Ranks in the middle of a reply cannot take another
  // frame; they see the connection close instead.
  [[noreturn]] void fail(ErrorKind kind, const std::string& what) {
    const std::string body = what.substr(0, star::kMaxErrorMessage);
    auto head = star::encode_reply({star::Status::Error, kind, body.size()});
    std::vector<int> targets;
    for (int r = 1; r < o_.size; ++r) {
      Conn& c = conns_[r];
      if (c.fd.valid() && !c.lost && c.out.at_boundary()) {
        c.out = Outbox{head, body.data(), body.size(), 0};
        targets.push_back(r);
      }
    }
    const Deadline budget = Deadline::after(kSmallSendBudget);
    std::vector<pollfd> fds;
    while (!budget.expired()) {
      fds.clear();
      for (int r : targets) {
        Conn& c = conns_[r];
        if (!c.lost && !c.out.finished()) {
          c.lost = c.out.pump(c.fd.get()) != 0;
          if (!c.lost && !c.out.finished()) {
            fds.push_back({c.fd.get(), POLLOUT, 0});
          }
        }
      }
      if (fds.empty()) {
        break;
      }
      poll_until(fds.data(), fds.size(), budget);
    }
    // FIN after the frame: a rank that could not take the frame still
    // learns that the coordinator is gone. The sockets stay open (closing
    // with unread input would reset them and could destroy the frame).
    for (auto& c : conns_) {
      if (c.fd.valid()) {
        ::shutdown(c.fd.get(), SHUT_WR);
      }
    }
    listener_.reset();
    pending_.clear();
    raise(kind, what, {.rank = 0});
  }

  TcpStarOptions o_;
  std::string address_;
  uint64_t job_;
  uint64_t calls_ = 0;
  uint64_t seq_ = 0;  // number of the call in progress
  Fd ep_;
  std::vector<epoll_event> events_ = std::vector<epoll_event>(512);
  Fd listener_;
  bool listener_armed_ = false;
  star::ListenDrops drops_before_;
  std::map<uint64_t, Pending> pending_;  // by id = accept order
  uint64_t next_pending_ = 0;
  std::vector<Conn> conns_;  // by rank; [0] unused
  std::vector<bool> connected_;
  int connected_count_ = 0;
  int complete_ = 0;                    // ranks whose request is read
  std::map<int, std::string> refused_;  // why a rank's attempt failed
  int lost_rank_ = -1;  // broke while we sent; reported at the next call
};

}  // namespace

AllGatherFn star::make_server(const TcpStarOptions& o) {
  auto server = std::make_shared<Server>(o);
  return [server](const char* src, char* dst, size_t n) {
    server->call(src, dst, n);
  };
}

}  // namespace jaccl::detail
