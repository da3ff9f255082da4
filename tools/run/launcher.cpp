// Copyright 2026 the jaccl authors.
#include "run/launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bootstrap/kv_store.h"
#include "jaccl/error.h"
#include "run/elastic.h"
#include "run/limits.h"
#include "run/remote.h"
#include "run/summary.h"
#include "run/util.h"
#include "transport/ofi/shm_regions.h"

namespace jaccl::run {

namespace {

// Reads what is queued on the signal pipe: did a signal other than
// SIGCHLD arrive? Our last flush gives up on a stalled reader only for
// such a signal. A rank's SIGCHLD may still be queued when the job ends
// (reaped before its byte was read); it must not drop the job's last lines.
bool stop_signal_queued(int signal_fd) {
  unsigned char sigs[64];
  ssize_t n;
  bool stop = false;
  while ((n = ::read(signal_fd, sigs, sizeof(sigs))) > 0) {
    stop = stop || std::any_of(sigs, sigs + n,
                               [](unsigned char s) { return s != SIGCHLD; });
  }
  return stop;
}

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

const char* signal_line(int sig) {
  switch (sig) {
    case SIGINT:
      return "INT\n";
    case SIGHUP:
      return "HUP\n";
    case SIGKILL:
      return "KILL\n";
    default:
      return "TERM\n";
  }
}

}  // namespace

Launcher::Launcher(const Options& opt, JobPlan plan)
    : opt_(opt), plan_(std::move(plan)) {}

Launcher::~Launcher() = default;

void Launcher::host_grow_channel() {
  for (const RankPlan& rp : plan_.ranks) {
    if (rp.remote) {
      // The store listens on loopback: remote ranks set their own
      // JACCL_GROW_CHANNEL (file://, redis://).
      return;
    }
  }
  if (plan_.ranks.empty()) {
    return;
  }
  try {
    kv_ = std::make_unique<jaccl::detail::KvServer>(
        "127.0.0.1:0", env_value(plan_.ranks[0].spec.env, "JACCL_TOKEN"));
  } catch (const jaccl::Error& e) {
    note(std::string("--elastic: cannot host the grow channel: ") + e.what());
    return;
  }
  for (RankPlan& rp : plan_.ranks) {
    add_grow_channel(rp.spec.env, "kv://" + kv_->address());
  }
  if (opt_.verbose) {
    note("--elastic: grows meet at kv://" + kv_->address());
  }
}

bool Launcher::restart(int rank, const std::string& why) {
  if (restarts_ >= opt_.elastic.restart) {
    return false;
  }
  const RankPlan& rp = plan_.ranks[static_cast<size_t>(rank)];
  if (rp.remote) {
    note(why + "; --restart: ranks on other hosts are not restarted");
    return false;
  }
  ++restarts_;
  SpawnSpec spec = rp.spec;
  spec.env = replacement_env(spec.env, restarts_);
  spec.pass_fd = -1;  // a newcomer joins a grow; it serves no star
  Rank r = spawn(rank, spec);
  r.host = rp.host;
  if (!r.running) {
    note(why + "; --restart: could not start its replacement");
    return false;
  }
  rank_of_pid_[r.pid] = rank;
  ranks_[static_cast<size_t>(rank)] = std::move(r);
  note(why + "; --restart: replacement " + std::to_string(restarts_) + " of " +
       std::to_string(opt_.elastic.restart) + " (pid " +
       std::to_string(ranks_[static_cast<size_t>(rank)].pid) +
       ") joins grow generation " + std::to_string(restarts_));
  return true;
}

int Launcher::running() const {
  return static_cast<int>(std::count_if(
      ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }));
}

void Launcher::signal_rank(Rank& r, int sig) {
  if (!r.running) {
    return;
  }
  if (!r.remote) {
    ::kill(r.pid, sig);
    return;
  }
  if (!r.started || r.ctl < 0) {
    // Nothing runs there yet that we could signal: drop the connection
    // (the remote shell then stops whatever it started).
    ::kill(r.pid, sig == SIGKILL ? SIGKILL : SIGTERM);
    r.ssh_killed = sig == SIGKILL;
    return;
  }
  const char* line = signal_line(sig);
  if (::write(r.ctl, line, std::strlen(line)) < 0) {
    ::kill(r.pid, SIGTERM);  // ssh is not reading: end the connection
  }
  if (sig == SIGKILL) {
    ::close(r.ctl);
    r.ctl = -1;
    ssh_kill_at_ = Clock::now() + seconds(std::max(opt_.grace, 1.0));
  }
}

