// Copyright 2026 the jaccl authors.
#include "run/util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "run/output.h"

namespace jaccl::run {

void note(const std::string& msg) {
  err_sink().put("jaccl-run: " + msg + "\n");
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

namespace {

// A TCP socket bound to addr:0 (the kernel picks the port; *port), or exits.
int bound_socket(uint32_t addr, int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(addr);
  socklen_t len = sizeof(sa);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    note(std::string("cannot pick a coordinator port: ") +
         std::strerror(errno));
    std::exit(1);
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

}  // namespace

int free_port() {
  int port = 0;
  ::close(bound_socket(INADDR_ANY, &port));
  return port;
}

int coordinator_socket(int* port) {
  int fd = bound_socket(INADDR_LOOPBACK, port);
  if (fd < 3) {
    // Started with a standard stream closed: rank 0's own stdout or stderr
    // would be put over it.
    const int above = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    ::close(fd);
    fd = above;
  }
  if (::listen(fd, SOMAXCONN) != 0) {
    note(std::string("cannot listen for the coordinator: ") +
         std::strerror(errno));
    std::exit(1);
  }
  return fd;
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

}  // namespace jaccl::run
