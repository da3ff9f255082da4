// Copyright 2026 the jaccl authors.
#include "run/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "run/limits.h"
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

namespace {

// What the child of spawn() needs, all prepared by the parent: the child
// shares the parent's memory until it execs (CLONE_VM | CLONE_VFORK), so
// it makes system calls only -- no allocation, no C++ strings.
struct ChildArgs {
  const char* path;
  char* const* argv;
  char* const* envp;
  pid_t parent;
  bool own_group, ctl, stdin_ours, capture, bind;
  int ctl_fd, out_fd, err_fd, pass_fd;
  cpu_set_t cpus;
  const sigset_t* mask;  // restored just before exec
  const char* unbound;   // "jaccl-run: rank N runs unbound: "...
  const char* cannot;    // "jaccl-run: cannot execute PATH: "
};

void say(const char* a, const char* b) {
  [[maybe_unused]] ssize_t n = ::write(2, a, std::strlen(a));
  n = ::write(2, b, std::strlen(b));
  n = ::write(2, "\n", 1);
}

int child_main(void* p) {
  const ChildArgs& a = *static_cast<const ChildArgs*>(p);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != a.parent) {
    ::_exit(127);
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    ::sigaction(sig, &dfl, nullptr);
  }
  if (a.own_group) {
    ::setpgid(0, 0);
  }
  if (a.ctl) {
    ::dup2(a.ctl_fd, 0);
  } else if (!a.stdin_ours) {
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
  }
  if (a.capture) {
    ::dup2(a.out_fd, 1);
    ::dup2(a.err_fd, 2);
  }
  if (a.bind && ::sched_setaffinity(0, sizeof(a.cpus), &a.cpus) != 0) {
    say(a.unbound, std::strerror(errno));
  }
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (a.pass_fd >= 0) {
    ::fcntl(a.pass_fd, F_SETFD, 0);
  }
  ::sigprocmask(SIG_SETMASK, a.mask, nullptr);
  ::execve(a.path, a.argv, a.envp);
  const int e = errno;
  say(a.cannot, std::strerror(e));
  ::_exit(e == ENOENT ? 127 : 126);
}

// The child's stack: used only between clone and execve, while the parent
// waits (CLONE_VFORK), so one serves every spawn.
char* child_stack_top() {
  constexpr size_t kBytes = 256 << 10;
  static char* top = [] {
    void* p = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<char*>(p) + kBytes;
  }();
  return top;
}

}  // namespace

Rank spawn(int rank, const SpawnSpec& spec) {
  Rank r;
  int out[2] = {-1, -1}, err[2] = {-1, -1}, ctl[2] = {-1, -1};
  if ((spec.capture &&
       (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) ||
      (spec.ctl && ::pipe2(ctl, O_CLOEXEC) != 0)) {
    note(std::string("pipe2: ") + std::strerror(errno) + limit_hint(errno));
    for (int fd : {out[0], out[1], err[0], err[1], ctl[0], ctl[1]}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
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
  const std::string unbound = "jaccl-run: rank " + std::to_string(rank) +
                              " runs unbound: sched_setaffinity: ";
  const std::string cannot = "jaccl-run: cannot execute " + spec.path + ": ";
  ChildArgs a{};
  a.path = spec.path.c_str();
  a.argv = argv.data();
  a.envp = envp.data();
  a.parent = ::getpid();
  a.own_group = spec.own_group;
  a.ctl = spec.ctl;
  a.stdin_ours = spec.stdin_ours;
  a.capture = spec.capture;
  a.ctl_fd = ctl[0];
  a.out_fd = out[1];
  a.err_fd = err[1];
  a.pass_fd = spec.pass_fd;
  CPU_ZERO(&a.cpus);
  for (int c : spec.cpus) {
    if (c >= 0 && c < CPU_SETSIZE) {
      CPU_SET(c, &a.cpus);
      a.bind = true;
    }
  }
  a.unbound = unbound.c_str();
  a.cannot = cannot.c_str();
  // Block signals across the clone so our handlers never run in the child.
  sigset_t all, old;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, &old);
  a.mask = &old;
  // Like posix_spawn: the child borrows our memory until it execs, so
  // starting a rank costs no copy of our page tables (fork's cost, paid a
  // thousand times in a row at -n 1024, before the last rank can start).
  char* stack = child_stack_top();
  const pid_t pid =
      stack == nullptr
          ? -1
          : ::clone(child_main, stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
  const int fork_errno = errno;
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    note(std::string("cannot start a process (clone): ") +
         std::strerror(fork_errno) + limit_hint(fork_errno));
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
