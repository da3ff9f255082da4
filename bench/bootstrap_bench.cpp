// Copyright 2026 the jaccl authors.
// bootstrap_bench: the side-channel all-gather alone, ranks as threads.
//
//   bootstrap_bench [--channel ideal|inproc|tcp://127.0.0.1:P|file:///dir|..]
//                   [--ranks 2,8,64,1024] [--bytes 64] [--calls 20]
//
// For each N: N threads, each with its own detail::SideChannel (framing and
// checks included, exactly what init uses) over a shared
// detail::InProcessHub (inproc: the framing and N-way synchronization on
// one mutex, no I/O), over `ideal` (every rank copies its part into one
// buffer and everyone's out of it between barriers: the least an all-gather
// can cost, so what is left is the framing and the memory each rank must
// fill, N frames: SideChannel::frame_bytes(N) each), or over a real channel
// built from a URI (each thread connects like a process would). All threads
// start together; the first call (connect + first all-gather) is timed apart
// from the next `calls` calls of `bytes` bytes each. One JSON line per N: the
// slowest rank's first call and its mean per later call, the median rank's
// mean, and the first call's median, 90th percentile and slowest over the
// ranks; and first_call_cpu_ms, the CPU time (user + system, every thread)
// from the start until the last rank's first call returned: the work of the
// first call, which a busy machine stretches less than the wall time, and
// first_call_faults, the process's minor page faults over the same span.
// --raw calls the channel's all-gather directly (`bytes` per rank, no
// SideChannel frame around it): the transport alone. --marks prints the
// CLOCK_MONOTONIC times of the start and of the last first call's end to
// stderr, to cut a profile to the first call (perf record -k mono, then
// perf report --time START,END).
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
#include "process_usage.h"

namespace {

using Clock = std::chrono::steady_clock;
using jaccl::detail::Millis;

struct Options {
  std::string channel = "inproc";
  std::vector<int> ranks{2, 8, 64, 256, 1024};
  size_t bytes = 64;
  int calls = 20;
  bool raw = false;  // the channel's all-gather without SideChannel framing
  // Print the CLOCK_MONOTONIC seconds of the start and of the last first
  // call's end to stderr, to cut a profile (perf record -k mono) to them.
  bool marks = false;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: bootstrap_bench [--channel ideal|inproc|URI] [--ranks "
               "2,8,...] [--bytes B] [--calls K] [--raw] [--marks]\n");
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
    } else if (a == "--raw") {
      o.raw = true;
    } else if (a == "--marks") {
      o.marks = true;
    } else {
      usage();
    }
  }
  if (o.ranks.empty() || o.calls < 1 || o.bytes < 1)
    usage();
  return o;
}

// A barrier whose waiters wake together (std::barrier: the phase word is
// one futex). A mutex and condition variable wake them one after another,
// each a context switch: on 2 loaded cores that chain took minutes at 1024
// threads.
class Gate {
 public:
  explicit Gate(int n) : n_(n) {}
  // The last thread to arrive runs last() before releasing the others.
  template <class F>
  void arrive_and_wait(F last) {
    const uint64_t gen = gen_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      last();
      arrived_.store(0, std::memory_order_relaxed);
      gen_.store(gen + 1, std::memory_order_release);
      gen_.notify_all();
      return;
    }
    while (gen_.load(std::memory_order_acquire) == gen) {
      gen_.wait(gen, std::memory_order_acquire);
    }
  }
  void arrive_and_wait() {
    arrive_and_wait([] {});
  }

 private:
  int n_;
  std::atomic<int> arrived_{0};
  std::atomic<uint64_t> gen_{0};
};

// The ideal all-gather among threads (see the header).
class Ideal {
 public:
  explicit Ideal(int n) : n_(n), gate_(n) {}
  jaccl::AllGatherFn for_rank(int rank) {
    return [this, rank](const char* src, char* dst, size_t len) {
      gate_.arrive_and_wait([&] {
        if (buf_.size() < len * static_cast<size_t>(n_)) {
          buf_.resize(len * static_cast<size_t>(n_));
        }
      });
      std::memcpy(buf_.data() + static_cast<size_t>(rank) * len, src, len);
      gate_.arrive_and_wait();
      std::memcpy(dst, buf_.data(), len * static_cast<size_t>(n_));
      gate_.arrive_and_wait();  // everyone has read before the next call
    };
  }

