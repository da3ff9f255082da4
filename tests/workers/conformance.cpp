// Copyright 2026 the jaccl authors.
// One rank of the conformance suite: runs every collective over a matrix of
// dtypes, sizes and in-place variants on deterministic per-rank inputs and
// checks each result against a reference computed here, independently of the
// library's reduction kernels (small integer-valued inputs make float sums
// exact, so every reduction order gives the same bits).
//
// all_to_all and all_to_allv: conformance_a2a.h.
//
// Environment: JACCL_* (Config::from_env); CONF_MATRIX = full | reduced | big;
// CONF_DIR a directory shared by the ranks (barrier check); TEST_SIDE_DIR, if
// set, bootstraps through a shared-directory all-gather factory instead of
// the TCP coordinator.
//
// Prints "FAIL <check>: ..." for the first mismatches and one line
// "SUMMARY rank=R size=N backend=B checks=C failures=F"; exits 0 when every
// check passed, 1 on a mismatch, 2 on an exception ("ERROR <kind> during
// <check>: <what>").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "jaccl/jaccl.h"
#include "support/dir_allgather.h"

namespace {

namespace fs = std::filesystem;

// ---- element types and reference semantics -------------------------------

struct B8 {
  uint8_t v;
};
struct C64 {
  float re, im;
};
template <class T>
struct Tag {
  using type = T;
};
template <class T>
constexpr bool is_half =
    std::is_same_v<T, jaccl::float16_t> || std::is_same_v<T, jaccl::bfloat16_t>;

template <class F>
void dispatch(int dtype, F&& f) {
  switch (dtype) {
    case jaccl::Bool:
      return f(Tag<B8>{});
    case jaccl::Int8:
      return f(Tag<int8_t>{});
    case jaccl::Int16:
      return f(Tag<int16_t>{});
    case jaccl::Int32:
      return f(Tag<int32_t>{});
    case jaccl::Int64:
      return f(Tag<int64_t>{});
    case jaccl::UInt8:
      return f(Tag<uint8_t>{});
    case jaccl::UInt16:
      return f(Tag<uint16_t>{});
    case jaccl::UInt32:
      return f(Tag<uint32_t>{});
    case jaccl::UInt64:
      return f(Tag<uint64_t>{});
    case jaccl::Float16:
      return f(Tag<jaccl::float16_t>{});
    case jaccl::BFloat16:
      return f(Tag<jaccl::bfloat16_t>{});
    case jaccl::Float32:
      return f(Tag<float>{});
    case jaccl::Float64:
      return f(Tag<double>{});
    case jaccl::Complex64:
      return f(Tag<C64>{});
  }
  throw std::logic_error("bad dtype");
}

// A small integer in [-8, 8], different per rank, element and salt.
int base(int r, size_t i, int salt) {
  return static_cast<int>((static_cast<size_t>(r) * 7 + (i % 17) * 13 +
                           static_cast<size_t>(salt) * 5 + (i / 17) % 5) %
                          17) -
         8;
}

// Integers use most of their range (sums wrap, as documented); floats stay
// small multiples of a power of two (sums are exact in every type).
template <class T>
T gen(int r, size_t i, int salt) {
  const int b = base(r, i, salt);
  const int lo = static_cast<int>((i + static_cast<size_t>(r)) % 3);
  if constexpr (std::is_same_v<T, B8>) {
    size_t k = i % 5;
    return B8{static_cast<uint8_t>(
        k == 0   ? 0
        : k == 1 ? 1
                 : (i / 5 + static_cast<size_t>(r + salt)) % 2)};
  } else if constexpr (std::is_same_v<T, C64>) {
    return C64{static_cast<float>(b) * 0.5f,
               static_cast<float>(base(r, i, salt + 1)) * 0.25f};
  } else if constexpr (is_half<T>) {
    return T(static_cast<float>(b) * 0.5f);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(b) / static_cast<T>(sizeof(T) == 4 ? 4 : 8);
  } else {
    // Scale so that |value| * 8 ranks overflows: wrapping is exercised.
    constexpr int bits = static_cast<int>(sizeof(T) * 8);
    using U = std::make_unsigned_t<T>;
    const U scale = static_cast<U>(
        bits == 8    ? 15
        : bits == 16 ? 4000
        : bits == 32 ? (std::is_signed_v<T> ? 260000000u : 250000000u)
                     : (uint64_t(1) << 59));
    const int v = std::is_signed_v<T> ? b : b + 8;
    return static_cast<T>(static_cast<U>(static_cast<U>(v) * scale) +
                          static_cast<U>(lo));
  }
}

// gen() repeats in i with this period (base() through i % 17 and
// (i / 17) % 5, the low bits through i % 3, bool through i % 5 and
// (i / 5) % 2), so a reference is computed over one period and copied: the
// O(count x ranks) reference had been three quarters of an 8-rank run.
// main() checks the period before anything relies on it.
constexpr size_t kGenPeriod = 510;

// out[k] = value(first + k) for k < count, evaluating value() only over
// the first period.
template <class T, class F>
void fill_periodic(T* out, size_t first, size_t count, F value) {
  const size_t head = std::min(count, kGenPeriod);
  for (size_t k = 0; k < head; ++k)
    out[k] = value(first + k);
  for (size_t k = head; k < count; ++k)
    out[k] = out[k - kGenPeriod];
}

template <class T>
bool gen_is_periodic(int ranks) {
  for (int r = 0; r < ranks; ++r) {
    for (int salt : {0, 1, 77}) {
      for (size_t i = 0; i < 2 * kGenPeriod; ++i) {
        const T a = gen<T>(r, i, salt), b = gen<T>(r, i + kGenPeriod, salt);
        if (std::memcmp(&a, &b, sizeof(T)) != 0)
          return false;
      }
    }
  }
  return true;
}

enum class Op { Sum, Max, Min };
const char* op_name(Op op) {
  return op == Op::Sum ? "all_sum" : op == Op::Max ? "all_max" : "all_min";
}

template <class F>
F fmax_ref(F a, F b) {
  if (std::isnan(a))
    return a;
  if (std::isnan(b))
    return b;
  if (a == b)
    return std::signbit(a) ? b : a;  // max(-0, +0) = +0
  return a > b ? a : b;
}
template <class F>
F fmin_ref(F a, F b) {
  if (std::isnan(a))
    return a;
  if (std::isnan(b))
    return b;
  if (a == b)
    return std::signbit(a) ? a : b;  // min(-0, +0) = -0
  return a < b ? a : b;
}

template <class T>
T apply(Op op, T a, T b) {
  if constexpr (std::is_same_v<T, B8>) {
    return B8{
        static_cast<uint8_t>(op == Op::Min ? (a.v && b.v) : (a.v || b.v))};
  } else if constexpr (std::is_same_v<T, C64>) {
    if (op == Op::Sum)
      return C64{a.re + b.re, a.im + b.im};
    bool a_gt = a.re > b.re || (a.re == b.re && a.im > b.im);
    bool a_lt = a.re < b.re || (a.re == b.re && a.im < b.im);
    return (op == Op::Max ? a_gt : a_lt) ? a : b;
  } else if constexpr (is_half<T>) {
    return T(apply<float>(op, static_cast<float>(a), static_cast<float>(b)));
  } else if constexpr (std::is_floating_point_v<T>) {
    return op == Op::Sum   ? a + b
           : op == Op::Max ? fmax_ref(a, b)
                           : fmin_ref(a, b);
  } else {
    using U = std::make_unsigned_t<T>;
    if (op == Op::Sum)
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    return op == Op::Max ? (a < b ? b : a) : (b < a ? b : a);
  }
}

template <class T>
bool same(const T& a, const T& b) {
  if constexpr (is_half<T>) {
    if (std::isnan(static_cast<float>(a)) && std::isnan(static_cast<float>(b)))
      return true;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) && std::isnan(b))
      return true;
  } else if constexpr (std::is_same_v<T, C64>) {
    return same(a.re, b.re) && same(a.im, b.im);
  }
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
std::string show(const T& v) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, B8>) {
    os << int(v.v);
  } else if constexpr (std::is_same_v<T, C64>) {
    os << "(" << v.re << "," << v.im << ")";
  } else if constexpr (is_half<T>) {
    os << static_cast<float>(v) << " [0x" << std::hex << v.bits << "]";
  } else if constexpr (sizeof(T) == 1) {
    os << int(v);
  } else {
    os << v;
  }
  return os.str();
}

