// Copyright 2026 the jaccl authors.
// gloo_bench: Gloo over its TCP transport on loopback, timed exactly like
// jaccl-bench so the numbers are comparable.
//
//   jaccl-run -n 2 -- gloo_bench --store /tmp/dir -o all_sum -b 8 -e 64M
//
// Rank and size come from JACCL_RANK/JACCL_SIZE (jaccl-run) or
// OMPI_COMM_WORLD_RANK/SIZE (mpirun); the ranks rendezvous through a
// gloo::rendezvous::FileStore in --store (a fresh, empty directory per run)
// and connect a full mesh of TCP pairs on 127.0.0.1.
//
// all_sum is gloo::allreduce with AllreduceOptions::Algorithm::RING (the
// bandwidth-optimal reduce-scatter + all-gather ring PyTorch's Gloo backend
// uses, pipelined in segments of up to 1 MiB), float32 sum, out of place;
// all_gather is gloo::allgather (a ring). The options (and so the registered
// buffers) are built once per size and reused for every iteration.
//
// Per size: buffers allocated and touched once, warm-up iterations, an
// optional correctness check, gloo::barrier, the timed iterations
// back-to-back; every rank's average is gathered and min/avg/max reported with
// nccl-tests' busbw (all_sum: algbw * 2(n-1)/n; all_gather: algbw * (n-1)/n
// over the whole output). One JSON object per size on rank 0's stdout.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "sweep_args.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options : bench::SweepArgs {
  std::string store;
};

// Exits (like CLI11_PARSE) on --help or bad usage.
Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{"gloo_bench: Gloo's ring all-reduce timed like jaccl-bench"};
  bench::add_sweep_options(app, o, {"all_sum", "all_gather"});
  app.add_option("--store", o.store, "FileStore directory shared by the ranks")
      ->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  return o;
}

int env_int(const char* a, const char* b) {
  const char* v = std::getenv(a);
  if (!v)
    v = std::getenv(b);
  if (!v) {
    std::fprintf(stderr, "gloo_bench: set %s (jaccl-run) or %s (mpirun)\n", a,
                 b);
    std::exit(2);
  }
  return std::atoi(v);
}

void fill(std::vector<float>& v, int rank) {
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((rank + i) % 3);
}

// One collective with its buffers registered once.
class Op {
 public:
  Op(const std::shared_ptr<gloo::Context>& ctx, const std::string& op,
     std::vector<float>& in, std::vector<float>& out, uint32_t tag)
      : is_sum_(op == "all_sum") {
    if (is_sum_) {
      ar_ = std::make_unique<gloo::AllreduceOptions>(ctx);
      ar_->setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      ar_->setInput(in.data(), in.size());
      ar_->setOutput(out.data(), out.size());
      ar_->setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(
              &gloo::sum<float>));
      ar_->setTag(tag);
    } else {
      ag_ = std::make_unique<gloo::AllgatherOptions>(ctx);
      ag_->setInput(in.data(), in.size());
      ag_->setOutput(out.data(), out.size());
      ag_->setTag(tag);
    }
  }
  void run() {
    if (is_sum_)
      gloo::allreduce(*ar_);
    else
      gloo::allgather(*ag_);
  }

 private:
  bool is_sum_;
  std::unique_ptr<gloo::AllreduceOptions> ar_;
  std::unique_ptr<gloo::AllgatherOptions> ag_;
};

