// Copyright 2026 the jaccl authors.
#include "transport/tcp_connect.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <string>

#include "common/log.h"
#include "transport/interfaces.h"
#include "transport/liveness.h"
#include "transport/tcp_card.h"

namespace jaccl::detail {

namespace {

// Half-open connections kept at once; beyond, the oldest stray is dropped.
constexpr size_t kMaxPending = 1024;

}  // namespace

int data_wires_between(int a, int b, int size, int wires) {
  if (a == b) {
    return 0;
  }
  if (size <= 16) {
    return wires;
  }
  int d = (a - b + size) % size;
  return (d == 1 || d == size - 1) ? wires : 1;
}

// Each wire of a ring op is driven by its own thread, busy with copies in
// and out of the kernel, so a second wire is worth its thread only where
// cores are free for it (one wire was faster up to 4 MiB on two cores:
// BENCHMARKS.md, History).
int default_tcp_wires(const std::vector<TcpCard>& cards, bool leaders_only) {
  constexpr int kWires = 2;
  for (const TcpCard& c : cards) {
    if (c.wires_set) {
      return c.wires;
    }
  }
  struct Kernel {
    std::set<std::string> hosts;  // IPC namespaces (shared-memory hosts)
    int ranks = 0;                // that drive wires
    int cpus = 0;                 // the least any of them may run on
  };
  std::map<std::string, Kernel> kernels;  // by boot id
  for (const TcpCard& c : cards) {
    if (c.boot_id.empty() || c.cpus <= 0) {
      continue;  // unknown: no constraint from it
    }
    Kernel& k = kernels[c.boot_id];
    if (leaders_only && !k.hosts.insert(c.ipc_ns).second) {
      continue;  // not its host's first rank: shared memory, no wires
    }
    ++k.ranks;
    k.cpus = k.cpus == 0 ? c.cpus : std::min(k.cpus, c.cpus);
  }
  for (const auto& [boot, k] : kernels) {
    if (k.ranks * kWires > k.cpus) {
      return 1;
    }
  }
  return kWires;
}

bool dials(int from, int to, const std::vector<char>& listens) {
  if (from == to) {
    return false;
  }
  int i = std::min(from, to), j = std::max(from, to);
  bool j_dials_i = listens[i] != 0;
  bool i_dials_j = !j_dials_i && listens[j] != 0;
  return from == i ? i_dials_j : j_dials_i;
}

void check_listen_pairs(const std::vector<char>& listens, int me) {
  std::vector<int> silent;
  for (size_t r = 0; r < listens.size(); ++r) {
    if (!listens[r]) {
      silent.push_back(static_cast<int>(r));
    }
  }
  if (silent.size() >= 2) {
    raise(ErrorKind::Config,
          "ranks " + rank_nums(silent) +
              (silent.size() == 2 ? " both" : " all") +
              " have JACCL_LISTEN=0; at least one of each pair must listen",
          {.rank = me});
  }
}

// ---- acceptor -------------------------------------------------------------

TcpAcceptor::TcpAcceptor(int rank, int size, Fd listener, std::string token,
                         std::vector<int> expected_data, Deadline dl,
                         bool with_control)
    : rank_(rank),
      size_(size),
      listener_(std::move(listener)),
      token_(std::move(token)),
      job_(token_fingerprint(token_)),
      expected_(std::move(expected_data)),
      dl_(dl),
      with_control_(with_control),
      data_(static_cast<size_t>(size)),
      control_(static_cast<size_t>(size)),
      stop_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!stop_fd_.valid()) {
    raise(ErrorKind::Io, "eventfd() failed",
          {.rank = rank, .sys_errno = errno});
  }
  for (int p = 0; p < size_; ++p) {
    int w = expected_[static_cast<size_t>(p)];
    if (w >= 0) {
      data_[static_cast<size_t>(p)].resize(static_cast<size_t>(w));
      owed_ += w + (with_control_ ? 1 : 0);
    }
  }
  thread_ = std::thread([this] { run(); });
}

