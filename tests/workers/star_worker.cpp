// Copyright 2026 the jaccl authors.
// One rank of a TCP-star job, for tests/unit/test_coordinator.cpp. Builds the
// star with the internals (detail::make_tcp_star, then detail::SideChannel on
// top), so the test does not depend on the data plane.
//
// Environment: JACCL_RANK, JACCL_SIZE, JACCL_COORDINATOR, JACCL_TOKEN,
// JACCL_TIMEOUT (seconds), and
//   STAR_SIZES    comma-separated n_bytes of the raw all-gathers
//                 (default 0,1,200,201,1048576)
//   STAR_MODE     normal | absent (exit 0 at once, never connect)
//                 | hang-after-first (print READY after call 0, then sleep)
//                 | exit-after-first (_exit(0) instead of call 1)
//                 | abort-after-first (abort() instead of call 1)
//                 | mismatch-n (pass n + 1 in call 1)
//   STAR_DELAY_MS sleep this long before starting
//   STAR_GO_FILE  wait until this file exists before starting
//
// Prints LISTENING (rank 0, once bound), then OK and exits 0; on a jaccl
// error prints "ERROR <kind>: <what>" and exits 3; on wrong data exits 5.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/side_channel.h"
#include "bootstrap/tcp_star.h"
#include "jaccl/error.h"

namespace {

std::string env(const char* name, const char* def = "") {
  const char* v = std::getenv(name);
  return v != nullptr ? v : def;
}

void say(const std::string& s) {
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}

std::vector<size_t> parse_sizes(const std::string& s) {
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) {
      comma = s.size();
    }
    out.push_back(std::stoull(s.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return out;
}

// Rank-, call- and position-dependent, so a misplaced chunk shows.
char pattern(int rank, size_t call, size_t j) {
  return static_cast<char>((rank * 131 + j * 7 + call * 13 + (j >> 8)) & 0xff);
}

}  // namespace

int main() {
  const int rank = std::atoi(env("JACCL_RANK", "-1").c_str());
  const int size = std::atoi(env("JACCL_SIZE", "0").c_str());
  const std::string mode = env("STAR_MODE", "normal");
  if (mode == "absent") {
    say("ABSENT");
    return 0;
  }
  if (int delay = std::atoi(env("STAR_DELAY_MS", "0").c_str()); delay > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }
  if (std::string go = env("STAR_GO_FILE"); !go.empty()) {
    for (int i = 0; ::access(go.c_str(), F_OK) != 0; ++i) {
      if (i > 6000) {
        say("NO GO FILE");
        return 4;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  try {
    jaccl::detail::TcpStarOptions opt;
    opt.rank = rank;
    opt.size = size;
    opt.address = env("JACCL_COORDINATOR");
    opt.token = env("JACCL_TOKEN");
    opt.timeout = jaccl::detail::Millis(
        static_cast<long>(std::atof(env("JACCL_TIMEOUT", "60").c_str()) * 1e3));
    jaccl::AllGatherFn fn = jaccl::detail::make_tcp_star(opt);
    if (rank == 0) {
      say("LISTENING");
    }
    auto sizes = parse_sizes(env("STAR_SIZES", "0,1,200,201,1048576"));
    for (size_t call = 0; call < sizes.size(); ++call) {
      if (call == 1 && mode == "hang-after-first") {
        say("READY");
        for (;;) {
          ::pause();
        }
      }
      if (call == 1 && mode == "exit-after-first") {
        std::fflush(stdout);
        ::_exit(0);
      }
      if (call == 1 && mode == "abort-after-first") {
        std::abort();
      }
      size_t n = sizes[call];
      if (call == 1 && mode == "mismatch-n") {
        n += 1;
      }
      std::vector<char> src(n);
      for (size_t j = 0; j < n; ++j) {
        src[j] = pattern(rank, call, j);
      }
      std::vector<char> dst(n * static_cast<size_t>(size) + 1);
      fn(src.data(), dst.data(), n);
      for (int r = 0; r < size; ++r) {
        for (size_t j = 0; j < n; ++j) {
          if (dst[static_cast<size_t>(r) * n + j] != pattern(r, call, j)) {
            say("BAD DATA in call " + std::to_string(call) + " from rank " +
                std::to_string(r) + " at byte " + std::to_string(j));
            return 5;
          }
        }
      }
    }
    // The framed side channel on top of the star, as init uses it.
    jaccl::detail::SideChannel sc(rank, size, 0x5eedull, fn, "TCP coordinator",
                                  opt.timeout, false);
    sc.barrier();
    auto names = sc.all_gather_bytes(std::string(rank + 1, 'x'));
    for (int r = 0; r < size; ++r) {
      if (names[static_cast<size_t>(r)] != std::string(r + 1, 'x')) {
        say("BAD DATA in all_gather_bytes from rank " + std::to_string(r));
        return 5;
      }
    }
    sc.leave_barrier();
    say("OK");
    return 0;
  } catch (const jaccl::Error& e) {
    say(std::string("ERROR ") + jaccl::to_string(e.kind()) + ": " + e.what());
    return 3;
  } catch (const std::exception& e) {
    say(std::string("ERROR other: ") + e.what());
    return 6;
  }
}
