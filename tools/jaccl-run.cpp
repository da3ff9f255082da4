// Copyright 2026 the jaccl authors.
// jaccl-run: starts N local ranks of a program and supervises them.
//
//   jaccl-run -n N [options] -- program args...
//
// Every rank gets our environment plus the --env values, then JACCL_RANK,
// JACCL_SIZE, JACCL_COORDINATOR (a free loopback port; with --side-channel,
// JACCL_SIDE_CHANNEL and no coordinator at all) and one fresh JACCL_TOKEN for
// the whole run; those we set win over --env. Only rank 0 reads our stdin.
// Output lines are prefixed with "[rank] ". When a rank fails, the others get
// SIGTERM, then SIGKILL after the grace period, and jaccl-run exits with the
// failing rank's status (128+signal if it was killed). SIGINT/SIGTERM/SIGHUP
// are forwarded to the ranks (a second one kills them at once) and jaccl-run
// then dies of the same signal. Ranks have PR_SET_PDEATHSIG(SIGKILL).
//
// Single-threaded: one poll loop over the ranks' output pipes and a
// self-pipe that the signal handlers (including SIGCHLD) write to.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kUsageExit = 2;
constexpr int kTimeoutExit = 124;
// A line longer than this without a newline is emitted in pieces.
constexpr size_t kMaxLine = 64 * 1024;
// Reads of 64 KiB drained from an exited rank's pipe, at most.
constexpr int kMaxDrain = 256;

struct Options {
  int n = 0;
  std::vector<std::string> env;  // K=V
  std::string side_channel;
  std::string coordinator;
  bool no_token = false;
  bool no_prefix = false;
  double grace = 3;
  double timeout = 0;
  bool verbose = false;
  std::vector<std::string> command;
};

// ---------------------------------------------------------------- utilities

// Writes all of s to fd; false if the descriptor is unusable (e.g. EPIPE).
bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n >= 0) {
      off += static_cast<size_t>(n);
    } else if (errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
    } else if (errno != EINTR) {
      return false;
    }
  }
  return true;
}

void note(const std::string& msg) {
  write_all(2, "jaccl-run: " + msg + "\n");
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev
                           : "signal " + std::to_string(sig);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" +
           signal_name(sig) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

bool failed(int status) {
  return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

// 32 hex characters from the kernel's CSPRNG.
std::string random_token() {
  unsigned char bytes[16];
  if (::getrandom(bytes, sizeof(bytes), 0) != sizeof(bytes)) {
    note(std::string("getrandom: ") + std::strerror(errno));
    std::exit(1);
  }
  std::string token;
  for (unsigned char b : bytes) {
    token += "0123456789abcdef"[b >> 4];
    token += "0123456789abcdef"[b & 15];
  }
  return token;
}

// A loopback port that was free a moment ago.
int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    note(std::string("cannot pick a coordinator port: ") +
         std::strerror(errno));
    std::exit(1);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Finds the program like execvp: a name containing '/' is used as is, other
// names are looked up on PATH. Returns "" and sets err when not found.
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

// ------------------------------------------------------------------ signals

int g_signal_pipe_w = -1;

void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe_w, &b, 1);
  errno = saved;
}

// Returns the read end of the self-pipe.
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

// ------------------------------------------------------------------- output

// One of a rank's output pipes, re-emitted line by line with a prefix.
struct Stream {
  int fd = -1;    // read end, -1 once closed
  int dest = -1;  // 1 or 2
  std::string prefix;
  std::string partial;  // bytes after the last newline

  // Emits every complete line in data (plus what was pending). Each call
  // produces whole lines only, in one write, so ranks never mix mid-line.
  void emit(const char* data, size_t n) {
    std::string out;
    const char* end = data + n;
    while (data < end) {
      const char* nl =
          static_cast<const char*>(std::memchr(data, '\n', end - data));
      if (nl == nullptr) {
        partial.append(data, end);
        if (partial.size() >= kMaxLine) {
          out += prefix + partial + "\n";
          partial.clear();
        }
        break;
      }
      out += prefix;
      out += partial;
      out.append(data, nl + 1);
      partial.clear();
      data = nl + 1;
    }
    write_all(dest, out);
  }

