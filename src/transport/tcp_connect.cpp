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

bool dials(int from, int to, const std::vector<char>& listens) {
  if (from == to) {
    return false;
  }
  int i = std::min(from, to), j = std::max(from, to);
  bool i_dials_j = listens[j] != 0;
  bool j_dials_i = !i_dials_j && listens[i] != 0;
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
          "ranks " + rank_list(silent) +
              (silent.size() == 2 ? " both" : " all") +
              " have JACCL_LISTEN=0; at least one of each pair must listen",
          {.rank = me});
  }
}

// ---- acceptor -------------------------------------------------------------

TcpAcceptor::TcpAcceptor(int rank, int size, Fd listener, std::string token,
                         std::vector<int> expected_data, Deadline dl)
    : rank_(rank),
      size_(size),
      listener_(std::move(listener)),
      token_(std::move(token)),
      job_(token_fingerprint(token_)),
      expected_(std::move(expected_data)),
      dl_(dl),
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
      owed_ += w + 1;
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
    bool miss = expected_[static_cast<size_t>(p)] >= 0 &&
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

// Why a completed handshake is not one we expect ("" when it is).
std::string TcpAcceptor::check(const Hello& h) const {
  const std::string who = "rank " + std::to_string(h.rank);
  if (h.job != job_) {
    return "another job (job fingerprint differs)";
  }
  if (h.size != size_) {
    return who + " has group size " + std::to_string(h.size) + ", rank " +
           std::to_string(rank_) + " has " + std::to_string(size_);
  }
  if (h.channel != Channel::Data && h.channel != Channel::Control) {
    return std::string(channel_name(h.channel)) +
           " connection on a data-plane port";
  }
  if (h.rank < 0 || h.rank >= size_ || h.rank == rank_) {
    return "rank " + std::to_string(h.rank) + " is not a peer of rank " +
           std::to_string(rank_) + " in a group of " + std::to_string(size_);
  }
  int w = expected_[static_cast<size_t>(h.rank)];
  if (w < 0) {
    return who + " is not expected to dial rank " + std::to_string(rank_);
  }
  if (h.channel == Channel::Control) {
    if (h.wire != 0) {
      return "control connection with wire " + std::to_string(h.wire);
    }
    if (control_[static_cast<size_t>(h.rank)].valid()) {
      return "duplicate control connection from " + who;
    }
    return "";
  }
  if (h.wire < 0 || h.wire >= w) {
    return "wire " + std::to_string(h.wire) + " from " + who +
           " is out of range (" + std::to_string(w) + " wires)";
  }
  if (data_[static_cast<size_t>(h.rank)][static_cast<size_t>(h.wire)].valid()) {
    return "duplicate wire " + std::to_string(h.wire) + " from " + who;
  }
  return "";
}

