// Copyright 2026 the jaccl authors.
#include "transport/liveness.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

#include "common/bytes.h"
#include "common/error.h"
#include "common/error_wire.h"
#include "common/log.h"

namespace jaccl::detail {

namespace {

constexpr uint16_t kCtlMagic = 0xC71A;
constexpr size_t kCtlHeader = 12;
constexpr uint32_t kMaxText = 16384;      // an ABORT's encoded error
constexpr size_t kMaxQueued = 64 * 1024;  // heartbeats beyond are dropped
enum : uint8_t { kHeartbeat = 1, kGoodbye = 2, kAbort = 3 };

std::string frame(uint8_t type, uint8_t kind, int32_t root,
                  std::string_view text) {
  text = text.substr(0, kMaxText);
  std::string f(kCtlHeader + text.size(), '\0');
  auto* p = reinterpret_cast<uint8_t*>(f.data());
  p[0] = type;
  p[1] = kind;
  put_u16(p + 2, kCtlMagic);
  put_u32(p + 4, static_cast<uint32_t>(root));
  put_u32(p + 8, static_cast<uint32_t>(text.size()));
  if (!text.empty()) {  // an empty view may have a null data()
    std::memcpy(f.data() + kCtlHeader, text.data(), text.size());
  }
  return f;
}

const uint8_t* bytes_at(const std::string& s, size_t at) {
  return reinterpret_cast<const uint8_t*>(s.data()) + at;
}

// Where an ABORT this rank relays came from (set by the monitor thread
// around the fail() call that runs the hook synchronously): the root's
// kind and fields, relayed on as the root made them.
struct Origin {
  int root = -1;
  ErrorKind kind = ErrorKind::Internal;
  ErrorInfo info;
};
thread_local const Origin* t_relay = nullptr;

// "[jaccl] rank 2: x" -> "x", for an error made from a message alone.
std::string strip_prefix(std::string s, int rank) {
  const std::string a = "[jaccl] ";
  if (s.rfind(a, 0) == 0)
    s.erase(0, a.size());
  const std::string b = "rank " + std::to_string(rank) + ": ";
  if (s.rfind(b, 0) == 0)
    s.erase(0, b.size());
  return s;
}

Origin origin_of(std::exception_ptr e, int rank) {
  Origin o;
  o.root = rank;
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    o.kind = err.kind();
    if (err.structured()) {
      o.info = err.info();
      o.info.context.clear();
    } else {
      o.info.detail = escape_detail(strip_prefix(err.what(), rank));
    }
  } catch (const std::exception& err) {
    o.info.detail = escape_detail(err.what());
  } catch (...) {
    o.info.detail = "unknown exception";
  }
  o.info.rank = rank;
  return o;
}

// How rank `me` shows what rank `root` wrote about itself (and `via`
// passed on): "this rank" reads as the root, and a peer note naming the
// reader goes; the root's address and errno stay.
std::exception_ptr relayed(const Origin& o, int me, int via) {
  const ErrorInfo& ri = o.info;
  Detail body = Detail::from_template(ri.detail, ri.peers)
                    .replaced("this rank", rank_ref(o.root))
                    .replaced("This rank", "Rank " + rank_num(o.root));
  ErrorInfo info = error_info(rank_ref(o.root) + " reported: " + body,
                              {.rank = me,
                               .peer = ri.peer == me ? -1 : ri.peer,
                               .address = ri.address,
                               .sys_errno = ri.sys_errno});
  if (via != o.root) {
    info.relayed_by = via;
    if (std::find(info.peers.begin(), info.peers.end(), via) ==
        info.peers.end()) {
      info.peers.push_back(via);
    }
  }
  return make_error(o.kind, std::move(info));
}

}  // namespace

struct LivenessMonitor::Shared {
  std::mutex mu;
  std::vector<std::string> out;  // bytes queued per peer
  std::vector<char> open;        // control socket still usable
  bool stopping = false;
  Fd wake;

  void wake_up() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake.get(), &one, sizeof(one));
  }
  // Caller holds mu.
  void enqueue_all(const std::string& f, bool droppable) {
    for (size_t p = 0; p < out.size(); ++p) {
      if (open[p] && !(droppable && out[p].size() > kMaxQueued)) {
        out[p] += f;
      }
    }
  }
};

void apply_keepalive(int fd, Millis heartbeat_timeout) {
  long long hb_s = (heartbeat_timeout.count() + 999) / 1000;
  if (hb_s <= 0) {
    set_keepalive(fd, 60, 10, 6, 0);
    return;
  }
  int idle = static_cast<int>(std::max<long long>(1, hb_s));
  int interval = static_cast<int>(std::max<long long>(1, (hb_s + 3) / 4));
  set_keepalive(fd, idle, interval, 4, 0);
}

