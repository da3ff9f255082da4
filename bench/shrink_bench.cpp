// Copyright 2026 the jaccl authors.
// shrink_bench: the elastic benchmark's rank program (bench/sections/
// elastic.py), run under jaccl-run --elastic. Every rank initializes and
// runs a warm-up all_sum; then the victim (SHRINK_VICTIM, default the last
// rank) prints "KILL_AT <realtime ms>" and SIGKILLs itself while the others
// loop on a 4-byte all_sum. Each survivor notes when its all_sum failed,
// revokes, shrinks, runs (and checks) one all_sum on the new group and
// notes when that returned; the new rank 0 prints one JSON line with the
// latest survivor's times: {"n", "size" (of the shrunk group), "error_at",
// "ready_at", "shrink_ms"}
// (realtime ms; shrink_ms = the slowest survivor's error-to-ready time).
// SHRINK_TRACE=1: every survivor also prints "TRACE <rank> error|shrunk|ready
// <wall ms mod 10^6>" on stderr, to line up with shrink's JACCL_LOG=debug
// phases.
#include <jaccl/jaccl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "wall_clock.h"

int main() {
  try {
    auto g = jaccl::init(true);
    const int n = g->size(), me = g->rank();
    const char* v = std::getenv("SHRINK_VICTIM");
    const int victim = v != nullptr ? std::atoi(v) : n - 1;
    float x = 1, y = 0;
    g->all_sum(&x, &y, sizeof(x), jaccl::Float32);
    double error_at = 0;
    // The victim dies as soon as it leaves the barrier, and a rank still in
    // it (waiting for a message the victim would have passed on) fails
    // there: that is its detection too.
    try {
      g->barrier();
      if (me == victim) {
        std::printf("KILL_AT %.3f\n", realtime_ms());
        std::fflush(stdout);
        ::kill(::getpid(), SIGKILL);
      }
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::minutes(2);
      while (std::chrono::steady_clock::now() < until) {
        g->all_sum(&x, &y, sizeof(x), jaccl::Float32);
      }
      std::fprintf(stderr, "no failure seen within 2 minutes\n");
      return 1;
    } catch (const jaccl::Error&) {
      error_at = realtime_ms();
    }
    if (std::getenv("SHRINK_TRACE") != nullptr) {
      std::fprintf(stderr, "TRACE %d error %.0f\n", me,
                   std::fmod(error_at, 1e6));
    }
    g->revoke();
    auto s = g->shrink();
    if (std::getenv("SHRINK_TRACE") != nullptr) {
      std::fprintf(stderr, "TRACE %d shrunk %.0f\n", me,
                   std::fmod(realtime_ms(), 1e6));
    }
    float one = 1, sum = 0;
    s->all_sum(&one, &sum, sizeof(one), jaccl::Float32);
    const double ready_at = realtime_ms();
    if (std::getenv("SHRINK_TRACE") != nullptr) {
      std::fprintf(stderr, "TRACE %d ready %.0f\n", me,
                   std::fmod(ready_at, 1e6));
    }
    // Under heavy load a slow survivor may be declared failed too: the
    // shrunk group is then smaller, and says so in "size".
    if (sum != static_cast<float>(s->size())) {
      std::fprintf(stderr, "shrunk all_sum gave %g, not %d\n", sum, s->size());
      return 1;
    }
    double t[3] = {error_at, ready_at, ready_at - error_at}, m[3] = {};
    s->all_max(t, m, sizeof(t), jaccl::Float64);
    if (s->rank() == 0) {
      std::printf(
          "{\"n\": %d, \"size\": %d, \"error_at\": %.3f, "
          "\"ready_at\": %.3f, \"shrink_ms\": %.3f, \"backend\": \"%s\"}\n",
          n, s->size(), m[0], m[1], m[2], s->backend_name());
    }
    return 0;
  } catch (const jaccl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 3;
  }
}