void TcpAcceptor::run() {
  struct Pending {
    Fd fd;
    ServerHandshake hs;
  };
  std::deque<Pending> pending;
  std::vector<pollfd> pfds;
  auto drop = [&](Pending& c, const std::string& why, bool tell) {
    JACCL_LOG(Warn, "rank " << rank_ << ": dropped a connection from "
                            << peer_address(c.fd.get()).str() << ": " << why);
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
        std::string why;
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

// ---- the whole set-up -----------------------------------------------------

Connections setup_tcp(const Config& cfg, SideChannel& sc,
                      const DataWiresFn& want_data) {
  const int me = cfg.get_rank(), size = cfg.get_size();
  const int wires = cfg.get_wires();
  Connections conns;
  conns.rank = me;
  conns.size = size;
  conns.op_timeout = cfg.get_op_timeout();
  conns.wires.resize(static_cast<size_t>(size));
  if (size == 1) {
    return conns;
  }

  TcpCard mine = local_card(me, wires);
  Fd listener;
  if (cfg.get_listen()) {
    ListenAddress la = choose_listen_address(cfg);
    int backlog = std::min(4096, std::max(64, (size - 1) * (wires + 1)));
    listener = listen_tcp(resolve(HostPort{la.host, 0}, me), backlog, me);
    mine.addresses = {la.host};
    mine.port = port_of(local_address(listener.get()));
    JACCL_LOG(Info, "rank " << me << ": listening on "
                            << (HostPort{la.host, mine.port}.str()) << " ("
                            << la.why << ")");
  } else {
    JACCL_LOG(Info, "rank " << me << ": not listening (JACCL_LISTEN=0)");
  }
  std::vector<TcpCard> cards = exchange_cards(sc, mine);
  std::vector<char> listens(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    listens[static_cast<size_t>(r)] = cards[static_cast<size_t>(r)].listens();
  }
  check_listen_pairs(listens, me);
  const std::vector<int> data_wires =
      want_data ? want_data(cards) : std::vector<int>();

  // Who we dial, who dials us.
  struct Job {
    int peer;
    Channel channel;
    int wire;
  };
  std::vector<Job> jobs;
  std::vector<int> expected(static_cast<size_t>(size), -1);
  for (int p = 0; p < size; ++p) {
    if (p == me) {
      continue;
    }
    int w = data_wires.empty() ? data_wires_between(me, p, size, wires)
                               : data_wires[static_cast<size_t>(p)];
    if (w < 0) {
      continue;  // not connected at all (liveness goes through a relay)
    }
    conns.wires[static_cast<size_t>(p)].resize(static_cast<size_t>(w));
    if (dials(me, p, listens)) {
      const TcpCard& c = cards[static_cast<size_t>(p)];
      if (is_loopback_address(c.addresses.front()) &&
          (c.boot_id != mine.boot_id || c.net_ns != mine.net_ns)) {
        raise(ErrorKind::Config,
              "rank " + std::to_string(p) + " listens on loopback (" +
                  c.addresses.front() +
                  ") but runs on another host or network namespace (" +
                  c.hostname + "): set JACCL_IFNAME there",
              {.rank = me, .peer = p});
      }
      jobs.push_back({p, Channel::Control, 0});
      for (int k = 0; k < w; ++k) {
        jobs.push_back({p, Channel::Data, k});
      }
    } else {
      expected[static_cast<size_t>(p)] = w;
    }
  }
  const Deadline dl = Deadline::after(cfg.get_timeout());
  std::unique_ptr<TcpAcceptor> acceptor;
  if (std::any_of(expected.begin(), expected.end(),
                  [](int w) { return w >= 0; })) {
    acceptor = std::make_unique<TcpAcceptor>(me, size, std::move(listener),
                                             cfg.get_token(), expected, dl);
  }
  listener.reset();  // nobody dials us: close the port right away

  std::vector<Fd> control(static_cast<size_t>(size));
  std::vector<char> dialed(jobs.size(), 0);
  std::atomic<bool> stop{false};
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr fatal;
  const uint64_t job_fp = token_fingerprint(cfg.get_token());
  auto dialer = [&] {
    while (!stop.load()) {
      size_t i = next.fetch_add(1);
      if (i >= jobs.size()) {
        break;
      }
      const Job& j = jobs[i];
      const TcpCard& c = cards[static_cast<size_t>(j.peer)];
      Hello h{j.channel, me, size, j.wire, job_fp, random_nonce()};
      try {
        Fd fd =
            dial_peer(c.addresses, c.port, h, cfg.get_token(), dl, stop, me);
        if (!fd.valid()) {
          continue;
        }
        std::lock_guard<std::mutex> lock(mu);
        dialed[i] = 1;
        auto p = static_cast<size_t>(j.peer);
        if (j.channel == Channel::Control) {
          control[p] = std::move(fd);
        } else {
          conns.wires[p][static_cast<size_t>(j.wire)] = std::move(fd);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!fatal) {
          fatal = std::current_exception();
        }
        stop.store(true);
        if (acceptor) {
          acceptor->stop();
        }
      }
    }
  };
  {
    std::vector<std::thread> pool;
    size_t n_threads = std::min<size_t>(jobs.size(), 8);
    for (size_t t = 0; t < n_threads; ++t) {
      pool.emplace_back(dialer);
    }
    for (auto& t : pool) {
      t.join();
    }
  }
  if (fatal) {
    std::rethrow_exception(fatal);
  }

  // Collect accepted connections; name whoever is missing.
  std::vector<int> missing_out, missing_in;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!dialed[i] &&
        (missing_out.empty() || missing_out.back() != jobs[i].peer)) {
      missing_out.push_back(jobs[i].peer);
    }
  }
  if (acceptor) {
    acceptor->wait();
    missing_in = acceptor->missing();
    for (int p = 0; p < size; ++p) {
      auto up = static_cast<size_t>(p);
      if (expected[up] < 0) {
        continue;
      }
      control[up] = std::move(acceptor->control()[up]);
      for (size_t w = 0; w < conns.wires[up].size(); ++w) {
        conns.wires[up][w] = std::move(acceptor->data()[up][w]);
      }
    }
    acceptor.reset();
  }
  if (!missing_out.empty() || !missing_in.empty()) {
    std::string what = "timed out after " + format_duration(dl.total()) +
                       " connecting the TCP data plane:";
    if (!missing_out.empty()) {
      const TcpCard& c = cards[static_cast<size_t>(missing_out.front())];
      what += " could not connect to " + ranks_phrase(missing_out) + " (" +
              (missing_out.size() > 1 ? "rank " + std::to_string(c.rank) + ": "
                                      : "") +
              c.hostname + ", " + HostPort{c.addresses.front(), c.port}.str() +
              ")";
    }
    if (!missing_in.empty()) {
      what += std::string(missing_out.empty() ? "" : ";") +
              " no connection arrived from " + ranks_phrase(missing_in);
    }
    raise(ErrorKind::Timeout, what, {.rank = me});
  }

  const Millis hb = cfg.get_heartbeat_timeout();
  for (int p = 0; p < size; ++p) {
    auto up = static_cast<size_t>(p);
    for (auto& fd : conns.wires[up]) {
      set_nodelay(fd.get());
      apply_keepalive(fd.get(), hb);
    }
    if (control[up].valid()) {
      set_nodelay(control[up].get());
      apply_keepalive(control[up].get(), hb);
    }
  }
  JACCL_LOG(Debug, "rank " << me << ": TCP data plane connected");

  sc.barrier();  // every rank is connected
  // Started only now, so no rank's silence clock runs while a peer is still
  // connecting to someone else.
  conns.keepalive = std::make_shared<LivenessMonitor>(me, std::move(control),
                                                      conns.state, hb);
  sc.leave_barrier();
  return conns;
}

}  // namespace jaccl::detail