void Launcher::kill_all(int sig) {
  for (Rank& r : ranks_) {
    signal_rank(r, sig);
  }
}

// Sends sig to every running rank and arms the SIGKILL timer. Says why
// first, naming how many ranks are being stopped.
void Launcher::stop(int sig, const std::string& why) {
  if (stopping_) {
    return;
  }
  stopping_ = true;
  const int n = running();
  note(n > 0 ? why + "; stopping " + std::to_string(n) + " rank(s)" : why);
  kill_all(sig);
  kill_at_ = Clock::now() + seconds(opt_.grace);
}

void Launcher::fail(int rank, int status, const std::string& why) {
  if (stopping_) {
    return;
  }
  failed_rank_ = rank;
  failed_status_ = status;
  stop(SIGTERM, why);
}

void Launcher::rank_failed(int rank, int status, const std::string& why) {
  if (!opt_.elastic.enabled) {
    fail(rank, status, why);
    return;
  }
  if (!stopping_ && restart(rank, why)) {
    return;  // the replacement stands in: not the job's failure
  }
  if (failed_rank_ < 0) {
    failed_rank_ = rank;  // its status is the job's
    failed_status_ = status;
  }
  if (stopping_) {
    return;  // a signal or the timeout is ending the job anyway
  }
  const int n = running();
  note(why + (n > 0 ? "; --elastic: the other " + std::to_string(n) +
                          " running rank(s) carry on"
                    : ""));
}

void Launcher::on_started(int rank) {
  Rank& r = ranks_[rank];
  r.started = true;
  if (opt_.verbose) {
    note("rank " + std::to_string(rank) + " started on " + r.host +
         " (remote pid " + r.out.marker_rest + ", ssh pid " +
         std::to_string(r.pid) + ")");
  }
  if (stopping_) {
    signal_rank(r, signal_ != 0 ? signal_ : SIGTERM);  // came up too late
  }
}

void Launcher::on_exit(int rank) {
  Rank& r = ranks_[rank];
  r.out.pump(true);  // all it wrote before exiting is in the pipes
  r.err.pump(true);
  if (r.ctl >= 0) {
    ::close(r.ctl);
    r.ctl = -1;
  }
  if (r.remote && !r.started && r.out.marker_seen) {
    on_started(rank);
  }
  const std::string name = "rank " + std::to_string(rank);
  if (!r.remote && WIFSIGNALED(r.status)) {
    // Killed: it could not unlink its libfabric shm regions (the remote
    // side's shell does the same for its ranks).
    const int n = jaccl::detail::ofi::remove_shm_regions(r.pid);
    if (n > 0 && opt_.verbose) {
      note(name + ": removed " + std::to_string(n) +
           " libfabric shm region(s) it left in /dev/shm");
    }
  }
  if (r.remote && !r.started) {
    std::string said = r.err.last_line.empty() ? "" : ": " + r.err.last_line;
    // 255 is ssh's own failure, unless our remote shell said why.
    const bool ssh_failed = WIFEXITED(r.status) &&
                            WEXITSTATUS(r.status) == kSshExit &&
                            r.err.last_line.rfind("jaccl-run: ", 0) != 0;
    std::string what = ssh_failed ? "cannot reach host " + r.host
                                  : "could not start on host " + r.host + " (" +
                                        opt_.ssh + " " +
                                        describe_status(r.status) + ")";
    if (!stopping_ && !r.lost) {
      rank_failed(rank, r.status, name + ": " + what + said);
    } else if (opt_.verbose && !r.lost) {
      note(name + " " + describe_status(r.status) + " before it started");
    }
    return;
  }
  std::string how = name + " " + describe_status(r.status);
  if (r.remote && WIFSIGNALED(r.status)) {
    how = name + ": its ssh client (the connection to " + r.host + ") " +
          describe_status(r.status);
  } else if (r.remote) {
    // The remote shell exits 128+N when the rank died of signal N.
    const int code = WIFEXITED(r.status) ? WEXITSTATUS(r.status) : 0;
    if (code > 128 && code < 128 + NSIG) {
      how += " (128+" + signal_name(code - 128) + ")";
    }
    how += " on " + r.host;
  }
  if (failed(r.status) && !stopping_) {
    rank_failed(rank, r.status, how);
  } else if (opt_.verbose) {
    note(how);
  }
}

