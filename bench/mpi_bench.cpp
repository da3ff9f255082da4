// Copyright 2026 the jaccl authors.
// mpi_bench: the Open MPI side of bench/compare, timed exactly like
// jaccl-bench so the numbers are comparable.
//
//   mpirun -n 2 mpi_bench -o all_sum -b 8 -e 64M -f 4 -w 5 -n 20 --json
//   mpirun -n 8 mpi_bench --first        # start-up + one MPI_Allgather
//
// Ops (jaccl-bench's names, then the MPI call): all_sum = MPI_Allreduce
// (MPI_FLOAT, MPI_SUM), all_gather = MPI_Allgather (the reported size is the
// whole output), sum_scatter = MPI_Reduce_scatter_block (the reported size is
// the whole input), broadcast = MPI_Bcast from rank 0, sendrecv = ping-pong
// between ranks (0,1), (2,3)... reported as the one-way time, all_to_all =
// MPI_Alltoall (the reported size is the whole input = the whole output),
// all_to_allv = MPI_Alltoallv on jaccl-bench's counts (-p uniform|moe, see
// tools/bench_pattern.h; the size is each rank's whole input).
// --busy-thread R runs a computing thread in rank R's process (or all).
//
// Per size: buffers allocated and touched once, warm-up iterations, an
// optional correctness check, MPI_Barrier, then the timed iterations
// back-to-back; every rank's average is gathered and min/avg/max across ranks
// reported with algbw = bytes / avg time and busbw as nccl-tests defines it
// (all_sum: algbw * 2(n-1)/n; all_gather, sum_scatter, all_to_all: algbw *
// (n-1)/n;
// broadcast, sendrecv: algbw). One JSON object per size on rank 0's stdout.
#include <mpi.h>

#include "bench_pattern.h"
#include "sweep_args.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options : bench::SweepArgs {
  bool first = false;
  std::string label = "openmpi";
  std::string pattern = "moe";  // all_to_allv
  std::string busy;             // --busy-thread
  double min_ms = 0;            // --min-ms
};

// MPI_Alltoallv's arguments (elements of MPI_FLOAT) for one size.
struct VCounts {
  std::vector<int> send, sdispl, recv, rdispl;
};

VCounts vcounts(const std::string& pattern, size_t bytes, int n, int rank) {
  VCounts v;
  auto s = bench::a2av_send_counts(pattern, bytes, 4, n);
  auto r = bench::a2av_recv_counts(pattern, bytes, 4, n, rank);
  int so = 0, ro = 0;
  for (int j = 0; j < n; ++j) {
    v.send.push_back(static_cast<int>(s[static_cast<size_t>(j)] / 4));
    v.sdispl.push_back(so);
    so += v.send.back();
    v.recv.push_back(static_cast<int>(r[static_cast<size_t>(j)] / 4));
    v.rdispl.push_back(ro);
    ro += v.recv.back();
  }
  return v;
}

// Exits (like CLI11_PARSE) on --help or bad usage.
Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{"mpi_bench: Open MPI collectives timed like jaccl-bench"};
  bench::add_sweep_options(app, o,
                           {"all_sum", "all_gather", "sum_scatter", "broadcast",
                            "sendrecv", "all_to_all", "all_to_allv"});
  app.add_flag("--first", o.first,
               "time start-up + one MPI_Allgather, then exit");
  app.add_option("--label", o.label, "library label in the JSON");
  app.add_option("-p,--pattern", o.pattern, "all_to_allv counts: uniform, moe")
      ->check(CLI::IsMember({"uniform", "moe"}));
  app.add_option("--min-ms", o.min_ms,
                 "time at least this long per size (as jaccl-bench's)");
  app.add_option("--busy-thread", o.busy,
                 "run a computing thread in this rank's process while timing "
                 "(a rank number, or all)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  return o;
}

// jaccl-bench's fill: element i of rank r is (r + i + offset) % 3.
void fill(std::vector<float>& v, int rank, size_t offset) {
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((rank + i + offset) % 3);
}

struct Shape {
  size_t in_count, out_count;  // floats
  double busbw_factor;
};

Shape shape(const std::string& op, size_t count, int n) {
  double nn = n;
  if (op == "all_sum")
    return {count, count, 2 * (nn - 1) / nn};
  if (op == "all_gather")
    return {count / n, count / n * n, (nn - 1) / nn};
  if (op == "sum_scatter")
    return {count / n * n, count / n, (nn - 1) / nn};
  if (op == "all_to_all" || op == "all_to_allv")  // all_to_allv: see main
    return {count / n * n, count / n * n, (nn - 1) / nn};
  return {count, count, 1};  // broadcast, sendrecv
}