// ---- the run --------------------------------------------------------------

struct Ctx {
  std::shared_ptr<jaccl::Group> group;
  jaccl::Group& g;
  int rank, size;
  std::string dir;
  long checks = 0, failures = 0;
  // An FNV-1a-style hash over every result checked, in order: the same on
  // runs that must produce bit-identical results (JACCL_SHM_STRATEGY forced
  // each way).
  uint64_t digest = 0xcbf29ce484222325ull;
  int salt = 0;
  std::string current;  // the check in progress, for error messages
};

void fail(Ctx& c, const std::string& msg) {
  if (++c.failures <= 20)
    std::cout << "FAIL " << c.current << ": " << msg << std::endl;
}

template <class T>
void compare(Ctx& c, const T* got, const T* want, size_t count,
             const char* what = "result") {
  ++c.checks;
  // Eight bytes a step (a byte a step was the slowest part of a big check).
  const auto* bytes = reinterpret_cast<const unsigned char*>(got);
  const size_t len = count * sizeof(T);
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes + i, 8);
    c.digest = (c.digest ^ w) * 0x100000001b3ull;
  }
  for (; i < len; ++i)
    c.digest = (c.digest ^ bytes[i]) * 0x100000001b3ull;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!same(got[i], want[i]) && bad++ == 0)
      first = i;
  }
  if (bad > 0) {
    fail(c, std::string(what) + ": " + std::to_string(bad) + " of " +
                std::to_string(count) + " elements differ, first at " +
                std::to_string(first) + ": got " + show(got[first]) +
                ", want " + show(want[first]));
  }
}

