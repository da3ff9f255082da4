// Copyright 2026 the jaccl authors.
// Rank 0's replies: the result of a call to every rank (coded once when that
// is smaller, a bounded number of replies in flight), or one error to every
// connected rank before rank 0 throws it.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <system_error>
#include <thread>
#include <utility>

#include "bootstrap/tcp_star_server.h"
#include "common/error.h"
#include "common/log.h"

namespace jaccl::detail::star {

namespace {

// The replies of ranks [from, to) written by a second thread: at most
// in_flight at a time, waited on with poll() (their sockets are not armed
// in the server's epoll set while results go out), touching no state but
// those ranks' Conn. It stops at dl, or soon after `stop`.
struct Helper {
  int from = 0, to = 0, in_flight = 1;
  std::vector<std::pair<int, int>> lost;  // (rank, errno): broke
  std::vector<int> unfinished;            // at dl: ranks not served
  std::exception_ptr error;               // what run() threw (bad_alloc)
  std::atomic<bool> stop{false};
  std::thread thread;

  void run(std::vector<Conn>& conns, const Deadline& dl) {
    std::vector<int> active;
    std::vector<pollfd> fds;
    int next = from;
    auto pump = [&](int r) {  // true while r's reply is unfinished
      Conn& c = conns[static_cast<size_t>(r)];
      if (int e = c.out.pump(c.fd.get()); e != 0) {
        c.lost = true;
        lost.emplace_back(r, e);
        return false;
      }
      return !c.out.finished();
    };
    for (;;) {
      while (static_cast<int>(active.size()) < in_flight && next < to) {
        const int r = next++;
        if (pump(r)) {
          active.push_back(r);
        }
      }
      if (active.empty() || stop.load(std::memory_order_relaxed)) {
        break;
      }
      if (dl.expired()) {
        unfinished = active;
        for (int r = next; r < to; ++r) {
          unfinished.push_back(r);
        }
        break;
      }
      fds.clear();
      for (int r : active) {
        fds.push_back({conns[static_cast<size_t>(r)].fd.get(), POLLOUT, 0});
      }
      poll_until(fds.data(), fds.size(), dl, 100);  // 100: see stop
      size_t keep = 0;
      for (size_t i = 0; i < active.size(); ++i) {
        if (fds[i].revents == 0 || pump(active[i])) {
          active[keep++] = active[i];
        }
      }
      active.resize(keep);
    }
  }
  // Stops it (if still running) and waits for it; idempotent.
  void finish() {
    if (thread.joinable()) {
      stop.store(true, std::memory_order_relaxed);
      thread.join();
    }
  }
  ~Helper() { finish(); }
};

}  // namespace

// Pumps rank r's reply; false once it is finished or lost.
bool Server::pump_result(int r) {
  Conn& c = conns_[r];
  if (int e = c.out.pump(c.fd.get()); e != 0) {
    c.lost = true;
    lost_sending(r, e);
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

// Everyone else still gets the result; the loss is reported at the next
// call, where every rank can hear about it.
void Server::lost_sending(int r, int err) {
  JACCL_LOG(Info, "coordinator " << address_ << ": lost rank " << r
                                 << " while sending the result of "
                                 << call_name() << ": " << std::strerror(err));
  if (lost_rank_ < 0) {
    lost_rank_ = r;
  }
}

void Server::send_result(const char* dst, size_t total, const Deadline& dl) {
  auto head = encode_reply(
      {Status::Ok, ErrorKind::Internal, static_cast<uint64_t>(total)});
  // Written once into shared memory for the ranks that can map it.
  std::vector<uint8_t> ref;
  const auto near =
      host_key_ == 0
          ? 0
          : std::count_if(conns_.begin() + 1, conns_.end(),
                          [&](const Conn& c) { return c.host == host_key_; });
  if (total >= kShareFrom && near > 0) {
    if (auto r = shared_.publish(dst, total, static_cast<int>(near))) {
      ref = encode_shared_ref(*r);
      JACCL_LOG(Debug, "coordinator " << address_ << ": " << call_name()
                                      << "'s result in shared memory memfd:"
                                      << shared_label(r->key) << " for " << near
                                      << " rank(s)");
    }
  }
  auto shares = [&](const Conn& c) {
    return !ref.empty() && c.host == host_key_;
  };
  const auto shared_head =
      encode_reply({Status::Ok, ErrorKind::Internal, ref.size(), kShared});
  const bool any_tcp = std::any_of(conns_.begin() + 1, conns_.end(),
                                   [&](const Conn& c) { return !shares(c); });
  // Coded once for every other rank that takes it, when that saves a
  // quarter.
  std::vector<uint8_t> coded;
  const size_t n = total / static_cast<size_t>(o_.size);
  if (total >= kCodeFrom &&
      std::any_of(conns_.begin() + 1, conns_.end(),
                  [&](const Conn& c) { return c.coded_ok && !shares(c); })) {
    coded = encode_parts(dst, n, total);
    if (coded.size() > total - total / 4) {
      coded.clear();
    }
  }
  const auto coded_head =
      encode_reply({Status::Ok, ErrorKind::Internal, coded.size(), kCoded});
  if (!coded.empty()) {
    JACCL_LOG(Debug, "coordinator " << address_ << ": " << call_name()
                                    << "'s result coded in " << coded.size()
                                    << " of " << total << " bytes");
  }
  // A bounded number of replies at a time, in rank order: the bytes
  // queued in the kernel stay bounded (all at once, 4095 replies of 1 MiB,
  // is 4 GiB of socket memory) and so do the ranks woken at once.
  const size_t body = !any_tcp        ? ref.size()
                      : coded.empty() ? total
                                      : coded.size();
  const int in_flight = static_cast<int>(
      std::max<size_t>(16, kInFlightBytes / std::max<size_t>(body, 1)));
  auto outbox = [&](const Conn& c) {
    if (shares(c)) {
      return Outbox{shared_head, reinterpret_cast<const char*>(ref.data()),
                    ref.size(), 0};
    }
    return !coded.empty() && c.coded_ok
               ? Outbox{coded_head, reinterpret_cast<const char*>(coded.data()),
                        coded.size(), 0}
               : Outbox{head, dst, total, 0};
  };
  // More bytes to write than may be in flight at once: a second thread
  // writes the upper half of the replies. Rank 0's thread alone is the
  // bottleneck there (its sends also carry the kernel's whole loopback
  // path): 4095 replies of 256 KiB kept it busy for 280-450 ms while about
  // a third of two cores stood idle.
  Helper helper;
  int end = o_.size;
  if (body * static_cast<size_t>(o_.size - 1) > kInFlightBytes && o_.size > 2 &&
      std::thread::hardware_concurrency() > 1) {
    end = 1 + (o_.size - 1) / 2;
    helper.from = end;
    helper.to = o_.size;
    helper.in_flight = std::max(1, in_flight / 2);
    for (int r = end; r < o_.size; ++r) {
      conns_[r].out = outbox(conns_[r]);
    }
    try {
      helper.thread = std::thread([&] {
        try {
          helper.run(conns_, dl);
        } catch (...) {  // rethrown by this thread
          helper.error = std::current_exception();
        }
      });
    } catch (const std::system_error& e) {
      // Out of threads (thread-ranks by the thousand): this one writes all.
      JACCL_LOG(Info, "coordinator " << address_ << ": no second thread to "
                                     << "send results (" << e.what() << ")");
      end = o_.size;
    }
  }
  const int mine = end == o_.size ? in_flight : in_flight - helper.in_flight;
  int next = 1, active = 0;
  auto start_more = [&] {
    while (active < std::max(mine, 1) && next < end) {
      const int r = next++;
      conns_[r].out = outbox(conns_[r]);
      active += pump_result(r) ? 1 : 0;
    }
  };
  auto unserved = [&] {
    std::vector<int> who;
    for (int r = 1; r < o_.size; ++r) {
      if (!conns_[r].lost &&
          ((r < end && r >= next) || !conns_[r].out.finished())) {
        who.push_back(r);
      }
    }
    return who;
  };
  auto timed_out = [&] {
    helper.finish();
    fail(ErrorKind::Timeout, timeout_text() + " sending the result of " +
                                 call_name() + " to " + ranks_ref(unserved()) +
                                 " (they stopped reading)");
  };
  start_more();
  while (active > 0) {
    if (dl.expired()) {
      timed_out();
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
  if (helper.thread.joinable()) {
    helper.thread.join();
    if (helper.error) {
      std::rethrow_exception(helper.error);
    }
    for (const auto& [r, e] : helper.lost) {
      lost_sending(r, e);
    }
    if (!helper.unfinished.empty()) {
      timed_out();
    }
  }
}

// Tells every connected rank about the failure (best effort, bounded),
// then throws it here. Ranks in the middle of a reply cannot take another
// frame; they see the connection close instead.
void Server::fail(ErrorKind kind, const Detail& what) {
  // The ranks travel as numbers, so a client's error keeps them as fields;
  // a wire form too long for the frame (every one of thousands of ranks)
  // goes as the shown text, whose lists stop at 16.
  std::string body = what.to_wire();
  if (body.size() > kMaxErrorMessage) {
    body = escape_detail(what.str()).substr(0, kMaxErrorMessage);
  }
  auto head = encode_reply({Status::Error, kind, body.size()});
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
  shared_.abandon();
  raise(kind, what, {.rank = 0});
}
}  // namespace jaccl::detail::star
