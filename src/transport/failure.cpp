// Copyright 2026 the jaccl authors.
#include "transport/failure.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/error.h"

namespace jaccl::detail {

namespace {

void signal_fd(int fd) {
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(fd, &one, sizeof(one));
}

int make_eventfd() {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) {
    raise(ErrorKind::Io, "eventfd() failed", {.sys_errno = errno});
  }
  return fd;
}

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

FailureState::FailureState() : wake_fd_(make_eventfd()) {}

FailureState::~FailureState() {
  ::close(wake_fd_);
}

FailureState::Watch::~Watch() {
  if (fd >= 0) {
    ::close(fd);
  }
}

GroupStatus FailureState::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

bool FailureState::fail(std::exception_ptr e, bool authoritative) {
  if (!authoritative && !failed() && is_peer_lost(e) && await_verdict()) {
    return false;
  }
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_) {
      return false;
    }
    first_ = e;
    current_ = std::move(e);
    status_ = GroupStatus::Failed;
    failed_.store(true, std::memory_order_release);
    hooks.swap(hooks_);
  }
  signal_fd(wake_fd_);
  for (auto& h : hooks) {
    h();
  }
  return true;
}

bool FailureState::escalate(GroupStatus to, std::exception_ptr e) {
  std::vector<std::function<void()>> hooks;
  std::vector<std::function<void(GroupStatus)>> esc;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(to) <= static_cast<int>(status_)) {
      return false;
    }
    if (!first_) {
      first_ = e;
      hooks.swap(hooks_);
    }
    current_ = std::move(e);
    status_ = to;
    failed_.store(true, std::memory_order_release);
    esc = escalate_hooks_;
  }
  signal_fd(wake_fd_);
  for (auto& h : hooks) {
    h();
  }
  for (auto& h : esc) {
    h(to);
  }
  return true;
}

void FailureState::set_catch_up(std::function<void()> fn, Millis stall) {
  std::lock_guard<std::mutex> lock(mu_);
  catch_up_ = std::move(fn);
  stall_ms_ = stall.count();
}

void FailureState::catch_up() const {
  std::function<void()> fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn = catch_up_;
  }
  if (fn) {
    fn();
  }
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
  return current_;
}

std::exception_ptr FailureState::first_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_;
}

void FailureState::on_abort(std::function<void()> hook) {
  std::unique_lock<std::mutex> lock(mu_);
  if (first_) {
    lock.unlock();
    hook();
    return;
  }
  hooks_.push_back(std::move(hook));
}

void FailureState::on_escalate(std::function<void(GroupStatus)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  escalate_hooks_.push_back(std::move(hook));
}

bool FailureState::mark_failed(int r) {
  std::vector<std::shared_ptr<Watch>> wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto at = std::lower_bound(failed_ranks_.begin(), failed_ranks_.end(), r);
    if (at != failed_ranks_.end() && *at == r) {
      return false;
    }
    failed_ranks_.insert(at, r);
    for (auto& w : watches_) {
      auto s = w.lock();
      if (s &&
          std::find(s->ranks.begin(), s->ranks.end(), r) != s->ranks.end()) {
        wake.push_back(std::move(s));
      }
    }
    std::erase_if(watches_, [](const auto& w) { return w.expired(); });
  }
  for (auto& w : wake) {
    signal_fd(w->fd);
  }
  return true;
}

bool FailureState::is_failed(int r) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::binary_search(failed_ranks_.begin(), failed_ranks_.end(), r);
}

std::vector<int> FailureState::failed_ranks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_ranks_;
}

std::shared_ptr<FailureState::Watch> FailureState::watch(
    std::vector<int> ranks) {
  auto w = std::make_shared<Watch>();
  w->fd = make_eventfd();
  w->ranks = std::move(ranks);
  std::lock_guard<std::mutex> lock(mu_);
  for (int r : w->ranks) {
    if (std::binary_search(failed_ranks_.begin(), failed_ranks_.end(), r)) {
      signal_fd(w->fd);
      break;
    }
  }
  watches_.push_back(w);
  return w;
}

Detail after_first_failure(const FailureState& st, Detail what) {
  std::exception_ptr first = st.first_error();
  if (!first) {
    return what;
  }
  try {
    std::rethrow_exception(first);
  } catch (const Error& e) {
    const ErrorInfo& i = e.info();
    return what + " (after: " + Detail::from_template(i.detail, i.peers) + ")";
  } catch (...) {
  }
  return what;
}

}  // namespace jaccl::detail
