// Copyright 2026 the jaccl authors.
// The state of a group (healthy, failed, revoked, excluded, aborted) and the
// members known to have failed, shared by every thread working for it (and
// by every transport under it). No OS headers: the collectives include it.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/deadline.h"
#include "common/error_detail.h"

namespace jaccl::detail {

// What a group has gone through, in the order it can only climb: a
// healthy group fails (a peer lost, a timeout ...), may then be revoked (a
// member said so), this rank may be excluded (the others declared it
// failed), and abort ends it from any state.
enum class GroupStatus : int {
  Healthy = 0,
  Failed = 1,
  Revoked = 2,
  Excluded = 3,
  Aborted = 4,
};

// The state of a group, shared by every thread working for it (and by
// every transport under it): its status with the error of each step, and
// the members known to have failed (the liveness monitor's knowledge).
// fail() records the first error only, makes wake_fd() readable (every
// blocking poll in jaccl includes it, so every waiting thread wakes at once)
// and runs the abort hooks (the liveness monitor registers one that tells the
// peers why). After a failure every operation rethrows the error of the
// highest status reached (a revoked group's Revoked error, ...).
// Sockets are not shut down on a failure: peers must learn the root cause
// from the abort notice, not from a close that would name the wrong rank.
class FailureState {
 public:
  FailureState();
  ~FailureState();
  FailureState(const FailureState&) = delete;
  FailureState& operator=(const FailureState&) = delete;
  // An eventfd that becomes readable on the first failure.
  int wake_fd() const { return wake_fd_; }
  // Whether the group has left Healthy (failed, revoked, excluded, aborted).
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  GroupStatus status() const;
  // Records e if it is the first failure; returns true if it was.
  // authoritative: the liveness monitor's verdict. A PeerLost seen on a data
  // link is not: when peer B fails because rank D died and then exits, we
  // may read B's closed data socket before the monitor reads B's notice
  // naming D. So a non-authoritative PeerLost first waits up to the verdict
  // grace for the monitor, and loses to its verdict if one comes.
  bool fail(std::exception_ptr e, bool authoritative = false);
  // Climbs to `to` (Revoked, Excluded or Aborted) with e as that status's
  // error, when it is above the current status; true when it climbed. The
  // first failure, if none yet, is e too. Runs the escalation hooks (and,
  // from Healthy, the abort hooks).
  bool escalate(GroupStatus to, std::exception_ptr e);
  // Set by the transport when a liveness monitor runs (0: no waiting).
  void set_verdict_grace(Millis grace) {
    grace_ms_ = static_cast<int>(grace.count());
  }
  // Set by the liveness monitor: `fn` makes it read every control frame
  // already received and returns once it has (or after a bound), and a
  // thread that was paused for `stall` or longer (stopped, starved) calls it
  // through catch_up before posting more, since the peers may have declared
  // this rank failed meanwhile.
  void set_catch_up(std::function<void()> fn, Millis stall);
  // The pause after which catch_up is due (max: no monitor).
  Millis stall_limit() const { return Millis(stall_ms_.load()); }
  void catch_up() const;
  // Waits up to the verdict grace for a failure to be recorded (at once
  // when one is); true when one is. For a transport whose error may be a
  // peer's death reported without saying so (a provider's EIO).
  bool await_verdict() const;
  // Throws the error of the current status, if any.
  void throw_if_failed() const;
  // The error of the current status (null while healthy).
  std::exception_ptr error() const;
  // The first failure (the root cause), null while healthy.
  std::exception_ptr first_error() const;
  // Hook run once, on the first failure (from the failing thread).
  void on_abort(std::function<void()> hook);
  // Hook run on every escalation, with the status reached (from the
  // escalating thread).
  void on_escalate(std::function<void(GroupStatus)> hook);

  // Members (in the numbering of the group's control connections) known to
  // have failed. mark_failed returns true when r is new; watchers of r wake.
  bool mark_failed(int r);
  bool is_failed(int r) const;
  std::vector<int> failed_ranks() const;
  // fd (an eventfd) becomes readable once any of ranks is marked failed
  // (at once when one already is). Closed when the last handle goes.
  struct Watch {
    int fd = -1;
    std::vector<int> ranks;
    ~Watch();
  };
  std::shared_ptr<Watch> watch(std::vector<int> ranks);

 private:
  mutable std::mutex mu_;
  std::atomic<bool> failed_{false};
  GroupStatus status_ = GroupStatus::Healthy;
  std::exception_ptr first_;
  std::exception_ptr current_;
  std::vector<std::function<void()>> hooks_;
  std::vector<std::function<void(GroupStatus)>> escalate_hooks_;
  std::vector<int> failed_ranks_;  // ascending
  std::vector<std::weak_ptr<Watch>> watches_;
  int wake_fd_ = -1;
  std::atomic<int> grace_ms_{0};
  std::function<void()> catch_up_;  // under mu_
  std::atomic<Millis::rep> stall_ms_{Millis::max().count()};
};

// what, followed by the group's first failure when it has one ("rank 1
// revoked the group (after: rank 3 died ...)"), so that a revoke names the
// root cause too.
Detail after_first_failure(const FailureState& st, Detail what);

}  // namespace jaccl::detail