void run_op(const std::string& op, std::vector<float>& in,
            std::vector<float>& out, int rank, int n, const VCounts& v) {
  if (op == "all_sum") {
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(out.size()),
                  MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (op == "all_gather") {
    MPI_Allgather(in.data(), static_cast<int>(in.size()), MPI_FLOAT, out.data(),
                  static_cast<int>(in.size()), MPI_FLOAT, MPI_COMM_WORLD);
  } else if (op == "sum_scatter") {
    MPI_Reduce_scatter_block(in.data(), out.data(),
                             static_cast<int>(out.size()), MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD);
  } else if (op == "all_to_all") {
    const int per = static_cast<int>(in.size()) / n;
    MPI_Alltoall(in.data(), per, MPI_FLOAT, out.data(), per, MPI_FLOAT,
                 MPI_COMM_WORLD);
  } else if (op == "all_to_allv") {
    MPI_Alltoallv(in.data(), v.send.data(), v.sdispl.data(), MPI_FLOAT,
                  out.data(), v.recv.data(), v.rdispl.data(), MPI_FLOAT,
                  MPI_COMM_WORLD);
  } else if (op == "broadcast") {
    MPI_Bcast(out.data(), static_cast<int>(out.size()), MPI_FLOAT, 0,
              MPI_COMM_WORLD);
  } else if (op == "sendrecv") {
    int peer = rank ^ 1;
    if (peer >= n)
      return;
    int count = static_cast<int>(in.size());
    if (rank % 2 == 0) {
      MPI_Send(in.data(), count, MPI_FLOAT, peer, 7, MPI_COMM_WORLD);
      MPI_Recv(out.data(), count, MPI_FLOAT, peer, 7, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(out.data(), count, MPI_FLOAT, peer, 7, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      MPI_Send(in.data(), count, MPI_FLOAT, peer, 7, MPI_COMM_WORLD);
    }
  }
}

size_t verify(const std::string& op, const std::vector<float>& out, int rank,
              int n, size_t in_count, const VCounts& v) {
  size_t wrong = 0;
  if (op == "all_to_allv") {  // block q: q's block `rank`, at its offset
    for (int q = 0; q < n; ++q) {
      const size_t off = static_cast<size_t>(v.sdispl[static_cast<size_t>(
          rank)]);  // every sender's counts are alike
      const size_t at = static_cast<size_t>(v.rdispl[static_cast<size_t>(q)]);
      for (size_t j = 0;
           j < static_cast<size_t>(v.recv[static_cast<size_t>(q)]); ++j)
        wrong += out[at + j] !=
                 static_cast<float>((static_cast<size_t>(q) + off + j) % 3);
    }
    return wrong;
  }
  auto sum_at = [&](size_t i) {
    double s = 0;
    for (int r = 0; r < n; ++r)
      s += static_cast<double>((r + i) % 3);
    return s;
  };
  for (size_t i = 0; i < out.size(); ++i) {
    double expect = 0;
    if (op == "all_sum")
      expect = sum_at(i);
    else if (op == "sum_scatter")
      expect = sum_at(i + static_cast<size_t>(rank) * out.size());
    else if (op == "all_gather")
      expect = static_cast<double>((i / in_count + i % in_count) % 3);
    else if (op == "broadcast")
      expect = static_cast<double>(i % 3);
    else if (op == "all_to_all") {  // block q: block `rank` of q's input
      const size_t per = out.size() / static_cast<size_t>(n);
      expect = static_cast<double>(
          (i / per + static_cast<size_t>(rank) * per + i % per) % 3);
    } else if (op == "sendrecv") {
      int peer = rank ^ 1;
      if (peer >= n)
        return 0;
      expect = static_cast<double>((peer + i) % 3);
    }
    wrong += out[i] != expect;
  }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::optional<bench::BusyThread> busy;
  if (!o.first && bench::busy_here(o.busy, rank))
    busy.emplace();

  if (o.first) {
    // Start-up check: one 8-byte MPI_Allgather (what a bootstrap does).
    long mine = rank;
    std::vector<long> all(static_cast<size_t>(n));
    MPI_Allgather(&mine, 1, MPI_LONG, all.data(), 1, MPI_LONG, MPI_COMM_WORLD);
    int bad = 0;
    for (int r = 0; r < n; ++r)
      bad += all[static_cast<size_t>(r)] != r;
    if (rank == 0)
      std::printf("{\"op\":\"first_allgather\",\"ranks\":%d,\"wrong\":%d}\n", n,
                  bad);
    MPI_Finalize();
    return bad ? 1 : 0;
  }

  std::vector<size_t> sizes;  // bytes, multiples of 4 (and of 4n if split)
  for (double s = static_cast<double>(std::max<size_t>(o.min_bytes, 4));
       s <= static_cast<double>(o.max_bytes) * 1.0000001; s *= o.factor) {
    size_t b = static_cast<size_t>(s) / 4 * 4;
    if (o.op == "all_gather" || o.op == "sum_scatter" || o.op == "all_to_all" ||
        o.op == "all_to_allv")
      b = static_cast<size_t>(s) / (4 * static_cast<size_t>(n)) * 4 *
          static_cast<size_t>(n);
    if (b > 0 && (sizes.empty() || sizes.back() != b))
      sizes.push_back(b);
  }

  int failures = 0;
  for (size_t bytes : sizes) {
    Shape sh = shape(o.op, bytes / 4, n);
    VCounts v;
    if (o.op == "all_to_allv") {
      v = vcounts(o.pattern, bytes, n, rank);
      sh.out_count = static_cast<size_t>(v.rdispl.back() + v.recv.back());
    }
    std::vector<float> in(sh.in_count), out(sh.out_count);
    fill(in, rank, 0);
    fill(out, 0, 0);  // broadcast source at rank 0; touches every page
    for (int i = 0; i < o.warmup; ++i)
      run_op(o.op, in, out, rank, n, v);
    size_t wrong = 0;
    if (o.check) {
      fill(out, 0, 0);
      run_op(o.op, in, out, rank, n, v);
      wrong = verify(o.op, out, rank, n, sh.in_count, v);
    }
    int iters = o.iters;
    if (o.min_ms > 0) {  // jaccl-bench's calibrating pass
      MPI_Barrier(MPI_COMM_WORLD);
      auto c0 = Clock::now();
      for (int i = 0; i < iters; ++i)
        run_op(o.op, in, out, rank, n, v);
      double ms =
          std::chrono::duration<double, std::milli>(Clock::now() - c0).count();
      double slow = 0;
      MPI_Allreduce(&ms, &slow, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (slow < o.min_ms)
        iters = static_cast<int>(
            std::min(1e7, std::ceil(iters * o.min_ms / std::max(slow, 1e-3))));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i)
      run_op(o.op, in, out, rank, n, v);
    double us =
        std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
        iters;
    if (o.op == "sendrecv")
      us /= 2;  // one-way
    double mine[2] = {us, static_cast<double>(wrong)};
    std::vector<double> all(2 * static_cast<size_t>(n));
    MPI_Allgather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE,
                  MPI_COMM_WORLD);
    double tmin = 1e300, tmax = 0, tsum = 0, wsum = 0;
    for (int r = 0; r < n; ++r) {
      tmin = std::min(tmin, all[2 * r]);
      tmax = std::max(tmax, all[2 * r]);
      tsum += all[2 * r];
      wsum += all[2 * r + 1];
    }
    double tavg = tsum / n;
    double algbw = static_cast<double>(bytes) / (tavg * 1e-6) / 1e9;
    double busbw = algbw * sh.busbw_factor;
    if (wsum > 0)
      ++failures;
    if (rank == 0) {
      if (o.json) {
        std::printf(
            "{\"op\":\"%s\",\"dtype\":\"float32\",\"ranks\":%d,"
            "\"backend\":\"%s\",\"bytes\":%zu,\"count\":%zu,"
            "\"min_us\":%.3f,\"avg_us\":%.3f,\"max_us\":%.3f,"
            "\"algbw_gbps\":%.6f,\"busbw_gbps\":%.6f,\"inplace\":false,"
            "\"busy_thread\":\"%s\",\"iters\":%d,%s\"wrong\":%.0f}\n",
            o.op.c_str(), n, o.label.c_str(), bytes, bytes / 4, tmin, tavg,
            tmax, algbw, busbw, o.busy.c_str(), iters,
            o.op == "all_to_allv"
                ? ("\"pattern\":\"" + o.pattern + "\",").c_str()
                : "",
            o.check ? wsum : -1.0);
      } else {
        std::printf("%12zu %12.2f %12.2f %12.2f %10.3f %10.3f %6.0f\n", bytes,
                    tmin, tavg, tmax, algbw, busbw, o.check ? wsum : -1.0);
      }
      std::fflush(stdout);
    }
  }
  busy.reset();
  MPI_Finalize();
  if (failures && rank == 0)
    std::fprintf(stderr, "mpi_bench: %d sizes had wrong results\n", failures);
  return failures ? 1 : 0;
}
