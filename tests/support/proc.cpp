// Copyright 2026 the jaccl authors.
#include "support/proc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

extern char** environ;

namespace jaccl::test {

namespace {

using Clock = std::chrono::steady_clock;

// How long we wait for a SIGKILLed process to be reaped before giving up.
constexpr std::chrono::seconds kReapAfterKill{30};

[[noreturn]] void throw_errno(const std::string& what, int err = errno) {
  throw std::system_error(err, std::generic_category(), what);
}

void close_fd(int& fd) {
  if (fd >= 0) {
    ::close(fd);
    fd = -1;
  }
}

// Finds program like execvp does: a name with a slash is used as is, anything
// else is looked up on PATH. Returns an empty string and sets err if not found.
std::string resolve_program(const std::string& program, int& err) {
  err = 0;
  if (program.empty()) {
    err = ENOENT;
    return {};
  }
  if (program.find('/') != std::string::npos) {
    return program;
  }
  const char* env_path = std::getenv("PATH");
  std::string path = env_path != nullptr ? env_path : "/bin:/usr/bin";
  bool saw_eacces = false;
  size_t begin = 0;
  while (true) {
    size_t end = path.find(':', begin);
    std::string dir = path.substr(
        begin, end == std::string::npos ? std::string::npos : end - begin);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (::access(candidate.c_str(), X_OK) == 0) {
        return candidate;
      }
      saw_eacces = true;
    }
    if (end == std::string::npos) {
      break;
    }
    begin = end + 1;
  }
  err = saw_eacces ? EACCES : ENOENT;
  return {};
}

std::vector<std::string> build_env(
    const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) {
      continue;
    }
    vars.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  for (const auto& [k, v] : extra) {
    if (v == kUnsetEnv) {
      vars.erase(k);
    } else {
      vars[k] = v;
    }
  }
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [k, v] : vars) {
    out.push_back(k + "=" + v);
  }
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) {
    out.push_back(s.data());
  }
  out.push_back(nullptr);
  return out;
}

// Marks every descriptor from 3 up close-on-exec (in the child, after fork).
void cloexec_from_3() {
#ifdef CLOSE_RANGE_CLOEXEC
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0) {
    return;
  }
#endif
  long max_fd = ::sysconf(_SC_OPEN_MAX);
  if (max_fd < 0 || max_fd > 65536) {
    max_fd = 65536;
  }
  for (int fd = 3; fd < max_fd; ++fd) {
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
}

// Forks and execs one child: stdin from /dev/null, stdout+stderr to out_w.
// Only async-signal-safe calls between fork and exec. Throws if the exec
// fails (the child is reaped).
pid_t spawn(const std::string& path, std::vector<char*>& argv,
            std::vector<char*>& envp, int devnull, int out_w) {
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    throw_errno("pipe2");
  }
  // Block every signal across fork so no handler of ours runs in the child
  // before it resets dispositions.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
      ::_exit(127);  // the parent died before prctl took effect
    }
    // A group of its own, whose parent (this test) is in another group of
    // the session: never orphaned while the test lives. In the test's group
    // a rank a test stopped (SIGSTOP) got the kernel's SIGHUP when the
    // shell that started the suite exited and orphaned that group.
    ::setpgid(0, 0);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      ::sigaction(sig, &dfl, nullptr);
    }
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(out_w, STDOUT_FILENO);
    ::dup2(out_w, STDERR_FILENO);
    cloexec_from_3();
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(path.c_str(), argv.data(), envp.data());
    int err = errno;
    [[maybe_unused]] ssize_t n = ::write(status_pipe[1], &err, sizeof(err));
    ::_exit(127);
  }
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(status_pipe[1]);
  if (pid < 0) {
    ::close(status_pipe[0]);
    throw_errno("fork", fork_errno);
  }
  int child_err = 0;
  ssize_t n;
  do {
    n = ::read(status_pipe[0], &child_err, sizeof(child_err));
  } while (n < 0 && errno == EINTR);
  ::close(status_pipe[0]);
  if (n > 0) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw_errno("cannot execute " + path, child_err);
  }
  return pid;
}

}  // namespace

