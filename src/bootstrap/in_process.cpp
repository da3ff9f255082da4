// Copyright 2026 the jaccl authors.
#include "bootstrap/in_process.h"

#include <cstring>
#include <string>

#include "common/error.h"

namespace jaccl::detail {

std::shared_ptr<InProcessHub> InProcessHub::create(int size, Millis timeout) {
  if (size < 1) {
    raise(ErrorKind::Config,
          "in-process hub needs size >= 1, got " + std::to_string(size));
  }
  return std::shared_ptr<InProcessHub>(new InProcessHub(size, timeout));
}

InProcessHub::InProcessHub(int size, Millis timeout)
    : size_(size), timeout_(timeout), present_(static_cast<size_t>(size), 0) {}

AllGatherFn InProcessHub::for_rank(int rank) {
  if (rank < 0 || rank >= size_) {
    raise(ErrorKind::Config, "in-process hub: " + rank_ref(rank) +
                                 " out of range for size " +
                                 std::to_string(size_));
  }
  auto self = shared_from_this();
  return [self, rank](const char* src, char* dst, size_t n) {
    self->call(rank, src, dst, n);
  };
}

AllGatherFactory InProcessHub::factory() {
  auto self = shared_from_this();
  return [self](int rank, int size) {
    if (size != self->size_) {
      raise(ErrorKind::Config,
            "in-process hub has size " + std::to_string(self->size_) +
                " but the factory was asked for size " + std::to_string(size));
    }
    return self->for_rank(rank);
  };
}

void InProcessHub::call(int rank, const char* src, char* dst, size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  ErrorContext ctx{.rank = rank, .address = "in-process hub"};
  // Wait until the previous round has been read by everyone.
  auto dl = Deadline::after(timeout_);
  auto wait = [&](auto pred) {
    if (dl.is_never()) {
      cv_.wait(lock, pred);
      return true;
    }
    return cv_.wait_for(lock, dl.remaining(), pred);
  };
  if (!wait([&] { return failed_ || departed_ == 0; })) {
    raise(ErrorKind::Timeout, "previous all-gather round never drained", ctx);
  }
  if (failed_)
    raise(failure_kind_, failure_, ctx);
  if (present_[rank]) {
    raise(ErrorKind::Config, rank_ref(rank) + " called twice in one round",
          ctx);
  }
  if (arrived_ == 0) {
    n_ = n;
    data_.assign(n * static_cast<size_t>(size_), 0);
  } else if (n != n_) {
    failed_ = true;
    failure_kind_ = ErrorKind::Protocol;
    failure_ = "in-process all-gather: " + rank_ref(rank) + " passed " +
               std::to_string(n) + " bytes, others " + std::to_string(n_);
    cv_.notify_all();
    raise(ErrorKind::Protocol, failure_, ctx);
  }
  if (n != 0)  // an empty gather has no buffer (memcpy wants one)
    std::memcpy(data_.data() + static_cast<size_t>(rank) * n, src, n);
  present_[rank] = 1;
  uint64_t gen = generation_;
  if (++arrived_ == size_) {
    ++generation_;
    departed_ = size_;
    cv_.notify_all();
  } else if (!wait([&] { return failed_ || generation_ != gen; })) {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (!present_[r])
        missing.push_back(r);
    }
    failed_ = true;
    failure_kind_ = ErrorKind::Timeout;
    failure_ = "in-process all-gather timed out after " +
               format_duration(timeout_) + " waiting for " + ranks_ref(missing);
    cv_.notify_all();
    raise(ErrorKind::Timeout, failure_, ctx);
  }
  if (failed_ && generation_ == gen)
    raise(failure_kind_, failure_, ctx);
  if (!data_.empty())
    std::memcpy(dst, data_.data(), data_.size());
  present_[rank] = 0;
  if (--departed_ == 0) {
    arrived_ = 0;
    cv_.notify_all();
  }
}

}  // namespace jaccl::detail
