// Copyright 2026 the jaccl authors.
// Rank 0's half of the TCP star. One poll loop serves every socket (the
// listener, half-open handshakes, the ranks) and owns the call's deadline, so
// a slow or dead rank never delays reading or writing the others. When a call
// fails, rank 0 sends the same error to every connected rank before throwing
// it, so the whole job reports one cause instead of a cascade of timeouts.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include "bootstrap/tcp_star.h"
#include "common/error.h"
#include "common/log.h"
#include "common/net.h"

namespace jaccl::detail {

namespace {

using star::kReplyBytes;
using star::kRequestBytes;

// Half-open connections (port scanners, stuck strays) are dropped after this.
constexpr Millis kHandshakeLimit{10000};
constexpr size_t kMaxPending = 256;
// Verdicts and error frames are tiny; never wait long to deliver them.
constexpr Millis kSmallSendBudget{1000};

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
  std::string from;  // peer address, for logs
  std::array<uint8_t, kRequestBytes> req{};
  size_t req_have = 0;
  uint64_t n = 0;
  size_t have = 0;
  Outbox out;
  bool lost = false;  // the connection broke while we wrote to it
};

// An accepted connection that has not finished the handshake yet.
struct Pending {
  Fd fd;
  std::string from;
  ServerHandshake hs;
  Clock::time_point since;
  bool done = false;
};

void poll_or_raise(std::vector<pollfd>& fds, const Deadline& dl, int cap_ms,
                   const ErrorContext& ctx) {
  if (poll_until(fds.data(), fds.size(), dl, cap_ms) < 0) {
    ErrorContext c = ctx;
    c.sys_errno = errno;
    raise(ErrorKind::Io, "poll failed", c);
  }
}

class Server {
 public:
  explicit Server(const TcpStarOptions& o)
      : o_(o),
        address_(parse_host_port(o.address, "JACCL_COORDINATOR").str()),
        job_(token_fingerprint(o.token)),
        conns_(static_cast<size_t>(o.size)) {
    // Bind now so a taken port or a bad host fails init, not the first call.
    listener_ =
        listen_tcp(resolve(parse_host_port(o.address, "JACCL_COORDINATOR"), 0),
                   SOMAXCONN, 0);
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
    for (auto& c : conns_) {
      c.req_have = c.have = 0;
      c.n = 0;
    }
    std::vector<pollfd> fds;
    std::vector<int> who;  // > 0: rank, 0: listener, < 0: -1 - pending index
    for (;;) {
      std::vector<int> missing, waiting;
      for (int r = 1; r < o_.size; ++r) {
        const Conn& c = conns_[r];
        if (!c.fd.valid()) {
          missing.push_back(r);
        } else if (c.req_have < kRequestBytes || (c.n == n && c.have < n)) {
          waiting.push_back(r);
        }
      }
      if (missing.empty() && waiting.empty()) {
        break;
      }
      if (dl.expired()) {
        fail(ErrorKind::Timeout, timeout_message(missing, waiting));
      }
      fds.clear();
      who.clear();
      if (!missing.empty()) {
        fds.push_back({listener_.get(), POLLIN, 0});
        who.push_back(0);
      }
      for (size_t i = 0; i < pending_.size(); ++i) {
        fds.push_back({pending_[i].fd.get(), POLLIN, 0});
        who.push_back(-1 - static_cast<int>(i));
      }
      for (int r : waiting) {
        fds.push_back({conns_[r].fd.get(), POLLIN, 0});
        who.push_back(r);
      }
      // Wake at least once a second to expire stale handshakes.
      poll_or_raise(fds, dl, 1000, {.rank = 0});
      bool accept_ready = false;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) {
          continue;
        }
        if (who[i] == 0) {
          accept_ready = true;
        } else if (who[i] < 0) {
          advance(pending_[static_cast<size_t>(-1 - who[i])]);
        } else {
          read_request(who[i], dst, n);
        }
      }
      expire_pending();
      if (accept_ready) {
        accept_pending();
      }
    }
    check_sizes(n);
    if (listener_.valid()) {
      // Everyone is here: stop accepting, free the port.
      listener_.reset();
      pending_.clear();
      refused_.clear();
    }
    send_result(dst, n * static_cast<size_t>(o_.size), dl);
  }

  std::string timeout_message(const std::vector<int>& missing,
                              const std::vector<int>& waiting) {
    std::string what = timeout_text() + " waiting for ";
    if (!missing.empty()) {
      what += ranks_phrase(missing) + " to connect to coordinator " + address_;
      for (int r : missing) {
        auto it = refused_.find(r);
        if (it != refused_.end()) {
          what += "; " + it->second;
        }
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
    for (int i = 0; i < 64; ++i) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) {
          continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          JACCL_LOG(Warn, "coordinator " << address_ << ": accept failed: "
                                         << std::strerror(errno));
        }
        return;
      }
      set_nodelay(fd);
      if (pending_.size() >= kMaxPending) {
        JACCL_LOG(Warn, "coordinator " << address_
                                       << ": too many half-open connections, "
                                          "dropping the oldest from "
                                       << pending_.front().from);
        pending_.erase(pending_.begin());
      }
      std::string from = peer_address(fd).str();
      pending_.push_back(Pending{Fd(fd), std::move(from),
                                 ServerHandshake(o_.token), Clock::now()});
    }
  }

  void expire_pending() {
    const auto limit = std::min(
        kHandshakeLimit, o_.timeout.count() > 0 ? o_.timeout : kHandshakeLimit);
    const auto now = Clock::now();
    for (auto& p : pending_) {
      if (!p.done && now - p.since > limit) {
        JACCL_LOG(Info, "coordinator " << address_ << ": dropped a connection "
                                       << "from " << p.from
                                       << " that did not finish the handshake");
        p.done = true;
      }
    }
    std::erase_if(pending_, [](const Pending& p) { return p.done; });
  }

  void advance(Pending& p) {
    if (p.done) {
      return;
    }
    auto st = p.hs.on_readable(p.fd.get());
    if (st == ServerHandshake::State::NeedHello ||
        st == ServerHandshake::State::NeedProof) {
      return;
    }
    p.done = true;
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
    std::vector<bool> connected(conns_.size());
    for (size_t r = 0; r < conns_.size(); ++r) {
      connected[r] = conns_[r].fd.valid();
    }
    std::string why = star::admission_problem(h, o_.size, job_, connected);
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
      if (ours && !connected[h.rank]) {
        refused_[h.rank] = "a connection claiming rank " +
                           std::to_string(h.rank) + " from " + p.from +
                           " was refused: " + why;
      }
      return;
    }
    Conn& c = conns_[h.rank];
    c.fd = std::move(p.fd);
    c.from = p.from;
    refused_.erase(h.rank);
    JACCL_LOG(Debug, "coordinator " << address_ << ": rank " << h.rank
                                    << " connected from " << c.from);
  }

  void read_request(int r, char* dst, size_t n) {
    Conn& c = conns_[r];
    for (;;) {
      char* p = nullptr;
      size_t want = 0;
      if (c.req_have < kRequestBytes) {
        p = reinterpret_cast<char*>(c.req.data()) + c.req_have;
        want = kRequestBytes - c.req_have;
      } else if (c.n == n && c.have < n) {
        p = dst + static_cast<size_t>(r) * n + c.have;
        want = std::min(n - c.have, kMaxIoSlice);
      } else {
        return;  // complete, or a size we will not read (reported later)
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
        }
      } else {
        c.have += static_cast<size_t>(k);
      }
    }
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

  void send_result(const char* dst, size_t total, const Deadline& dl) {
    auto head = star::encode_reply(
        {star::Status::Ok, ErrorKind::Internal, static_cast<uint64_t>(total)});
    for (int r = 1; r < o_.size; ++r) {
      conns_[r].out = Outbox{head, dst, total, 0};
    }
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (;;) {
      fds.clear();
      who.clear();
      for (int r = 1; r < o_.size; ++r) {
        Conn& c = conns_[r];
        if (c.lost || c.out.finished()) {
          continue;
        }
        if (int e = c.out.pump(c.fd.get()); e != 0) {
          // Everyone else still gets the result; the loss is reported at
          // the next call, where every rank can hear about it.
          JACCL_LOG(Info, "coordinator " << address_ << ": lost rank " << r
                                         << " while sending the result of "
                                         << call_name() << ": "
                                         << std::strerror(e));
          c.lost = true;
          if (lost_rank_ < 0) {
            lost_rank_ = r;
          }
          continue;
        }
        if (!c.out.finished()) {
          fds.push_back({c.fd.get(), POLLOUT, 0});
          who.push_back(r);
        }
      }
      if (fds.empty()) {
        return;
      }
      if (dl.expired()) {
        fail(ErrorKind::Timeout, timeout_text() + " sending the result of " +
                                     call_name() + " to " + ranks_phrase(who) +
                                     " (they stopped reading)");
      }
      poll_or_raise(fds, dl, -1, {.rank = 0});
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
  Fd listener_;
  std::vector<Pending> pending_;
  std::vector<Conn> conns_;             // by rank; [0] unused
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