void Launcher::notice_starts() {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (r.remote && !r.started && r.out.marker_seen && r.running) {
      on_started(static_cast<int>(i));
    }
  }
}

void Launcher::reap() {
  notice_starts();
  // One waitpid per exited child, not one per running rank: with a
  // thousand ranks a scan per SIGCHLD made the exits quadratic.
  for (;;) {
    int status = 0;
    const pid_t got = ::waitpid(-1, &status, WNOHANG);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      if (got < 0 && errno == ECHILD) {
        // Nothing left to wait for: whatever we still count as running
        // has gone (not ours to reap any more).
        for (size_t i = 0; i < ranks_.size(); ++i) {
          if (ranks_[i].running) {
            ranks_[i].running = false;
            on_exit(static_cast<int>(i));
          }
        }
      }
      return;
    }
    auto it = rank_of_pid_.find(got);
    if (it == rank_of_pid_.end()) {
      continue;  // not a rank (none today)
    }
    const int rank = it->second;
    rank_of_pid_.erase(it);
    Rank& r = ranks_[static_cast<size_t>(rank)];
    r.status = status;
    r.running = false;
    on_exit(rank);
  }
}

void Launcher::check_deadlines() {
  const auto now = Clock::now();
  if (!stopping_ && opt_.connect_timeout > 0 && now >= connect_by_) {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      Rank& r = ranks_[i];
      if (r.remote && r.running && !r.started && !r.lost) {
        const std::string why =
            "rank " + std::to_string(i) + ": host " + r.host +
            " did not start it within " + format_seconds(opt_.connect_timeout) +
            " s (--connect-timeout)" +
            (r.err.last_line.empty() ? "" : ": " + r.err.last_line);
        if (!opt_.elastic.enabled) {
          fail(static_cast<int>(i), kSshExit << 8, why);
          break;
        }
        // Only this rank's connection is dropped (nothing runs there yet;
        // the remote shell cleans up when it goes); its exit is not
        // reported again.
        r.lost = true;
        rank_failed(static_cast<int>(i), kSshExit << 8, why);
        signal_rank(r, SIGKILL);
      }
    }
  }
  if (opt_.timeout > 0 && !stopping_ && now >= start_ + seconds(opt_.timeout)) {
    timed_out_ = true;
    stop(SIGTERM, "timeout: the job ran longer than " +
                      format_seconds(opt_.timeout) + " s");
  }
  if (kill_at_ && now >= *kill_at_) {
    note(std::to_string(running()) +
         " rank(s) still running after the grace period; sending SIGKILL");
    kill_all(SIGKILL);
    kill_at_.reset();
  }
  if (ssh_kill_at_ && now >= *ssh_kill_at_) {
    for (Rank& r : ranks_) {
      if (r.remote && r.running && !r.ssh_killed) {
        ::kill(r.pid, SIGKILL);
        r.ssh_killed = true;
      }
    }
    ssh_kill_at_.reset();
  }
}

