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
#include "transport/liveness_loop.h"

namespace jaccl::detail {

namespace {

// How long a thread waits for the monitor's word: a data link's PeerLost
// for its verdict (FailureState::fail), a resumed thread for its catch-up.
// The monitor reads what is waiting within milliseconds.
constexpr Millis kMonitorGrace{1000};

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

std::string abort_frame(const Origin& o, uint8_t gen) {
  return ctl_frame(kCtlAbort, static_cast<uint8_t>(o.kind), o.root,
                   encode_error_info(o.info, kCtlMaxText), gen);
}

}  // namespace

void LivenessMonitor::Shared::wake_up() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake.get(), &one, sizeof(one));
}

void LivenessMonitor::Shared::enqueue_all(const std::string& f,
                                          bool droppable) {
  for (size_t p = 0; p < out.size(); ++p) {
    if (open[p] && !(droppable && out[p].size() > kCtlMaxQueued)) {
      out[p] += f;
    }
  }
}

int LivenessMonitor::Shared::hub() const {
  for (size_t r = 0; r < out.size(); ++r) {
    if (static_cast<int>(r) == self) {
      return self;
    }
    if (!gone[r] && open[r]) {
      return static_cast<int>(r);
    }
  }
  return self;
}

void LivenessMonitor::Shared::rehub() {
  const int h = hub();
  if (h == notice_hub) {
    return;
  }
  notice_hub = h;
  for (const std::string& f : notices) {
    if (h == self) {
      enqueue_all(f, false);
    } else {
      out[static_cast<size_t>(h)] += f;
    }
  }
}

void LivenessMonitor::Shared::notice(const std::string& f, int from) {
  rehub();
  notices.push_back(f);
  const int h = notice_hub;
  if (h != self) {
    if (from != h) {
      out[static_cast<size_t>(h)] += f;
    }
    return;
  }
  for (size_t p = 0; p < out.size(); ++p) {
    if (open[p] && !gone[p] && static_cast<int>(p) != from) {
      out[p] += f;
    }
  }
}

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
                                 Millis heartbeat_timeout,
                                 std::vector<Taken> taken, Inherit inherit)
    : rank_(rank),
      size_(static_cast<int>(control.size())),
      heartbeat_(heartbeat_timeout),
      state_(std::move(state)),
      shared_(std::make_shared<Shared>(rank, size_, inherit.generation)),
      control_(std::move(control)),
      taken_(std::move(taken)),
      gen_(inherit.generation) {
  shared_->parent_decide = std::move(inherit.decide);
  shared_->parent_held_from =
      shared_->parent_decide.empty() ? -1 : inherit.held_from;
  // A fresh group takes nothing over: taken_ stays empty rather than N
  // empty entries (72 bytes each, fresh pages at every rank of a large job).
  if (!taken_.empty())
    taken_.resize(control_.size());
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && !control_[static_cast<size_t>(p)].valid() &&
        !lost_at(static_cast<size_t>(p))) {
      full_mesh_ = false;
    }
  }
  shared_->wake = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!shared_->wake.valid()) {
    raise(ErrorKind::Io, "eventfd() failed",
          {.rank = rank, .sys_errno = errno});
  }
  state_->set_verdict_grace(kMonitorGrace);
  shared_->out.resize(control_.size());
  shared_->open.resize(control_.size());
  shared_->gone.assign(control_.size(), 0);
  shared_->handing.assign(control_.size(), 0);
  shared_->handed.assign(control_.size(), 0);
  shared_->handed_fd.resize(control_.size());
  for (size_t p = 0; p < control_.size(); ++p) {
    shared_->open[p] = control_[p].valid();
    if (p < taken_.size())
      shared_->out[p] = std::move(taken_[p].out);
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
    Origin o = t_relay ? *t_relay : origin_of(st->first_error(), rank);
    if (o.kind == ErrorKind::Revoked || o.kind == ErrorKind::Aborted ||
        o.kind == ErrorKind::Excluded) {
      return;  // not a failure: the escalation hook says what it is
    }
    std::string f = abort_frame(o, s->gen);
    {
      std::lock_guard<std::mutex> lock(s->mu);
      // Learned while handling a peer's frame: that peer knows of a
      // failure too. Queued even while stopping: the state reads as failed
      // before its hooks run, so the op thread may see the failure and
      // destroy the group first; the loop's last flush still sends this
      // ahead of its GOODBYE. Dropped, a hub would leave a member waiting
      // in an op for a peer that said goodbye.
      s->notice(f, t_notice_from);
    }
    s->wake_up();
  });
  register_escalation_hook(weak, st, rank);
  // A thread resuming after a pause of a heartbeat period (this rank may
  // have been stopped long enough to be left out) has the thread read what
  // arrived meanwhile, so a DEAD naming this rank is known before it posts.
  state_->set_catch_up(
      [weak] {
        auto s = weak.lock();
        if (!s) {
          return;
        }
        std::unique_lock<std::mutex> lock(s->mu);
        if (s->stopping || s->loop_ended) {
          return;
        }
        const uint64_t want = ++s->sync_asked;
        s->wake_up();
        s->cv.wait_for(lock, kMonitorGrace, [&] {
          return s->sync_done >= want || s->stopping || s->loop_ended;
        });
      },
      heartbeat_ > Millis(0) ? std::max(Millis(1), heartbeat_ / 4)
                             : Millis::max());
  thread_ = std::thread([this] {
    Loop loop(*this);
    loop.run();
  });
}

