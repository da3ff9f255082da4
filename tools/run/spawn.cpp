// Copyright 2026 the jaccl authors.
#include "run/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/affinity.h"
#include "run/util.h"

extern char** environ;

namespace jaccl::run {

namespace {

int g_signal_pipe_w = -1;

void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe_w, &b, 1);
  errno = saved;
}

// For the forked child only: async-signal-safe write.
void child_say(const std::string& s) {
  [[maybe_unused]] ssize_t n = ::write(2, s.data(), s.size());
}

}  // namespace

std::vector<std::string> our_environment() {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    out.emplace_back(*e);
  }
  return out;
}

std::string resolve_program(const std::string& program, int& err) {
  std::vector<std::string> candidates;
  if (program.find('/') != std::string::npos) {
    candidates.push_back(program);
  } else {
    const char* path = std::getenv("PATH");
    std::istringstream dirs(path != nullptr ? path : "/bin:/usr/bin");
    for (std::string dir; std::getline(dirs, dir, ':');) {
      candidates.push_back((dir.empty() ? "." : dir) + "/" + program);
    }
  }
  err = ENOENT;
  for (const auto& c : candidates) {
    struct stat st {};
    if (::stat(c.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (::access(c.c_str(), X_OK) == 0) {
        return c;
      }
      err = EACCES;
    }
  }
  return "";
}

int install_signal_handlers() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    note(std::string("pipe2: ") + std::strerror(errno));
    std::exit(1);
  }
  g_signal_pipe_w = fds[1];
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) {
    ::sigaction(sig, &sa, nullptr);
  }
  ::signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the launcher
  return fds[0];
}

Rank spawn(int rank, const SpawnSpec& spec) {
  Rank r;
  int out[2] = {-1, -1}, err[2] = {-1, -1}, ctl[2] = {-1, -1};
  if ((spec.capture &&
       (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) ||
      (spec.ctl && ::pipe2(ctl, O_CLOEXEC) != 0)) {
    note(std::string("pipe2: ") + std::strerror(errno));
    return r;
  }
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  for (const auto& e : spec.env) {
    envp.push_back(const_cast<char*>(e.c_str()));
  }
  envp.push_back(nullptr);
  // Block signals across fork so our handlers never run in the child.
  sigset_t all, old;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &old);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
      ::_exit(127);
    }
    for (int sig = 1; sig < NSIG; ++sig) {
      ::signal(sig, SIG_DFL);
    }
    if (spec.own_group) {
      ::setpgid(0, 0);
    }
    if (spec.ctl) {
      ::dup2(ctl[0], 0);
    } else if (!spec.stdin_ours) {
      int devnull = ::open("/dev/null", O_RDONLY);
      ::dup2(devnull, 0);
    }
    if (spec.capture) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
    }
    if (!spec.cpus.empty() && !jaccl::detail::set_allowed_cpus(spec.cpus)) {
      const int e = errno;
      child_say("jaccl-run: rank " + std::to_string(rank) +
                " runs unbound: sched_setaffinity: " + std::strerror(e) + "\n");
    }
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    ::execve(spec.path.c_str(), argv.data(), envp.data());
    int e = errno;
    child_say("jaccl-run: cannot execute " + spec.path + ": " +
              std::strerror(e) + "\n");
    ::_exit(e == ENOENT ? 127 : 126);
  }
  const int fork_errno = errno;
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    note(std::string("fork: ") + std::strerror(fork_errno));
  } else {
    r.pid = pid;
    r.running = true;
  }
  if (spec.ctl) {
    ::close(ctl[0]);
    r.ctl = ctl[1];
    ::fcntl(r.ctl, F_SETFL, ::fcntl(r.ctl, F_GETFL) | O_NONBLOCK);
    if (!spec.first_input.empty()) {
      // Far below a pipe's capacity: this write never comes up short.
      [[maybe_unused]] ssize_t n =
          ::write(r.ctl, spec.first_input.data(), spec.first_input.size());
    }
  }
  if (spec.capture) {
    ::close(out[1]);
    ::close(err[1]);
    std::string prefix = "[" + std::to_string(rank) + "] ";
    r.out.fd = out[0];
    r.out.dest = &out_sink();
    r.out.prefix = prefix;
    r.err.fd = err[0];
    r.err.dest = &err_sink();
    r.err.prefix = prefix;
    for (int fd : {out[0], err[0]}) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
  }
  return r;
}

}  // namespace jaccl::run