template <class T>
void junk(std::vector<T>& v) {
  if (!v.empty())  // an empty vector's data() may be null
    std::memset(static_cast<void*>(v.data()), 0xA5, v.size() * sizeof(T));
}

void call_reduce(jaccl::Group& g, Op op, const void* in, void* out, size_t n,
                 int dtype) {
  if (op == Op::Sum)
    g.all_sum(in, out, n, dtype);
  if (op == Op::Max)
    g.all_max(in, out, n, dtype);
  if (op == Op::Min)
    g.all_min(in, out, n, dtype);
}

std::string label(const char* op, int dtype, size_t count, bool inplace) {
  return std::string(op) + " " + jaccl::dtype_name(dtype) +
         " n=" + std::to_string(count) + (inplace ? " in-place" : "");
}

// Element i of the reduction over every rank's gen() input.
template <class T>
T fold(const Ctx& c, Op op, size_t i, int salt) {
  T acc = gen<T>(0, i, salt);
  for (int r = 1; r < c.size; ++r)
    acc = apply(op, acc, gen<T>(r, i, salt));
  return acc;
}

template <class T>
void check_reduce(Ctx& c, Op op, int dtype, size_t count, bool inplace) {
  const int salt = c.salt++;
  c.current = label(op_name(op), dtype, count, inplace);
  std::vector<T> in(count), out(count), ref(count);
  fill_periodic(in.data(), 0, count,
                [&](size_t i) { return gen<T>(c.rank, i, salt); });
  fill_periodic(ref.data(), 0, count,
                [&](size_t i) { return fold<T>(c, op, i, salt); });
  const size_t bytes = count * sizeof(T);
  if (inplace) {
    call_reduce(c.g, op, in.data(), in.data(), bytes, dtype);
    compare(c, in.data(), ref.data(), count);
    return;
  }
  const std::vector<T> keep = in;
  junk(out);
  call_reduce(c.g, op, in.data(), out.data(), bytes, dtype);
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
        return T(std::is_same_v<T, jaccl::float16_t> ? 65504.0f : 3.0e38f);
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

// A run of the same dtype-independent check over one dtype's type.
template <template <class> class Fn, class... A>
void with_dtype(int dtype, A&&... a) {
  dispatch(dtype,
           [&](auto tag) { Fn<typename decltype(tag)::type>::run(a...); });
}
template <class T>
struct Reduce {
  static void run(Ctx& c, Op op, int d, size_t n, bool ip) {
    check_reduce<T>(c, op, d, n, ip);
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

std::vector<uint8_t> pattern(int who, size_t n, int salt) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<uint8_t>((i * 31 + static_cast<size_t>(who) * 7 +
                                 static_cast<size_t>(salt) * 13 + (i >> 8)) &
                                0xff);
  }
  return v;
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

// Nobody leaves a barrier before every rank has entered it.
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

}  // namespace

#include "conformance_a2a.h"  // uses the helpers above

namespace {

constexpr int kAllDtypes[] = {jaccl::Bool,    jaccl::Int8,     jaccl::Int16,
                              jaccl::Int32,   jaccl::Int64,    jaccl::UInt8,
                              jaccl::UInt16,  jaccl::UInt32,   jaccl::UInt64,
                              jaccl::Float16, jaccl::BFloat16, jaccl::Float32,
                              jaccl::Float64, jaccl::Complex64};
constexpr size_t k4MiB = size_t(4) << 20;

void run_matrix(Ctx& c, bool full) {
  const std::vector<size_t> counts =
      full ? std::vector<size_t>{0, 1, 7, 1000, 1003, 20011}
           : std::vector<size_t>{0, 1, 1003};
  for (int d : kAllDtypes) {
    for (size_t n : counts) {
      for (bool ip : {false, true}) {
        for (Op op : {Op::Sum, Op::Max, Op::Min})
          with_dtype<Reduce>(d, c, op, d, n, ip);
        with_dtype<Gather>(d, c, d, n, ip);
        with_dtype<Scatter>(d, c, d, n, ip);
      }
    }
  }
  for (Op op : {Op::Sum, Op::Max, Op::Min}) {
    check_specials<jaccl::float16_t>(c, op, jaccl::Float16);
    check_specials<jaccl::bfloat16_t>(c, op, jaccl::BFloat16);
    check_specials<float>(c, op, jaccl::Float32);
    check_specials<double>(c, op, jaccl::Float64);
  }
  // Around the mesh/ring switch (64 KiB, 256 KiB at two ranks).
  for (size_t n :
       {size_t(16384), size_t(16385), size_t(65536), size_t(65537)}) {
    check_reduce<float>(c, Op::Sum, jaccl::Float32, n, false);
    with_dtype<Gather>(jaccl::Float32, c, jaccl::Float32, n / 4, false);
    with_dtype<Scatter>(jaccl::Float32, c, jaccl::Float32, n / 4 + 1, false);
  }
  check_unaligned<float>(c, Op::Sum, jaccl::Float32, 1003);
  check_unaligned<int64_t>(c, Op::Max, jaccl::Int64, 20011);
  check_unaligned<C64>(c, Op::Min, jaccl::Complex64, 7);
  check_unaligned<jaccl::float16_t>(c, Op::Sum, jaccl::Float16, 300007);
  check_agreement<jaccl::float16_t>(c, jaccl::Float16, 1003);
  check_agreement<jaccl::bfloat16_t>(c, jaccl::BFloat16, 300007);
  check_agreement<float>(c, jaccl::Float32, 300007);
  // 4 MiB plus a few elements, so no chunking divides it evenly.
  auto big = [](int d) { return k4MiB / jaccl::dtype_size(d) + 3; };
  check_reduce<float>(c, Op::Sum, jaccl::Float32, big(jaccl::Float32), false);
  if (full) {
    check_reduce<float>(c, Op::Sum, jaccl::Float32, big(jaccl::Float32), true);
    check_reduce<jaccl::float16_t>(c, Op::Sum, jaccl::Float16,
                                   big(jaccl::Float16), false);
    check_reduce<int64_t>(c, Op::Sum, jaccl::Int64, big(jaccl::Int64), true);
    check_reduce<C64>(c, Op::Sum, jaccl::Complex64, big(jaccl::Complex64),
                      false);
    check_reduce<float>(c, Op::Max, jaccl::Float32, big(jaccl::Float32), false);
    check_reduce<jaccl::bfloat16_t>(c, Op::Min, jaccl::BFloat16,
                                    big(jaccl::BFloat16), true);
    check_all_gather<float>(c, jaccl::Float32, big(jaccl::Float32), false);
    check_all_gather<int32_t>(c, jaccl::Int32, big(jaccl::Int32), true);
    check_sum_scatter<float>(c, jaccl::Float32, big(jaccl::Float32), false);
    check_sum_scatter<uint16_t>(c, jaccl::UInt16, big(jaccl::UInt16), true);
  }
  for (size_t n : {size_t(0), size_t(1), size_t(7), size_t(1003),
                   full ? k4MiB + 3 : size_t(70001)}) {
    check_broadcast(c, n);
    check_ring_p2p(c, n);
  }
  for (size_t n : full ? std::vector<size_t>{1, 1003, 70001}
                       : std::vector<size_t>{1, 1003}) {
    check_pairs(c, n);
  }
  check_barrier(c, 3);
  run_all_to_all(c, full);
}

// 64 MiB of float32 (plus a few elements), out of place and in place.
void run_big(Ctx& c) {
  const size_t count = (size_t(64) << 20) / 4 + 5;
  check_reduce<float>(c, Op::Sum, jaccl::Float32, count, false);
  check_reduce<float>(c, Op::Sum, jaccl::Float32, count, true);
}

}  // namespace

int main() {
  const char* matrix_env = std::getenv("CONF_MATRIX");
  const std::string matrix = matrix_env ? matrix_env : "full";
  const char* dir_env = std::getenv("CONF_DIR");
  std::string current = "init";
  try {
    jaccl::Config cfg = jaccl::Config::from_env();
    if (const char* side = std::getenv("TEST_SIDE_DIR")) {
      std::string dir = side;
      cfg.set_all_gather_factory([dir](int rank, int size) {
        return jaccl::test::dir_all_gather(dir, rank, size);
      });
    }
    auto group = jaccl::init(cfg, true);
    Ctx c{group, *group, group->rank(), group->size(),
          dir_env ? dir_env : "/tmp"};
    for (int d : kAllDtypes) {
      dispatch(d, [&](auto tag) {
        if (!gen_is_periodic<typename decltype(tag)::type>(c.size)) {
          c.current = std::string("gen period, ") + jaccl::dtype_name(d);
          fail(c, "gen() does not repeat every kGenPeriod elements");
        }
      });
    }
    try {
      if (matrix == "big") {
        run_big(c);
      } else {
        run_matrix(c, matrix == "full");
      }
    } catch (...) {
      current = c.current;
      throw;
    }
    std::cout << "SUMMARY rank=" << c.rank << " size=" << c.size
              << " backend=" << group->backend_name() << " checks=" << c.checks
              << " failures=" << c.failures << " digest=" << std::hex
              << c.digest << std::dec << std::endl;
    return c.failures == 0 ? 0 : 1;
  } catch (const jaccl::Error& e) {
    std::cout << "ERROR " << jaccl::to_string(e.kind()) << " during " << current
              << ": " << e.what() << std::endl;
  } catch (const std::exception& e) {
    std::cout << "ERROR std::exception during " << current << ": " << e.what()
              << std::endl;
  }
  return 2;
}
