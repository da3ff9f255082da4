// Copyright 2026 the jaccl authors.
#include "transport/failure.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.h"

namespace jaccl::detail {

FailureState::FailureState()
    : wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wake_fd_ < 0) {
    raise(ErrorKind::Io, "eventfd() failed", {.sys_errno = errno});
  }
}

FailureState::~FailureState() {
  ::close(wake_fd_);
}

namespace {

bool is_peer_lost(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return err.kind() == ErrorKind::PeerLost;
  } catch (...) {
    return false;
  }
}

}  // namespace

bool FailureState::fail(std::exception_ptr e, bool authoritative) {
  if (!authoritative && !failed() && is_peer_lost(e) && await_verdict()) {
    return false;
  }
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) {
      return false;
    }
    error_ = std::move(e);
    failed_.store(true, std::memory_order_release);
    hooks.swap(hooks_);
  }
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
  for (auto& h : hooks) {
    h();
  }
  return true;
}

bool FailureState::await_verdict() const {
  const int grace = grace_ms_.load();
  if (grace > 0 && !failed()) {
    pollfd p{wake_fd_, POLLIN, 0};
    while (::poll(&p, 1, grace) < 0 && errno == EINTR) {
    }
  }
  return failed();
}

void FailureState::throw_if_failed() const {
  if (!failed()) {
    return;
  }
  std::rethrow_exception(error());
}

std::exception_ptr FailureState::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void FailureState::on_abort(std::function<void()> hook) {
  std::unique_lock<std::mutex> lock(mu_);
  if (error_) {
    lock.unlock();
    hook();
    return;
  }
  hooks_.push_back(std::move(hook));
}

}  // namespace jaccl::detail