  // One read of what is available now, closing the pipe at EOF. With
  // `drain` (the rank has exited), reads what is left and closes the pipe
  // even if a grandchild still holds it open (at most kMaxDrain reads, in
  // case that grandchild keeps writing).
  void pump(bool drain) {
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

  void close() {
    if (fd >= 0) {
      ::close(fd);
      fd = -1;
    }
    if (!partial.empty()) {
      write_all(dest, prefix + partial + "\n");
      partial.clear();
    }
  }
};

// -------------------------------------------------------------------- ranks

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Stream out, err;
};

// Forks and execs one rank. Output goes to fresh pipes unless no_prefix.
Rank spawn_rank(int rank, const std::string& path, const Options& opt,
                const std::vector<std::string>& env) {
  Rank r;
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (!opt.no_prefix &&
      (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) {
    note(std::string("pipe2: ") + std::strerror(errno));
    return r;
  }
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
    if (rank != 0) {  // only rank 0 reads the launcher's stdin
      int devnull = ::open("/dev/null", O_RDONLY);
      ::dup2(devnull, 0);
    }
    if (!opt.no_prefix) {
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
    }
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    std::vector<char*> argv, envp;
    for (const auto& a : opt.command) {
      argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    for (const auto& e : env) {
      envp.push_back(const_cast<char*>(e.c_str()));
    }
    envp.push_back(nullptr);
    ::execve(path.c_str(), argv.data(), envp.data());
    int e = errno;
    write_all(2, "jaccl-run: cannot execute " + path + ": " + std::strerror(e) +
                     "\n");
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
  if (!opt.no_prefix) {
    ::close(out[1]);
    ::close(err[1]);
    std::string prefix = "[" + std::to_string(rank) + "] ";
    r.out = Stream{out[0], 1, prefix, {}};
    r.err = Stream{err[0], 2, prefix, {}};
    for (int fd : {out[0], err[0]}) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
  }
  return r;
}

// The environment of every rank: ours, then --env, then the JACCL_* we set.
std::vector<std::string> rank_env(const Options& opt, int rank,
                                  const std::string& coordinator,
                                  const std::string& token) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) {
      vars[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
    }
  }
  for (const auto& kv : opt.env) {
    size_t eq = kv.find('=');
    vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  vars["JACCL_RANK"] = std::to_string(rank);
  vars["JACCL_SIZE"] = std::to_string(opt.n);
  if (!opt.side_channel.empty()) {
    vars["JACCL_SIDE_CHANNEL"] = opt.side_channel;
    vars.erase("JACCL_COORDINATOR");
    vars.erase("MLX_JACCL_COORDINATOR");
  } else {
    vars["JACCL_COORDINATOR"] = coordinator;
  }
  if (!token.empty()) {
    vars["JACCL_TOKEN"] = token;
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : vars) {
    out.push_back(k + "=" + v);
  }
  return out;
}

// ---------------------------------------------------------------- launcher

class Launcher {
 public:
  explicit Launcher(const Options& opt) : opt_(opt) {}

  int run();

 private:
  void reap();
  void on_exit(int rank);
  void stop(int sig, const std::string& why);
  void kill_all(int sig);
  int running() const {
    return static_cast<int>(std::count_if(
        ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; }));
  }

  const Options& opt_;
  std::vector<Rank> ranks_;
  std::optional<Clock::time_point> kill_at_;  // SIGKILL stragglers then
  bool stopping_ = false;
  int failed_rank_ = -1;  // first rank that failed
  int signal_ = 0;        // signal that stopped the job
  bool timed_out_ = false;
};

void Launcher::kill_all(int sig) {
  for (const Rank& r : ranks_) {
    if (r.running) {
      ::kill(r.pid, sig);
    }
  }
}

// Sends sig to every running rank and arms the SIGKILL timer. Says why
// first, naming how many ranks are being stopped.
void Launcher::stop(int sig, const std::string& why) {
  if (stopping_) {
    return;
  }
  stopping_ = true;
  const int n = running();
  note(n > 0 ? why + "; stopping " + std::to_string(n) + " rank(s)" : why);
  kill_all(sig);
  kill_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(opt_.grace));
}

