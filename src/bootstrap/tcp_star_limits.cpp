// Copyright 2026 the jaccl authors.
#include "bootstrap/tcp_star_limits.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "common/fd_limit.h"
#include "common/log.h"

namespace jaccl::detail::star {

namespace {

// Descriptors beyond the ranks' sockets: the listener, epoll, strays in
// their handshake, the rest of the process (logs, libraries).
constexpr size_t kFdSlack = 64;

int read_int_file(const char* path) {
  std::ifstream f(path);
  long long v = -1;
  if (!(f >> v)) {
    return -1;
  }
  return static_cast<int>(std::min<long long>(v, 1 << 30));
}

}  // namespace

void ensure_fd_room(size_t more, const std::string& who, int rank) {
  const std::string short_by = fd_room_shortfall(more, kFdSlack);
  if (!short_by.empty()) {
    raise(ErrorKind::Io, who + " " + short_by, {.rank = rank});
  }
}

void reserve_fd_table(int fd, size_t more) {
  rlimit lim{};
  if (more == 0 || ::getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    return;
  }
  // A duplicate at the target makes the kernel size the table for it (in
  // one step); closing it keeps the table.
  const int low = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the lowest free one
  if (low < 0) {
    return;
  }
  ::close(low);
  const rlim_t want = static_cast<rlim_t>(low) + more;
  const rlim_t cap = lim.rlim_cur == RLIM_INFINITY ? want : lim.rlim_cur - 1;
  const rlim_t top = std::min<rlim_t>({want, cap, rlim_t{1} << 24});
  if (top > static_cast<rlim_t>(low)) {
    const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(top));
    if (dup >= 0) {
      ::close(dup);
    }
  }
}

int listen_backlog(int size) {
  // The kernel caps it at somaxconn; asking for more costs nothing.
  return static_cast<int>(std::min<long long>(
      static_cast<long long>(size) + static_cast<long long>(kFdSlack),
      1 << 30));
}

ListenSysctls read_listen_sysctls() {
  ListenSysctls s;
  s.somaxconn = read_int_file("/proc/sys/net/core/somaxconn");
  s.max_syn_backlog = read_int_file("/proc/sys/net/ipv4/tcp_max_syn_backlog");
  s.syncookies = read_int_file("/proc/sys/net/ipv4/tcp_syncookies");
  return s;
}

std::string backlog_note(int size, const ListenSysctls& s) {
  const int dialers = size - 1;
  std::string note;
  if (s.somaxconn >= 0 && s.somaxconn < dialers) {
    note = "net.core.somaxconn is " + std::to_string(s.somaxconn) +
           ", below the " + std::to_string(dialers) +
           " ranks that may dial at once: when they do, the kernel drops "
           "the SYNs that find the accept queue full and each dropped one "
           "costs its rank a second (raise net.core.somaxconn to " +
           std::to_string(dialers) + ")";
  }
  // Without SYN cookies a full SYN queue drops SYNs as well.
  if (s.syncookies == 0 && s.max_syn_backlog >= 0 &&
      s.max_syn_backlog < dialers) {
    note += std::string(note.empty() ? "" : "; ") +
            "net.ipv4.tcp_syncookies is 0 and net.ipv4.tcp_max_syn_backlog " +
            std::to_string(s.max_syn_backlog) + " is below the " +
            std::to_string(dialers) + " ranks (raise it to " +
            std::to_string(dialers) + ")";
  }
  return note;
}

ListenDrops read_listen_drops() {
  ListenDrops d;
  std::ifstream f("/proc/net/netstat");
  std::string names, values;
  while (std::getline(f, names) && std::getline(f, values)) {
    if (names.rfind("TcpExt:", 0) != 0) {
      continue;
    }
    std::istringstream n(names), v(values);
    std::string name, value;
    while (n >> name && v >> value) {
      if (name == "ListenOverflows") {
        d.overflows = std::stoull(value);
        d.known = true;
      } else if (name == "ListenDrops") {
        d.drops = std::stoull(value);
      }
    }
  }
  return d;
}

std::string listen_drop_hint(const ListenDrops& before, int size) {
  const ListenDrops now = read_listen_drops();
  if (!before.known || !now.known || now.drops <= before.drops) {
    return "";
  }
  const ListenSysctls s = read_listen_sysctls();
  std::string hint =
      "meanwhile this host's kernel dropped " +
      std::to_string(now.drops - before.drops) +
      " connection attempts at full listen queues (TcpExtListenDrops; " +
      std::to_string(now.overflows - before.overflows) +
      " accept-queue overflows): raise net.core.somaxconn (now " +
      std::to_string(s.somaxconn) + ")";
  if (s.syncookies == 0) {
    hint += " and net.ipv4.tcp_max_syn_backlog (now " +
            std::to_string(s.max_syn_backlog) + ")";
  }
  return hint + " to at least " + std::to_string(size - 1);
}

}  // namespace jaccl::detail::star
