// Copyright 2026 the jaccl authors.
// The argument and zero-byte rules every group kind keeps (one op skeleton,
// collectives/op_runner.h; support/group_conformance.h): what a wrong call
// throws, and that neither a wrong call nor an empty one touches the peers.
#include <vector>

#include "support/group_conformance.h"

namespace jaccl::test::group_conformance {

namespace {

// A UsageError naming `needle`, reported by this rank (its rank field).
void expect_usage(Ctx& c, const std::string& what, const std::string& needle,
                  const std::function<void()>& f) {
  c.current = "usage error: " + what;
  expect_error(c, ErrorKind::Usage, needle, [&] {
    try {
      f();
    } catch (const Error& e) {
      ++c.checks;
      if (e.kind() == ErrorKind::Usage && e.rank() != c.rank) {
        fail(c, "the error's rank is " + std::to_string(e.rank()) + ": " +
                    e.what());
      }
      throw;
    }
  });
}

// The group still works and its streams are in step: a reduction and
// send/recv around the ring, checked.
void expect_working(Ctx& c, const std::string& after) {
  const int salt = c.salt++;
  c.current = "all_sum int32 after " + after;
  std::vector<int32_t> in(5), out(5, -1), ref(5);
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = gen<int32_t>(c.rank, i, salt);
    ref[i] = gen<int32_t>(0, i, salt);
    for (int r = 1; r < c.size; ++r)
      ref[i] = apply(Op::Sum, ref[i], gen<int32_t>(r, i, salt));
  }
  c.g.all_sum(in.data(), out.data(), in.size() * 4, Int32);
  compare(c, out.data(), ref.data(), ref.size());
  if (c.size == 1) {
    return;
  }
  c.current = "send/recv ring after " + after;
  const int next = (c.rank + 1) % c.size, prev = (c.rank + c.size - 1) % c.size;
  auto mine = pattern(c.rank, 100, salt);
  std::vector<uint8_t> got(100, 0xA5);
  if (c.rank == 0) {
    c.g.send(mine.data(), mine.size(), next);
    c.g.recv(got.data(), got.size(), prev);
  } else {
    c.g.recv(got.data(), got.size(), prev);
    c.g.send(mine.data(), mine.size(), next);
  }
  auto want = pattern(prev, 100, salt);
  compare(c, got.data(), want.data(), want.size());
}

}  // namespace

void run_usage_errors(Ctx& c) {
  const size_t n = static_cast<size_t>(c.size);
  std::vector<char> mem(64 * n + 64);
  char* buf = mem.data();
  char* none = nullptr;
  const int last = c.size - 1;
  const int other = c.rank == 0 ? last : 0;  // == rank only when size 1
  // Ranks make different mistakes: none may put the streams out of step.
  expect_usage(c, "unknown dtype", "99", [&] { c.g.all_sum(buf, buf, 8, 99); });
  expect_usage(c, "bytes not a whole element", "",
               [&] { c.g.all_max(buf, buf, 6, Float32); });
  expect_usage(c, "sum_scatter bytes not a whole element", "",
               [&] { c.g.sum_scatter(buf, buf, 3, Int16); });
  if (c.rank == 0) {
    expect_usage(c, "send to this rank", "is this rank",
                 [&] { c.g.send(buf, 4, 0); });
    expect_usage(c, "recv from rank size", "out of range",
                 [&] { c.g.recv(buf, 4, c.size); });
    expect_usage(c, "send to rank -1", "out of range",
                 [&] { c.g.send(buf, 4, -1); });
    expect_usage(c, "broadcast from root size + 4", "out of range",
                 [&] { c.g.broadcast(buf, 4, c.size + 4); });
    expect_usage(c, "all_sum partly overlapping", "overlap partially",
                 [&] { c.g.all_sum(buf, buf + 2, 8, Int8); });
    expect_usage(c, "all_min partly overlapping", "overlap partially",
                 [&] { c.g.all_min(buf + 4, buf, 8, Float32); });
    // all_gather's input may sit only at this rank's slot of the output.
    expect_usage(c, "all_gather input off its slot", "overlaps output",
                 [&] { c.g.all_gather(buf + 4, buf, 8); });
    expect_usage(c, "bitand of float32", "not supported", [&] {
      c.g.all_reduce(buf, buf, 8, Float32, ReduceOp::BitAnd);
    });
    expect_usage(c, "reduce to root size", "out of range", [&] {
      c.g.reduce(buf, buf, 8, Float32, ReduceOp::Sum, c.size);
    });
    expect_usage(c, "gather into its own input", "overlap",
                 [&] { c.g.gather(buf, buf, 8, 0); });
  }
  if (c.rank == last) {
    const std::vector<std::pair<std::string, std::function<void()>>> nulls = {
        {"all_sum null input", [&] { c.g.all_sum(none, buf, 8, Float32); }},
        {"all_max null output", [&] { c.g.all_max(buf, none, 8, Float32); }},
        {"all_gather null input", [&] { c.g.all_gather(none, buf, 8); }},
        {"all_gather null output", [&] { c.g.all_gather(buf, none, 8); }},
        {"sum_scatter null input",
         [&] { c.g.sum_scatter(none, buf, 8, Float32); }},
        {"sum_scatter null output",
         [&] { c.g.sum_scatter(buf, none, 8, Float32); }},
        {"broadcast null", [&] { c.g.broadcast(none, 8, 0); }},
    };
    for (const auto& [what, f] : nulls) {
      expect_usage(c, what, "null buffer", f);
    }
    if (other != c.rank) {
      expect_usage(c, "send null", "null buffer",
                   [&] { c.g.send(none, 8, other); });
      expect_usage(c, "recv null", "null buffer",
                   [&] { c.g.recv(none, 8, other); });
    }
    expect_usage(c, "all_to_all null input", "null buffer",
                 [&] { c.g.all_to_all(none, buf, 4); });
    expect_usage(c, "reduce null input", "null buffer", [&] {
      c.g.reduce(none, buf, 8, Float32, ReduceOp::Prod, c.rank);
    });
    expect_usage(c, "scatter from a null input", "null buffer",
                 [&] { c.g.scatter(none, buf, 8, c.rank); });
    expect_usage(c, "all_to_all in place", "overlap",
                 [&] { c.g.all_to_all(buf, buf, 4); });
  }
  expect_working(c, "usage errors");
}

void run_zero_bytes(Ctx& c) {
  // Only the last rank calls them, some with null buffers (allowed when
  // empty): had one waited for its peers it would time out or put the
  // streams out of step for the checks after.
  if (c.rank == c.size - 1) {
    c.current = "zero-byte ops on one rank";
    float x = 0;
    float* none = nullptr;
    const int other = c.size == 1 ? -1 : 0;
    c.g.all_sum(&x, &x, 0, Float32);
    c.g.all_max(none, none, 0, Float32);
    c.g.all_min(&x, none, 0, Int8);
    c.g.all_gather(none, &x, 0);
    c.g.sum_scatter(&x, none, 0, Float32);
    c.g.broadcast(none, 0, 0);
    if (other >= 0) {
      c.g.send(none, 0, other);
      c.g.recv(&x, 0, other);
    }
    c.g.all_to_all(none, none, 0);
    c.g.all_reduce(none, none, 0, Int8, ReduceOp::BitXor);
    ++c.checks;
  }
  expect_working(c, "zero-byte ops");
}

}  // namespace jaccl::test::group_conformance
