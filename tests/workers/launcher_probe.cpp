// Copyright 2026 the jaccl authors.
// A tiny program for the launcher tests. It runs its arguments as a little
// script, left to right, writing with unbuffered write(2):
//
//   env              every JACCL_* variable, one "env NAME=VALUE" line each
//   getenv NAME      "NAME=VALUE", or "NAME unset"
//   pid              "pid=<pid>"
//   cwd              "cwd=<working directory>"
//   say TEXT         TEXT and a newline on stdout
//   err TEXT         TEXT and a newline on stderr
//   partial TEXT     TEXT without a newline on stdout
//   lines N LEN      N stdout lines "line <rank> <i> xxx..." of LEN chars
//   errlines N LEN   the same on stderr ("errline <rank> <i> ...")
//   sleep MS         sleep MS milliseconds
//   ignore SIG       ignore signal number SIG (e.g. 15: survive SIGTERM)
//   touch PATH       create the file PATH
//   await PATH       wait until the file PATH exists
//   exit CODE        exit now with CODE
//   signal SIG       die by signal number SIG
//   if-rank R        run the next command only if JACCL_RANK == R
//
// With no more commands it exits 0.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

void put(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      std::_Exit(99);
    }
    off += static_cast<size_t>(n);
  }
}

[[noreturn]] void usage(const std::string& why) {
  put(2, "launcher_probe: " + why + "\n");
  std::_Exit(98);
}

std::string rank_str() {
  const char* r = std::getenv("JACCL_RANK");
  return r != nullptr ? r : "?";
}

void print_lines(int fd, const char* tag, long n, long len) {
  std::string rank = rank_str();
  for (long i = 0; i < n; ++i) {
    std::string line = std::string(tag) + " " + rank + " " + std::to_string(i);
    line += ' ';
    while (static_cast<long>(line.size()) < len) {
      line += static_cast<char>('a' + (line.size() % 26));
    }
    line += '\n';
    put(fd, line);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  size_t i = 0;
  auto next = [&](const std::string& cmd) -> std::string {
    if (i >= args.size()) {
      usage(cmd + " needs an argument");
    }
    return args[i++];
  };
  bool skip_next = false;

  while (i < args.size()) {
    const std::string cmd = args[i++];
    // Parse the command's arguments even when skipping it.
    std::vector<std::string> a;
    int want = 0;
    if (cmd == "getenv" || cmd == "say" || cmd == "err" || cmd == "partial" ||
        cmd == "sleep" || cmd == "ignore" || cmd == "exit" || cmd == "touch" ||
        cmd == "await" || cmd == "signal" || cmd == "if-rank") {
      want = 1;
    } else if (cmd == "lines" || cmd == "errlines") {
      want = 2;
    } else if (cmd != "env" && cmd != "pid" && cmd != "cwd") {
      usage("unknown command: " + cmd);
    }
    for (int k = 0; k < want; ++k) {
      a.push_back(next(cmd));
    }
    if (skip_next) {
      skip_next = false;
      continue;
    }
    auto num = [&](size_t k) {
      char* end = nullptr;
      long v = std::strtol(a[k].c_str(), &end, 10);
      if (a[k].empty() || *end != '\0') {
        usage(cmd + ": not a number: " + a[k]);
      }
      return v;
    };

    if (cmd == "env") {
      std::vector<std::string> vars;
      for (char** e = environ; *e != nullptr; ++e) {
        if (std::strncmp(*e, "JACCL_", 6) == 0) {
          vars.emplace_back(*e);
        }
      }
      std::sort(vars.begin(), vars.end());
      for (const auto& v : vars) {
        put(1, "env " + v + "\n");
      }
    } else if (cmd == "getenv") {
      const char* v = std::getenv(a[0].c_str());
      put(1, v != nullptr ? a[0] + "=" + v + "\n" : a[0] + " unset\n");
    } else if (cmd == "pid") {
      put(1, "pid=" + std::to_string(::getpid()) + "\n");
    } else if (cmd == "cwd") {
      char buf[4096];
      put(1, std::string("cwd=") +
                 (::getcwd(buf, sizeof(buf)) != nullptr ? buf : "?") + "\n");
    } else if (cmd == "say") {
      put(1, a[0] + "\n");
    } else if (cmd == "err") {
      put(2, a[0] + "\n");
    } else if (cmd == "partial") {
      put(1, a[0]);
    } else if (cmd == "lines" || cmd == "errlines") {
      print_lines(cmd == "lines" ? 1 : 2, cmd == "lines" ? "line" : "errline",
                  num(0), num(1));
    } else if (cmd == "sleep") {
      std::this_thread::sleep_for(std::chrono::milliseconds(num(0)));
    } else if (cmd == "ignore") {
      ::signal(static_cast<int>(num(0)), SIG_IGN);
    } else if (cmd == "touch") {
      int fd = ::open(a[0].c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) {
        usage("cannot create " + a[0]);
      }
      ::close(fd);
    } else if (cmd == "await") {
      while (::access(a[0].c_str(), F_OK) != 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    } else if (cmd == "exit") {
      std::_Exit(static_cast<int>(num(0)));
    } else if (cmd == "signal") {
      int sig = static_cast<int>(num(0));
      ::signal(sig, SIG_DFL);
      ::raise(sig);
      std::_Exit(97);  // the signal was not fatal
    } else if (cmd == "if-rank") {
      skip_next = rank_str() != a[0];
    }
  }
  return 0;
}
