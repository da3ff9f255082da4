// Copyright 2026 the jaccl authors.
#include "common/fd_limit.h"

#include <dirent.h>

#include "common/log.h"

namespace jaccl::detail {

namespace {

size_t open_fds() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (const dirent* e = ::readdir(d)) {
      n += e->d_name[0] != '.';
    }
    ::closedir(d);
  }
  return n;
}

}  // namespace

std::string limit_text(rlim_t v) {
  return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v);
}

std::string fd_room_shortfall(size_t more, size_t slack,
                              std::string_view for_what) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    return "";
  }
  const size_t need = open_fds() + more + slack;
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) {
    return "";
  }
  if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
    const rlim_t old = rl.rlim_cur;
    rl.rlim_cur = static_cast<rlim_t>(need);
    if (::setrlimit(RLIMIT_NOFILE, &rl) == 0) {
      JACCL_LOG(Info, "raised this process's soft open-file limit from "
                          << old << " to " << need << " (hard limit "
                          << limit_text(rl.rlim_max) << ")");
      return "";
    }
  }
  return "needs about " + std::to_string(need) + " open files" +
         (for_what.empty() ? std::string()
                           : " (" + std::string(for_what) + ")") +
         " but this process may open " + limit_text(rl.rlim_cur) +
         " (hard limit " + limit_text(rl.rlim_max) +
         "): raise the open-file limit, e.g. ulimit -n " +
         std::to_string(need) +
         " (LimitNOFILE= under systemd, nofile in "
         "/etc/security/limits.conf)";
}

}  // namespace jaccl::detail
