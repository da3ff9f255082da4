// Copyright 2026 the jaccl authors.
// setup_tcp: from the side channel to connected sockets, in phases (listen
// and publish the card, decide who dials whom, dial and accept, collect and
// name whoever is missing, tune the sockets and start liveness).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "bootstrap/tcp_star_limits.h"
#include "common/cache_info.h"
#include "common/log.h"
#include "transport/interfaces.h"
#include "transport/liveness.h"
#include "transport/tcp_card.h"
#include "transport/tcp_connect.h"

namespace jaccl::detail {

namespace {

// One connection this rank dials.
struct Job {
  int peer;
  Channel channel;
  int wire;
};

// Everything the phases share.
struct TcpSetup {
  const Config& cfg;
  int me;
  int size;
  ControlBlock conns;
  Fd listener;
  std::vector<TcpCard> cards;
  std::vector<char> listens;
  std::vector<Job> jobs;
  std::vector<int> expected;  // p dials us with that many wires; -1: not
  std::vector<Fd> control;
  std::vector<char> dialed;
  bool with_control = true;  // false: the monitor comes later (MonitorSlot)
};

// Opens the listener (unless JACCL_LISTEN=0) and publishes the card.
void listen_and_publish(TcpSetup& st, SideChannel& sc,
                        std::vector<std::string> ofi_card) {
  const Config& cfg = st.cfg;
  const int me = st.me;
  TcpCard mine = local_card(me, cfg.get_wires(), cfg.get_wires_set());
  mine.ofi = std::move(ofi_card);
  if (cfg.get_listen()) {
    ListenAddress la = choose_listen_address(cfg);
    int backlog =
        std::min(4096, std::max(64, (st.size - 1) * (cfg.get_wires() + 1)));
    st.listener = listen_tcp(resolve(HostPort{la.host, 0}, me), backlog, me);
    mine.addresses = {la.host};
    mine.port = port_of(local_address(st.listener.get()));
    JACCL_LOG(Info, "rank " << me << ": listening on "
                            << (HostPort{la.host, mine.port}.str()) << " ("
                            << la.why << ")");
  } else {
    JACCL_LOG(Info, "rank " << me << ": not listening (JACCL_LISTEN=0)");
  }
  st.cards = exchange_cards(sc, mine);
  st.listens.resize(static_cast<size_t>(st.size));
  for (int r = 0; r < st.size; ++r) {
    st.listens[static_cast<size_t>(r)] =
        st.cards[static_cast<size_t>(r)].listens();
  }
  check_listen_pairs(st.listens, me);
}

}  // namespace

void count_host_cpus(const std::vector<TcpCard>& cards, int me,
                     ControlBlock& conns) {
  const TcpCard& mine = cards[static_cast<size_t>(me)];
  if (mine.boot_id.empty()) {
    return;
  }
  CpuUnion cpus;
  int ranks = 0;
  for (size_t r = 0; r < cards.size(); ++r) {
    if (cards[r].boot_id == mine.boot_id) {
      if (static_cast<int>(r) == me) {
        conns.host_index = ranks;
      }
      cpus.add(cards[r].cpu_mask);
      ++ranks;
    }
  }
  conns.host_ranks = ranks;
  conns.host_cpus = cpus.count();
  JACCL_LOG(Info, "rank " << me << ": " << conns.host_ranks
                          << " ranks on this host, on " << conns.host_cpus
                          << " CPU(s) between them");
}

namespace {

// Who we dial (jobs), who dials us (expected), how many wires each pair has.
void plan_connections(TcpSetup& st, const DataWiresFn& want_data) {
  const int me = st.me, size = st.size;
  const std::vector<int> data_wires =
      want_data ? want_data(st.cards) : std::vector<int>();
  const int default_wires =
      data_wires.empty() ? default_tcp_wires(st.cards) : 0;
  const TcpCard& mine = st.cards[static_cast<size_t>(me)];
  st.expected.assign(static_cast<size_t>(size), -1);
  for (int p = 0; p < size; ++p) {
    if (p == me) {
      continue;
    }
    int w = data_wires.empty() ? data_wires_between(me, p, size, default_wires)
                               : data_wires[static_cast<size_t>(p)];
    if (w < 0 || (w == 0 && !st.with_control)) {
      continue;  // not connected at all (liveness goes through a relay)
    }
    st.conns.wires[static_cast<size_t>(p)].resize(static_cast<size_t>(w));
    if (!dials(me, p, st.listens)) {
      st.expected[static_cast<size_t>(p)] = w;
      continue;
    }
    const TcpCard& c = st.cards[static_cast<size_t>(p)];
    if (is_loopback_address(c.addresses.front()) &&
        (c.boot_id != mine.boot_id || c.net_ns != mine.net_ns)) {
      raise(ErrorKind::Config,
            rank_ref(p) + " listens on loopback (" + c.addresses.front() +
                ") but runs on another host or network namespace (" +
                c.hostname.str() + "): set JACCL_IFNAME there",
            {.rank = me, .peer = p});
    }
    if (st.with_control) {
      st.jobs.push_back({p, Channel::Control, 0});
    }
    for (int k = 0; k < w; ++k) {
      st.jobs.push_back({p, Channel::Data, k});
    }
  }
}

// Dials every job on a small pool of threads while the acceptor takes the
// connections that dial us. Rethrows the first rejection.
void dial_all(TcpSetup& st, TcpAcceptor* acceptor, const Deadline& dl,
              std::atomic<bool>& stop) {
  st.control.resize(static_cast<size_t>(st.size));
  st.dialed.assign(st.jobs.size(), 0);
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr fatal;
  const uint64_t job_fp = token_fingerprint(st.cfg.get_token());
  auto dialer = [&] {
    while (!stop.load()) {
      size_t i = next.fetch_add(1);
      if (i >= st.jobs.size()) {
        break;
      }
      const Job& j = st.jobs[i];
      const TcpCard& c = st.cards[static_cast<size_t>(j.peer)];
      try {
        Hello h{j.channel, st.me, st.size, j.wire, job_fp, random_nonce()};
        Fd fd = dial_peer(c.addresses, c.port, h, st.cfg.get_token(), dl, stop,
                          st.me);
        if (!fd.valid()) {
          continue;
        }
        std::lock_guard<std::mutex> lock(mu);
        st.dialed[i] = 1;
        auto p = static_cast<size_t>(j.peer);
        if (j.channel == Channel::Control) {
          st.control[p] = std::move(fd);
        } else {
          st.conns.wires[p][static_cast<size_t>(j.wire)] = std::move(fd);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!fatal) {
          fatal = std::current_exception();
        }
        stop.store(true);
        if (acceptor != nullptr) {
          acceptor->stop();
        }
      }
    }
  };
  // The calling thread dials too: a rank with one connection to make (a
  // one-host job's control connection to rank 0) starts no thread.
  std::vector<std::thread> pool;
  const size_t n_threads = std::min<size_t>(st.jobs.size(), 8);
  for (size_t t = 1; t < n_threads; ++t) {
    pool.emplace_back(dialer);
  }
  if (n_threads > 0) {
    dialer();
  }
  for (auto& t : pool) {
    t.join();
  }
  if (fatal) {
    std::rethrow_exception(fatal);
  }
}

// Stops the dialers and the acceptor when the side channel's abort fd
// becomes readable (a shrink whose member failed), so the set-up gives up at
// once instead of at its deadline.
class AbortWatch {
 public:
  AbortWatch(int abort_fd, std::atomic<bool>& stop, TcpAcceptor* acceptor,
             const Deadline& dl)
      : done_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (abort_fd < 0 || !done_.valid()) {
      return;
    }
    thread_ = std::thread([this, abort_fd, &stop, acceptor, dl] {
      pollfd p[2] = {{abort_fd, POLLIN, 0}, {done_.get(), POLLIN, 0}};
      while (!dl.expired()) {
        const int k = ::poll(p, 2, dl.poll_ms(1000));
        if (k < 0 && errno != EINTR) {
          return;
        }
        if (p[1].revents & POLLIN) {
          return;
        }
        if (p[0].revents & POLLIN) {
          fired_.store(true);
          stop.store(true);
          if (acceptor != nullptr) {
            acceptor->stop();
          }
          return;
        }
      }
    });
  }
  ~AbortWatch() {
    if (thread_.joinable()) {
      uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(done_.get(), &one, sizeof(one));
      thread_.join();
    }
  }
  void raise_if_fired(int me) const {
    if (fired_.load()) {
      raise(ErrorKind::PeerLost,
            "a member was lost while the group's connections were made",
            {.rank = me});
    }
  }

