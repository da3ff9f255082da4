// Copyright 2026 the jaccl authors.
// The first failure of a group, shared by every thread working for it (and
// by every transport under it). No OS headers: the collectives include it.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "common/deadline.h"

namespace jaccl::detail {

// The first failure of a group, shared by every thread working for it.
// fail() records the first error only, makes wake_fd() readable (every
// blocking poll in jaccl includes it, so every waiting thread wakes at once)
// and runs the abort hooks (the liveness monitor registers one that tells the
// peers why). After a failure every operation rethrows the original error.
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
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Records e if it is the first failure; returns true if it was.
  // authoritative: the liveness monitor's verdict. A PeerLost seen on a data
  // link is not: when peer B fails because rank D died and then exits, we
  // may read B's closed data socket before the monitor reads B's notice
  // naming D. So a non-authoritative PeerLost first waits up to the verdict
  // grace for the monitor, and loses to its verdict if one comes.
  bool fail(std::exception_ptr e, bool authoritative = false);
  // Set by the transport when a liveness monitor runs (0: no waiting).
  void set_verdict_grace(Millis grace) {
    grace_ms_ = static_cast<int>(grace.count());
  }
  // Waits up to the verdict grace for a failure to be recorded (at once
  // when one is); true when one is. For a transport whose error may be a
  // peer's death reported without saying so (a provider's EIO).
  bool await_verdict() const;
  // Throws the recorded failure, if any.
  void throw_if_failed() const;
  std::exception_ptr error() const;
  // Hook run once, on the first failure (from the failing thread).
  void on_abort(std::function<void()> hook);

 private:
  mutable std::mutex mu_;
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::vector<std::function<void()>> hooks_;
  int wake_fd_ = -1;
  std::atomic<int> grace_ms_{0};
};

}  // namespace jaccl::detail
