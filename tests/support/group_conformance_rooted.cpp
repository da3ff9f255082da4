// Copyright 2026 the jaccl authors.
// The group conformance checks of the rooted ops, reduce, gather and
// scatter (support/group_conformance.h): from three roots, the root's
// result checked, the other ranks' inputs left alone, and null buffers
// where the op allows them (the root's output or input on the others).
#include <set>
#include <vector>

#include "support/group_conformance.h"

namespace jaccl::test::group_conformance {

namespace {

std::vector<int> roots_of(const Ctx& c) {
  const std::set<int> r{0, c.size / 2, c.size - 1};
  return {r.begin(), r.end()};
}

std::string where(const std::string& op, size_t n, int root) {
  return op + " n=" + std::to_string(n) + " root=" + std::to_string(root);
}

// inplace: input == output on the root.
template <class T>
void check_reduce_to(Ctx& c, Op op, int dtype, size_t count, int root,
                     bool inplace) {
  const int salt = c.salt++;
  c.current = where(std::string("reduce ") + reduce_op_name(op) + " " +
                        dtype_name(dtype),
                    count, root) +
              (inplace ? " in-place" : "");
  std::vector<T> in(count), ref(count);
  fill_periodic(in.data(), 0, count,
                [&](size_t i) { return gen_for<T>(op, c.rank, i, salt); });
  fill_periodic(ref.data(), 0, count,
                [&](size_t i) { return fold<T>(op, c.size, i, salt); });
  const size_t bytes = count * sizeof(T);
  const bool me_root = c.rank == root;
  unsign_zeros(op, ref);
  if (me_root && inplace) {
    c.g.reduce(in.data(), in.data(), bytes, dtype, op, root);
    unsign_zeros(op, in);
    compare(c, in.data(), ref.data(), count);
    return;
  }
  const std::vector<T> keep = in;
  std::vector<T> out(me_root ? count : 0);
  if (!out.empty()) {
    std::memset(static_cast<void*>(out.data()), 0xA5, bytes);
  }
  c.g.reduce(in.data(), me_root ? out.data() : nullptr, bytes, dtype, op, root);
  if (me_root) {
    unsign_zeros(op, out);
    compare(c, out.data(), ref.data(), count);
  }
  compare(c, in.data(), keep.data(), count, "input was modified");
}

// Block r of a gather comes from rank r; of a scatter goes to rank r.
std::vector<uint8_t> block(int r, size_t n, int salt) {
  return pattern(r * 13 + 5, n, salt);
}

void check_gather(Ctx& c, size_t n, int root) {
  const int salt = c.salt++;
  c.current = where("gather", n, root);
  const bool me_root = c.rank == root;
  const auto mine = block(c.rank, n, salt);
  const auto size = static_cast<size_t>(c.size);
  std::vector<uint8_t> out(me_root ? n * size : 0, 0xA5);
  c.g.gather(mine.data(), me_root ? out.data() : nullptr, n, root);
  if (me_root) {
    std::vector<uint8_t> want;
    for (int r = 0; r < c.size; ++r) {
      const auto b = block(r, n, salt);
      want.insert(want.end(), b.begin(), b.end());
    }
    compare(c, out.data(), want.data(), want.size());
  }
}

void check_scatter(Ctx& c, size_t n, int root) {
  const int salt = c.salt++;
  c.current = where("scatter", n, root);
  const bool me_root = c.rank == root;
  std::vector<uint8_t> in;
  for (int r = 0; me_root && r < c.size; ++r) {
    const auto b = block(r, n, salt);
    in.insert(in.end(), b.begin(), b.end());
  }
  std::vector<uint8_t> out(n, 0xA5);
  c.g.scatter(me_root ? in.data() : nullptr, out.data(), n, root);
  const auto want = block(c.rank, n, salt);
  compare(c, out.data(), want.data(), n);
}

}  // namespace

void run_rooted(Ctx& c, const std::vector<size_t>& counts) {
  for (int root : roots_of(c)) {
    // Every op and dtype at the largest count; in place on the root for
    // every other op.
    bool inplace = false;
    for (int d : kAllDtypes) {
      for (Op op : kAllOps) {
        dispatch(d, [&](auto tag) {
          using T = typename decltype(tag)::type;
          if (takes<T>(op)) {
            check_reduce_to<T>(c, op, d, counts.back(), root, inplace);
            inplace = !inplace;
          }
        });
      }
    }
    for (size_t n : counts) {
      check_reduce_to<float>(c, Op::Sum, Float32, n, root, false);
      check_gather(c, n, root);
      check_scatter(c, n, root);
    }
  }
}

}  // namespace jaccl::test::group_conformance
