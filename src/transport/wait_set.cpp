// Copyright 2026 the jaccl authors.
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <ctime>
#include <string>

#include "common/deadline.h"
#include "common/error.h"
#include "common/host_load.h"
#include "transport/endpoint.h"

namespace jaccl::detail {

WaitSet::WaitSet() {
  items_.reserve(8);
}

WaitSet::~WaitSet() = default;

void WaitSet::clear() {
  items_.clear();
  ready_ = false;
  driven_ = false;
  max_sleep_ms_ = -1;
}

void WaitSet::add_fd(int fd, bool read, bool write) {
  if (fd < 0 || (!read && !write)) {
    return;
  }
  const short ev =
      static_cast<short>((read ? POLLIN : 0) | (write ? POLLOUT : 0));
  for (Item& it : items_) {
    if (it.fd == fd) {
      it.events = static_cast<short>(it.events | ev);
      return;
    }
  }
  items_.push_back({fd, ev, 0});
}

bool WaitSet::spinning() const {
  return !spinning_ || now_ns_ < spin_until_ns_;
}

bool WaitSet::wait(const Deadline& dl, FailureState& state, int spin_us,
                   const YieldPlan& yp, const char* op, int rank) {
  static_assert(sizeof(Item) == sizeof(pollfd));
  static_assert(offsetof(Item, events) == offsetof(pollfd, events));
  static_assert(offsetof(Item, revents) == offsetof(pollfd, revents));
  if (ready_) {
    state.throw_if_failed();
    return true;
  }
  now_ns_ = static_cast<long long>(now_ns());
  if (!spinning_) {
    spinning_ = true;
    spin_until_ns_ = now_ns_ + static_cast<long long>(spin_us) * 1000;
    yield_until_ns_ = now_ns_ + kYieldNs;
    backoff_us_ = kMinBackoffUs;
  }
  if (driven_ && items_.empty() && spin_us > 0 && now_ns_ < spin_until_ns_) {
    // Spinning on driven links only: nothing for poll() to watch but the
    // failure's wake fd, whose flag reads without a system call (ofi shm
    // 8-byte all_sum: one poll per op was a third of its latency).
    state.throw_if_failed();
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
    return true;
  }
  items_.push_back({state.wake_fd(), POLLIN, 0});
  auto* fds = reinterpret_cast<pollfd*>(items_.data());
  const nfds_t n = static_cast<nfds_t>(items_.size());
  struct Pop {
    std::vector<Item>& v;
    ~Pop() { v.pop_back(); }
  } pop{items_};
  for (;;) {
    const bool spin = spin_us > 0 && now_ns_ < spin_until_ns_;
    const bool yield = !spin && !driven_ && yp.ranks > 0 &&
                       now_ns_ < yield_until_ns_ &&
                       YieldGate::host().allows(now_ns_, yp.ranks);
    const int timeout_ms = spin || yield ? 0 : dl.poll_ms(max_sleep_ms_);
    int rc;
    if (driven_ && timeout_ms > 0) {
      // A driven link may have nothing to wake us (the shm provider has no
      // wait fd): sleep a little longer each round, from microseconds up
      // to the cap, so a reply that comes soon is seen soon (a 1 ms poll
      // made an 8-byte round trip cost ~650 us) without spinning a core.
      const long long us =
          std::min<long long>(backoff_us_, timeout_ms * 1000LL);
      backoff_us_ = std::min<long long>(backoff_us_ * 2, timeout_ms * 1000LL);
      const timespec ts{static_cast<time_t>(us / 1000000),
                        static_cast<long>(us % 1000000) * 1000};
      rc = ::ppoll(fds, n, &ts, nullptr);
    } else {
      rc = ::poll(fds, n, timeout_ms);
    }
    now_ns_ = static_cast<long long>(
        now_ns());  // for the next round, and spinning() after a sleep
    if (fds[n - 1].revents != 0) {
      state.throw_if_failed();
    }
    if (rc > 0) {
      return true;
    }
    if (rc < 0 && errno != EINTR) {
      raise(ErrorKind::Io, std::string("poll failed during ") + op,
            {.rank = rank, .sys_errno = errno});
    }
    if (!spin && dl.expired()) {
      return false;
    }
    if (yield) {
      yield_now(yp);
    }
    if (driven_ && rc == 0) {
      return true;  // a spin round, or a bounded sleep: progress again
    }
  }
}

void WaitSet::yield_now(const YieldPlan& yp) {
  const long long before = now_ns_;
  ::sched_yield();
  now_ns_ = static_cast<long long>(now_ns());
  YieldGate::host().yielded(now_ns_, now_ns_ - before);
  // Yielding ranks never sleep, so nothing makes the kernel spread ranks
  // it has stacked on one CPU (they all stay cache-hot): each goes back to
  // its own, at most once a millisecond, once the gate has settled (4
  // ranks on 2 CPUs were stacked in half of the runs, at up to twice the
  // time).
  if (yp.home_cpu >= 0 && now_ns_ >= next_home_ns_) {
    next_home_ns_ = now_ns_ + kHomeEveryNs;
    move_home(yp.home_cpu, yp.ranks, now_ns_);
  }
}

}  // namespace jaccl::detail
