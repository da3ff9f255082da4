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
#include <iostream>
#include <string>
#include <thread>

#include "bootstrap/side_channel.h"
#include "common/net.h"
#include "support/dir_allgather.h"
#include "support/listen_sockets.h"
#include "transport/tcp_connect.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

void check_wires(jaccl::detail::ControlBlock& c) {
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
    cfg.set_all_gather(
        jaccl::test::dir_all_gather(dir, cfg.get_rank(), cfg.get_size()));
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
      std::cout << "LISTEN_SOCKETS " << jaccl::test::listen_sockets_of()
                << std::endl;
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
