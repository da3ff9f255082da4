// Copyright 2026 the jaccl authors.
// An all-gather among threads of one process (ranks as threads), for tests
// and for the side-channel benchmark with many ranks.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "common/deadline.h"
#include "common/error_detail.h"
#include "jaccl/error.h"
#include "jaccl/side_channel.h"

namespace jaccl::detail {

class InProcessHub : public std::enable_shared_from_this<InProcessHub> {
 public:
  // timeout bounds each call: a rank that never arrives is named in a
  // Timeout error at every rank that waited.
  static std::shared_ptr<InProcessHub> create(int size, Millis timeout);

  // The all-gather for one rank; keeps the hub alive.
  AllGatherFn for_rank(int rank);
  // A factory suitable for Config::set_all_gather_factory.
  AllGatherFactory factory();

  int size() const { return size_; }

 private:
  InProcessHub(int size, Millis timeout);
  void call(int rank, const char* src, char* dst, size_t n);

  int size_;
  Millis timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  int departed_ = 0;
  size_t n_ = 0;
  std::vector<char> data_;
  std::vector<char> present_;
  bool failed_ = false;
  ErrorKind failure_kind_ = ErrorKind::Protocol;
  Detail failure_;
};

}  // namespace jaccl::detail