int Launcher::run() {
  const int signal_fd = install_signal_handlers();
  if (opt_.verbose) {
    note(plan_.summary);
  }
  start_ = Clock::now();
  connect_by_ = start_ + seconds(opt_.connect_timeout);
  // Two pipes per rank whose output we prefix, and ssh's stdin: all held
  // until the rank ends.
  size_t want_fds = 0;
  for (const RankPlan& rp : plan_.ranks) {
    want_fds += (rp.spec.capture ? 2 : 0) + (rp.spec.ctl ? 1 : 0);
  }
  if (opt_.elastic.enabled) {
    host_grow_channel();
  }
  const std::string fds = ensure_fd_room(want_fds);
  if (!fds.empty()) {
    note("cannot start " + std::to_string(plan_.ranks.size()) +
         " rank(s): jaccl-run " + fds);
    err_sink().flush_all(signal_fd,
                         [&] { return stop_signal_queued(signal_fd); });
    return 1;
  }
  for (size_t rank = 0; rank < plan_.ranks.size(); ++rank) {
    RankPlan& rp = plan_.ranks[rank];
    Rank r = spawn(static_cast<int>(rank), rp.spec);
    if (rank == 0 && plan_.coordinator_fd >= 0) {
      // Rank 0 holds the coordinator's socket now: when it ends, the ranks
      // still dialing are refused at once instead of queued.
      ::close(plan_.coordinator_fd);
      plan_.coordinator_fd = -1;
    }
    r.remote = rp.remote;
    r.host = rp.host;
    if (r.remote) {
      r.out.marker = kStartMarker;
      if (opt_.no_prefix) {
        r.out.prefix.clear();
        r.err.prefix.clear();
      }
    }
    if (r.running) {
      rank_of_pid_[r.pid] = static_cast<int>(rank);
    }
    ranks_.push_back(std::move(r));
    if (!ranks_.back().running) {
      fail(static_cast<int>(rank), 1 << 8,
           "cannot start rank " + std::to_string(rank));
      break;
    }
    if (opt_.verbose && !rp.remote) {
      note("rank " + std::to_string(rank) + " is pid " +
           std::to_string(ranks_.back().pid));
    }
  }

  reap();
  while (running() > 0) {
    std::vector<pollfd> fds{{signal_fd, POLLIN, 0}};
    std::vector<Stream*> streams{nullptr};
    std::vector<Sink*> sinks{&out_sink()};
    if (&err_sink() != &out_sink()) {
      sinks.push_back(&err_sink());
    }
    for (Sink* s : sinks) {
      if (s->pending()) {
        fds.push_back({s->fd(), POLLOUT, 0});
        streams.push_back(nullptr);
      }
    }
    for (Rank& r : ranks_) {
      for (Stream* s : {&r.out, &r.err}) {
        if (s->fd >= 0 && !s->dest->full()) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
    }
    std::optional<Clock::time_point> wake = kill_at_;
    auto consider = [&](Clock::time_point t) {
      if (!wake || t < *wake) {
        wake = t;
      }
    };
    if (ssh_kill_at_) {
      consider(*ssh_kill_at_);
    }
    if (!stopping_ && opt_.timeout > 0) {
      consider(start_ + seconds(opt_.timeout));
    }
    if (!stopping_ && opt_.connect_timeout > 0 &&
        std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
          return r.remote && r.running && !r.started && !r.lost;
        })) {
      consider(connect_by_);
    }
    int wait_ms = -1;
    if (wake) {
      auto left =
          std::chrono::ceil<std::chrono::milliseconds>(*wake - Clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    ::poll(fds.data(), fds.size(), wait_ms);

    for (size_t k = 1; k < fds.size(); ++k) {
      if (fds[k].revents == 0) {
        continue;
      }
      if (streams[k] != nullptr) {
        streams[k]->pump(false);
      } else {
        (fds[k].fd == out_sink().fd() ? out_sink() : err_sink()).flush_some();
      }
    }
    // Before any signal is handled: a rank whose output was just passed on
    // is started (signalled through its shell, not by dropping ssh).
    notice_starts();
    unsigned char sigs[64];
    ssize_t n;
    while ((n = ::read(signal_fd, sigs, sizeof(sigs))) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        int sig = sigs[i];
        if (sig == SIGCHLD) {
          continue;
        }
        if (stopping_) {  // no more grace
          note("got " + signal_name(sig) +
               " while stopping; killing the ranks");
          kill_all(SIGKILL);
          kill_at_.reset();
        } else {
          signal_ = sig;
          stop(sig, "got " + signal_name(sig));
        }
      }
    }
    reap();
    check_deadlines();
  }
  if (opt_.elastic.enabled) {
    note("elastic job ended: " + elastic_summary(ranks_) +
         (restarts_ > 0 ? "; " + std::to_string(restarts_) +
                              " replacement(s) started (--restart)"
                        : ""));
  }
  auto give_up = [&] { return stop_signal_queued(signal_fd); };
  out_sink().flush_all(signal_fd, give_up);
  err_sink().flush_all(signal_fd, give_up);  // (the same queue under 2>&1)

  if (signal_ != 0) {
    ::signal(signal_, SIG_DFL);
    ::raise(signal_);
    return 128 + signal_;
  }
  if (timed_out_) {
    return kTimeoutExit;
  }
  if (failed_rank_ >= 0) {
    return exit_code_of(failed_status_);
  }
  return 0;
}

}  // namespace jaccl::run