 private:
  Fd done_;
  std::atomic<bool> fired_{false};
  std::thread thread_;
};

// Takes the accepted connections; a TimeoutError names whoever is missing.
void collect(TcpSetup& st, TcpAcceptor* acceptor, const Deadline& dl) {
  std::vector<int> missing_out, missing_in;
  for (size_t i = 0; i < st.jobs.size(); ++i) {
    if (!st.dialed[i] &&
        (missing_out.empty() || missing_out.back() != st.jobs[i].peer)) {
      missing_out.push_back(st.jobs[i].peer);
    }
  }
  if (acceptor) {
    acceptor->wait();
    missing_in = acceptor->missing();
    for (int p = 0; p < st.size; ++p) {
      auto up = static_cast<size_t>(p);
      if (st.expected[up] < 0) {
        continue;
      }
      st.control[up] = std::move(acceptor->control()[up]);
      for (size_t w = 0; w < st.conns.wires[up].size(); ++w) {
        st.conns.wires[up][w] = std::move(acceptor->data()[up][w]);
      }
    }
  }
  if (missing_out.empty() && missing_in.empty()) {
    return;
  }
  Detail what = "timed out after " + format_duration(dl.total()) +
                " connecting the TCP data plane:";
  if (!missing_out.empty()) {
    const TcpCard& c = st.cards[static_cast<size_t>(missing_out.front())];
    what += " could not connect to " + ranks_ref(missing_out) + " (" +
            (missing_out.size() > 1 ? rank_ref(c.rank) + ": " : Detail()) +
            c.hostname.str() + ", " +
            HostPort{c.addresses.front(), c.port}.str() + ")";
  }
  if (!missing_in.empty()) {
    what += std::string(missing_out.empty() ? "" : ";") +
            " no connection arrived from " + ranks_ref(missing_in);
  }
  raise(ErrorKind::Timeout, what, {.rank = st.me});
}

// Between two ranks on one kernel (loopback, or veth between namespaces)
// TCP is memory copies: the sender's into socket buffers, the receiver's
// out of them. Left to autotune, a send buffer grows to megabytes, the
// bytes in flight outgrow the core's L2, and both copies go to memory: a
// 1 MiB 2-rank all_sum spent about twice Open MPI-TCP's CPU per call
// (perf: the kernel's copy into the socket 3-4x slower per byte). So the
// kernel's accounting (twice SO_SNDBUF) is capped at one L2, which sped up
// large all_sums (BENCHMARKS.md, History). Between hosts a send buffer has
// to cover the bandwidth-delay product, so autotuning stays. The kernel
// caps the request at net.core.wmem_max (212992 on a stock Debian); the
// debug log says what it applied.
int same_host_send_buffer() {
  return static_cast<int>(
      std::clamp<size_t>(l2_cache_bytes() / 2, 64 << 10, 4 << 20));
}

// TCP_NODELAY and keepalive on every socket; same-host data connections
// get a send buffer sized to the cache (above).
void tune_sockets(TcpSetup& st) {
  const Millis hb = st.cfg.get_heartbeat_timeout();
  const std::string& boot = st.cards[static_cast<size_t>(st.me)].boot_id;
  int sndbuf = 0;
  st.conns.send_buffer.assign(static_cast<size_t>(st.size), 0);
  for (int p = 0; p < st.size; ++p) {
    auto up = static_cast<size_t>(p);
    const bool local = !boot.empty() && st.cards[up].boot_id == boot;
    for (auto& fd : st.conns.wires[up]) {
      set_nodelay(fd.get());
      apply_keepalive(fd.get(), hb);
      if (local) {
        const bool first = sndbuf == 0;
        if (first) {
          sndbuf = same_host_send_buffer();
        }
        set_send_buffer(fd.get(), sndbuf);
        st.conns.send_buffer[up] = sndbuf;
        if (first) {
          JACCL_LOG(Debug, "rank " << st.me << ": same-host data connections "
                                   << "send with SO_SNDBUF " << (sndbuf >> 10)
                                   << " KiB (half the L2); the kernel applied "
                                   << (send_buffer(fd.get()) >> 10) << " KiB");
        }
      }
    }
    if (st.control[up].valid()) {
      set_nodelay(st.control[up].get());
      apply_keepalive(st.control[up].get(), hb);
    }
  }
}

}  // namespace

