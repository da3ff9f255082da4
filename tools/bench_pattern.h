// Copyright 2026 the jaccl authors.
// What jaccl-bench and mpi_bench share beyond their options (sweep_args.h):
// the all_to_allv traffic patterns and the busy thread of a loaded rank, so
// both libraries are timed on exactly the same counts and the same load.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

namespace bench {

// Bytes rank `src` sends to each rank in an all_to_allv of `bytes` input
// bytes per rank (a multiple of esz * n), in elements of esz bytes.
//   uniform: bytes / n to every rank (all_to_all's counts);
//   moe:     mixture-of-experts routing with a hot expert: every rank sends
//            all its `bytes` (its tokens), split over the ranks in Zipf(1)
//            proportions 1, 1/2, 1/3 ... (rank 0 hosts the most popular
//            experts): 2 ranks 2/3 and 1/3, 4 ranks 48, 24, 16, 12 %. Every
//            sender is alike, so receivers are uneven (rank 0 receives
//            1.33x / 1.92x the mean at 2 / 4 ranks) and each rank keeps
//            part of its own tokens.
inline std::vector<size_t> a2av_send_counts(const std::string& pattern,
                                            size_t bytes, size_t esz, int n) {
  std::vector<size_t> c(static_cast<size_t>(n));
  size_t elems = bytes / esz;
  if (pattern != "moe") {
    for (auto& x : c)
      x = elems / static_cast<size_t>(n) * esz;
    return c;
  }
  double total = 0;
  for (int j = 0; j < n; ++j)
    total += 1.0 / (j + 1);
  size_t used = 0;
  for (int j = n - 1; j >= 1; --j) {
    c[static_cast<size_t>(j)] =
        static_cast<size_t>(static_cast<double>(elems) / (j + 1) / total);
    used += c[static_cast<size_t>(j)];
  }
  c[0] = elems - used;  // the rounding goes to the hot rank
  for (auto& x : c)
    x *= esz;
  return c;
}

// Counts (bytes) rank `rank` receives from every rank: send_counts(q)[rank].
inline std::vector<size_t> a2av_recv_counts(const std::string& pattern,
                                            size_t bytes, size_t esz, int n,
                                            int rank) {
  std::vector<size_t> r(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q)
    r[static_cast<size_t>(q)] =
        a2av_send_counts(pattern, bytes, esz, n)[static_cast<size_t>(rank)];
  return r;
}

// Offset (bytes) of block `dst` inside rank `src`'s packed input.
inline size_t a2av_send_offset(const std::string& pattern, size_t bytes,
                               size_t esz, int n, int dst) {
  auto c = a2av_send_counts(pattern, bytes, esz, n);
  size_t off = 0;
  for (int j = 0; j < dst; ++j)
    off += c[static_cast<size_t>(j)];
  return off;
}

// A thread that computes (spins on integer arithmetic) until destroyed:
// what a framework's compute or loader thread does beside a rank. It
// inherits the process's CPU binding, as such threads do.
class BusyThread {
 public:
  BusyThread()
      : th_([this] {
          unsigned long x = 1;
          while (!stop_.load(std::memory_order_relaxed))
            for (int i = 0; i < 4096; ++i)
              x = x * 6364136223846793005UL + 1442695040888963407UL;
          sink_.store(x, std::memory_order_relaxed);
        }) {}
  ~BusyThread() {
    stop_.store(true);
    th_.join();
  }
  BusyThread(const BusyThread&) = delete;
  BusyThread& operator=(const BusyThread&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::atomic<unsigned long> sink_{0};
  std::thread th_;
};

// --busy-thread: "" (none), "all", or one rank number.
inline bool busy_here(const std::string& spec, int rank) {
  if (spec.empty() || spec == "none")
    return false;
  return spec == "all" || spec == std::to_string(rank);
}

}  // namespace bench
