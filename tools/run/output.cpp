// Copyright 2026 the jaccl authors.
#include "run/output.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace jaccl::run {

namespace {

// A line longer than this without a newline is emitted in pieces.
constexpr size_t kMaxLine = 64 * 1024;
// Reads of 64 KiB drained from an exited rank's pipe, at most.
constexpr int kMaxDrain = 256;

// A non-blocking descriptor of the same pipe, or fd itself.
int open_sink(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
    return fd;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  int nb = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  return nb >= 0 ? nb : fd;
}

}  // namespace

Sink::Sink(int fd) : fd_(open_sink(fd)) {}

void Sink::put(const std::string& s) {
  if (!ok_ || s.empty()) {
    return;
  }
  if (off_ == buf_.size()) {
    buf_.clear();
    off_ = 0;
  }
  buf_ += s;
  flush_some();
}

void Sink::flush_some() {
  while (ok_ && off_ < buf_.size()) {
    ssize_t n = ::write(fd_, buf_.data() + off_, buf_.size() - off_);
    if (n >= 0) {
      off_ += static_cast<size_t>(n);
    } else if (errno == EAGAIN) {
      break;
    } else if (errno != EINTR) {
      ok_ = false;  // e.g. EPIPE: nobody reads our output any more
    }
  }
  if (off_ == buf_.size()) {
    buf_.clear();
    off_ = 0;
  } else if (off_ > (1 << 20) && off_ > buf_.size() / 2) {
    buf_.erase(0, off_);
    off_ = 0;
  }
}

void Sink::flush_all(int wake_fd, const std::function<bool()>& give_up) {
  while (pending()) {
    pollfd p[2] = {{fd_, POLLOUT, 0}, {wake_fd, POLLIN, 0}};
    if (::poll(p, wake_fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR) {
      return;
    }
    if (p[1].revents != 0 && (!give_up || give_up())) {
      return;
    }
    flush_some();
  }
}

Sink& out_sink() {
  static Sink s(1);
  return s;
}

// When our stdout and stderr are one pipe (2>&1), they share one queue:
// two queues could each write part of a line and mix them.
Sink& err_sink() {
  static Sink& s = []() -> Sink& {
    struct stat a {
    }, b{};
    if (::fstat(1, &a) == 0 && ::fstat(2, &b) == 0 && S_ISFIFO(a.st_mode) &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
      return out_sink();
    }
    static Sink own(2);
    return own;
  }();
  return s;
}

void Stream::emit(const char* data, size_t n) {
  std::string out;
  const char* end = data + n;
  auto line = [&](const std::string& text) {  // text ends with '\n'
    if (!marker.empty() && !marker_seen &&
        text.compare(0, marker.size(), marker) == 0) {
      marker_seen = true;
      marker_rest = text.substr(marker.size(), text.size() - marker.size() - 1);
      return;
    }
    last_line = text.substr(0, text.size() - 1);
    out += prefix;
    out += text;
  };
  while (data < end) {
    const char* nl =
        static_cast<const char*>(std::memchr(data, '\n', end - data));
    if (nl == nullptr) {
      partial.append(data, end);
      if (partial.size() >= kMaxLine) {
        line(partial + "\n");
        partial.clear();
      }
      break;
    }
    partial.append(data, nl + 1);
    line(partial);
    partial.clear();
    data = nl + 1;
  }
  if (dest != nullptr) {
    dest->put(out);
  }
}

void Stream::pump(bool drain) {
  char buf[65536];
  for (int reads = 0; fd >= 0 && reads < (drain ? kMaxDrain : 1); ++reads) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      emit(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (!(n < 0 && errno == EAGAIN) || drain) {
      close();
    }
  }
  if (drain) {
    close();
  }
}

void Stream::close() {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
  if (!partial.empty()) {
    last_line = partial;
    if (dest != nullptr) {
      dest->put(prefix + partial + "\n");
    }
    partial.clear();
  }
}

}  // namespace jaccl::run
