// Copyright 2026 the jaccl authors.
// first_allreduce: the bootstrap benchmark's rank program. It initializes a
// group from the environment (jaccl-run's JACCL_RANK/SIZE/COORDINATOR, or
// JACCL_SIDE_CHANNEL), runs one 4-byte float32 all_sum, checks it and exits.
// bench/compare times the whole launcher command from outside; rank 0 also
// prints, as one JSON line, how long init and the first all_sum took inside
// the process.
#include <jaccl/jaccl.h>

#include <chrono>
#include <cstdio>

int main() {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  try {
    auto group = jaccl::init(/*strict=*/true);
    auto t1 = Clock::now();
    float in = static_cast<float>(group->rank() + 1), out = 0;
    group->all_sum(&in, &out, sizeof(float), jaccl::Float32);
    auto t2 = Clock::now();
    int n = group->size();
    bool ok = out == static_cast<float>(n) * (n + 1) / 2;
    if (group->rank() == 0 || !ok) {
      auto ms = [](auto d) {
        return std::chrono::duration<double, std::milli>(d).count();
      };
      std::printf(
          "{\"ranks\":%d,\"rank\":%d,\"backend\":\"%s\",\"init_ms\":%.3f,"
          "\"first_all_sum_ms\":%.3f,\"ok\":%s}\n",
          n, group->rank(), group->backend_name(), ms(t1 - t0), ms(t2 - t1),
          ok ? "true" : "false");
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "first_allreduce: %s\n", e.what());
    return 1;
  }
}