std::string ProcResult::describe() const {
  std::ostringstream os;
  if (term_signal != 0) {
    const char* abbrev = sigabbrev_np(term_signal);
    os << "signal " << term_signal << " (SIG" << (abbrev ? abbrev : "?") << ")";
  } else {
    os << "exit " << exit_code;
  }
  if (timed_out) {
    return "timed out, " + os.str();
  }
  return os.str();
}

std::string worker_path(const std::string& name) {
  return std::string(JACCL_WORKER_DIR) + "/" + name;
}

std::string tool_path(const std::string& name) {
  return std::string(JACCL_TOOLS_DIR) + "/" + name;
}

namespace {

// Binds a TCP socket to 127.0.0.1:port (with SO_REUSEADDR if reuse) and
// closes it again; returns 0 or bind's errno. *bound: the port bound (for
// port 0, the kernel's choice).
int bind_loopback(int port, bool reuse, int* bound) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw_errno("socket");
  }
  if (reuse) {
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int err = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    err = errno;
  }
  ::close(fd);
  if (bound != nullptr) {
    *bound = err == 0 ? ntohs(addr.sin_port) : -1;
  }
  return err;
}

// The port bound at 127.0.0.1:port without SO_REUSEADDR (0: any), or -1
// if it was taken.
int try_loopback_port(int port) {
  int bound = -1;
  if (const int err = bind_loopback(port, false, &bound);
      err != 0 && port == 0) {
    throw_errno("bind 127.0.0.1:0", err);
  }
  return bound;
}

// The next value of a counter that every test process on this machine
// shares (a file under flock), or -1.
long next_shared_count() {
  const int fd = ::open("/tmp/jaccl-test-port-counter",
                        O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    return -1;
  }
  long n = -1;
  if (::flock(fd, LOCK_EX) == 0) {
    char buf[32] = {};
    const ssize_t got = ::pread(fd, buf, sizeof(buf) - 1, 0);
    n = got > 0 ? std::strtol(buf, nullptr, 10) : 0;
    const std::string next = std::to_string(n + 1) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, next.data(), next.size(), 0) !=
                                       static_cast<ssize_t>(next.size())) {
      n = -1;
    }
  }
  ::close(fd);  // releases the lock
  return n;
}

}  // namespace

// A port bound to 0 comes from the kernel's ephemeral range, where any
// connect() of a test running beside us could take it between this check
// and the rank's own bind (seen about once in a thousand runs). So the port
// comes from the 10,000 below that range, which only bind() to a named port
// hands out, and test processes take them in turn from one shared counter.
int free_loopback_port() {
  int lo = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> lo;
  const int base = std::max(1024, lo - 10000);
  const int span = lo - base;
  for (int tries = 0; span >= 1000 && tries < 200; ++tries) {
    const long n = next_shared_count();
    if (n < 0) {
      break;
    }
    const int port = try_loopback_port(base + static_cast<int>(n % span));
    if (port > 0) {
      return port;
    }
  }
  return try_loopback_port(0);  // no room below the range: the old way
}

int loopback_bind_errno(int port) {
  return bind_loopback(port, true, nullptr);
}

bool pid_alive(pid_t pid) {
  if (pid <= 0) {
    return false;
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!stat || !std::getline(stat, line)) {
    return false;
  }
  // "pid (comm) S ...": the state follows the last ')'.
  size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) {
    return false;
  }
  char state = line[paren + 2];
  return state != 'Z' && state != 'X' && state != 'x';
}

// ---------------------------------------------------------------------------

