// Copyright 2026 the jaccl authors.
// Sweep options shared by jaccl-bench and the peer benchmarks in bench/
// (mpi_bench, gloo_bench), parsed with CLI11, so bench/compare drives every
// library with the same flags.
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace bench {

struct SweepArgs {
  std::string op = "all_sum";
  size_t min_bytes = 8, max_bytes = size_t(64) << 20;
  double factor = 2;
  int warmup = 5;
  int iters = 20;
  bool check = false;
  bool json = false;
};

// "8", "4K", "1M", "2GiB" -> bytes.
inline size_t parse_size(const std::string& s) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    throw CLI::ValidationError("size", "bad size '" + s + "'");
  }
  const std::string suffix = s.substr(used);
  double mult = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") {
    mult = 1024.0;
  } else if (suffix == "M" || suffix == "m" || suffix == "MiB") {
    mult = 1048576.0;
  } else if (suffix == "G" || suffix == "g" || suffix == "GiB") {
    mult = 1073741824.0;
  } else if (!suffix.empty() && suffix != "B") {
    throw CLI::ValidationError("size", "bad size suffix in '" + s + "'");
  }
  return static_cast<size_t>(v * mult);
}

// -o (one of ops), -b, -e, -f, -w, -n, -c, --json.
inline void add_sweep_options(CLI::App& app, SweepArgs& a,
                              const std::vector<std::string>& ops) {
  app.add_option("-o,--op", a.op, "operation")->check(CLI::IsMember(ops));
  app.add_option_function<std::string>(
      "-b,--minbytes",
      [&a](const std::string& s) { a.min_bytes = parse_size(s); },
      "smallest size (8, 4K, 1M)");
  app.add_option_function<std::string>(
      "-e,--maxbytes",
      [&a](const std::string& s) { a.max_bytes = parse_size(s); },
      "largest size");
  app.add_option("-f,--stepfactor", a.factor, "size multiplier per step")
      ->check(CLI::Range(1.01, 1024.0));
  app.add_option("-w,--warmup", a.warmup, "warm-up iterations per size")
      ->check(CLI::Range(0, 100000));
  app.add_option("-n,--iters", a.iters, "timed iterations per size")
      ->check(CLI::Range(1, 10000000));
  app.add_flag("-c,--check", a.check, "check every result");
  app.add_flag("--json", a.json, "one JSON object per size");
}

}  // namespace bench
