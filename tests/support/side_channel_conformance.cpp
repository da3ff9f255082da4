// Copyright 2026 the jaccl authors.
#include "support/side_channel_conformance.h"

#include <thread>

namespace jaccl::test {

namespace {

using Millis = std::chrono::milliseconds;

std::string describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const jaccl::Error& x) {
    return std::string(to_string(x.kind())) + " error: " + x.what();
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// Runs check(fn, rank, size) on a fresh group of n ranks; failures are
// appended as "<target>: <check>: <what>".
void run_group(const ThreadedTarget& t, const std::string& check, int n,
               Millis timeout,
               const std::function<void(AllGatherFn&, int, int)>& body,
               std::vector<std::string>* failures) {
  AllGatherFactory factory;
  try {
    factory = t.make_group(n, timeout);
  } catch (...) {
    failures->push_back(t.name + ": " + check + ": make_group threw: " +
                        describe(std::current_exception()));
    return;
  }
  auto errors = run_ranks(n, [&](int rank) {
    AllGatherFn fn = factory(rank, n);
    if (!fn)
      throw ConformanceFailure("the factory returned an empty function");
    body(fn, rank, n);
  });
  for (int r = 0; r < n; ++r) {
    if (errors[r]) {
      failures->push_back(t.name + ": " + check + ": rank " +
                          std::to_string(r) + ": " + describe(errors[r]));
    }
  }
}

// Ranks other than `missing` make `calls_before` good calls, then `missing`
// stays away (its channel is destroyed, as when its process exits) and the
// others call again: each must get a TimeoutError (or PeerLostError) naming
// it.
void run_missing(const ThreadedTarget& t, int n, int missing, int calls_before,
                 Millis timeout, std::vector<std::string>* failures) {
  const std::string check = "missing rank " + std::to_string(missing) +
                            " at call #" + std::to_string(calls_before);
  AllGatherFactory factory;
  try {
    factory = t.make_group(n, timeout);
  } catch (...) {
    failures->push_back(t.name + ": " + check + ": make_group threw: " +
                        describe(std::current_exception()));
    return;
  }
  auto errors = run_ranks(n, [&](int rank) {
    if (calls_before == 0 && rank == missing) {
      return;  // never even creates its channel
    }
    AllGatherFn fn = factory(rank, n);
    for (int k = 0; k < calls_before; ++k) {
      conformance::gather_and_verify(fn, rank, n, 24, 77 + k, check);
    }
    if (rank == missing) {
      return;
    }
    char in[4] = {1, 2, 3, 4};
    std::vector<char> out(4 * static_cast<size_t>(n));
    try {
      fn(in, out.data(), 4);
    } catch (const Error& e) {
      // A channel that notices the rank is gone (PeerLost) is as good as one
      // that times out; either must name it.
      if (e.kind() != ErrorKind::Timeout && e.kind() != ErrorKind::PeerLost) {
        throw;
      }
      if (!conformance::message_names_rank(e.what(), missing)) {
        throw ConformanceFailure(
            std::string(to_string(e.kind())) +
            " error does not name the missing rank: " + e.what());
      }
      return;
    }
    throw ConformanceFailure("the call returned although rank " +
                             std::to_string(missing) + " never made it");
  });
  for (int r = 0; r < n; ++r) {
    if (errors[r]) {
      failures->push_back(t.name + ": " + check + ": rank " +
                          std::to_string(r) + ": " + describe(errors[r]));
    }
  }
}

}  // namespace

std::vector<std::exception_ptr> run_ranks(
    int n, const std::function<void(int rank)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return errors;
}

std::vector<std::string> run_threaded_conformance(const ThreadedTarget& t,
                                                  const ConformanceOptions& o) {
  namespace c = conformance;
  std::vector<std::string> failures;
  const int n = o.ranks;
  run_group(
      t, "rank order", n, o.timeout,
      [](AllGatherFn& fn, int r, int s) { c::check_rank_order(fn, r, s); },
      &failures);
  run_group(
      t, "sizes", n, o.timeout,
      [&](AllGatherFn& fn, int r, int s) {
        c::check_sizes(fn, r, s, o.max_bytes);
      },
      &failures);
  run_group(
      t, "repeated calls", n, o.timeout,
      [&](AllGatherFn& fn, int r, int s) {
        c::check_repeated(fn, r, s, o.repeats);
      },
      &failures);
  run_group(
      t, "framing mismatch", n, o.timeout,
      [&](AllGatherFn& fn, int r, int s) {
        c::check_framing_mismatch(fn, r, s, o.timeout);
      },
      &failures);
  run_group(
      t, "single rank", 1, o.timeout,
      [](AllGatherFn& fn, int r, int s) {
        c::check_rank_order(fn, r, s);
        c::check_repeated(fn, r, s, 3);
      },
      &failures);
  if (o.many_ranks > 0) {
    run_group(
        t, std::to_string(o.many_ranks) + " ranks", o.many_ranks, o.timeout,
        [](AllGatherFn& fn, int r, int s) {
          c::check_rank_order(fn, r, s);
          c::check_repeated(fn, r, s, 3);
          c::gather_and_verify(fn, r, s, 1000, 9, "64 ranks, 1000 B");
        },
        &failures);
  }
  if (o.missing_rank_checks) {
    run_missing(t, n, n - 1, 0, o.short_timeout, &failures);
    run_missing(t, n, 0, 0, o.short_timeout, &failures);
    run_missing(t, n, n / 2, 2, o.short_timeout, &failures);
  }
  return failures;
}

}  // namespace jaccl::test