struct Job::Impl {
  struct Proc {
    pid_t pid = -1;
    int out_fd = -1;  // read end of the child's stdout+stderr pipe
    int pidfd = -1;   // readable once the child exits; -1 if unsupported
    bool reaped = false;
    bool done = false;  // reaped and its pipe drained
    ProcResult result;
  };

  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::vector<Proc> procs;
  int wake_r = -1, wake_w = -1;
  bool stop = false;
  std::thread reader;

  ~Impl() { shutdown(); }

  // Appends up to `limit` bytes readable now from p's pipe; closes it at EOF.
  static void read_some(Proc& p, size_t limit) {
    char buf[16384];
    size_t total = 0;
    while (p.out_fd >= 0 && total < limit) {
      ssize_t n = ::read(p.out_fd, buf, sizeof(buf));
      if (n > 0) {
        p.result.output.append(buf, static_cast<size_t>(n));
        total += static_cast<size_t>(n);
      } else if (n == 0) {
        close_fd(p.out_fd);
      } else if (errno != EINTR) {
        if (errno != EAGAIN) {
          close_fd(p.out_fd);
        }
        return;
      }
    }
  }

  // Called with mu held.
  void try_reap(Proc& p) {
    int status = 0;
    pid_t r = ::waitpid(p.pid, &status, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR)) {
      return;
    }
    p.reaped = true;
    if (r == p.pid) {
      if (WIFEXITED(status)) {
        p.result.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        p.result.term_signal = WTERMSIG(status);
      }
    }
    close_fd(p.pidfd);
    // Everything the child wrote before exiting is in the pipe now (the cap
    // only matters if a grandchild holds the pipe and keeps writing).
    read_some(p, 64 << 20);
    p.done = true;
  }

  void reader_loop() {
    std::vector<pollfd> fds;
    std::vector<int> owner;  // proc index per pollfd, -1 for the wake pipe
    std::unique_lock<std::mutex> lk(mu);
    while (!stop) {
      fds.clear();
      owner.clear();
      fds.push_back({wake_r, POLLIN, 0});
      owner.push_back(-1);
      bool tick = false;
      for (size_t i = 0; i < procs.size(); ++i) {
        const Proc& p = procs[i];
        if (p.out_fd >= 0) {
          fds.push_back({p.out_fd, POLLIN, 0});
          owner.push_back(static_cast<int>(i));
        }
        if (!p.reaped) {
          if (p.pidfd >= 0) {
            fds.push_back({p.pidfd, POLLIN, 0});
            owner.push_back(static_cast<int>(i));
          } else {
            tick = true;  // no pidfd: poll waitpid periodically
          }
        }
      }
      lk.unlock();
      int rc = ::poll(fds.data(), fds.size(), tick ? 5 : -1);
      lk.lock();
      if (rc < 0 && errno != EINTR) {
        break;
      }
      char drain[64];
      while (::read(wake_r, drain, sizeof(drain)) > 0) {
      }
      for (size_t k = 1; k < fds.size(); ++k) {
        if (fds[k].revents != 0 && fds[k].fd == procs[owner[k]].out_fd) {
          read_some(procs[owner[k]], 1 << 20);
        }
      }
      for (Proc& p : procs) {
        if (!p.reaped) {
          try_reap(p);
        }
      }
      cv.notify_all();
    }
  }

  // Waits (mu held) until p is done or until `until`; true if done.
  bool wait_done(std::unique_lock<std::mutex>& lk, Proc& p,
                 Clock::time_point until) {
    return cv.wait_until(lk, until, [&] { return p.done; });
  }

  void kill_and_reap_all() {
    std::unique_lock<std::mutex> lk(mu);
    for (Proc& p : procs) {
      if (!p.reaped) {
        ::kill(p.pid, SIGKILL);
      }
    }
    auto until = Clock::now() + kReapAfterKill;
    for (Proc& p : procs) {
      if (reader.joinable()) {
        wait_done(lk, p, until);
      }
    }
  }

  void shutdown() {
    kill_and_reap_all();
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    if (wake_w >= 0) {
      [[maybe_unused]] ssize_t n = ::write(wake_w, "x", 1);
    }
    if (reader.joinable()) {
      reader.join();
    }
    for (Proc& p : procs) {
      if (!p.reaped) {
        // Reader never ran or gave up: reap synchronously (already killed).
        while (::waitpid(p.pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        p.reaped = true;
      }
      close_fd(p.out_fd);
      close_fd(p.pidfd);
    }
    close_fd(wake_r);
    close_fd(wake_w);
  }

  ProcResult finish(std::unique_lock<std::mutex>& lk, int rank,
                    Clock::time_point until) {
    Proc& p = procs.at(static_cast<size_t>(rank));
    if (!wait_done(lk, p, until)) {
      if (!p.reaped) {
        ::kill(p.pid, SIGKILL);
        p.result.timed_out = true;
      }
      wait_done(lk, p, Clock::now() + kReapAfterKill);
    }
    return p.result;
  }
};

Job::Job(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Job::Job(Job&&) noexcept = default;
Job& Job::operator=(Job&&) noexcept = default;
Job::~Job() = default;

Job Job::start(const std::string& program, const std::vector<std::string>& args,
               int n, const EnvFn& env) {
  if (n < 1) {
    throw std::invalid_argument("Job::start: n must be >= 1");
  }
  int err = 0;
  std::string path = resolve_program(program, err);
  if (path.empty()) {
    throw_errno("cannot execute " + program, err);
  }
  auto impl = std::make_unique<Impl>();
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw_errno("pipe2");
  }
  impl->wake_r = wake[0];
  impl->wake_w = wake[1];
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) {
    throw_errno("open /dev/null");
  }

  std::vector<std::string> argv_strings;
  argv_strings.push_back(program);
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  auto argv = c_strings(argv_strings);

  try {
    for (int rank = 0; rank < n; ++rank) {
      auto env_strings =
          build_env(env ? env(rank) : std::map<std::string, std::string>{});
      auto envp = c_strings(env_strings);
      int out[2];
      if (::pipe2(out, O_CLOEXEC) != 0) {
        throw_errno("pipe2");
      }
      Impl::Proc p;
      p.out_fd = out[0];
      try {
        p.pid = spawn(path, argv, envp, devnull, out[1]);
      } catch (...) {
        ::close(out[0]);
        ::close(out[1]);
        throw;
      }
      ::close(out[1]);
      ::fcntl(p.out_fd, F_SETFL, ::fcntl(p.out_fd, F_GETFL) | O_NONBLOCK);
      p.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, p.pid, 0));
      if (p.pidfd >= 0) {
        ::fcntl(p.pidfd, F_SETFD, FD_CLOEXEC);
      }
      std::lock_guard<std::mutex> lk(impl->mu);
      impl->procs.push_back(p);
    }
  } catch (...) {
    ::close(devnull);
    throw;  // ~Impl kills and reaps the ranks already started
  }
  ::close(devnull);
  impl->reader = std::thread([raw = impl.get()] { raw->reader_loop(); });
  return Job(std::move(impl));
}

