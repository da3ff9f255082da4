// Copyright 2026 the jaccl authors.
#include "run/limits.h"

#include <sys/resource.h>

#include <cerrno>
#include <fstream>

#include "common/fd_limit.h"

namespace jaccl::run {

namespace {

std::string first_word(const std::string& path) {
  std::ifstream f(path);
  std::string w;
  f >> w;
  return w.empty() ? "?" : w;
}

// This process's cgroup (v2) directory, "" if unknown.
std::string cgroup_dir() {
  std::ifstream f("/proc/self/cgroup");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("0::", 0) == 0) {
      return "/sys/fs/cgroup" + line.substr(3);
    }
  }
  return "";
}

}  // namespace

std::string ensure_fd_room(size_t more) {
  return detail::fd_room_shortfall(more, 32, "pipes to the ranks' output");
}

std::string limit_hint(int err) {
  rlimit rl{};
  switch (err) {
    case EMFILE:
      ::getrlimit(RLIMIT_NOFILE, &rl);
      return " (the open-file limit of this process, " +
             detail::limit_text(rl.rlim_cur) +
             ", is reached: raise ulimit -n; jaccl-run holds two pipes per "
             "rank)";
    case ENFILE:
      return " (the system-wide open-file limit fs.file-max, " +
             first_word("/proc/sys/fs/file-max") +
             ", is reached: raise it with sysctl)";
    case EAGAIN: {
      ::getrlimit(RLIMIT_NPROC, &rl);
      const std::string cg = cgroup_dir();
      return " (a process limit is reached: ulimit -u is " +
             detail::limit_text(rl.rlim_cur) + ", kernel.pid_max " +
             first_word("/proc/sys/kernel/pid_max") + ", kernel.threads-max " +
             first_word("/proc/sys/kernel/threads-max") +
             (cg.empty()
                  ? std::string()
                  : ", this cgroup's pids.max " + first_word(cg + "/pids.max") +
                        " (" + first_word(cg + "/pids.current") + " in use)") +
             "; every rank is a process and each of its threads counts: "
             "raise the one that is reached, or run fewer ranks per host)";
    }
    case ENOMEM:
      return " (out of memory for another process: fewer ranks per host, "
             "or more memory)";
    default:
      return "";
  }
}

}  // namespace jaccl::run
