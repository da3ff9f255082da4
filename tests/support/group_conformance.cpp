// Copyright 2026 the jaccl authors.
// The group conformance checks of reductions, all_gather, sum_scatter,
// broadcast, send/recv and barrier (support/group_conformance.h).
#include "support/group_conformance.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

namespace jaccl::test::group_conformance {

namespace fs = std::filesystem;

void fail(Ctx& c, const std::string& what) {
  if (++c.failures <= 20 && c.on_fail) {
    c.on_fail(c.current + ": " + what);
  }
}

void expect_error(Ctx& c, ErrorKind kind, const std::string& needle,
                  const std::function<void()>& f) {
  ++c.checks;
  try {
    f();
    fail(c, "no error");
  } catch (const Error& e) {
    if (e.kind() != kind) {
      fail(c, std::string("got ") + to_string(e.kind()) + " (" + e.what() +
                  "), want " + to_string(kind));
    } else if (std::string(e.what()).find(needle) == std::string::npos) {
      fail(c, std::string("message '") + e.what() + "' lacks '" + needle + "'");
    }
  }
}

void check_gen_period(Ctx& c) {
  for (int d : kAllDtypes) {
    dispatch(d, [&](auto tag) {
      ++c.checks;
      if (!gen_is_periodic<typename decltype(tag)::type>(c.size)) {
        c.current = std::string("gen period, ") + dtype_name(d);
        fail(c, "gen() does not repeat every kGenPeriod elements");
      }
    });
  }
}

namespace {

template <class T>
void junk(std::vector<T>& v) {
  if (!v.empty())  // an empty vector's data() may be null
    std::memset(static_cast<void*>(v.data()), 0xA5, v.size() * sizeof(T));
}

// generic: through Group::all_reduce even for sum, max and min.
void call_reduce(Group& g, Op op, const void* in, void* out, size_t n,
                 int dtype, bool generic = false) {
  if (generic) {
    return g.all_reduce(in, out, n, dtype, op);
  }
  switch (op) {
    case Op::Sum:
      return g.all_sum(in, out, n, dtype);
    case Op::Max:
      return g.all_max(in, out, n, dtype);
    case Op::Min:
      return g.all_min(in, out, n, dtype);
    default:
      return g.all_reduce(in, out, n, dtype, op);
  }
}

std::string label(const std::string& op, int dtype, size_t count,
                  bool inplace) {
  return op + " " + dtype_name(dtype) + " n=" + std::to_string(count) +
         (inplace ? " in-place" : "");
}

// Element i of the reduction over every rank's input.
template <class T>
T fold(const Ctx& c, Op op, size_t i, int salt) {
  return group_conformance::fold<T>(op, c.size, i, salt);
}

template <class T>
void check_reduce(Ctx& c, Op op, int dtype, size_t count, bool inplace,
                  bool generic = false) {
  const int salt = c.salt++;
  c.current = label(
      generic ? std::string("all_reduce ") + reduce_op_name(op) : op_name(op),
      dtype, count, inplace);
  std::vector<T> in(count), out(count), ref(count);
  fill_periodic(in.data(), 0, count,
                [&](size_t i) { return gen_for<T>(op, c.rank, i, salt); });
  fill_periodic(ref.data(), 0, count,
                [&](size_t i) { return fold<T>(c, op, i, salt); });
  const size_t bytes = count * sizeof(T);
  unsign_zeros(op, ref);
  if (inplace) {
    call_reduce(c.g, op, in.data(), in.data(), bytes, dtype, generic);
    unsign_zeros(op, in);
    compare(c, in.data(), ref.data(), count);
    return;
  }
  const std::vector<T> keep = in;
  junk(out);
  call_reduce(c.g, op, in.data(), out.data(), bytes, dtype, generic);
  unsign_zeros(op, out);
  compare(c, out.data(), ref.data(), count);
  compare(c, in.data(), keep.data(), count, "input was modified");
}

// Buffers at odd byte offsets (the API takes any pointer).
template <class T>
void check_unaligned(Ctx& c, Op op, int dtype, size_t count) {
  const int salt = c.salt++;
  c.current = label(op_name(op), dtype, count, false) + " unaligned";
  const size_t bytes = count * sizeof(T);
  std::vector<T> in(count), out(count), ref(count);
  fill_periodic(in.data(), 0, count,
                [&](size_t i) { return gen<T>(c.rank, i, salt); });
  fill_periodic(ref.data(), 0, count,
                [&](size_t i) { return fold<T>(c, op, i, salt); });
  std::vector<char> a(bytes + 8), b(bytes + 8, static_cast<char>(0xA5));
  std::memcpy(a.data() + 1, in.data(), bytes);
  call_reduce(c.g, op, a.data() + 1, b.data() + 3, bytes, dtype);
  std::memcpy(static_cast<void*>(out.data()), b.data() + 3, bytes);
  compare(c, out.data(), ref.data(), count);
  std::memcpy(b.data() + 5, in.data(), bytes);  // in place, odd offset
  call_reduce(c.g, op, b.data() + 5, b.data() + 5, bytes, dtype);
  std::memcpy(static_cast<void*>(out.data()), b.data() + 5, bytes);
  compare(c, out.data(), ref.data(), count, "in-place result");
}

// Float specials: signed zeros, NaN, opposite infinities, overflow.
template <class T>
void check_specials(Ctx& c, Op op, int dtype) {
  c.current = label(op_name(op), dtype, 4, false) + " specials";
  auto val = [&](int r, size_t i) -> T {
    const float inf = INFINITY;
    if constexpr (std::is_same_v<T, double>) {
      if (i == 3)
        return 1.7e308;
    }
    switch (i) {
      case 0:
        return T(r % 2 == 0 ? -0.0f : 0.0f);
      case 1:
        return T(r == c.size - 1 ? NAN : 1.0f);
      case 2:
        return T(r == 0 ? inf : r == 1 ? -inf : 2.0f);
      default:
        return T(std::is_same_v<T, float16_t> ? 65504.0f : 3.0e38f);
    }
  };
  std::vector<T> in(4), out(4), ref(4);
  for (size_t i = 0; i < 4; ++i) {
    in[i] = val(c.rank, i);
    ref[i] = val(0, i);
    for (int r = 1; r < c.size; ++r)
      ref[i] = apply(op, ref[i], val(r, i));
  }
  junk(out);
  call_reduce(c.g, op, in.data(), out.data(), 4 * sizeof(T), dtype);
  compare(c, out.data(), ref.data(), 4);
}

template <class T>
void check_all_gather(Ctx& c, int dtype, size_t count, bool inplace) {
  const int salt = c.salt++;
  c.current = label("all_gather", dtype, count, inplace);
  const size_t n = static_cast<size_t>(c.size);
  std::vector<T> in(count), out(n * count), ref(n * count);
  for (size_t r = 0; r < n; ++r) {
    fill_periodic(ref.data() + r * count, 0, count, [&](size_t i) {
      return gen<T>(static_cast<int>(r), i, salt);
    });
  }
  fill_periodic(in.data(), 0, count,
                [&](size_t i) { return gen<T>(c.rank, i, salt); });
  junk(out);
  T* mine = out.data() + static_cast<size_t>(c.rank) * count;
  if (inplace) {
    if (count > 0)
      std::memcpy(static_cast<void*>(mine), in.data(), count * sizeof(T));
    c.g.all_gather(mine, out.data(), count * sizeof(T));
  } else {
    c.g.all_gather(in.data(), out.data(), count * sizeof(T));
  }
  compare(c, out.data(), ref.data(), n * count);
}

template <class T>
void check_sum_scatter(Ctx& c, int dtype, size_t count, bool inplace) {
  const int salt = c.salt++;
  c.current = label("sum_scatter", dtype, count, inplace);
  const size_t n = static_cast<size_t>(c.size);
  const size_t at = static_cast<size_t>(c.rank) * count;
  std::vector<T> in(n * count), out(count), ref(count);
  fill_periodic(in.data(), 0, n * count,
                [&](size_t i) { return gen<T>(c.rank, i, salt); });
  fill_periodic(ref.data(), at, count,
                [&](size_t i) { return fold<T>(c, Op::Sum, i, salt); });
  const size_t bytes = count * sizeof(T);
  if (inplace) {
    c.g.sum_scatter(in.data(), in.data() + at, bytes, dtype);
    compare(c, in.data() + at, ref.data(), count);
    return;
  }
  junk(out);
  c.g.sum_scatter(in.data(), out.data(), bytes, dtype);
  compare(c, out.data(), ref.data(), count);
}

// Inexact float sums: every rank must end with the same bits.
template <class T>
void check_agreement(Ctx& c, int dtype, size_t count) {
  c.current = label("all_sum", dtype, count, false) + " agreement";
  std::vector<T> in(count), out(count),
      all(count * static_cast<size_t>(c.size));
  for (size_t i = 0; i < count; ++i) {
    uint32_t h = static_cast<uint32_t>(i * 2654435761u) ^
                 static_cast<uint32_t>(c.rank * 40503u);
    in[i] = T(static_cast<float>(h % 20001) / 7919.0f - 1.3f);
  }
  junk(out);
  c.g.all_sum(in.data(), out.data(), count * sizeof(T), dtype);
  c.g.all_gather(out.data(), all.data(), count * sizeof(T));
  for (int r = 0; r < c.size; ++r) {
    compare(c, all.data() + static_cast<size_t>(r) * count, out.data(), count,
            ("rank " + std::to_string(r) + " disagrees").c_str());
  }
}

void check_broadcast(Ctx& c, size_t n) {
  std::set<int> roots{0, c.size / 2, c.size - 1};
  for (int root : roots) {
    const int salt = c.salt++;
    c.current =
        "broadcast n=" + std::to_string(n) + " root=" + std::to_string(root);
    auto want = pattern(root, n, salt);
    std::vector<uint8_t> buf =
        c.rank == root ? want : std::vector<uint8_t>(n, 0xA5);
    c.g.broadcast(buf.data(), n, root);
    compare(c, buf.data(), want.data(), n);
  }
}

// send to the next rank, receive from the previous one (rank 0 sends first).
void check_ring_p2p(Ctx& c, size_t n) {
  if (c.size == 1)
    return;
  const int salt = c.salt++;
  c.current = "send/recv ring n=" + std::to_string(n);
  const int next = (c.rank + 1) % c.size, prev = (c.rank + c.size - 1) % c.size;
  auto out = pattern(c.rank, n, salt);
  std::vector<uint8_t> in(n, 0xA5);
  if (c.rank == 0) {
    c.g.send(out.data(), n, next);
    c.g.recv(in.data(), n, prev);
  } else {
    c.g.recv(in.data(), n, prev);
    c.g.send(out.data(), n, next);
  }
  auto want = pattern(prev, n, salt);
  compare(c, in.data(), want.data(), n);
}

// Every ordered pair (a, b) in one global order: a sends two messages of
// different sizes back to back, b receives them in order.
void check_pairs(Ctx& c, size_t n) {
  const int salt = c.salt++;
  for (int a = 0; a < c.size; ++a) {
    for (int b = 0; b < c.size; ++b) {
      if (a == b || (c.rank != a && c.rank != b))
        continue;
      c.current = "send/recv " + std::to_string(a) + "->" + std::to_string(b) +
                  " n=" + std::to_string(n);
      auto m1 = pattern(a * 16 + b, n, salt),
           m2 = pattern(a * 16 + b, n / 2 + 3, salt + 1);
      if (c.rank == a) {
        c.g.send(m1.data(), m1.size(), b);
        c.g.send(m2.data(), m2.size(), b);
      } else {
        std::vector<uint8_t> r1(m1.size(), 0xA5), r2(m2.size(), 0xA5);
        c.g.recv(r1.data(), r1.size(), a);
        c.g.recv(r2.data(), r2.size(), a);
        compare(c, r1.data(), m1.data(), m1.size(), "first message");
        compare(c, r2.data(), m2.data(), m2.size(), "second message");
      }
    }
  }
}

// A run of the same dtype-independent check over one dtype's type.
template <template <class> class Fn, class... A>
void with_dtype(int dtype, A&&... a) {
  dispatch(dtype,
           [&](auto tag) { Fn<typename decltype(tag)::type>::run(a...); });
}
template <class T>
struct Reduce {
  static void run(Ctx& c, Op op, int d, size_t n, bool ip,
                  bool generic = false) {
    if (takes<T>(op)) {
      check_reduce<T>(c, op, d, n, ip, generic);
    }
  }
};
template <class T>
struct Gather {
  static void run(Ctx& c, int d, size_t n, bool ip) {
    check_all_gather<T>(c, d, n, ip);
  }
};
template <class T>
struct Scatter {
  static void run(Ctx& c, int d, size_t n, bool ip) {
    check_sum_scatter<T>(c, d, n, ip);
  }
};

constexpr size_t k4MiB = size_t(4) << 20;

}  // namespace

void run_reductions(Ctx& c, const std::vector<size_t>& counts) {
  for (int d : kAllDtypes) {
    for (size_t n : counts) {
      for (bool ip : {false, true}) {
        for (Op op : {Op::Sum, Op::Max, Op::Min})
          with_dtype<Reduce>(d, c, op, d, n, ip);
      }
    }
  }
  for (Op op : {Op::Sum, Op::Max, Op::Min}) {
    check_specials<float16_t>(c, op, Float16);
    check_specials<bfloat16_t>(c, op, BFloat16);
    check_specials<float>(c, op, Float32);
    check_specials<double>(c, op, Float64);
  }
}

void run_all_reduce_ops(Ctx& c, const std::vector<size_t>& counts) {
  for (int d : kAllDtypes) {
    for (size_t n : counts) {
      for (bool ip : {false, true}) {
        for (Op op : {Op::Prod, Op::BitAnd, Op::BitOr, Op::BitXor})
          with_dtype<Reduce>(d, c, op, d, n, ip);
      }
    }
    // all_reduce(sum/max/min) is all_sum/all_max/all_min.
    for (Op op : {Op::Sum, Op::Max, Op::Min})
      with_dtype<Reduce>(d, c, op, d, size_t(1003), false, true);
  }
}

void run_gather_scatter(Ctx& c, const std::vector<size_t>& counts) {
  for (int d : kAllDtypes) {
    for (size_t n : counts) {
      for (bool ip : {false, true}) {
        with_dtype<Gather>(d, c, d, n, ip);
        with_dtype<Scatter>(d, c, d, n, ip);
      }
    }
  }
}

void run_edges(Ctx& c) {
  // Around the mesh/ring switch (64 KiB, 256 KiB at two ranks).
  for (size_t n :
       {size_t(16384), size_t(16385), size_t(65536), size_t(65537)}) {
    check_reduce<float>(c, Op::Sum, Float32, n, false);
    with_dtype<Gather>(Float32, c, Float32, n / 4, false);
    with_dtype<Scatter>(Float32, c, Float32, n / 4 + 1, false);
  }
  check_unaligned<float>(c, Op::Sum, Float32, 1003);
  check_unaligned<int64_t>(c, Op::Max, Int64, 20011);
  check_unaligned<C64>(c, Op::Min, Complex64, 7);
  check_unaligned<float16_t>(c, Op::Sum, Float16, 300007);
  check_agreement<float16_t>(c, Float16, 1003);
  check_agreement<bfloat16_t>(c, BFloat16, 300007);
  check_agreement<float>(c, Float32, 300007);
}

void run_big(Ctx& c, bool full) {
  auto big = [](int d) { return k4MiB / dtype_size(d) + 3; };
  check_reduce<float>(c, Op::Sum, Float32, big(Float32), false);
  if (!full) {
    return;
  }
  check_reduce<float>(c, Op::Sum, Float32, big(Float32), true);
  check_reduce<float16_t>(c, Op::Sum, Float16, big(Float16), false);
  check_reduce<int64_t>(c, Op::Sum, Int64, big(Int64), true);
  check_reduce<C64>(c, Op::Sum, Complex64, big(Complex64), false);
  check_reduce<float>(c, Op::Max, Float32, big(Float32), false);
  check_reduce<bfloat16_t>(c, Op::Min, BFloat16, big(BFloat16), true);
  check_all_gather<float>(c, Float32, big(Float32), false);
  check_all_gather<int32_t>(c, Int32, big(Int32), true);
  check_sum_scatter<float>(c, Float32, big(Float32), false);
  check_sum_scatter<uint16_t>(c, UInt16, big(UInt16), true);
}

void run_point_to_point(Ctx& c, const std::vector<size_t>& sizes,
                        const std::vector<size_t>& pair_sizes) {
  for (size_t n : sizes) {
    check_broadcast(c, n);
    check_ring_p2p(c, n);
  }
  for (size_t n : pair_sizes) {
    check_pairs(c, n);
  }
}

void check_barrier(Ctx& c, int rounds) {
  for (int k = 0; k < rounds; ++k) {
    c.current = "barrier round " + std::to_string(k);
    std::string stem = c.dir + "/barrier." + std::to_string(k) + ".";
    std::ofstream(stem + std::to_string(c.rank)) << "x";
    c.g.barrier();
    ++c.checks;
    for (int r = 0; r < c.size; ++r) {
      if (!fs::exists(stem + std::to_string(r))) {
        fail(c, "rank " + std::to_string(r) + " had not entered the barrier");
      }
    }
  }
}

void run_matrix(Ctx& c, bool full) {
  check_gen_period(c);
  const std::vector<size_t> counts =
      full ? std::vector<size_t>{0, 1, 7, 1000, 1003, 20011}
           : std::vector<size_t>{0, 1, 1003};
  // The extra ops at the reduced counts: they share the algorithms of
  // all_sum, which the full counts exercise.
  const std::vector<size_t> few = {0, 1, 1003};
  run_reductions(c, counts);
  run_all_reduce_ops(c, few);
  run_gather_scatter(c, counts);
  run_rooted(c, few);
  run_edges(c);
  run_big(c, full);
  run_point_to_point(c, {0, 1, 7, 1003, full ? k4MiB + 3 : size_t(70001)},
                     full ? std::vector<size_t>{1, 1003, 70001}
                          : std::vector<size_t>{1, 1003});
  check_barrier(c, 3);
  run_all_to_all(c, full);
  run_usage_errors(c);
  run_zero_bytes(c);
}

void run_huge(Ctx& c) {
  const size_t count = (size_t(64) << 20) / 4 + 5;
  check_reduce<float>(c, Op::Sum, Float32, count, false);
  check_reduce<float>(c, Op::Sum, Float32, count, true);
}

}  // namespace jaccl::test::group_conformance