TcpAcceptor::~TcpAcceptor() {
  stop();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void TcpAcceptor::stop() {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(stop_fd_.get(), &one, sizeof(one));
}

bool TcpAcceptor::wait() {
  if (thread_.joinable()) {
    thread_.join();
  }
  return owed_ == 0;
}

std::vector<int> TcpAcceptor::missing() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  for (int p = 0; p < size_; ++p) {
    auto& d = data_[static_cast<size_t>(p)];
    bool miss = with_control_ && expected_[static_cast<size_t>(p)] >= 0 &&
                !control_[static_cast<size_t>(p)].valid();
    for (const auto& fd : d) {
      miss = miss || !fd.valid();
    }
    if (miss) {
      out.push_back(p);
    }
  }
  return out;
}

// Why a completed handshake is not one we expect (empty when it is).
Detail TcpAcceptor::check(const Hello& h) const {
  // Named only for a connection refused (rank 0 of 1024 checks 1,023).
  auto who = [&h] { return rank_ref(h.rank); };
  if (h.job != job_) {
    return "another job (job fingerprint differs)";
  }
  if (h.size != size_) {
    return who() + " has group size " + std::to_string(h.size) + ", " +
           rank_ref(rank_) + " has " + std::to_string(size_);
  }
  if (h.channel != Channel::Data && h.channel != Channel::Control) {
    return std::string(channel_name(h.channel)) +
           " connection on a data-plane port";
  }
  if (h.rank < 0 || h.rank >= size_ || h.rank == rank_) {
    return who() + " is not a peer of " + rank_ref(rank_) + " in a group of " +
           std::to_string(size_);
  }
  int w = expected_[static_cast<size_t>(h.rank)];
  if (w < 0) {
    return who() + " is not expected to dial " + rank_ref(rank_);
  }
  if (h.channel == Channel::Control) {
    if (!with_control_) {
      return "control connection from " + who() +
             " to a group that has its control connections";
    }
    if (h.wire != 0) {
      return "control connection with wire " + std::to_string(h.wire);
    }
    if (control_[static_cast<size_t>(h.rank)].valid()) {
      return "duplicate control connection from " + who();
    }
    return {};
  }
  if (h.wire < 0 || h.wire >= w) {
    return "wire " + std::to_string(h.wire) + " from " + who() +
           " is out of range (" + std::to_string(w) + " wires)";
  }
  if (data_[static_cast<size_t>(h.rank)][static_cast<size_t>(h.wire)].valid()) {
    return "duplicate wire " + std::to_string(h.wire) + " from " + who();
  }
  return {};
}

