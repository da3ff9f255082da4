// Copyright 2026 the jaccl authors.
#include "transport/tcp_reuse.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "common/bytes.h"
#include "common/error.h"
#include "common/log.h"

namespace jaccl::detail {

namespace {

constexpr uint64_t kReuseMagic = 0x3130535752434a6aull;  // "jJCRWS01"

// How long a take-over waits for an op of the parent still running on
// another thread to end (it throws once it sees the failure).
constexpr Millis kQuietWait{1000};

// try_lock until the deadline: the op lock is a plain mutex, and
// std::timed_mutex's timed lock goes through pthread_mutex_clocklock, which
// GCC 12's ThreadSanitizer does not see (it then reports the unlock as
// one of an unlocked mutex).
std::unique_lock<std::mutex> lock_within(std::mutex& mu, Millis wait) {
  std::unique_lock<std::mutex> lk(mu, std::try_to_lock);
  const Deadline dl = Deadline::after(wait);
  while (!lk.owns_lock() && !dl.expired()) {
    std::this_thread::sleep_for(Millis(1));
    lk.try_lock();
  }
  return lk;
}

// One wire whose parent's stream still has bytes to drop.
struct Drain {
  int member;
  int wire;
  int fd;
  uint64_t left;
  WireCount* count;
};

// Reads and drops what each wire's peer sent past what this end had read,
// all wires at once, until the set-up's deadline or a member's loss.
void drain(const std::vector<Drain>& wires, int rank, int abort_fd,
           const Deadline& dl) {
  std::vector<Drain> left = wires;
  std::vector<char> buf(size_t(64) << 10);
  while (!left.empty()) {
    std::vector<pollfd> p;
    for (const Drain& d : left) {
      p.push_back({d.fd, POLLIN, 0});
    }
    if (abort_fd >= 0) {
      p.push_back({abort_fd, POLLIN, 0});
    }
    if (dl.expired()) {
      std::vector<int> who;
      for (const Drain& d : left) {
        who.push_back(d.member);
      }
      raise(ErrorKind::Timeout,
            "timed out after " + format_duration(dl.total()) +
                " reading the end of the old group's data from " +
                ranks_ref(who),
            {.rank = rank});
    }
    const int k = ::poll(p.data(), p.size(), dl.poll_ms(1000));
    if (k < 0 && errno != EINTR) {
      raise(ErrorKind::Io, "poll failed while taking connections over",
            {.rank = rank, .sys_errno = errno});
    }
    if (abort_fd >= 0 && (p.back().revents & POLLIN) != 0) {
      raise(ErrorKind::PeerLost,
            "a member was lost while the group's connections were taken over",
            {.rank = rank});
    }
    for (size_t i = 0; i < left.size(); ++i) {
      if (p[i].revents == 0) {
        continue;
      }
      Drain& d = left[i];
      const ssize_t n =
          ::recv(d.fd, buf.data(),
                 static_cast<size_t>(std::min<uint64_t>(d.left, buf.size())),
                 MSG_DONTWAIT);
      if (n > 0) {
        d.left -= static_cast<uint64_t>(n);
        d.count->received.fetch_add(static_cast<uint64_t>(n),
                                    std::memory_order_relaxed);
      } else if (n == 0) {
        raise(ErrorKind::PeerLost,
              "connection closed by the peer while the old group's data "
              "was read off it",
              {.rank = rank, .peer = d.member});
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        raise(ErrorKind::PeerLost,
              "recv failed while the old group's data was read off the "
              "connection",
              {.rank = rank, .peer = d.member, .sys_errno = errno});
      }
    }
    left.erase(std::remove_if(left.begin(), left.end(),
                              [](const Drain& d) { return d.left == 0; }),
               left.end());
  }
}

}  // namespace

std::optional<ReusedWires> reuse_tcp_wires(const Config& cfg, SideChannel& sc,
                                           WireBank& bank,
                                           const std::vector<int>& parent_of,
                                           const std::vector<int>& want,
                                           int slots,
                                           const AllGatherFn& gather) {
  const int rank = cfg.get_rank();
  const int size = cfg.get_size();
  const auto n = static_cast<size_t>(size);
  const auto k = static_cast<size_t>(std::max(slots, 1));
  // Whether this member can take its connections over, and how many of
  // those the plan wants there are to each member (the same at both ends:
  // the parent's plan connected both alike).
  bool can = parent_of.size() == n && want.size() == n;
  std::vector<int> have(n, 0);
  bool short_of = false;
  for (size_t i = 0; can && i < n; ++i) {
    if (static_cast<int>(i) == rank || want[i] <= 0) {
      continue;
    }
    const auto p = static_cast<size_t>(parent_of[i]);
    can = p < bank.fds.size() && want[i] <= static_cast<int>(k);
    if (can) {
      have[i] = std::min(want[i], static_cast<int>(bank.fds[p].size()));
      short_of = short_of || have[i] < want[i];
    }
  }
  // A thread may still be inside an op of the parent on these wires: the
  // parent has failed, so the op throws at its next wait (and a later one
  // before it touches them), but a thread descheduled just before a send
  // would put the end of the failed op into the new group's stream after
  // its counts went out. So the counts are read holding the parent's op
  // lock; a member that cannot have it soon says it cannot take over, and
  // every member dials new connections.
  std::unique_lock<std::mutex> quiet;
  if (can && bank.ops != nullptr) {
    quiet = lock_within(*bank.ops, kQuietWait);
    if (!quiet.owns_lock()) {
      can = false;
      JACCL_LOG(Info, "rank " << rank
                              << ": an operation of the parent group is "
                                 "still running on another thread after "
                              << format_duration(kQuietWait)
                              << ": its data connections are not taken over");
    }
  }
  // Mine: magic, can, short_of, then what I sent to member i on wire w
  // (i * k + w).
  const size_t bytes = 24 + n * k * 8;
  std::vector<char> mine(bytes, 0);
  auto* u = reinterpret_cast<uint8_t*>(mine.data());
  put_u64(u, kReuseMagic);
  put_u64(u + 8, can ? 1 : 0);
  put_u64(u + 16, short_of ? 1 : 0);
  for (size_t i = 0; can && i < n; ++i) {
    const auto p = static_cast<size_t>(parent_of[i]);
    for (size_t w = 0; w < static_cast<size_t>(have[i]); ++w) {
      put_u64(u + 24 + (i * k + w) * 8,
              bank.counts[p][w]->sent.load(std::memory_order_relaxed));
    }
  }
  std::vector<char> all(bytes * n);
  if (gather) {
    gather(mine.data(), all.data(), bytes);
  } else {
    sc.all_gather(mine.data(), all.data(), bytes);
  }
  bool every = true, any_short = false;
  for (size_t r = 0; r < n; ++r) {
    const auto* a = reinterpret_cast<const uint8_t*>(all.data() + r * bytes);
    if (get_u64(a) != kReuseMagic) {
      raise(ErrorKind::Protocol,
            "taking the data connections over: " +
                rank_ref(static_cast<int>(r)) + " sent a message out of step",
            {.rank = rank, .peer = static_cast<int>(r)});
    }
    every = every && get_u64(a + 8) == 1;
    any_short = any_short || get_u64(a + 16) == 1;
  }
  if (!every) {
    JACCL_LOG(Info, "rank " << rank
                            << ": some member cannot take its parent's data "
                               "connections over: dialing new ones");
    return std::nullopt;
  }
  ReusedWires out;
  out.any_missing = any_short;
  out.missing.assign(n, 0);
  ControlBlock& conns = out.conns;
  conns.rank = rank;
  conns.size = size;
  conns.op_timeout = cfg.get_op_timeout();
  conns.wires.resize(n);
  conns.send_buffer.assign(n, 0);
  std::vector<Drain> drains;
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<int>(i) == rank || want[i] <= 0) {
      continue;
    }
    out.missing[i] = want[i] - have[i];
    const auto p = static_cast<size_t>(parent_of[i]);
    conns.send_buffer[i] =
        p < bank.send_buffer.size() ? bank.send_buffer[p] : 0;
    const auto* a = reinterpret_cast<const uint8_t*>(all.data() + i * bytes);
    for (size_t w = 0; w < static_cast<size_t>(have[i]); ++w) {
      Fd fd(::fcntl(bank.fds[p][w], F_DUPFD_CLOEXEC, 0));
      if (!fd.valid()) {
        raise(ErrorKind::Io,
              "cannot duplicate a data connection to take it over",
              {.rank = rank, .peer = static_cast<int>(i), .sys_errno = errno});
      }
      WireCount& c = *bank.counts[p][w];
      const uint64_t sent =
          get_u64(a + 24 + (static_cast<size_t>(rank) * k + w) * 8);
      const uint64_t got = c.received.load(std::memory_order_relaxed);
      if (sent < got) {
        raise(ErrorKind::Protocol,
              "taking the data connections over: " +
                  rank_ref(static_cast<int>(i)) + " says it sent " +
                  std::to_string(sent) + " bytes on wire " + std::to_string(w) +
                  ", and " + std::to_string(got) + " arrived",
              {.rank = rank, .peer = static_cast<int>(i)});
      }
      if (sent > got) {
        drains.push_back({static_cast<int>(i), static_cast<int>(w), fd.get(),
                          sent - got, &c});
      }
      conns.wires[i].push_back(std::move(fd));
    }
  }
  drain(drains, rank, sc.abort_fd(), Deadline::after(cfg.get_timeout()));
  JACCL_LOG(Debug, "rank " << rank << ": took the parent group's data "
                           << "connections over (" << drains.size()
                           << " with the end of its data to read off)"
                           << (any_short ? "; some pairs need more" : ""));
  return out;
}

}  // namespace jaccl::detail