LivenessMonitor::~LivenessMonitor() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stopping = true;
  }
  shared_->wake_up();
  shared_->cv.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

LivenessMonitor::Loop::Loop(LivenessMonitor& m)
    : m_(m),
      rank_(m.rank_),
      n_(m.control_.size()),
      control_(m.control_),
      shared_(*m.shared_),
      last_(n_, Clock::now()),
      goodbye_(n_, 0),
      reported_(n_, 0),
      servicing_(n_, 0),
      handoff_(n_, 0),
      eof_(n_, 0),
      in_(n_),
      next_(n_),
      rbuf_(new char[kReadBytes]) {
  for (size_t p = 0; p < m.taken_.size(); ++p) {
    in_[p] = std::move(m.taken_[p].in);
  }
}

void LivenessMonitor::Loop::fail(ErrorKind kind, const Detail& what,
                                 const ErrorContext& ctx) {
  std::exception_ptr e = error_ptr(kind, what, ctx);
  if (m_.state_->fail(e, /*authoritative=*/true)) {
    JACCL_LOG(Debug,
              "rank " << rank_ << " liveness: " << format_error(what, ctx));
  }
}

void LivenessMonitor::Loop::close_peer(size_t p) {
  if (control_[p].valid()) {
    ::shutdown(control_[p].get(), SHUT_WR);
    // Drain unread bytes so close() sends FIN, not RST.
    char buf[4096];
    while (::recv(control_[p].get(), buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
  }
  control_[p].reset();
  std::lock_guard<std::mutex> lock(shared_.mu);
  shared_.open[p] = 0;
  shared_.out[p].clear();
  if (shared_.handing[p]) {
    shared_.handed[p] = 1;  // lost before its HANDOFF: an invalid fd
    shared_.cv.notify_all();
  }
}

void LivenessMonitor::Loop::lost(int r, const Detail& what, int sys_errno,
                                 const Detail& cause) {
  const auto u = static_cast<size_t>(r);
  if (!m_.state_->mark_failed(r)) {
    return;
  }
  // What r sent before it failed is read first (a decision among it).
  if (control_[u].valid() && !servicing_[u] && !eof_[u]) {
    service(u);
  }
  // DEAD goes out before the ABORT that fail() queues: a stopped r, woken,
  // reads first that it was left out.
  const std::string dead =
      shared_.frame(kCtlDead, 0, r, (cause.empty() ? what : cause).to_wire());
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    shared_.gone[u] = 1;
    shared_.notice(dead, t_notice_from);
    if (shared_.open[u]) {
      // A stopped rank reads this when it wakes: it has been left out.
      shared_.out[u] += dead;
      const std::string& q = shared_.out[u];
      [[maybe_unused]] auto k = ::send(control_[u].get(), q.data(), q.size(),
                                       MSG_DONTWAIT | MSG_NOSIGNAL);
    }
  }
  shared_.cv.notify_all();
  // Once r's next monitor spoke, the stream is a shrunk group's: its
  // monitor judges.
  if (!handoff_[u]) {
    close_peer(u);
  }
  fail(ErrorKind::PeerLost, what, {.rank = rank_, .sys_errno = sys_errno});
}

void LivenessMonitor::Loop::close_all() {
  for (size_t p = 0; p < n_; ++p) {
    if (control_[p].valid()) {
      close_peer(p);
    }
  }
}

void LivenessMonitor::Loop::flush() {
  std::lock_guard<std::mutex> lock(shared_.mu);
  for (size_t p = 0; p < n_; ++p) {
    auto& q = shared_.out[p];
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
}

void LivenessMonitor::Loop::on_abort_frame(size_t p, uint8_t kind, int32_t root,
                                           std::string_view body) {
  Origin o;
  o.root = root;
  o.kind = kind <= static_cast<uint8_t>(ErrorKind::Internal)
               ? static_cast<ErrorKind>(kind)
               : ErrorKind::Internal;
  if (o.kind == ErrorKind::Aborted) {
    // The root aborted the group: for us it is a lost peer.
    if (root >= 0 && static_cast<size_t>(root) < n_ && root != rank_) {
      lost(root, rank_ref(root) + " aborted the group", 0);
    }
    return;
  }
  if (m_.state_->failed()) {
    return;  // only the first failure counts: no error to make
  }
  if (auto info = decode_error_info(body)) {
    o.info = std::move(*info);
  } else {  // not an encoded error: shown as text
    o.info.detail = escape_detail(body);
  }
  // o.info is relayed on as the root made it; only what this rank shows is
  // rewritten from the root's point of view.
  std::exception_ptr e = relayed(o, rank_, static_cast<int>(p));
  t_relay = &o;
  if (m_.state_->fail(e, /*authoritative=*/true)) {
    try {
      std::rethrow_exception(e);
    } catch (const Error& err) {
      JACCL_LOG(Debug, "rank " << rank_ << " liveness: " << err.what());
    }
  }
  t_relay = nullptr;
}

void LivenessMonitor::Loop::handle(size_t p, uint8_t type, uint8_t kind,
                                   int32_t root, std::string_view body) {
  switch (type) {
    case kCtlGoodbye: {
      goodbye_[p] = 1;
      std::lock_guard<std::mutex> lock(shared_.mu);
      shared_.gone[p] = 1;  // left: not waited for by an agreement
      shared_.cv.notify_all();
      break;
    }
    case kCtlAbort:
      on_abort_frame(p, kind, root, body);
      break;
    case kCtlDead:
      on_dead(p, root, body);
      break;
    case kCtlRevoke:
      on_revoke(p, root);
      break;
    case kCtlVote:
      on_vote(p, body);
      break;
    case kCtlDecide:
      on_decide(p, body);
      break;
    case kCtlMail:
      on_mail(p, body);
      break;
    default:  // HEARTBEAT: last_ is already updated
      break;
  }
}

// Reads what peer p sent, handles complete frames, then EOF or an error.
void LivenessMonitor::Loop::service(size_t p) {
  if (eof_[p]) {
    return;  // the rest is the next monitor's
  }
  servicing_[p] = 1;
  // Reads are done before any frame is handled (a handler may service
  // another peer), so every call shares one buffer.
  char* buf = rbuf_.get();
  int err = -1;  // -1: still open, 0: EOF, >0: errno
  for (;;) {
    ssize_t k = ::recv(control_[p].get(), buf, kReadBytes, MSG_DONTWAIT);
    if (k > 0) {
      in_[p].append(buf, static_cast<size_t>(k));
      last_[p] = Clock::now();
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      break;
    err = k == 0 ? 0 : errno;
    break;
  }
  // Named only when something goes wrong: rank 0 of a one-host group of
  // 1024 services 1,023 peers, and a Detail is several allocations.
  auto who = [p] { return rank_ref(static_cast<int>(p)); };
  while (in_[p].size() >= kCtlHeader && control_[p].valid()) {
    const std::string& s = in_[p];
    const uint8_t type = static_cast<uint8_t>(s[0]);
    const uint8_t kind = static_cast<uint8_t>(s[1]);
    const uint32_t len = get_u32(bytes_at(s, 8));
    uint8_t gen = 0;
    const bool known = ctl_generation(get_u16(bytes_at(s, 2)), &gen);
    const bool mine = known && gen == shared_.gen;
    const bool next = known && gen == static_cast<uint8_t>(shared_.gen + 1);
    const bool prev = known && gen == static_cast<uint8_t>(shared_.gen - 1);
    if (!(mine || next || prev) || type < kCtlHeartbeat || type > kCtlLast ||
        len > ctl_max_body(type)) {
      fail(ErrorKind::Protocol,
           who() + " sent a malformed control frame (type " +
               std::to_string(type) + ", length " + std::to_string(len) + ")",
           {.rank = rank_});
      close_peer(p);
      servicing_[p] = 0;
      return;
    }
    if (s.size() < kCtlHeader + len)
      break;
    if (next) {
      // The peer's next monitor (a shrunk group's): kept for ours.
      next_[p].append(s, 0, kCtlHeader + len);
      in_[p].erase(0, kCtlHeader + len);
      handoff_[p] = 1;
      continue;
    }
    if (prev) {
      // The peer's old monitor (its group's ranks, not ours): a vote, from
      // a survivor that missed the commit, is answered with the decision.
      if (type == kCtlVote) {
        std::lock_guard<std::mutex> lock(shared_.mu);
        if (shared_.open[p]) {
          shared_.out[p] += shared_.parent_decide;
        }
      }
      in_[p].erase(0, kCtlHeader + len);
      continue;
    }
    const auto root = static_cast<int32_t>(get_u32(bytes_at(s, 4)));
    // Taken out first: a handler may service other peers (or close this
    // one) before it returns.
    std::string body = s.substr(kCtlHeader, len);
    in_[p].erase(0, kCtlHeader + len);
    const int outer = t_notice_from;
    t_notice_from = static_cast<int>(p);
    handle(p, type, kind, root, body);
    t_notice_from = outer;
  }
  servicing_[p] = 0;
  // After the next monitor spoke, an EOF is its to read (the socket stays).
  if (err >= 0 && handoff_[p]) {
    eof_[p] = 1;
  }
  if (err >= 0 && control_[p].valid() && !handoff_[p]) {
    close_peer(p);
    if (!goodbye_[p]) {
      lost(static_cast<int>(p),
           who() + " died or closed its connection (no goodbye)", err);
    }
  }
}

void LivenessMonitor::Loop::run() {
  const bool hb_on = m_.heartbeat_.count() > 0;
  const Millis heartbeat = m_.heartbeat_;
  const Millis period = std::max(Millis(1), heartbeat / 4);
  auto now = Clock::now();
  // A monitor taking connections over (a shrunk group's) sends its first
  // heartbeat a period from now, not at once: every peer's new monitor
  // starts its silence clock now too, and at once it was n (n - 1) frames
  // just as the new group's first operation starts.
  auto next_hb = m_.gen_ > 0 ? now + period : now;

  std::vector<pollfd> pfds;
  std::vector<size_t> owner;
  for (size_t p = 0; p < n_; ++p) {
    if (!m_.lost_at(p)) {
      continue;
    }
    const int r = static_cast<int>(p);
    lost(r,
         rank_ref(r) +
             " was lost while the survivors' connections were handed to their "
             "new group",
         0);
  }
  for (size_t p = 0; p < n_; ++p) {
    if (!in_[p].empty() && control_[p].valid()) {
      service(p);  // frames read by the monitor before this one
    }
  }
  for (;;) {
    if (mail_news_) {  // once a turn, not once a frame
      mail_news_ = false;
      shared_.cv.notify_all();
    }
    now = Clock::now();
    if (hb_on && now >= next_hb) {
      std::lock_guard<std::mutex> lock(shared_.mu);
      shared_.enqueue_all(shared_.frame(kCtlHeartbeat, 0, rank_, {}), true);
      next_hb = now + period;
    }
    drive_agreement();
    flush();
    transfer();
    bool close = false;
    {
      std::lock_guard<std::mutex> lock(shared_.mu);
      close = shared_.close_all;
    }
    if (close) {
      close_all();
    }
    int timeout_ms = -1;
    if (hb_on) {
      auto wake_at = next_hb;
      for (size_t p = 0; p < n_; ++p) {
        if (control_[p].valid() && !goodbye_[p] && !reported_[p] &&
            !handoff_[p]) {
          wake_at = std::min(wake_at, last_[p] + heartbeat);
        }
      }
      timeout_ms = static_cast<int>(std::max<long long>(
          0, std::chrono::ceil<Millis>(wake_at - now).count()));
    }
    pfds.assign(1, pollfd{shared_.wake.get(), POLLIN, 0});
    owner.assign(1, n_);
    uint64_t sync = 0;  // catch-up requests this turn answers
    {
      std::lock_guard<std::mutex> lock(shared_.mu);
      if (shared_.sync_asked > shared_.sync_done) {
        sync = shared_.sync_asked;
        timeout_ms = 0;
      }
      for (size_t p = 0; p < n_; ++p) {
        if (control_[p].valid() && !(eof_[p] && shared_.out[p].empty())) {
          short ev = eof_[p] ? 0 : POLLIN;
          if (!shared_.out[p].empty())
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
      [[maybe_unused]] auto r = ::read(shared_.wake.get(), &v, sizeof(v));
      std::lock_guard<std::mutex> lock(shared_.mu);
      if (shared_.stopping)
        break;
    }
    for (size_t i = 1; k > 0 && i < pfds.size(); ++i) {
      const size_t p = owner[i];
      if ((pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
          control_[p].valid()) {
        service(p);
      }
    }
    if (sync > 0) {
      {
        std::lock_guard<std::mutex> lock(shared_.mu);
        shared_.sync_done = std::max(shared_.sync_done, sync);
      }
      shared_.cv.notify_all();
    }
    // Silence is judged only after reading what arrived, so a rank that was
    // itself stopped does not blame its peers when it resumes.
    if (hb_on) {
      now = Clock::now();
      for (size_t p = 0; p < n_; ++p) {
        if (control_[p].valid() && !goodbye_[p] && !reported_[p] &&
            !handoff_[p] && now - last_[p] > heartbeat) {
          reported_[p] = 1;
          const int ip = static_cast<int>(p);
          lost(ip,
               "no heartbeat from " + rank_ref(ip) + " for " +
                   format_duration(heartbeat) + ": host unreachable?",
               0);
        }
      }
    }
  }

  // Normal end: GOODBYE to every peer, best effort, never waiting.
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    for (size_t p = 0; p < n_; ++p) {
      if (control_[p].valid())
        shared_.out[p] += shared_.frame(kCtlGoodbye, 0, rank_, {});
    }
  }
  flush();
  close_all();
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    shared_.loop_ended = true;
  }
  shared_.cv.notify_all();
}

}  // namespace jaccl::detail