int Job::size() const {
  return static_cast<int>(impl_->procs.size());
}

pid_t Job::pid(int rank) const {
  return impl_->procs.at(static_cast<size_t>(rank)).pid;
}

void Job::kill(int rank, int sig) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto& p = impl_->procs.at(static_cast<size_t>(rank));
  if (!p.reaped) {
    ::kill(p.pid, sig);
  }
}

std::vector<ProcResult> Job::wait(std::chrono::milliseconds deadline) {
  auto until = Clock::now() + deadline;
  std::unique_lock<std::mutex> lk(impl_->mu);
  // Wait for all until the common deadline, then kill the stragglers.
  impl_->cv.wait_until(lk, until, [&] {
    return std::all_of(impl_->procs.begin(), impl_->procs.end(),
                       [](const Impl::Proc& p) { return p.done; });
  });
  std::vector<ProcResult> results;
  for (int rank = 0; rank < size(); ++rank) {
    auto& p = impl_->procs[static_cast<size_t>(rank)];
    if (!p.done && !p.reaped) {
      ::kill(p.pid, SIGKILL);
      p.result.timed_out = true;
    }
  }
  for (int rank = 0; rank < size(); ++rank) {
    results.push_back(impl_->finish(lk, rank, Clock::now()));
  }
  return results;
}

