// Copyright 2026 the jaccl authors.
// memcpy_bench: the single-core memory ceilings bench/compare divides by.
//
//   memcpy_bench [MiB=64] [reps=20]
//
// Two pre-faulted buffers of MiB each; memcpy one into the other `reps`
// times and report the best and the median copy bandwidth (bytes copied per
// second). Also a float32 c = a + b pass over three such buffers (the inner
// loop of a reduction), reported as bytes of c produced per second, and as
// bytes touched (read a, read b, write c) per second. One JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

__attribute__((noinline)) void add(float* c, const float* a, const float* b,
                                   size_t n) {
  for (size_t i = 0; i < n; ++i)
    c[i] = a[i] + b[i];
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  size_t bytes = mib << 20;
  std::vector<char> a(bytes), b(bytes), c(bytes);  // value-initialized: faulted
  std::memset(a.data(), 1, bytes);
  std::memset(b.data(), 2, bytes);
  std::memset(c.data(), 3, bytes);
  for (int i = 0; i < 2; ++i)  // warm-up
    std::memcpy(b.data(), a.data(), bytes);
  std::vector<double> copy_gbps, add_gbps;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    std::memcpy(r % 2 ? a.data() : b.data(), r % 2 ? b.data() : a.data(),
                bytes);
    copy_gbps.push_back(static_cast<double>(bytes) / seconds_since(t0) / 1e9);
  }
  size_t nf = bytes / sizeof(float);
  auto* fa = reinterpret_cast<float*>(a.data());
  auto* fb = reinterpret_cast<float*>(b.data());
  auto* fc = reinterpret_cast<float*>(c.data());
  add(fc, fa, fb, nf);
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    add(fc, fa, fb, nf);
    add_gbps.push_back(static_cast<double>(bytes) / seconds_since(t0) / 1e9);
  }
  volatile char sink = c[bytes / 2] + a[bytes / 3];
  (void)sink;
  std::printf(
      "{\"buffer_mib\":%zu,\"reps\":%d,\"memcpy_best_gbps\":%.3f,"
      "\"memcpy_median_gbps\":%.3f,\"add_best_gbps\":%.3f,"
      "\"add_median_gbps\":%.3f,\"add_touched_median_gbps\":%.3f}\n",
      mib, reps, *std::max_element(copy_gbps.begin(), copy_gbps.end()),
      median(copy_gbps), *std::max_element(add_gbps.begin(), add_gbps.end()),
      median(add_gbps), 3 * median(add_gbps));
  return 0;
}