 private:
  int n_;
  std::vector<char> buf_;
  Gate gate_;
};

double mono_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
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
    std::unique_ptr<Ideal> ideal;
    if (o.channel == "inproc")
      hub = jaccl::detail::InProcessHub::create(n, Millis(120000));
    if (o.channel == "ideal")
      ideal = std::make_unique<Ideal>(n);
    std::string job_id =
        "bb" + std::to_string(::getpid()) + "x" + std::to_string(job++);
    std::vector<RankResult> res(static_cast<size_t>(n));
    Gate start(n);
    double cpu_start = 0, cpu_first = 0, mono_start = 0, mono_first = 0;
    double flt_start = 0, flt_first = 0;
    std::atomic<int> firsts_done{0};
    std::mutex err_mu;
    std::string first_error;
    auto body = [&](int rank) {
      RankResult& r = res[static_cast<size_t>(rank)];
      // The caller's buffers are the caller's: filled before the clock
      // starts, like an application's would be.
      std::vector<char> mine(o.bytes, static_cast<char>(rank));
      std::vector<char> all(o.bytes * static_cast<size_t>(n), 1);
      try {
        start.arrive_and_wait([&] {
          process_usage(&cpu_start, &flt_start);
          mono_start = mono_s();
        });
        auto t0 = Clock::now();
        jaccl::AllGatherFn fn;
        if (hub) {
          fn = hub->for_rank(rank);
        } else if (ideal) {
          fn = ideal->for_rank(rank);
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
        auto gather = [&] {
          if (o.raw) {
            fn(mine.data(), all.data(), o.bytes);
          } else {
            sc.all_gather(mine.data(), all.data(), o.bytes);
          }
        };
        gather();
        auto t1 = Clock::now();
        if (firsts_done.fetch_add(1) + 1 == n) {
          process_usage(&cpu_first, &flt_first);
          mono_first = mono_s();
        }
        for (int k = 0; k < o.calls; ++k)
          gather();
        auto t2 = Clock::now();
        for (int q = 0; q < n; ++q)
          r.ok = r.ok &&
                 all[static_cast<size_t>(q) * o.bytes] == static_cast<char>(q);
        r.first_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
        r.mean_us = std::chrono::duration<double, std::micro>(t2 - t1).count() /
                    o.calls;
        // The channel (sockets, records) is torn down when sc and fn go;
        // keep every rank until all have finished reading.
        if (o.raw) {
          gather();
        } else {
          sc.leave_barrier();
        }
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
        "{\"channel\":\"%s\",\"raw\":%s,\"ranks\":%d,\"bytes\":%zu,"
        "\"calls\":%d,"
        "\"first_call_max_us\":%.1f,\"call_mean_max_us\":%.1f,"
        "\"call_mean_median_us\":%.1f,\"first_call_median_us\":%.1f,"
        "\"first_call_p90_us\":%.1f,\"first_call_cpu_ms\":%.1f,"
        "\"first_call_faults\":%.0f,\"wall_ms\":%.1f,\"ok\":%s}\n",
        o.channel.substr(0, o.channel.find(':')).c_str(),
        o.raw ? "true" : "false", n, o.bytes, o.calls, firsts.back(),
        means.back(), means[means.size() / 2], firsts[firsts.size() / 2],
        firsts[firsts.size() * 9 / 10], cpu_first - cpu_start,
        flt_first - flt_start, wall_ms, ok ? "true" : "false");
    std::fflush(stdout);
    if (o.marks) {
      std::fprintf(stderr, "marks: %d ranks start %.6f first %.6f\n", n,
                   mono_start, mono_first);
    }
    if (!ok) {
      std::fprintf(stderr, "bootstrap_bench: %d ranks failed: %s\n", n,
                   first_error.c_str());
      return 1;
    }
  }
  return 0;
}
