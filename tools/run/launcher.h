// Copyright 2026 the jaccl authors.
// The supervision loop: starts the planned ranks, re-emits their output,
// stops them all when one fails, forwards signals, enforces deadlines.
//
// Single-threaded: one poll loop over the ranks' output pipes, our own
// stdout/stderr when output is queued, and a self-pipe that the signal
// handlers (including SIGCHLD) write to.
//
// With --elastic a rank that fails is noted, not followed by the others'
// stop; the job ends when the last rank exits (summary.h's closing line).
// jaccl-run then also hosts the kv:// store where the survivors' grows meet
// (bootstrap/kv_store.h, its own thread), and with --restart N starts a
// replacement in the slot of a local rank that died (run/elastic.h); a
// replaced death is not the job's failure.
//
// Local ranks get signals directly. A remote rank is an ssh client whose
// stdin carries the token and then signal names, one per line, which the
// remote shell applies to the rank's process group (see remote.h); ending
// that stdin, or the connection, ends the remote rank.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "run/options.h"
#include "run/plan.h"
#include "run/spawn.h"

namespace jaccl::detail {
class KvServer;
}

namespace jaccl::run {

class Launcher {
 public:
  Launcher(const Options& opt, JobPlan plan);
  ~Launcher();

  int run();

 private:
  using Clock = std::chrono::steady_clock;

  void reap();
  void on_exit(int rank);
  void on_started(int rank);
  void notice_starts();
  void stop(int sig, const std::string& why);
  void fail(int rank, int status, const std::string& why);
  // A rank failed or died: stops the job, or under --elastic only notes it.
  void rank_failed(int rank, int status, const std::string& why);
  // --elastic: hosts the grow channel and names it in every local rank's
  // environment.
  void host_grow_channel();
  // --restart: starts a replacement for `rank`, which died; false when
  // none is left or the rank is remote.
  bool restart(int rank, const std::string& why);
  void kill_all(int sig);
  void signal_rank(Rank& r, int sig);
  void check_deadlines();
  int running() const;

  const Options& opt_;
  JobPlan plan_;
  std::vector<Rank> ranks_;
  std::unordered_map<pid_t, int> rank_of_pid_;  // running ranks
  Clock::time_point start_;
  Clock::time_point connect_by_;                  // remote ranks start by then
  std::optional<Clock::time_point> kill_at_;      // SIGKILL stragglers then
  std::optional<Clock::time_point> ssh_kill_at_;  // then their ssh clients
  bool stopping_ = false;
  int failed_rank_ = -1;  // first rank that failed
  int failed_status_ = 0;
  int signal_ = 0;  // signal that stopped the job
  bool timed_out_ = false;
  std::unique_ptr<jaccl::detail::KvServer> kv_;
  int restarts_ = 0;
};

}  // namespace jaccl::run
