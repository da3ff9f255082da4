// Copyright 2026 the jaccl authors.
// A watch on a call that nothing can interrupt (a user-supplied function run
// on the caller's thread, which may need locks that caller holds): one shared
// thread logs when the call passes its deadline, and again every period,
// until it returns.
#pragma once

#include <cstdint>
#include <string>

#include "common/deadline.h"

namespace jaccl::detail {

class OverrunWatch {
 public:
  // Watches until destroyed; `what` is the log line's text, to which the
  // elapsed time is appended. period <= 0 watches nothing.
  OverrunWatch(std::string what, Millis period);
  ~OverrunWatch();
  OverrunWatch(const OverrunWatch&) = delete;
  OverrunWatch& operator=(const OverrunWatch&) = delete;

 private:
  uint64_t id_ = 0;
};

}  // namespace jaccl::detail
