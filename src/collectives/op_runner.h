// Copyright 2026 the jaccl authors.
// The one shape of every op of every group (NetGroup, ShmGroup, HierGroup).
// A group owns an OpRunner and writes each op as
//
//   void all_sum(const void* in, void* out, size_t n, int dtype) override {
//     ops_.run(call::all_reduce(OpKind::AllSum, in, out, n, dtype),
//              [&](const Deadline& dl) { ...move the bytes, bounded by dl...
//              });
//   }
//
// and run() does, in this order:
//   1. takes the group's lock: one op at a time, in arrival order (a
//      shrink that takes the group's TCP connections over takes it too:
//      transport/tcp_reuse.h);
//   2. a failed group rethrows its first failure;
//   3. checks the arguments (op_checks.h): a UsageError, the group untouched;
//   4. an op that moves zero bytes returns (op_checks.h has the rule);
//   5. runs the body under the op's deadline (op_timeout from now);
//   6. anything the body throws becomes the group's failure (recorded once,
//      in the FailureState every plane of the group reports to), and the
//      caller sees the group's first failure -- except a UsageError and an
//      error the body raised through agreed(), which leave the group as it
//      was.
// The group's states live in its FailureState (healthy, failed, revoked,
// excluded, aborted): step 2 throws the current state's error (a revoked
// group's Revoked), step 6 the failure that ended the op (an op running
// when a peer died reports the death, even if a revoke followed).
#pragma once

#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "collectives/op_checks.h"
#include "common/deadline.h"
#include "transport/failure.h"

namespace jaccl::detail {

class OpRunner {
 public:
  // member/size: this rank in its group; job_rank names it in messages.
  // op_timeout: one op's budget (0 = none). lock (may be null: one of its
  // own): the group's lock, shared with what must know that no op runs.
  OpRunner(int member, int size, int job_rank,
           std::shared_ptr<FailureState> state, Millis op_timeout,
           std::shared_ptr<std::mutex> lock = nullptr)
      : mu_(lock != nullptr ? std::move(lock) : std::make_shared<std::mutex>()),
        member_(member),
        size_(size),
        job_rank_(job_rank),
        state_(std::move(state)),
        op_timeout_(op_timeout) {}
  OpRunner(const OpRunner&) = delete;
  OpRunner& operator=(const OpRunner&) = delete;

  // Runs one op (steps 1-6 above); body(const Deadline&).
  template <class Body>
  void run(const OpCall& c, Body&& body) {
    std::lock_guard<std::mutex> lock(*mu_);
    state_->throw_if_failed();
    check_call(c, member_, size_, job_rank_);
    if (moves_no_bytes(c)) {
      return;
    }
    agreed_ = false;
    deadline_ = Deadline::after(op_timeout_);
    try {
      body(deadline_);
    } catch (...) {
      settle(c);
    }
  }

  // Runs check inside a body: what it throws, every rank of the group
  // throws at the same point with nothing out of step (all_to_allv's counts
  // check), so it leaves the group working.
  template <class Check>
  void agreed(Check&& check) {
    try {
      check();
    } catch (...) {
      agreed_ = true;
      throw;
    }
  }

  // The deadline of the op in flight (what run() passed to its body).
  const Deadline& deadline() const { return deadline_; }
  FailureState& state() const { return *state_; }
  const std::shared_ptr<FailureState>& shared_state() const { return state_; }
  Millis op_timeout() const { return op_timeout_; }

 private:
  // Step 6, from inside the catch block of run().
  [[noreturn]] void settle(const OpCall& c);

  std::shared_ptr<std::mutex> mu_;
  int member_;
  int size_;
  int job_rank_;
  std::shared_ptr<FailureState> state_;
  Millis op_timeout_;
  Deadline deadline_;
  bool agreed_ = false;  // the body's error came through agreed()
};

}  // namespace jaccl::detail
