// Copyright 2026 the jaccl authors.
// first_allreduce: the bootstrap benchmark's rank program. It initializes a
// group from the environment (jaccl-run's JACCL_RANK/SIZE/COORDINATOR, or
// JACCL_SIDE_CHANNEL), runs one 4-byte float32 all_sum, checks it and exits.
// bench/compare times the whole launcher command from outside; rank 0 also
// prints, as one JSON line, how long init and the first all_sum took inside
// the process.
//
// With FIRST_ALLREDUCE_T0 set (CLOCK_REALTIME in ns, taken by the caller
// just before it started the launcher), every rank's phases are reduced
// after the measured all_sum (one all_max more) and rank 0 adds, in ms
// from T0: when the last rank reached main (fork, exec and the dynamic
// loader of every rank), when the last finished init and when the last
// finished the first all_sum; and the slowest rank's init and all_sum;
// and, summed over the ranks, the CPU time (every thread) and minor page
// faults of init and of the first all_sum (an all_sum more).
//
// FIRST_ALLREDUCE_STOP=main exits at once (what starting the program
// costs), =init right after init (what bootstrap adds); the CPU a whole
// job spends with each, beside the full run, splits it into phases.
#include <jaccl/jaccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "process_usage.h"
#include "wall_clock.h"

int main() {
  using Clock = std::chrono::steady_clock;
  const double main_at = realtime_ms();
  const char* stop = std::getenv("FIRST_ALLREDUCE_STOP");
  const std::string stop_at = stop != nullptr ? stop : "";
  if (stop_at == "main") {
    return 0;
  }
  double cpu0 = 0, flt0 = 0, cpu1 = 0, flt1 = 0, cpu2 = 0, flt2 = 0;
  process_usage(&cpu0, &flt0);
  auto t0 = Clock::now();
  try {
    auto group = jaccl::init(/*strict=*/true);
    if (stop_at == "init") {
      return 0;
    }
    auto t1 = Clock::now();
    const double init_at = realtime_ms();
    process_usage(&cpu1, &flt1);
    float in = static_cast<float>(group->rank() + 1), out = 0;
    group->all_sum(&in, &out, sizeof(float), jaccl::Float32);
    auto t2 = Clock::now();
    const double first_at = realtime_ms();
    process_usage(&cpu2, &flt2);
    int n = group->size();
    bool ok = out == static_cast<float>(n) * (n + 1) / 2;
    auto ms = [](auto d) {
      return std::chrono::duration<double, std::milli>(d).count();
    };
    std::string phases;
    if (const char* t0_env = std::getenv("FIRST_ALLREDUCE_T0")) {
      const double start = std::strtod(t0_env, nullptr) / 1e6;
      double mine[5] = {main_at - start, init_at - start, first_at - start,
                        ms(t1 - t0), ms(t2 - t1)};
      double worst[5] = {0, 0, 0, 0, 0};
      group->all_max(mine, worst, sizeof(mine), jaccl::Float64);
      double cost[4] = {cpu1 - cpu0, cpu2 - cpu1, flt1 - flt0, flt2 - flt1};
      double sum[4] = {0, 0, 0, 0};
      group->all_sum(cost, sum, sizeof(cost), jaccl::Float64);
      char buf[512];
      std::snprintf(buf, sizeof(buf),
                    ",\"last_main_ms\":%.1f,\"last_init_done_ms\":%.1f,"
                    "\"last_first_done_ms\":%.1f,\"max_init_ms\":%.1f,"
                    "\"max_first_all_sum_ms\":%.1f,\"init_cpu_ms\":%.0f,"
                    "\"first_cpu_ms\":%.0f,\"init_faults\":%.0f,"
                    "\"first_faults\":%.0f",
                    worst[0], worst[1], worst[2], worst[3], worst[4], sum[0],
                    sum[1], sum[2], sum[3]);
      phases = buf;
    }
    if (group->rank() == 0 || !ok) {
      std::printf(
          "{\"ranks\":%d,\"rank\":%d,\"backend\":\"%s\",\"init_ms\":%.3f,"
          "\"first_all_sum_ms\":%.3f,\"ok\":%s%s}\n",
          n, group->rank(), group->backend_name(), ms(t1 - t0), ms(t2 - t1),
          ok ? "true" : "false", phases.c_str());
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "first_allreduce: %s\n", e.what());
    return 1;
  }
}
