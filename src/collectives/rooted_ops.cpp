// Copyright 2026 the jaccl authors.
// The defaults of Group::all_reduce, reduce, gather and scatter, built from
// the group's own ops, so every group (jaccl's and any other) has them and
// each piece runs through the group's op skeleton.
#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "collectives/op_checks.h"
#include "collectives/ring_math.h"
#include "common/copy.h"
#include "common/error.h"
#include "common/reduce.h"
#include "jaccl/group.h"

namespace jaccl {
namespace {

void check_root(Group& g, const char* op, int root) {
  if (root < 0 || root >= g.size()) {
    detail::raise_usage(g.rank(), std::string(op) + ": root " +
                                      std::to_string(root) +
                                      " is out of range for a group of size " +
                                      std::to_string(g.size()));
  }
}

// all_to_allv's counts for a rooted op: block_of_root bytes between the root
// and each rank (the root's own block included), nothing else.
struct RootedCounts {
  std::vector<size_t> to;    // send counts
  std::vector<size_t> from;  // receive counts
};

RootedCounts rooted_counts(Group& g, int root, size_t n, bool root_sends) {
  const auto size = static_cast<size_t>(g.size());
  const bool me_root = g.rank() == root;
  RootedCounts c{std::vector<size_t>(size, 0), std::vector<size_t>(size, 0)};
  auto& root_side = root_sends ? c.to : c.from;
  auto& leaf_side = root_sends ? c.from : c.to;
  if (me_root) {
    std::fill(root_side.begin(), root_side.end(), n);
  }
  leaf_side[static_cast<size_t>(root)] = n;
  return c;
}

// all_to_allv's errors say which op the caller made.
void rooted_a2a(Group& g, const char* op, int root, const void* in, void* out,
                size_t n, bool root_sends) {
  check_root(g, op, root);
  const auto c = rooted_counts(g, root, n, root_sends);
  try {
    g.all_to_allv(in, c.to, out, c.from);
  } catch (const Error& e) {
    std::rethrow_exception(with_context(
        e, std::string(op) + " (root " + std::to_string(root) + "): "));
  }
}

}  // namespace

void Group::all_reduce(const void* input, void* output, size_t n_bytes,
                       int dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return all_sum(input, output, n_bytes, dtype);
    case ReduceOp::Max:
      return all_max(input, output, n_bytes, dtype);
    case ReduceOp::Min:
      return all_min(input, output, n_bytes, dtype);
    default:
      break;
  }
  const int me = rank();
  detail::check_call(detail::call::all_reduce(detail::all_reduce_kind(op),
                                              input, output, n_bytes, dtype),
                     me, size(), me);
  if (n_bytes == 0) {
    return;
  }
  // Every rank reduces the same inputs in rank order: the same bytes
  // everywhere, whatever the op.
  std::vector<char> all(n_bytes * static_cast<size_t>(size()));
  all_gather(input, all.data(), n_bytes);
  const size_t count = detail::checked_count(op, dtype, n_bytes, me);
  detail::copy_bytes(output, all.data(), n_bytes);
  for (int r = 1; r < size(); ++r) {
    detail::reduce_into(op, dtype, output,
                        all.data() + static_cast<size_t>(r) * n_bytes, count);
  }
}

void Group::reduce(const void* input, void* output, size_t n_bytes, int dtype,
                   ReduceOp op, int root) {
  check_root(*this, "reduce", root);
  if (rank() == root) {
    all_reduce(input, output, n_bytes, dtype, op);
    return;
  }
  // An all-reduce whose result only the root keeps (twice a tree reduce's
  // bytes, on the group's fastest path).
  std::vector<char> scratch(n_bytes);
  all_reduce(input, scratch.data(), n_bytes, dtype, op);
}

void Group::gather(const void* input, void* output, size_t n_bytes, int root) {
  rooted_a2a(*this, "gather", root, input, output, n_bytes,
             /*root_sends=*/false);
}

void Group::scatter(const void* input, void* output, size_t n_bytes, int root) {
  rooted_a2a(*this, "scatter", root, input, output, n_bytes,
             /*root_sends=*/true);
}

}  // namespace jaccl
