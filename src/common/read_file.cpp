// Copyright 2026 the jaccl authors.
#include "common/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace jaccl::detail {

bool read_file(const std::string& path, std::string* out, int* err) {
  out->clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (err != nullptr) {
      *err = errno;
    }
    return false;
  }
  char buf[4096];
  for (;;) {
    const ssize_t k = ::read(fd, buf, sizeof buf);
    if (k > 0) {
      out->append(buf, static_cast<size_t>(k));
      continue;
    }
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k < 0 && err != nullptr) {
      *err = errno;
    }
    ::close(fd);
    return k == 0;
  }
}

std::string read_file_or_empty(const std::string& path) {
  std::string text;
  return read_file(path, &text) ? text : std::string();
}

std::string read_link_or_empty(const std::string& path) {
  char buf[256];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace jaccl::detail