LivenessMonitor::LivenessMonitor(int rank, std::vector<Fd> control,
                                 std::shared_ptr<FailureState> state,
                                 Millis heartbeat_timeout)
    : rank_(rank),
      heartbeat_(heartbeat_timeout),
      state_(std::move(state)),
      shared_(std::make_shared<Shared>()),
      control_(std::move(control)) {
  shared_->wake = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!shared_->wake.valid()) {
    raise(ErrorKind::Io, "eventfd() failed",
          {.rank = rank, .sys_errno = errno});
  }
  // A data link's PeerLost now waits this long for our verdict (see
  // FailureState::fail): the monitor reads a peer's notice within ms.
  state_->set_verdict_grace(Millis(1000));
  shared_->out.resize(control_.size());
  shared_->open.resize(control_.size());
  for (size_t p = 0; p < control_.size(); ++p) {
    shared_->open[p] = control_[p].valid();
  }
  std::weak_ptr<Shared> weak = shared_;
  FailureState* st = state_.get();
  // A failure recorded before this point runs the hook right away (on_abort
  // does), so the ABORT is queued and the thread sends it first thing.
  state_->on_abort([weak, st, rank] {
    auto s = weak.lock();
    if (!s) {
      return;
    }
    Origin o = t_relay ? *t_relay : origin_of(st->error(), rank);
    std::string f = frame(kAbort, static_cast<uint8_t>(o.kind), o.root,
                          encode_error_info(o.info, kMaxText));
    {
      std::lock_guard<std::mutex> lock(s->mu);
      if (s->stopping) {
        return;
      }
      s->enqueue_all(f, false);
    }
    s->wake_up();
  });
  thread_ = std::thread([this] { run(); });
}

