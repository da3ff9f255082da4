// Copyright 2026 the jaccl authors.
// jaccl-bench: collective performance in the style of nccl-tests.
//
//   jaccl-run -n 2 -- jaccl-bench -o all_sum -b 8 -e 64M -f 2 -c
//
// For each size: a barrier, warm-up iterations, then timed iterations; every
// rank's average time is gathered and min/avg/max across ranks reported with
// algbw = bytes / time and busbw as nccl-tests defines it (all_sum: algbw *
// 2(n-1)/n; all_gather, sum_scatter and all_to_all: algbw * (n-1)/n over
// the whole buffer; broadcast and send/recv: algbw). all_to_allv (-p uniform
// or moe, see bench_pattern.h): the size is each rank's whole input, busbw
// as all_to_all's. --busy-thread R runs a computing thread in rank R's
// process (or every rank's: all) while it is timed.
#include <jaccl/jaccl.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench_pattern.h"
#include "sweep_args.h"

namespace {

using Clock = std::chrono::steady_clock;

const std::map<std::string, int>& dtypes() {
  static const std::map<std::string, int> m{
      {"bool", jaccl::Bool},         {"int8", jaccl::Int8},
      {"int16", jaccl::Int16},       {"int32", jaccl::Int32},
      {"int64", jaccl::Int64},       {"uint8", jaccl::UInt8},
      {"uint16", jaccl::UInt16},     {"uint32", jaccl::UInt32},
      {"uint64", jaccl::UInt64},     {"float16", jaccl::Float16},
      {"bfloat16", jaccl::BFloat16}, {"float32", jaccl::Float32},
      {"float64", jaccl::Float64},   {"complex64", jaccl::Complex64}};
  return m;
}

struct Options : bench::SweepArgs {
  std::string dtype = "float32";
  bool inplace = false;
  bool quiet = false;
  std::string pattern = "moe";  // all_to_allv
  std::string busy;             // --busy-thread
  double min_ms = 0;            // --min-ms
};

// Bytes per rank buffer and busbw factor for an op, nccl-tests style. For
// all_gather the reported size is the whole output (size * per-rank), for
// sum_scatter the whole input.
struct OpShape {
  size_t in_bytes, out_bytes;
  double busbw_factor;
};

OpShape shape(const std::string& op, size_t size_bytes, int n) {
  double nn = n;
  if (op == "all_sum")
    return {size_bytes, size_bytes, 2 * (nn - 1) / nn};
  if (op == "all_gather") {
    size_t per = size_bytes / n;
    return {per, per * n, (nn - 1) / nn};
  }
  if (op == "sum_scatter") {
    size_t per = size_bytes / n;
    return {per * n, per, (nn - 1) / nn};
  }
  if (op == "all_to_all" || op == "all_to_allv")  // size() blocks each way
    return {size_bytes, size_bytes, (nn - 1) / nn};
  if (op == "broadcast" || op == "sendrecv")
    return {size_bytes, size_bytes, 1};
  return {0, 0, 1};  // barrier
}

// Deterministic fill: element i of rank r, small integers so sums are exact
// in every dtype we check.
void fill(std::vector<char>& buf, int dtype, int rank, size_t offset) {
  size_t esz = jaccl::dtype_size(dtype);
  size_t count = buf.size() / esz;
  for (size_t i = 0; i < count; ++i) {
    int v = static_cast<int>((rank + i + offset) % 3);
    char* p = buf.data() + i * esz;
    switch (dtype) {
      case jaccl::Float32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case jaccl::Float64: {
        double d = v;
        std::memcpy(p, &d, 8);
        break;
      }
      case jaccl::Float16: {
        jaccl::float16_t h(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case jaccl::BFloat16: {
        jaccl::bfloat16_t h(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case jaccl::Complex64: {
        float c[2] = {static_cast<float>(v), 0};
        std::memcpy(p, c, 8);
        break;
      }
      default: {
        uint64_t u = static_cast<uint64_t>(v);
        std::memcpy(p, &u, esz);  // little-endian low bytes
        break;
      }
    }
  }
}

double value_at(const char* p, int dtype) {
  switch (dtype) {
    case jaccl::Float32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case jaccl::Float64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case jaccl::Float16: {
      jaccl::float16_t h;
      std::memcpy(&h, p, 2);
      return static_cast<float>(h);
    }
    case jaccl::BFloat16: {
      jaccl::bfloat16_t h;
      std::memcpy(&h, p, 2);
      return static_cast<float>(h);
    }
    case jaccl::Complex64: {
      float c[2];
      std::memcpy(c, p, 8);
      return c[0];
    }
    case jaccl::Bool:
      return *p != 0;
    default: {
      uint64_t u = 0;
      std::memcpy(&u, p, jaccl::dtype_size(dtype));
      return static_cast<double>(u);
    }
  }
}

// Number of wrong elements in the result of one op.
size_t verify(const std::string& op, std::span<const char> out, int dtype,
              int rank, int n, size_t in_bytes, int root,
              const std::string& pattern) {
  size_t esz = jaccl::dtype_size(dtype);
  size_t wrong = 0;
  auto expect_at = [&](size_t i, size_t base_offset) -> double {
    if (op == "all_sum" || op == "sum_scatter") {
      double s = 0;
      for (int r = 0; r < n; ++r)
        s += (r + i + base_offset) % 3;
      return dtype == jaccl::Bool ? (s != 0) : s;
    }
    return 0;
  };
  if (op == "all_sum") {
    for (size_t i = 0; i < out.size() / esz; ++i)
      wrong += value_at(out.data() + i * esz, dtype) != expect_at(i, 0);
  } else if (op == "sum_scatter") {
    size_t per = in_bytes / n / esz;
    for (size_t i = 0; i < out.size() / esz; ++i)
      wrong += value_at(out.data() + i * esz, dtype) !=
               expect_at(i, static_cast<size_t>(rank) * per);
  } else if (op == "all_gather") {
    size_t per = in_bytes / esz;
    for (size_t i = 0; i < out.size() / esz; ++i) {
      size_t r = i / std::max<size_t>(per, 1), j = i % std::max<size_t>(per, 1);
      wrong += value_at(out.data() + i * esz, dtype) !=
               static_cast<double>((r + j) % 3);
    }
  } else if (op == "all_to_all") {
    // Block q of the output is block `rank` of rank q's input.
    size_t per = std::max<size_t>(in_bytes / n / esz, 1);
    for (size_t i = 0; i < out.size() / esz; ++i) {
      size_t q = i / per, j = i % per;
      wrong +=
          value_at(out.data() + i * esz, dtype) !=
          static_cast<double>((q + static_cast<size_t>(rank) * per + j) % 3);
    }
  } else if (op == "all_to_allv") {
    // Block q of the output is rank q's block `rank`, at its offset there.
    size_t at = 0;
    for (int q = 0; q < n; ++q) {
      size_t cnt = bench::a2av_send_counts(pattern, in_bytes, esz,
                                           n)[static_cast<size_t>(rank)];
      size_t off =
          bench::a2av_send_offset(pattern, in_bytes, esz, n, rank) / esz;
      for (size_t j = 0; j < cnt / esz; ++j, ++at)
        wrong += value_at(out.data() + at * esz, dtype) !=
                 static_cast<double>((static_cast<size_t>(q) + off + j) % 3);
    }
  } else if (op == "broadcast") {
    for (size_t i = 0; i < out.size() / esz; ++i)
      wrong += value_at(out.data() + i * esz, dtype) !=
               static_cast<double>((root + i) % 3);
  } else if (op == "sendrecv") {
    int peer = rank ^ 1;
    if (peer < n) {
      for (size_t i = 0; i < out.size() / esz; ++i)
        wrong += value_at(out.data() + i * esz, dtype) !=
                 static_cast<double>((peer + i) % 3);
    }
  }
  return wrong;
}

// all_to_allv's counts for one size (empty for the other ops).
struct Counts {
  std::vector<size_t> send, recv;
};

void run_op(jaccl::Group& g, const std::string& op, std::vector<char>& in,
            std::vector<char>& out, int dtype, bool inplace,
            const Counts& counts) {
  int rank = g.rank(), n = g.size();
  char* src = in.data();
  if (op == "all_sum") {
    g.all_sum(inplace ? out.data() : src, out.data(), out.size(), dtype);
  } else if (op == "all_gather") {
    char* mine = out.data() + static_cast<size_t>(rank) * in.size();
    g.all_gather(inplace ? mine : src, out.data(), in.size());
  } else if (op == "sum_scatter") {
    g.sum_scatter(src, inplace ? src : out.data(), out.size(), dtype);
  } else if (op == "all_to_all") {
    g.all_to_all(src, out.data(), in.size() / static_cast<size_t>(n));
  } else if (op == "all_to_allv") {
    g.all_to_allv(src, counts.send, out.data(), counts.recv);
  } else if (op == "broadcast") {
    g.broadcast(out.data(), out.size(), 0);
  } else if (op == "sendrecv") {
    // Ping-pong between pairs (0,1), (2,3)...: one iteration is a round
    // trip, reported as half of it (one-way time).
    int peer = rank ^ 1;
    if (peer >= n)
      return;
    if (rank % 2 == 0) {
      g.send(src, in.size(), peer);
      g.recv(out.data(), out.size(), peer);
    } else {
      g.recv(out.data(), out.size(), peer);
      g.send(src, in.size(), peer);
    }
  } else if (op == "barrier") {
    g.barrier();
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "jaccl-bench: collective latency and bandwidth (run it under "
      "jaccl-run)"};
  bench::add_sweep_options(
      app, o,
      {"all_sum", "all_gather", "sum_scatter", "broadcast", "sendrecv",
       "barrier", "all_to_all", "all_to_allv"});
  app.add_option("-d,--dtype", o.dtype, "element type")
      ->check(CLI::IsMember(dtypes()));
  app.add_flag("-i,--inplace", o.inplace, "in-place operation");
  app.add_flag("-q,--quiet", o.quiet, "no progress lines");
  app.add_option("-p,--pattern", o.pattern,
                 "all_to_allv counts: uniform, or moe (Zipf-popular "
                 "destinations, rank 0 hottest)")
      ->check(CLI::IsMember({"uniform", "moe"}));
  app.add_option("--busy-thread", o.busy,
                 "run a computing thread in this rank's process while timing "
                 "(a rank number, or all)");
  app.add_option("--min-ms", o.min_ms,
                 "time at least this long per size: after warm-up, a timed "
                 "pass of -n calls sets the count (the slowest rank's time, "
                 "so every rank runs as many)");
  std::string transport;
  app.add_option("-t,--transport", transport,
                 "auto, tcp, shm or ofi (default: JACCL_TRANSPORT)");
  CLI11_PARSE(app, argc, argv);
  if (o.inplace && (o.op == "all_to_all" || o.op == "all_to_allv")) {
    std::fprintf(stderr, "jaccl-bench: %s has no in-place form\n",
                 o.op.c_str());
    return 2;
  }

  const size_t lo = o.min_bytes, hi = o.max_bytes;
  int dtype = dtypes().at(o.dtype);
  size_t esz = jaccl::dtype_size(dtype);

  try {
    auto cfg = jaccl::Config::from_env();
    if (!transport.empty())
      cfg.set_transport(transport);
    auto group = jaccl::init(cfg, /*strict=*/true);
    int rank = group->rank(), n = group->size();
    std::optional<bench::BusyThread> busy;
    if (bench::busy_here(o.busy, rank))
      busy.emplace();
    if (rank == 0 && !o.json) {
      std::printf("# jaccl-bench %s %s, %d ranks, backend %s%s\n", o.op.c_str(),
                  o.dtype.c_str(), n, group->backend_name(),
                  o.inplace ? ", in place" : "");
      std::printf("# %12s %12s %12s %12s %12s %10s %10s %8s\n", "size(B)",
                  "count", "min(us)", "avg(us)", "max(us)", "algbw(GB/s)",
                  "busbw(GB/s)", "wrong");
    }
    std::vector<size_t> sizes;
    if (o.op == "barrier") {
      sizes.push_back(0);
    } else {
      for (double s = static_cast<double>(std::max(lo, esz));
           s <= static_cast<double>(hi) * 1.0000001; s *= o.factor) {
        size_t b = static_cast<size_t>(s) / (esz * n) * (esz * n);
        if (o.op == "all_sum" || o.op == "broadcast" || o.op == "sendrecv") {
          b = static_cast<size_t>(s) / esz * esz;
        }
        if (b > 0 && (sizes.empty() || sizes.back() != b))
          sizes.push_back(b);
      }
    }
    int failures = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      size_t size_bytes = sizes[k];
      OpShape sh = shape(o.op, size_bytes, n);
      Counts counts;
      if (o.op == "all_to_allv") {
        counts.send = bench::a2av_send_counts(o.pattern, size_bytes, esz, n);
        counts.recv =
            bench::a2av_recv_counts(o.pattern, size_bytes, esz, n, rank);
        sh.out_bytes = 0;
        for (size_t c : counts.recv)
          sh.out_bytes += c;
      }
      std::vector<char> in(sh.in_bytes), out(sh.out_bytes);
      fill(in, dtype, rank, 0);
      if (o.op == "broadcast") {
        out = in;
      }
      if (o.inplace && o.op == "all_sum")
        out = in;
      if (o.inplace && o.op == "all_gather")
        std::memcpy(out.data() + rank * in.size(), in.data(), in.size());
      for (int i = 0; i < o.warmup; ++i) {
        run_op(*group, o.op, in, out, dtype, o.inplace, counts);
        if (o.inplace && o.op == "all_sum")
          fill(out, dtype, rank, 0);
        if (o.op == "broadcast")
          fill(out, dtype, rank, 0);
      }
      // Correctness of one fresh run. As mpi_bench's check: only what the
      // op writes is refilled (the input only where it is the output) and
      // the result is checked in place, so that the timed calls that follow
      // find the same caches under both libraries.
      size_t wrong = 0;
      if (o.check) {
        const bool in_is_out = o.inplace && o.op == "sum_scatter";
        if (in_is_out)
          fill(in, dtype, rank, 0);
        fill(out, dtype, rank, 0);
        if (o.inplace && o.op == "all_gather")
          std::memcpy(out.data() + rank * in.size(), in.data(), in.size());
        run_op(*group, o.op, in, out, dtype, o.inplace, counts);
        const std::vector<char>& res = in_is_out ? in : out;
        wrong = verify(o.op, {res.data(), sh.out_bytes}, dtype, rank, n,
                       sh.in_bytes, 0, o.pattern);
      }
      int iters = o.iters;
      if (o.min_ms > 0) {
        // A calibrating pass; the count must be the same on every rank.
        group->barrier();
        auto c0 = Clock::now();
        for (int i = 0; i < iters; ++i)
          run_op(*group, o.op, in, out, dtype, o.inplace, counts);
        double ms[1] = {
            std::chrono::duration<double, std::milli>(Clock::now() - c0)
                .count()};
        std::vector<double> all_ms(static_cast<size_t>(n));
        group->all_gather(ms, all_ms.data(), sizeof(ms));
        double slow = *std::max_element(all_ms.begin(), all_ms.end());
        if (slow < o.min_ms)
          iters = static_cast<int>(std::min(
              1e7, std::ceil(iters * o.min_ms / std::max(slow, 1e-3))));
      }
      group->barrier();
      auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) {
        run_op(*group, o.op, in, out, dtype, o.inplace, counts);
      }
      double us =
          std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
          iters;
      if (o.op == "sendrecv")
        us /= 2;  // one-way
      double mine[2] = {us, static_cast<double>(wrong)};
      std::vector<double> all(2 * static_cast<size_t>(n));
      group->all_gather(mine, all.data(), sizeof(mine));
      double tmin = 1e300, tmax = 0, tsum = 0, wsum = 0;
      for (int r = 0; r < n; ++r) {
        tmin = std::min(tmin, all[2 * r]);
        tmax = std::max(tmax, all[2 * r]);
        tsum += all[2 * r];
        wsum += all[2 * r + 1];
      }
      double tavg = tsum / n;
      double algbw = size_bytes / (tavg * 1e-6) / 1e9;
      double busbw = algbw * sh.busbw_factor;
      if (wsum > 0)
        ++failures;
      if (rank == 0) {
        if (o.json) {
          nlohmann::json j{{"op", o.op},
                           {"dtype", o.dtype},
                           {"ranks", n},
                           {"backend", group->backend_name()},
                           {"bytes", size_bytes},
                           {"count", size_bytes / esz},
                           {"min_us", tmin},
                           {"avg_us", tavg},
                           {"max_us", tmax},
                           {"algbw_gbps", algbw},
                           {"busbw_gbps", busbw},
                           {"inplace", o.inplace},
                           {"busy_thread", o.busy},
                           {"iters", iters},
                           {"wrong", o.check ? wsum : -1}};
          if (o.op == "all_to_allv")
            j["pattern"] = o.pattern;
          std::printf("%s\n", j.dump().c_str());
        } else {
          std::printf(
              "  %12zu %12zu %12.2f %12.2f %12.2f %10.3f %10.3f %8s\n",
              size_bytes, size_bytes / esz, tmin, tavg, tmax, algbw, busbw,
              o.check ? std::to_string(static_cast<long>(wsum)).c_str() : "-");
        }
        std::fflush(stdout);
        if (!o.quiet && sizes.size() > 8) {
          std::fprintf(stderr, "jaccl-bench: %zu/%zu sizes done\r", k + 1,
                       sizes.size());
        }
      }
    }
    if (rank == 0 && !o.quiet && sizes.size() > 8)
      std::fprintf(stderr, "\n");
    if (failures > 0) {
      if (rank == 0) {
        std::fprintf(stderr, "jaccl-bench: %d sizes had wrong results\n",
                     failures);
      }
      return 1;
    }
    return 0;
  } catch (const jaccl::Error& e) {
    std::fprintf(stderr, "jaccl-bench: %s\n", e.what());
    return 1;
  }
}
