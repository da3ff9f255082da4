// Copyright 2026 the jaccl authors.
// tcp_rtt: the TCP loopback latency ceiling bench/compare divides by.
//
//   tcp_rtt [iters=20000] [bytes=8] [spin]
//
// Forks; the child connects to the parent over 127.0.0.1 (TCP_NODELAY both
// ways) and they ping-pong `bytes` bytes with blocking send/recv, or with
// `spin`, non-blocking calls retried at once (a receiver that busy-polls,
// as jaccl's and Open MPI's small ops do: no sleep and wake-up per
// message). Reports the median and best round trip over batches of 1000,
// and half of it (one way).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

bool g_spin = false;

void xfer(int fd, char* buf, size_t n, bool send_first) {
  const int flags = g_spin ? MSG_DONTWAIT : 0;
  auto full = [&](bool out) {
    size_t off = 0;
    while (off < n) {
      ssize_t k = out ? ::send(fd, buf + off, n - off, flags)
                      : ::recv(fd, buf + off, n - off, flags);
      if (k < 0 && g_spin && (errno == EAGAIN || errno == EWOULDBLOCK))
        continue;
      if (k <= 0)
        die(out ? "send" : "recv");
      off += static_cast<size_t>(k);
    }
  };
  if (send_first) {
    full(true);
    full(false);
  } else {
    full(false);
    full(true);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  size_t bytes = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 8;
  g_spin = argc > 3 && std::string(argv[3]) == "spin";
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    die("bind");
  socklen_t len = sizeof(addr);
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len);
  ::listen(ls, 1);
  std::vector<char> buf(bytes, 'x');
  int one = 1;
  pid_t child = ::fork();
  if (child == 0) {
    ::close(ls);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      die("connect");
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (int i = 0; i < iters + 1000; ++i)
      xfer(fd, buf.data(), bytes, false);
    ::close(fd);
    std::_Exit(0);
  }
  int fd = ::accept(ls, nullptr, nullptr);
  if (fd < 0)
    die("accept");
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  for (int i = 0; i < 1000; ++i)  // warm-up
    xfer(fd, buf.data(), bytes, true);
  std::vector<double> batch_us;
  using Clock = std::chrono::steady_clock;
  for (int done = 0; done < iters; done += 1000) {
    int k = std::min(1000, iters - done);
    auto t0 = Clock::now();
    for (int i = 0; i < k; ++i)
      xfer(fd, buf.data(), bytes, true);
    batch_us.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
        k);
  }
  ::close(fd);
  ::waitpid(child, nullptr, 0);
  std::sort(batch_us.begin(), batch_us.end());
  double med = batch_us[batch_us.size() / 2];
  std::printf(
      "{\"bytes\":%zu,\"iters\":%d,\"spin\":%s,\"rtt_median_us\":%.3f,"
      "\"rtt_best_us\":%.3f,\"oneway_median_us\":%.3f}\n",
      bytes, iters, g_spin ? "true" : "false", med, batch_us.front(), med / 2);
  return 0;
}
