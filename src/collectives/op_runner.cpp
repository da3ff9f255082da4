// Copyright 2026 the jaccl authors.
#include "collectives/op_runner.h"

#include "common/error.h"

namespace jaccl::detail {

void OpRunner::settle(const OpCall& c) {
  std::exception_ptr e = std::current_exception();
  bool usage = false;
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    usage = err.kind() == ErrorKind::Usage;
  } catch (...) {
    // Recorded as a jaccl::Error, so every caller sees one.
    try {
      rethrow_as_error(e, ErrorKind::Internal, c.name, {.rank = job_rank_});
    } catch (...) {
      e = std::current_exception();
    }
  }
  if (usage || agreed_) {
    std::rethrow_exception(e);
  }
  state_->fail(e);
  // The failure that ended this op, also when a revoke came after it (later
  // ops see that, in step 2); but a rank that is out of the group
  // (excluded, aborted) says so.
  const GroupStatus now = state_->status();
  std::rethrow_exception(now == GroupStatus::Excluded ||
                                 now == GroupStatus::Aborted
                             ? state_->error()
                             : state_->first_error());
}

}  // namespace jaccl::detail