void TcpAcceptor::run() {
  struct Pending {
    Fd fd;
    ServerHandshake hs;
  };
  std::deque<Pending> pending;
  std::vector<pollfd> pfds;
  auto drop = [&](Pending& c, const Detail& why, bool tell) {
    JACCL_LOG(Warn, "rank " << rank_ << ": dropped a connection from "
                            << peer_address(c.fd.get()).str() << ": "
                            << why.str());
    if (tell) {
      try {
        send_verdict(c.fd.get(), false, why, Deadline::after(Millis(500)),
                     {.rank = rank_});
      } catch (const Error& e) {
        // The stray is dropped either way; it just will not hear why.
        JACCL_LOG(Debug, "rank " << rank_ << ": could not send the refusal: "
                                 << e.what());
      }
    }
    c.fd.reset();
    rejected_.fetch_add(1);
  };
  while (owed_ > 0 && !dl_.expired()) {
    pfds.clear();
    pfds.push_back({stop_fd_.get(), POLLIN, 0});
    pfds.push_back({listener_.get(), POLLIN, 0});
    for (auto& c : pending) {
      pfds.push_back({c.fd.get(), POLLIN, 0});
    }
    int n = poll_until(pfds.data(), pfds.size(), dl_, 1000);
    if (n < 0) {
      JACCL_LOG(Error, "rank " << rank_ << ": acceptor poll failed: "
                               << std::strerror(errno));
      break;
    }
    if (n <= 0) {
      continue;
    }
    if (pfds[0].revents & POLLIN) {
      break;  // stopped
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      if (!(pfds[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) {
        continue;
      }
      Pending& c = pending[i];
      auto st = c.hs.on_readable(c.fd.get());
      if (st == ServerHandshake::State::Failed) {
        drop(c, c.hs.failure(), false);
      } else if (st == ServerHandshake::State::Done) {
        const Hello& h = c.hs.hello();
        Detail why;
        {
          std::lock_guard<std::mutex> lock(mu_);
          why = check(h);
        }
        if (!why.empty()) {
          drop(c, why, true);
          continue;
        }
        try {
          send_verdict(c.fd.get(), true, "", Deadline::after(Millis(1000)),
                       {.rank = rank_, .peer = h.rank});
        } catch (const Error& e) {
          drop(c, e.what(), false);
          continue;
        }
        std::lock_guard<std::mutex> lock(mu_);
        auto p = static_cast<size_t>(h.rank);
        if (h.channel == Channel::Control) {
          control_[p] = std::move(c.fd);
        } else {
          data_[p][static_cast<size_t>(h.wire)] = std::move(c.fd);
        }
        --owed_;
      }
    }
    std::erase_if(pending, [](const Pending& c) { return !c.fd.valid(); });
    if (pfds[1].revents & POLLIN) {
      for (int k = 0; k < 64; ++k) {
        int fd = ::accept4(listener_.get(), nullptr, nullptr,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          break;  // EAGAIN, or a transient error: poll again
        }
        if (pending.size() >= kMaxPending) {
          drop(pending.front(), "too many half-open connections", false);
          pending.pop_front();
        }
        pending.push_back(Pending{Fd(fd), ServerHandshake(token_)});
      }
    }
  }
  for (auto& c : pending) {
    if (c.hs.state() != ServerHandshake::State::NeedHello) {
      JACCL_LOG(Debug, "rank " << rank_ << ": closing an unfinished handshake");
    }
  }
  listener_.reset();  // no port stays open after set-up
}

// ---- dialing --------------------------------------------------------------

Fd dial_peer(const std::vector<std::string>& addresses, uint16_t port,
             const Hello& hello, const std::string& token, const Deadline& dl,
             const std::atomic<bool>& stop, int rank) {
  std::vector<SockAddr> addrs;
  for (const auto& a : addresses) {
    addrs.push_back(resolve(HostPort{a, port}, rank));
  }
  for (int attempt = 0; !dl.expired() && !stop.load(); ++attempt) {
    for (const auto& addr : addrs) {
      int err = 0;
      Fd fd = try_connect(addr, dl, &err);
      if (!fd.valid()) {
        if (err == EMFILE || err == ENFILE) {
          // No descriptor to dial with: waiting will not give one back.
          raise(ErrorKind::Io,
                "cannot open a socket to dial " + rank_ref(hello.rank) + ": " +
                    resource_hint(err),
                {.rank = rank,
                 .peer = hello.rank,
                 .address = addr.str(),
                 .sys_errno = err});
        }
        JACCL_LOG(Debug, "rank " << rank << ": connect to rank " << hello.rank
                                 << " at " << addr.str()
                                 << " failed: " << std::strerror(err));
        continue;
      }
      ErrorContext ctx{.rank = rank, .peer = -1, .address = addr.str()};
      try {
        client_handshake(fd.get(), hello, token, dl, ctx);
        return fd;
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::Config || e.kind() == ErrorKind::Protocol) {
          throw;  // rejected, or not a jaccl peer: retrying will not help
        }
        JACCL_LOG(Debug, "rank " << rank << ": handshake failed: " << e.what());
      }
    }
    sleep_for_retry(attempt, dl);
  }
  return Fd();
}

}  // namespace jaccl::detail