ProcResult Job::wait_one(int rank, std::chrono::milliseconds deadline) {
  std::unique_lock<std::mutex> lk(impl_->mu);
  return impl_->finish(lk, rank, Clock::now() + deadline);
}

std::string Job::output(int rank) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->procs.at(static_cast<size_t>(rank)).result.output;
}

bool Job::wait_for_output(int rank, const std::string& needle,
                          std::chrono::milliseconds deadline) const {
  std::unique_lock<std::mutex> lk(impl_->mu);
  const auto& p = impl_->procs.at(static_cast<size_t>(rank));
  return impl_->cv.wait_for(lk, deadline, [&] {
    return p.done || p.result.output.find(needle) != std::string::npos;
  }) && p.result.output.find(needle) != std::string::npos;
}

bool Job::finished(int rank) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->procs.at(static_cast<size_t>(rank)).done;
}

ProcResult run(const std::string& program, const std::vector<std::string>& args,
               const std::map<std::string, std::string>& env,
               std::chrono::milliseconds deadline) {
  Job job = Job::start(program, args, 1, [&](int) { return env; });
  return job.wait_one(0, deadline);
}

std::map<std::string, std::string> clean_rank_env(int rank, int size) {
  std::map<std::string, std::string> e = {{"JACCL_RANK", std::to_string(rank)},
                                          {"JACCL_SIZE", std::to_string(size)},
                                          {"JACCL_TIMEOUT", "30"},
                                          {"JACCL_OP_TIMEOUT", "600"}};
  for (const char* k : {"JACCL_COORDINATOR",
                        "JACCL_SIDE_CHANNEL",
                        "JACCL_TRANSPORT",
                        "JACCL_RING",
                        "JACCL_WIRES",
                        "JACCL_TOKEN",
                        "JACCL_JOB",
                        "JACCL_LISTEN",
                        "JACCL_IFNAME",
                        "JACCL_HEARTBEAT_TIMEOUT",
                        "JACCL_SHM_BUDGET",
                        "JACCL_SHM_STRATEGY",
                        "JACCL_LOG",
                        "JACCL_OFI_PROVIDER",
                        "JACCL_OFI_FORCE_REGISTER",
                        "JACCL_JOIN",
                        "JACCL_GROW_CHANNEL",
                        "TEST_SIDE_DIR",
                        "TEST_HOLD_FILE",
                        "TEST_RELEASE_FILE"}) {
    e[k] = kUnsetEnv;
  }
  return e;
}

std::map<std::string, std::string> coordinator_rank_env(
    int rank, int size, int port, const std::string& transport) {
  auto e = clean_rank_env(rank, size);
  e["JACCL_COORDINATOR"] = "127.0.0.1:" + std::to_string(port);
  e["JACCL_TRANSPORT"] = transport;
  if (transport.rfind("ofi:", 0) == 0) {  // "ofi:<provider>"
    e["JACCL_TRANSPORT"] = "ofi";
    e["JACCL_OFI_PROVIDER"] = transport.substr(4);
  }
  return e;
}

std::string line_of(const std::string& out, const std::string& prefix) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0)
      return line;
  }
  return "";
}

int count_of(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

std::string all_output(const std::vector<ProcResult>& rs) {
  std::string s;
  for (size_t r = 0; r < rs.size(); ++r) {
    s += "---- rank " + std::to_string(r) + " (" + rs[r].describe() + ")\n" +
         rs[r].output;
  }
  return s;
}

}  // namespace jaccl::test