void barrier(const std::shared_ptr<gloo::Context>& ctx) {
  gloo::BarrierOptions b(ctx);
  b.setTag(0x7fff0000u);
  gloo::barrier(b);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  int rank = env_int("JACCL_RANK", "OMPI_COMM_WORLD_RANK");
  int n = env_int("JACCL_SIZE", "OMPI_COMM_WORLD_SIZE");
  try {
    gloo::transport::tcp::attr attr("127.0.0.1");
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(o.store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
    ctx->connectFullMesh(store, dev);

    std::vector<size_t> sizes;
    for (double s = static_cast<double>(std::max<size_t>(o.min_bytes, 4));
         s <= static_cast<double>(o.max_bytes) * 1.0000001; s *= o.factor) {
      size_t b = static_cast<size_t>(s) / 4 * 4;
      if (o.op == "all_gather")
        b = static_cast<size_t>(s) / (4 * static_cast<size_t>(n)) * 4 *
            static_cast<size_t>(n);
      if (b > 0 && (sizes.empty() || sizes.back() != b))
        sizes.push_back(b);
    }
    int failures = 0;
    uint32_t tag = 1;
    for (size_t bytes : sizes) {
      size_t count = bytes / 4;
      bool sum = o.op == "all_sum";
      std::vector<float> in(sum ? count : count / n), out(count);
      fill(in, rank);
      std::fill(out.begin(), out.end(), 0.0f);
      Op op(ctx, o.op, in, out, tag++);
      for (int i = 0; i < o.warmup; ++i)
        op.run();
      size_t wrong = 0;
      if (o.check) {
        std::fill(out.begin(), out.end(), -1.0f);
        op.run();
        for (size_t i = 0; i < count; ++i) {
          double expect = 0;
          if (sum) {
            for (int r = 0; r < n; ++r)
              expect += static_cast<double>((r + i) % 3);
          } else {
            size_t per = count / n;
            expect = static_cast<double>((i / per + i % per) % 3);
          }
          wrong += out[i] != expect;
        }
      }
      barrier(ctx);
      auto t0 = Clock::now();
      for (int i = 0; i < o.iters; ++i)
        op.run();
      double us =
          std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
          o.iters;
      double mine[2] = {us, static_cast<double>(wrong)};
      std::vector<double> all(2 * static_cast<size_t>(n));
      {
        gloo::AllgatherOptions g(ctx);
        g.setInput(mine, 2);
        g.setOutput(all.data(), all.size());
        g.setTag(0x7ffe0000u);
        gloo::allgather(g);
      }
      double tmin = 1e300, tmax = 0, tsum = 0, wsum = 0;
      for (int r = 0; r < n; ++r) {
        tmin = std::min(tmin, all[2 * r]);
        tmax = std::max(tmax, all[2 * r]);
        tsum += all[2 * r];
        wsum += all[2 * r + 1];
      }
      double nn = n;
      double tavg = tsum / n;
      double algbw = static_cast<double>(bytes) / (tavg * 1e-6) / 1e9;
      double busbw = algbw * (sum ? 2 * (nn - 1) / nn : (nn - 1) / nn);
      if (wsum > 0)
        ++failures;
      if (rank == 0) {
        if (o.json) {
          std::printf(
              "{\"op\":\"%s\",\"dtype\":\"float32\",\"ranks\":%d,"
              "\"backend\":\"gloo-tcp-ring\",\"bytes\":%zu,\"count\":%zu,"
              "\"min_us\":%.3f,\"avg_us\":%.3f,\"max_us\":%.3f,"
              "\"algbw_gbps\":%.6f,\"busbw_gbps\":%.6f,\"inplace\":false,"
              "\"wrong\":%.0f}\n",
              o.op.c_str(), n, bytes, count, tmin, tavg, tmax, algbw, busbw,
              o.check ? wsum : -1.0);
        } else {
          std::printf("%12zu %12.2f %12.2f %12.2f %10.3f %10.3f %6.0f\n", bytes,
                      tmin, tavg, tmax, algbw, busbw, o.check ? wsum : -1.0);
        }
        std::fflush(stdout);
      }
    }
    barrier(ctx);
    if (failures && rank == 0)
      std::fprintf(stderr, "gloo_bench: %d sizes had wrong results\n",
                   failures);
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_bench: rank %d: %s\n", rank, e.what());
    return 1;
  }
}
