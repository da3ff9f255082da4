// Copyright 2026 the jaccl authors.
// bootstrap_bench: the side-channel all-gather alone, ranks as threads.
//
//   bootstrap_bench [--channel inproc|tcp://127.0.0.1:P|file:///dir|redis://..]
//                   [--ranks 2,8,64,1024] [--bytes 64] [--calls 20]
//
// For each N: N threads, each with its own detail::SideChannel (framing and
// checks included, exactly what init uses) over either a shared
// detail::InProcessHub (inproc: the cost of the framing and of N-way
// synchronization, no I/O) or a real channel built from a URI (each thread
// connects like a process would). All threads start together; the first
// call (connect + first all-gather) is timed apart from the next `calls`
// calls of `bytes` bytes each. One JSON line per N: the slowest rank's first
// call and its mean per later call, and the median rank's mean.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/in_process.h"
#include "bootstrap/side_channel.h"
#include "bootstrap/uri.h"

namespace {

using Clock = std::chrono::steady_clock;
using jaccl::detail::Millis;

struct Options {
  std::string channel = "inproc";
  std::vector<int> ranks{2, 8, 64, 256, 1024};
  size_t bytes = 64;
  int calls = 20;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: bootstrap_bench [--channel inproc|URI] [--ranks "
               "2,8,...] [--bytes B] [--calls K]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        usage();
      return argv[++i];
    };
    if (a == "--channel") {
      o.channel = next();
    } else if (a == "--ranks") {
      o.ranks.clear();
      std::stringstream ss(next());
      std::string item;
      while (std::getline(ss, item, ','))
        o.ranks.push_back(std::atoi(item.c_str()));
    } else if (a == "--bytes") {
      o.bytes = std::strtoul(next().c_str(), nullptr, 10);
    } else if (a == "--calls") {
      o.calls = std::atoi(next().c_str());
    } else {
      usage();
    }
  }
  if (o.ranks.empty() || o.calls < 1 || o.bytes < 1)
    usage();
  return o;
}

struct RankResult {
  double first_us = 0;  // connect + first all-gather
  double mean_us = 0;   // mean of the later calls
  bool ok = true;
};

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  int job = 0;
  for (int n : o.ranks) {
    std::shared_ptr<jaccl::detail::InProcessHub> hub;
    if (o.channel == "inproc")
      hub = jaccl::detail::InProcessHub::create(n, Millis(120000));
    std::string job_id =
        "bb" + std::to_string(::getpid()) + "x" + std::to_string(job++);
    std::vector<RankResult> res(static_cast<size_t>(n));
    std::barrier start(n);
    std::mutex err_mu;
    std::string first_error;
    auto body = [&](int rank) {
      RankResult& r = res[static_cast<size_t>(rank)];
      try {
        start.arrive_and_wait();
        auto t0 = Clock::now();
        jaccl::AllGatherFn fn;
        if (hub) {
          fn = hub->for_rank(rank);
        } else {
          jaccl::detail::SideChannelSpec spec;
          spec.uri = o.channel;
          spec.rank = rank;
          spec.size = n;
          spec.job = job_id;
          spec.timeout = Millis(120000);
          fn = jaccl::detail::make_side_channel_from_uri(spec);
        }
        jaccl::detail::SideChannel sc(rank, n, /*fingerprint=*/0, fn, "bench",
                                      Millis(120000), /*guarded=*/false);
        std::vector<char> mine(o.bytes, static_cast<char>(rank));
        std::vector<char> all(o.bytes * static_cast<size_t>(n));
        sc.all_gather(mine.data(), all.data(), o.bytes);
        auto t1 = Clock::now();
        for (int k = 0; k < o.calls; ++k)
          sc.all_gather(mine.data(), all.data(), o.bytes);
        auto t2 = Clock::now();
        for (int q = 0; q < n; ++q)
          r.ok = r.ok &&
                 all[static_cast<size_t>(q) * o.bytes] == static_cast<char>(q);
        r.first_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
        r.mean_us = std::chrono::duration<double, std::micro>(t2 - t1).count() /
                    o.calls;
        // The channel (sockets, records) is torn down when sc and fn go;
        // keep every rank until all have finished reading.
        sc.leave_barrier();
      } catch (const std::exception& e) {
        r.ok = false;
        std::lock_guard<std::mutex> lk(err_mu);
        if (first_error.empty())
          first_error = "rank " + std::to_string(rank) + ": " + e.what();
      }
    };
    auto w0 = Clock::now();
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(n));
    for (int rank = 0; rank < n; ++rank)
      threads.emplace_back(body, rank);
    for (auto& t : threads)
      t.join();
    double wall_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - w0).count();
    bool ok = std::all_of(res.begin(), res.end(),
                          [](const RankResult& r) { return r.ok; });
    std::vector<double> means, firsts;
    for (const auto& r : res) {
      means.push_back(r.mean_us);
      firsts.push_back(r.first_us);
    }
    std::sort(means.begin(), means.end());
    std::sort(firsts.begin(), firsts.end());
    std::printf(
        "{\"channel\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"calls\":%d,"
        "\"first_call_max_us\":%.1f,\"call_mean_max_us\":%.1f,"
        "\"call_mean_median_us\":%.1f,\"wall_ms\":%.1f,\"ok\":%s}\n",
        o.channel.substr(0, o.channel.find(':')).c_str(), n, o.bytes, o.calls,
        firsts.back(), means.back(), means[means.size() / 2], wall_ms,
        ok ? "true" : "false");
    std::fflush(stdout);
    if (!ok) {
      std::fprintf(stderr, "bootstrap_bench: %d ranks failed: %s\n", n,
                   first_error.c_str());
      return 1;
    }
  }
  return 0;
}