ControlBlock setup_tcp(const Config& cfg, SideChannel& sc,
                       const DataWiresFn& want_data,
                       std::vector<std::string> ofi_card,
                       std::shared_ptr<MonitorSlot> later,
                       const std::function<bool()>& monitor_later) {
  TcpSetup st{.cfg = cfg, .me = cfg.get_rank(), .size = cfg.get_size()};
  st.with_control = later == nullptr;
  st.conns.rank = st.me;
  st.conns.size = st.size;
  st.conns.op_timeout = cfg.get_op_timeout();
  st.conns.wires.resize(static_cast<size_t>(st.size));
  if (st.size == 1) {
    return std::move(st.conns);
  }
  listen_and_publish(st, sc, std::move(ofi_card));
  count_host_cpus(st.cards, st.me, st.conns);
  plan_connections(st, want_data);
  // Rank 0 of a one-host job holds a control connection to every rank:
  // found short here (and the soft limit raised if the hard one allows),
  // not as a dial that fails until the deadline.
  size_t sockets = st.jobs.size();
  for (int w : st.expected) {
    sockets += w >= 0 ? static_cast<size_t>(w) + st.with_control : 0;
  }
  star::ensure_fd_room(sockets,
                       "the TCP data plane (" + std::to_string(sockets) +
                           (sockets == 1 ? " connection" : " connections") +
                           " to peers)",
                       st.me);
  const Deadline dl = Deadline::after(cfg.get_timeout());
  std::unique_ptr<TcpAcceptor> acceptor;
  if (std::any_of(st.expected.begin(), st.expected.end(),
                  [](int w) { return w >= 0; })) {
    acceptor = std::make_unique<TcpAcceptor>(
        st.me, st.size, std::move(st.listener), cfg.get_token(), st.expected,
        dl, st.with_control);
  }
  st.listener.reset();  // nobody dials us: close the port right away
  std::atomic<bool> stop{false};
  {
    AbortWatch abort(sc.abort_fd(), stop, acceptor.get(), dl);
    dial_all(st, acceptor.get(), dl, stop);
    try {
      collect(st, acceptor.get(), dl);
    } catch (const Error&) {
      abort.raise_if_fired(st.me);
      throw;
    }
    abort.raise_if_fired(st.me);
  }
  tune_sockets(st);
  JACCL_LOG(Debug, "rank " << st.me << ": TCP data plane connected");

  st.conns.cards =
      std::make_shared<const std::vector<TcpCard>>(std::move(st.cards));
  if (later) {
    // A shrink: no monitor to start, and its caller's barrier (or shared
    // memory's gathers) and commit follow; one round of every process less.
    st.conns.keepalive = std::move(later);
    st.conns.shrink = true;
    return std::move(st.conns);
  }
  // Started only once every rank is connected, so no rank's silence clock
  // runs while a peer is still connecting to someone else.
  auto slot = std::make_shared<MonitorSlot>();
  auto control = std::make_shared<std::vector<Fd>>(std::move(st.control));
  auto start = [slot, control, me = st.me, state = st.conns.state,
                hb = cfg.get_heartbeat_timeout()] {
    slot->monitor =
        std::make_shared<LivenessMonitor>(me, std::move(*control), state, hb);
  };
  if (monitor_later && monitor_later()) {
    st.conns.start_monitor = std::move(start);
    st.conns.monitor_slot = slot;
    st.conns.keepalive = std::move(slot);
    return std::move(st.conns);
  }
  sc.barrier();  // every rank is connected
  start();
  st.conns.monitor = slot->monitor;
  st.conns.keepalive = st.conns.monitor;
  return std::move(st.conns);
}

}  // namespace jaccl::detail