LivenessMonitor::~LivenessMonitor() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stopping = true;
  }
  shared_->wake_up();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void LivenessMonitor::run() {
  const size_t n = control_.size();
  const bool hb_on = heartbeat_.count() > 0;
  const Millis period = std::max(Millis(1), heartbeat_ / 4);
  auto now = Clock::now();
  std::vector<Clock::time_point> last(n, now);
  std::vector<char> goodbye(n, 0), reported(n, 0);
  std::vector<std::string> in(n);
  auto next_hb = now;

  auto fail_with = [&](std::exception_ptr e, const Origin* relay) {
    t_relay = relay;
    if (state_->fail(e, /*authoritative=*/true)) {
      try {
        std::rethrow_exception(e);
      } catch (const Error& err) {
        JACCL_LOG(Debug, "rank " << rank_ << " liveness: " << err.what());
      }
    }
    t_relay = nullptr;
  };
  auto fail = [&](ErrorKind kind, const Detail& what, const ErrorContext& ctx) {
    fail_with(error_ptr(kind, what, ctx), nullptr);
  };
  auto close_peer = [&](size_t p) {
    control_[p].reset();
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->open[p] = 0;
    shared_->out[p].clear();
  };
  auto flush = [&] {
    std::lock_guard<std::mutex> lock(shared_->mu);
    for (size_t p = 0; p < n; ++p) {
      auto& q = shared_->out[p];
      while (!q.empty() && control_[p].valid()) {
        ssize_t k = ::send(control_[p].get(), q.data(), q.size(),
                           MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k > 0) {
          q.erase(0, static_cast<size_t>(k));
        } else if (k < 0 && errno == EINTR) {
          continue;
        } else {
          // EAGAIN: retry on POLLOUT; a broken socket: the read side reports.
          if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            q.clear();
          }
          break;
        }
      }
    }
  };
  // Reads what peer p sent, handles complete frames, then EOF or an error.
  auto service = [&](size_t p) {
    char buf[4096];
    int err = -1;  // -1: still open, 0: EOF, >0: errno
    for (;;) {
      ssize_t k = ::recv(control_[p].get(), buf, sizeof(buf), MSG_DONTWAIT);
      if (k > 0) {
        in[p].append(buf, static_cast<size_t>(k));
        last[p] = Clock::now();
        continue;
      }
      if (k < 0 && errno == EINTR)
        continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      err = k == 0 ? 0 : errno;
      break;
    }
    const Detail who = rank_ref(static_cast<int>(p));
    while (in[p].size() >= kCtlHeader) {
      const std::string& s = in[p];
      uint8_t type = static_cast<uint8_t>(s[0]);
      uint8_t kind = static_cast<uint8_t>(s[1]);
      uint32_t len = get_u32(bytes_at(s, 8));
      if (get_u16(bytes_at(s, 2)) != kCtlMagic || len > kMaxText ||
          type < kHeartbeat || type > kAbort) {
        fail(ErrorKind::Protocol,
             who + " sent a malformed control frame (type " +
                 std::to_string(type) + ", length " + std::to_string(len) + ")",
             {.rank = rank_});
        close_peer(p);
        return;
      }
      if (s.size() < kCtlHeader + len)
        break;
      if (type == kGoodbye) {
        goodbye[p] = 1;
      } else if (type == kAbort) {
        Origin o;
        o.root = static_cast<int32_t>(get_u32(bytes_at(s, 4)));
        o.kind = kind <= static_cast<uint8_t>(ErrorKind::Internal)
                     ? static_cast<ErrorKind>(kind)
                     : ErrorKind::Internal;
        const std::string_view body(s.data() + kCtlHeader, len);
        if (auto info = decode_error_info(body)) {
          o.info = std::move(*info);
        } else {  // not an encoded error: shown as text
          o.info.detail = escape_detail(body);
        }
        // o.info is relayed on as the root made it; only what this rank
        // shows is rewritten from the root's point of view.
        fail_with(relayed(o, rank_, static_cast<int>(p)), &o);
      }
      in[p].erase(0, kCtlHeader + len);
    }
    if (err >= 0) {
      close_peer(p);
      if (!goodbye[p]) {
        fail(ErrorKind::PeerLost,
             who + " died or closed its connection (no goodbye)",
             {.rank = rank_, .sys_errno = err});
      }
    }
  };

  std::vector<pollfd> pfds;
  std::vector<size_t> owner;
  for (;;) {
    now = Clock::now();
    if (hb_on && now >= next_hb) {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->enqueue_all(frame(kHeartbeat, 0, rank_, {}), true);
      next_hb = now + period;
    }
    flush();
    int timeout_ms = -1;
    if (hb_on) {
      auto wake_at = next_hb;
      for (size_t p = 0; p < n; ++p) {
        if (control_[p].valid() && !goodbye[p] && !reported[p]) {
          wake_at = std::min(wake_at, last[p] + heartbeat_);
        }
      }
      timeout_ms = static_cast<int>(std::max<long long>(
          0, std::chrono::ceil<Millis>(wake_at - now).count()));
    }
    pfds.assign(1, pollfd{shared_->wake.get(), POLLIN, 0});
    owner.assign(1, n);
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      for (size_t p = 0; p < n; ++p) {
        if (control_[p].valid()) {
          short ev = POLLIN;
          if (!shared_->out[p].empty())
            ev |= POLLOUT;
          pfds.push_back(pollfd{control_[p].get(), ev, 0});
          owner.push_back(p);
        }
      }
    }
    int k = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (k < 0 && errno != EINTR) {
      fail(ErrorKind::Io, "liveness monitor: poll failed",
           {.rank = rank_, .sys_errno = errno});
      break;
    }
    if (k > 0 && (pfds[0].revents & POLLIN)) {
      uint64_t v = 0;
      [[maybe_unused]] auto r = ::read(shared_->wake.get(), &v, sizeof(v));
      std::lock_guard<std::mutex> lock(shared_->mu);
      if (shared_->stopping)
        break;
    }
    for (size_t i = 1; k > 0 && i < pfds.size(); ++i) {
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        service(owner[i]);
      }
    }
    // Silence is judged only after reading what arrived, so a rank that was
    // itself stopped does not blame its peers when it resumes.
    if (hb_on) {
      now = Clock::now();
      for (size_t p = 0; p < n; ++p) {
        if (control_[p].valid() && !goodbye[p] && !reported[p] &&
            now - last[p] > heartbeat_) {
          reported[p] = 1;
          fail(ErrorKind::PeerLost,
               "no heartbeat from " + rank_ref(static_cast<int>(p)) + " for " +
                   format_duration(heartbeat_) + ": host unreachable?",
               {.rank = rank_});
        }
      }
    }
  }

  // Normal end: GOODBYE to every peer, best effort, never waiting.
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    for (size_t p = 0; p < n; ++p) {
      if (control_[p].valid())
        shared_->out[p] += frame(kGoodbye, 0, rank_, {});
    }
  }
  flush();
  for (size_t p = 0; p < n; ++p) {
    if (!control_[p].valid())
      continue;
    ::shutdown(control_[p].get(), SHUT_WR);
    // Drain unread bytes so close() sends FIN, not RST.
    char buf[4096];
    while (::recv(control_[p].get(), buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
    close_peer(p);
  }
}

}  // namespace jaccl::detail
