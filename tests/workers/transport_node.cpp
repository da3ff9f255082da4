// Copyright 2026 the jaccl authors.
// One rank of a TCP data-plane test: sets up the transport (setup_tcp) over a
// shared-directory all-gather, then runs a mode.
//
//   transport_node check         verify every wire (bytes both ways), print
//                                "LISTEN_SOCKETS n" and "OK"
//   transport_node hold <secs>   print "CONNECTED", wait on the group's
//                                wake_fd; print "FAILED <kind>: <what>" and
//                                exit 3, or "NO_FAILURE" and exit 4
//
// Environment: JACCL_RANK, JACCL_SIZE and the other JACCL_* variables
// (Config::from_env); TEST_SC_DIR the shared directory; TEST_HOLD_FILE, if
// set, a file to wait for before starting set-up.
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "bootstrap/side_channel.h"
#include "common/net.h"
#include "transport/tcp_connect.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// All-gather through files: call k of rank r writes <dir>/<k>.<r>.
jaccl::AllGatherFn file_all_gather(std::string dir, int rank, int size) {
  auto seq = std::make_shared<int>(0);
  return [dir, rank, size, seq](const char* src, char* dst, size_t n) {
    int k = (*seq)++;
    std::string base = dir + "/" + std::to_string(k) + ".";
    {
      std::ofstream f(base + std::to_string(rank) + ".tmp", std::ios::binary);
      f.write(src, static_cast<std::streamsize>(n));
    }
    fs::rename(base + std::to_string(rank) + ".tmp",
               base + std::to_string(rank));
    auto until = std::chrono::steady_clock::now() + 60s;
    for (int r = 0; r < size; ++r) {
      std::string path = base + std::to_string(r);
      while (!fs::exists(path)) {
        if (std::chrono::steady_clock::now() > until) {
          throw jaccl::TimeoutError("file all-gather: no " + path);
        }
        std::this_thread::sleep_for(1ms);
      }
      std::ifstream f(path, std::ios::binary);
      f.read(dst + static_cast<size_t>(r) * n, static_cast<std::streamsize>(n));
    }
  };
}

// Sockets of this process in LISTEN state (/proc/self/fd x /proc/net/tcp*).
int count_listen_sockets() {
  std::set<std::string> inodes;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = fs::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) {
      inodes.insert(target.substr(8, target.size() - 9));
    }
  }
  int count = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string sl, local, remote, st, queues, tr, retr, uid, timeout, inode;
      in >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >>
          timeout >> inode;
      if (st == "0A" && inodes.count(inode)) {
        ++count;
      }
    }
  }
  return count;
}

void check_wires(jaccl::detail::Connections& c) {
  using jaccl::detail::Deadline;
  auto dl = Deadline::after(std::chrono::milliseconds(20000));
  for (int p = 0; p < c.size; ++p) {
    auto& ws = c.wires[static_cast<size_t>(p)];
    for (size_t w = 0; w < ws.size(); ++w) {
      int32_t msg[3] = {c.rank, p, static_cast<int32_t>(w)};
      jaccl::detail::send_all(ws[w].get(), msg, sizeof(msg), dl, {});
    }
  }
  for (int p = 0; p < c.size; ++p) {
    auto& ws = c.wires[static_cast<size_t>(p)];
    for (size_t w = 0; w < ws.size(); ++w) {
      int32_t msg[3] = {};
      jaccl::detail::recv_all(ws[w].get(), msg, sizeof(msg), dl, {});
      if (msg[0] != p || msg[1] != c.rank || msg[2] != static_cast<int>(w)) {
        throw std::runtime_error("wrong bytes on wire " + std::to_string(w) +
                                 " from rank " + std::to_string(p));
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "check";
  try {
    jaccl::Config cfg = jaccl::Config::from_env();
    const char* dir = std::getenv("TEST_SC_DIR");
    if (dir == nullptr) {
      std::cerr << "TEST_SC_DIR not set\n";
      return 2;
    }
    cfg.set_all_gather(file_all_gather(dir, cfg.get_rank(), cfg.get_size()));
    if (const char* hold = std::getenv("TEST_HOLD_FILE")) {
      while (!fs::exists(hold)) {
        std::this_thread::sleep_for(5ms);
      }
    }
    jaccl::detail::SideChannel sc(cfg.get_rank(), cfg.get_size(), 0,
                                  cfg.get_all_gather(), "test files",
                                  cfg.get_timeout(), false);
    auto conns = jaccl::detail::setup_tcp(cfg, sc);
    if (mode == "check") {
      check_wires(conns);
      std::cout << "LISTEN_SOCKETS " << count_listen_sockets() << std::endl;
      sc.barrier();  // every rank has read its bytes before anyone leaves
      std::cout << "OK" << std::endl;
      return 0;
    }
    if (mode == "hold") {
      int secs = argc > 2 ? std::atoi(argv[2]) : 30;
      std::cout << "CONNECTED" << std::endl;
      pollfd p{conns.state->wake_fd(), POLLIN, 0};
      if (::poll(&p, 1, secs * 1000) == 1) {
        try {
          conns.state->throw_if_failed();
        } catch (const jaccl::Error& e) {
          std::cout << "FAILED " << jaccl::to_string(e.kind()) << ": "
                    << e.what() << std::endl;
          return 3;
        }
      }
      std::cout << "NO_FAILURE" << std::endl;
      return 4;
    }
    std::cerr << "unknown mode " << mode << "\n";
    return 2;
  } catch (const jaccl::Error& e) {
    std::cout << "ERROR " << jaccl::to_string(e.kind()) << ": " << e.what()
              << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cout << "ERROR other: " << e.what() << std::endl;
    return 1;
  }
}