void Launcher::on_exit(int rank) {
  Rank& r = ranks_[rank];
  r.out.pump(true);  // all it wrote before exiting is in the pipes
  r.err.pump(true);
  const std::string how =
      "rank " + std::to_string(rank) + " " + describe_status(r.status);
  if (failed(r.status) && !stopping_) {
    failed_rank_ = rank;
    stop(SIGTERM, how);
  } else if (opt_.verbose) {
    note(how);
  }
}

void Launcher::reap() {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (!r.running) {
      continue;
    }
    pid_t got;
    do {
      got = ::waitpid(r.pid, &r.status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got == r.pid || got < 0) {
      r.running = false;
      on_exit(static_cast<int>(i));
    }
  }
}

int Launcher::run() {
  int err = 0;
  const std::string path = resolve_program(opt_.command[0], err);
  if (path.empty()) {
    note("cannot execute " + opt_.command[0] + ": " + std::strerror(err));
    return err == ENOENT ? 127 : 126;
  }
  std::string coordinator;
  if (opt_.side_channel.empty()) {
    coordinator = !opt_.coordinator.empty()
                      ? opt_.coordinator
                      : "127.0.0.1:" + std::to_string(free_loopback_port());
  }
  const std::string token = opt_.no_token ? "" : random_token();
  const int signal_fd = install_signal_handlers();
  if (opt_.verbose) {
    note("starting " + std::to_string(opt_.n) + " rank(s) of " + path +
         (coordinator.empty() ? ", side channel " + opt_.side_channel
                              : ", coordinator " + coordinator));
  }

  for (int rank = 0; rank < opt_.n; ++rank) {
    ranks_.push_back(
        spawn_rank(rank, path, opt_, rank_env(opt_, rank, coordinator, token)));
    if (!ranks_.back().running) {
      failed_rank_ = rank;
      ranks_.back().status = 1 << 8;  // exit code 1
      stop(SIGTERM, "cannot start rank " + std::to_string(rank));
      break;
    }
    if (opt_.verbose) {
      note("rank " + std::to_string(rank) + " is pid " +
           std::to_string(ranks_.back().pid));
    }
  }
  const auto timeout_at =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(opt_.timeout));

  reap();
  while (running() > 0) {
    std::vector<pollfd> fds{{signal_fd, POLLIN, 0}};
    std::vector<Stream*> streams{nullptr};
    for (Rank& r : ranks_) {
      for (Stream* s : {&r.out, &r.err}) {
        if (s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
    }
    std::optional<Clock::time_point> wake = kill_at_;
    if (opt_.timeout > 0 && !stopping_) {
      wake = timeout_at;
    }
    int wait_ms = -1;
    if (wake) {
      auto left =
          std::chrono::ceil<std::chrono::milliseconds>(*wake - Clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    ::poll(fds.data(), fds.size(), wait_ms);

    for (size_t k = 1; k < fds.size(); ++k) {
      if (fds[k].revents != 0) {
        streams[k]->pump(false);
      }
    }
    unsigned char sigs[64];
    ssize_t n;
    while ((n = ::read(signal_fd, sigs, sizeof(sigs))) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        int sig = sigs[i];
        if (sig == SIGCHLD) {
          continue;
        }
        if (stopping_) {  // no more grace
          note("got " + signal_name(sig) +
               " while stopping; killing the ranks");
          kill_all(SIGKILL);
          kill_at_.reset();
        } else {
          signal_ = sig;
          stop(sig, "got " + signal_name(sig));
        }
      }
    }
    reap();
    if (opt_.timeout > 0 && !stopping_ && Clock::now() >= timeout_at) {
      timed_out_ = true;
      char secs[32];
      std::snprintf(secs, sizeof(secs), "%g", opt_.timeout);
      stop(SIGTERM,
           std::string("timeout: the job ran longer than ") + secs + " s");
    }
    if (kill_at_ && Clock::now() >= *kill_at_) {
      note(std::to_string(running()) +
           " rank(s) still running after the grace period; sending SIGKILL");
      kill_all(SIGKILL);
      kill_at_.reset();
    }
  }

  if (signal_ != 0) {
    ::signal(signal_, SIG_DFL);
    ::raise(signal_);
    return 128 + signal_;
  }
  if (timed_out_) {
    return kTimeoutExit;
  }
  if (failed_rank_ >= 0) {
    return exit_code_of(ranks_[failed_rank_].status);
  }
  return 0;
}

// ------------------------------------------------------------------ parsing

// A CLI11 check that a number is >= min.
std::function<std::string(const std::string&)> at_least(double min) {
  return [min](const std::string& text) {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    return text.empty() || *end != '\0' || !(v >= min)
               ? "must be a number >= " + std::to_string(static_cast<int>(min))
               : std::string();
  };
}

// Returns the exit code on a usage error or --help, nothing to go on.
std::optional<int> parse(int argc, char** argv, Options& opt) {
  CLI::App app{
      "Starts N local ranks of a program, each with JACCL_RANK, JACCL_SIZE,\n"
      "JACCL_COORDINATOR and a shared fresh JACCL_TOKEN, prefixes their "
      "output\n"
      "with [rank], and stops them all when one fails.",
      "jaccl-run"};
  app.footer(
      "Usage: jaccl-run -n N [options] -- program args...\n"
      "Exit status: 0 if every rank exits 0; else that of the first rank to\n"
      "fail (128+signal if killed); 124 on --timeout; 2 on bad usage.");
  app.prefix_command();  // the first positional starts the program
  app.add_option("-n,--np", opt.n, "number of ranks")
      ->type_name("N")
      ->required()
      ->check(at_least(1));
  app.add_option("--env", opt.env, "K=V passed to every rank (repeatable)")
      ->type_name("K=V")
      ->check([](const std::string& kv) {
        size_t eq = kv.find('=');
        return eq == std::string::npos || eq == 0
                   ? std::string("expected K=V, got '" + kv + "'")
                   : std::string();
      });
  auto* side =
      app.add_option(
             "--side-channel", opt.side_channel,
             "set JACCL_SIDE_CHANNEL=URI for every rank (no JACCL_COORDINATOR)")
          ->type_name("URI");
  app.add_option("--coordinator", opt.coordinator,
                 "HOST:PORT for JACCL_COORDINATOR (default: a free "
                 "127.0.0.1 port)")
      ->type_name("HOST:PORT")
      ->excludes(side);
  app.add_flag("--no-token", opt.no_token, "do not set a fresh JACCL_TOKEN");
  app.add_flag("--no-prefix", opt.no_prefix,
               "do not prefix output lines with [rank]");
  app.add_option("--grace", opt.grace,
                 "seconds between SIGTERM and SIGKILL when stopping ranks")
      ->type_name("SECONDS")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--timeout", opt.timeout,
                 "stop the job and exit 124 after SECONDS (0: no limit)")
      ->type_name("SECONDS")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_flag("-v,--verbose", opt.verbose, "report rank pids and exits");

  // Everything after the first "--" is the program and its arguments.
  int ours = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      ours = i;
      opt.command.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  try {
    app.parse(ours, argv);
  } catch (const CLI::ParseError& e) {
    if (app.exit(e) == 0) {  // --help
      return 0;
    }
    std::fprintf(stderr,
                 "Usage: jaccl-run -n N [options] -- program args...\n");
    return kUsageExit;
  }
  if (ours == argc) {
    opt.command = app.remaining();
  } else if (!app.remaining().empty()) {
    std::fprintf(stderr, "jaccl-run: unexpected argument '%s' before '--'\n",
                 app.remaining()[0].c_str());
    return kUsageExit;
  }
  if (opt.command.empty()) {
    std::fprintf(stderr, "jaccl-run: no program given\n%s", app.help().c_str());
    return kUsageExit;
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (auto code = parse(argc, argv, opt)) {
    return *code;
  }
  return Launcher(opt).run();
}
