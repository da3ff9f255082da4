// Copyright 2026 the jaccl authors.
// Element-wise reductions: every op x dtype against a straightforward
// reference written here, over odd counts, unaligned pointers and aliasing,
// for both the portable kernels and any CPU-specific ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/reduce.h"
#include "jaccl/error.h"
#include "jaccl/types.h"

namespace {

using jaccl::detail::checked_count;
using jaccl::detail::reduce3;
using jaccl::detail::reduce_into;
using jaccl::detail::ReduceOp;

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min};
constexpr int kNumDtypes = jaccl::Complex64 + 1;

// ---- reference semantics ----

// Correctly rounded value of d in a binary format with p significant bits,
// minimum normal exponent emin and the given overflow threshold (the tie
// between the largest finite value and the next power of two).
double round_to_format(double d, int p, int emin, double overflow) {
  if (std::isnan(d)) {
    return d;
  }
  const double a = std::fabs(d);
  double r;
  if (a >= overflow) {
    r = std::numeric_limits<double>::infinity();
  } else if (a == 0) {
    r = 0;
  } else {
    const int e = std::max(std::ilogb(a), emin);
    const double q = std::ldexp(1.0, e - (p - 1));
    r = std::nearbyint(a / q) * q;  // default mode: ties to even
  }
  return std::copysign(r, d);
}
double round_half(double d) {
  return round_to_format(d, 11, -14, 65520.0);
}
double round_bf16(double d) {
  return round_to_format(d, 8, -126, std::ldexp(2.0 - 0x1p-8, 127));
}

template <class F>
F ref_float(ReduceOp op, F a, F b) {
  if (op == ReduceOp::Sum) {
    return a + b;
  }
  if (std::isnan(a)) {
    return a;
  }
  if (std::isnan(b)) {
    return b;
  }
  if (a == b) {  // only +0 / -0 can differ: max prefers +0, min -0
    const bool pick_a = (op == ReduceOp::Max) != std::signbit(a);
    return pick_a ? a : b;
  }
  if (op == ReduceOp::Max) {
    return a > b ? a : b;
  }
  return a < b ? a : b;
}

template <class T>
T ref_int(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::Sum:
      return static_cast<T>(static_cast<uint64_t>(a) +
                            static_cast<uint64_t>(b));
    case ReduceOp::Max:
      return std::max(a, b);
    case ReduceOp::Min:
      return std::min(a, b);
  }
  return 0;
}

struct Cplx {
  float re, im;
};

Cplx ref_complex(ReduceOp op, Cplx a, Cplx b) {
  if (op == ReduceOp::Sum) {
    return {a.re + b.re, a.im + b.im};
  }
  if (std::isnan(a.re) || std::isnan(a.im)) {
    return a;
  }
  if (std::isnan(b.re) || std::isnan(b.im)) {
    return b;
  }
  if (a.re == b.re && a.im == b.im) {
    return {ref_float(op, a.re, b.re), ref_float(op, a.im, b.im)};
  }
  const bool a_greater = a.re > b.re || (a.re == b.re && a.im > b.im);
  return (op == ReduceOp::Max) == a_greater ? a : b;
}

template <class T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// Same value: NaN matches any NaN, everything else (including the sign of
// zero) must match exactly.
bool same_double(double got, double want) {
  if (std::isnan(want)) {
    return std::isnan(got);
  }
  return got == want && std::signbit(got) == std::signbit(want);
}

template <class T>
std::string show(T v) {
  std::ostringstream s;
  if constexpr (sizeof(T) == 1) {
    s << static_cast<int>(v);
  } else {
    s << v;
  }
  return s.str();
}

// Empty if got holds op(a, b) for one element, else a description.
std::string check_element(ReduceOp op, int dtype, const uint8_t* a,
                          const uint8_t* b, const uint8_t* got) {
  auto integer = [&](auto tag) -> std::string {
    using T = decltype(tag);
    const T want = ref_int(op, get<T>(a), get<T>(b));
    if (get<T>(got) == want) {
      return "";
    }
    return show(get<T>(a)) + " , " + show(get<T>(b)) + " -> " +
           show(get<T>(got)) + ", want " + show(want);
  };
  auto floating = [&](auto tag) -> std::string {
    using F = decltype(tag);
    const F want = ref_float(op, get<F>(a), get<F>(b));
    if (same_double(get<F>(got), want)) {
      return "";
    }
    return show(get<F>(a)) + " , " + show(get<F>(b)) + " -> " +
           show(get<F>(got)) + ", want " + show(want);
  };
  auto sixteen = [&](auto tag, double (*rounder)(double)) -> std::string {
    using H = decltype(tag);
    const double x = static_cast<float>(H::from_bits(get<uint16_t>(a)));
    const double y = static_cast<float>(H::from_bits(get<uint16_t>(b)));
    // Two 16-bit floats add exactly in double (bf16 up to a rounding that
    // cannot change the final one), so this is the correctly rounded sum.
    const double want =
        op == ReduceOp::Sum ? rounder(x + y) : ref_float(op, x, y);
    const double g = static_cast<float>(H::from_bits(get<uint16_t>(got)));
    if (same_double(g, want)) {
      return "";
    }
    return show(x) + " , " + show(y) + " -> " + show(g) + ", want " +
           show(want);
  };
  switch (dtype) {
    case jaccl::Bool: {
      const bool x = a[0] != 0;
      const bool y = b[0] != 0;
      const uint8_t want = op == ReduceOp::Min ? (x && y) : (x || y);
      if (got[0] == want) {
        return "";
      }
      return show(a[0]) + " , " + show(b[0]) + " -> " + show(got[0]);
    }
    case jaccl::Int8:
      return integer(int8_t{});
    case jaccl::Int16:
      return integer(int16_t{});
    case jaccl::Int32:
      return integer(int32_t{});
    case jaccl::Int64:
      return integer(int64_t{});
    case jaccl::UInt8:
      return integer(uint8_t{});
    case jaccl::UInt16:
      return integer(uint16_t{});
    case jaccl::UInt32:
      return integer(uint32_t{});
    case jaccl::UInt64:
      return integer(uint64_t{});
    case jaccl::Float16:
      return sixteen(jaccl::float16_t{}, round_half);
    case jaccl::BFloat16:
      return sixteen(jaccl::bfloat16_t{}, round_bf16);
    case jaccl::Float32:
      return floating(float{});
    case jaccl::Float64:
      return floating(double{});
    case jaccl::Complex64: {
      const Cplx x{get<float>(a), get<float>(a + 4)};
      const Cplx y{get<float>(b), get<float>(b + 4)};
      const Cplx want = ref_complex(op, x, y);
      const Cplx g{get<float>(got), get<float>(got + 4)};
      if (same_double(g.re, want.re) && same_double(g.im, want.im)) {
        return "";
      }
      return "(" + show(x.re) + "," + show(x.im) + ") , (" + show(y.re) + "," +
             show(y.im) + ") -> (" + show(g.re) + "," + show(g.im) +
             "), want (" + show(want.re) + "," + show(want.im) + ")";
    }
    default:
      return "bad dtype";
  }
}

// ---- inputs ----

float special_float(std::mt19937& rng) {
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::denorm_min(),
                            65504.0f,
                            0x1p-24f};
  return specials[rng() % std::size(specials)];
}

template <class F>
F random_float(std::mt19937& rng) {
  switch (rng() % 4) {
    case 0:
      return static_cast<F>(special_float(rng));
    case 1: {
      F v;
      uint64_t bits = (static_cast<uint64_t>(rng()) << 32) | rng();
      std::memcpy(&v, &bits, sizeof v);
      return v;
    }
    default:
      return static_cast<F>(
          std::uniform_real_distribution<double>(-100, 100)(rng));
  }
}

uint16_t random_sixteen(std::mt19937& rng, bool half) {
  switch (rng() % 3) {
    case 0:
      return static_cast<uint16_t>(rng());
    case 1: {
      const float f = special_float(rng);
      return half ? jaccl::float16_t(f).bits : jaccl::bfloat16_t(f).bits;
    }
    default: {
      const float f =
          std::uniform_real_distribution<float>(-3000.0f, 3000.0f)(rng);
      return half ? jaccl::float16_t(f).bits : jaccl::bfloat16_t(f).bits;
    }
  }
}

// Random elements for a and b, with b often related to a (equal, negated,
// same real part) so ties and signed zeros are exercised.
void fill_inputs(int dtype, uint8_t* a, uint8_t* b, size_t count,
                 std::mt19937& rng) {
  const size_t s = jaccl::dtype_size(dtype);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* x = a + i * s;
    uint8_t* y = b + i * s;
    for (uint8_t* p : {x, y}) {
      switch (dtype) {
        case jaccl::Float16:
        case jaccl::BFloat16:
          put(p, random_sixteen(rng, dtype == jaccl::Float16));
          break;
        case jaccl::Float32:
          put(p, random_float<float>(rng));
          break;
        case jaccl::Float64:
          put(p, random_float<double>(rng));
          break;
        case jaccl::Complex64:
          put(p, random_float<float>(rng));
          put(p + 4, random_float<float>(rng));
          break;
        default:  // integers and bool: any bytes (bool: any nonzero is true)
          for (size_t k = 0; k < s; ++k) {
            p[k] = static_cast<uint8_t>(rng());
          }
      }
    }
    switch (rng() % 8) {
      case 0:  // equal
        std::memcpy(y, x, s);
        break;
      case 1:  // sign bit flipped (floats: -x, or -0 vs +0)
        std::memcpy(y, x, s);
        y[s - 1] ^= 0x80;
        break;
      case 2:  // complex: same real part, so the imaginary part decides
        if (dtype == jaccl::Complex64) {
          std::memcpy(y, x, 4);
        }
        break;
      default:
        break;
    }
  }
}

// ---- the sweep ----

enum class Mode { Distinct, OutIsA, OutIsB, Into };

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::Distinct:
      return "distinct";
    case Mode::OutIsA:
      return "out==a";
    case Mode::OutIsB:
      return "out==b";
    case Mode::Into:
      return "reduce_into";
  }
  return "?";
}

constexpr uint8_t kGuard = 0xA5;
constexpr size_t kSlack = 32;

// One reduction, checked element by element and for writes outside [0, count).
void run_case(ReduceOp op, int dtype, size_t count, Mode mode, size_t off_out,
              size_t off_a, size_t off_b, std::mt19937& rng) {
  const size_t s = jaccl::dtype_size(dtype);
  const size_t bytes = count * s;
  std::vector<uint8_t> a0(bytes + 1), b0(bytes + 1);  // +1: never empty
  fill_inputs(dtype, a0.data(), b0.data(), count, rng);

  std::vector<uint8_t> abuf(bytes + 2 * kSlack, kGuard);
  std::vector<uint8_t> bbuf(bytes + 2 * kSlack, kGuard);
  std::vector<uint8_t> obuf(bytes + 2 * kSlack, kGuard);
  uint8_t* a = abuf.data() + off_a;
  uint8_t* b = bbuf.data() + off_b;
  std::memcpy(a, a0.data(), bytes);
  std::memcpy(b, b0.data(), bytes);

  uint8_t* out = nullptr;
  std::vector<uint8_t>* outbuf = nullptr;
  switch (mode) {
    case Mode::Distinct:
      out = obuf.data() + off_out;
      outbuf = &obuf;
      reduce3(op, dtype, out, a, b, count);
      break;
    case Mode::OutIsA:
      out = a;
      outbuf = &abuf;
      reduce3(op, dtype, a, a, b, count);
      break;
    case Mode::OutIsB:
      out = b;
      outbuf = &bbuf;
      reduce3(op, dtype, b, a, b, count);
      break;
    case Mode::Into:
      out = a;
      outbuf = &abuf;
      reduce_into(op, dtype, a, b, count);
      break;
  }

  const std::string where = std::string(jaccl::detail::op_name(op)) + " " +
                            jaccl::dtype_name(dtype) + " count " +
                            std::to_string(count) + " " + mode_name(mode) +
                            " offsets " + std::to_string(off_out) + "/" +
                            std::to_string(off_a) + "/" + std::to_string(off_b);
  int failures = 0;
  for (size_t i = 0; i < count && failures < 5; ++i) {
    const std::string err = check_element(op, dtype, a0.data() + i * s,
                                          b0.data() + i * s, out + i * s);
    if (!err.empty()) {
      ADD_FAILURE() << where << " element " << i << ": " << err;
      ++failures;
    }
  }
  // Nothing written outside the output range; inputs that are not the output
  // are left untouched.
  const size_t begin = static_cast<size_t>(out - outbuf->data());
  for (size_t k = 0; k < outbuf->size(); ++k) {
    if (k < begin || k >= begin + bytes) {
      ASSERT_EQ((*outbuf)[k], kGuard) << where << " wrote byte " << k;
    }
  }
  if (out != a) {
    ASSERT_EQ(std::memcmp(a, a0.data(), bytes), 0) << where << " changed a";
  }
  if (out != b) {
    ASSERT_EQ(std::memcmp(b, b0.data(), bytes), 0) << where << " changed b";
  }
}

class ReduceSweep : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { jaccl::detail::reduce_force_portable(GetParam()); }
  void TearDown() override { jaccl::detail::reduce_force_portable(false); }
};

TEST_P(ReduceSweep, EveryOpDtypeCountLayout) {
  std::mt19937 rng(2026);
  const size_t counts[] = {0, 1, 7, 1000, 4099};
  struct Offsets {
    size_t out, a, b;
  };
  const Offsets offsets[] = {{0, 0, 0}, {1, 3, 5}, {7, 2, 1}};
  const Mode modes[] = {Mode::Distinct, Mode::OutIsA, Mode::OutIsB, Mode::Into};
  for (ReduceOp op : kOps) {
    for (int dtype = 0; dtype < kNumDtypes; ++dtype) {
      for (size_t count : counts) {
        for (const auto& o : offsets) {
          for (Mode mode : modes) {
            run_case(op, dtype, count, mode, o.out, o.a, o.b, rng);
            if (HasFatalFailure()) {
              return;
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReduceSweep, ::testing::Values(false, true),
                         [](const auto& info) {
                           return info.param ? std::string("Portable")
                                             : std::string("Dispatched");
                         });

// ---- targeted semantics ----

template <class T>
std::vector<T> reduce_vec(ReduceOp op, int dtype, std::vector<T> a,
                          const std::vector<T>& b) {
  const size_t count = a.size() * sizeof(T) / jaccl::dtype_size(dtype);
  reduce_into(op, dtype, a.data(), b.data(), count);
  return a;
}

TEST(Reduce, IntegerWraparound) {
  using L8 = std::numeric_limits<int8_t>;
  EXPECT_EQ(reduce_vec<int8_t>(ReduceOp::Sum, jaccl::Int8, {L8::max()}, {1}),
            std::vector<int8_t>{L8::min()});
  EXPECT_EQ(reduce_vec<uint8_t>(ReduceOp::Sum, jaccl::UInt8, {255}, {1}),
            std::vector<uint8_t>{0});
  using L16 = std::numeric_limits<int16_t>;
  EXPECT_EQ(
      reduce_vec<int16_t>(ReduceOp::Sum, jaccl::Int16, {L16::min()}, {-1}),
      std::vector<int16_t>{L16::max()});
  using L32 = std::numeric_limits<int32_t>;
  EXPECT_EQ(reduce_vec<int32_t>(ReduceOp::Sum, jaccl::Int32, {L32::max()},
                                {L32::max()}),
            std::vector<int32_t>{-2});
  using L64 = std::numeric_limits<int64_t>;
  EXPECT_EQ(reduce_vec<int64_t>(ReduceOp::Sum, jaccl::Int64, {L64::max()}, {1}),
            std::vector<int64_t>{L64::min()});
  EXPECT_EQ(
      reduce_vec<uint64_t>(ReduceOp::Sum, jaccl::UInt64, {~uint64_t{0}}, {2}),
      std::vector<uint64_t>{1});
  // Signed comparisons for signed types, unsigned for unsigned.
  EXPECT_EQ(reduce_vec<int32_t>(ReduceOp::Max, jaccl::Int32, {-5}, {3}),
            std::vector<int32_t>{3});
  EXPECT_EQ(
      reduce_vec<uint32_t>(ReduceOp::Max, jaccl::UInt32, {0xfffffffbu}, {3}),
      std::vector<uint32_t>{0xfffffffbu});
  EXPECT_EQ(reduce_vec<int64_t>(ReduceOp::Min, jaccl::Int64, {-5}, {3}),
            std::vector<int64_t>{-5});
}

TEST(Reduce, BoolSemantics) {
  const std::vector<uint8_t> a = {0, 0, 1, 1, 2, 0xff, 0x80, 0};
  const std::vector<uint8_t> b = {0, 1, 0, 1, 0, 0x10, 0x80, 7};
  EXPECT_EQ(reduce_vec(ReduceOp::Sum, jaccl::Bool, a, b),
            (std::vector<uint8_t>{0, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(reduce_vec(ReduceOp::Max, jaccl::Bool, a, b),
            (std::vector<uint8_t>{0, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(reduce_vec(ReduceOp::Min, jaccl::Bool, a, b),
            (std::vector<uint8_t>{0, 0, 0, 1, 0, 1, 1, 0}));
}

TEST(Reduce, FloatNaNPropagatesAndZerosAreOrdered) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    const auto r = reduce_vec<float>(op, jaccl::Float32, {nan, 1.0f, nan, -inf},
                                     {1.0f, nan, nan, nan});
    for (float v : r) {
      EXPECT_TRUE(std::isnan(v)) << jaccl::detail::op_name(op);
    }
    const auto d = reduce_vec<double>(op, jaccl::Float64, {std::nan(""), 2.0},
                                      {3.0, std::nan("")});
    EXPECT_TRUE(std::isnan(d[0]) && std::isnan(d[1]));
  }
  // max(-0, +0) = +0 and min(-0, +0) = -0 whichever operand comes first.
  const auto mx = reduce_vec<float>(ReduceOp::Max, jaccl::Float32,
                                    {-0.0f, 0.0f}, {0.0f, -0.0f});
  EXPECT_FALSE(std::signbit(mx[0]));
  EXPECT_FALSE(std::signbit(mx[1]));
  const auto mn = reduce_vec<float>(ReduceOp::Min, jaccl::Float32,
                                    {-0.0f, 0.0f}, {0.0f, -0.0f});
  EXPECT_TRUE(std::signbit(mn[0]));
  EXPECT_TRUE(std::signbit(mn[1]));
  EXPECT_EQ(reduce_vec<float>(ReduceOp::Max, jaccl::Float32, {-inf}, {-1e30f}),
            std::vector<float>{-1e30f});
}

std::vector<uint16_t> half_bits(std::initializer_list<float> v) {
  std::vector<uint16_t> out;
  for (float f : v) {
    out.push_back(jaccl::float16_t(f).bits);
  }
  return out;
}
std::vector<uint16_t> bf16_bits(std::initializer_list<float> v) {
  std::vector<uint16_t> out;
  for (float f : v) {
    out.push_back(jaccl::bfloat16_t(f).bits);
  }
  return out;
}

class ReduceSixteen : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { jaccl::detail::reduce_force_portable(GetParam()); }
  void TearDown() override { jaccl::detail::reduce_force_portable(false); }
};

TEST_P(ReduceSixteen, HalfRoundsEachStep) {
  // Long enough to reach the block kernels, not just the scalar tail.
  for (size_t n : {size_t{1}, size_t{300}}) {
    std::vector<uint16_t> a(n, jaccl::float16_t(2048.0f).bits);
    std::vector<uint16_t> b(n, jaccl::float16_t(1.0f).bits);
    // 2049 is a tie between 2048 and 2050 -> even (2048), every element.
    for (uint16_t r : reduce_vec(ReduceOp::Sum, jaccl::Float16, a, b)) {
      ASSERT_EQ(r, jaccl::float16_t(2048.0f).bits);
    }
    std::fill(b.begin(), b.end(), jaccl::float16_t(3.0f).bits);
    for (uint16_t r : reduce_vec(ReduceOp::Sum, jaccl::Float16, a, b)) {
      ASSERT_EQ(r, jaccl::float16_t(2052.0f).bits);  // 2051 tie -> 2052
    }
  }
  EXPECT_EQ(reduce_vec(ReduceOp::Sum, jaccl::Float16,
                       half_bits({65504.0f, 65504.0f, 65504.0f, 0x1p-24f}),
                       half_bits({8.0f, 16.0f, 65504.0f, -0x1p-24f})),
            half_bits({65504.0f, 65520.0f /* inf */, 1e9f /* inf */, 0.0f}));
  const uint16_t nan = 0x7e00;
  const auto r = reduce_vec<uint16_t>(ReduceOp::Max, jaccl::Float16,
                                      {nan, 0x3c00}, {0x3c00, nan});
  for (uint16_t v : r) {
    EXPECT_TRUE(std::isnan(static_cast<float>(jaccl::float16_t::from_bits(v))));
  }
  EXPECT_EQ(
      reduce_vec<uint16_t>(ReduceOp::Max, jaccl::Float16, {0x8000}, {0x0000}),
      std::vector<uint16_t>{0x0000});
  EXPECT_EQ(
      reduce_vec<uint16_t>(ReduceOp::Min, jaccl::Float16, {0x0000}, {0x8000}),
      std::vector<uint16_t>{0x8000});
}

TEST_P(ReduceSixteen, BFloat16RoundsEachStep) {
  for (size_t n : {size_t{1}, size_t{300}}) {
    std::vector<uint16_t> a(n, jaccl::bfloat16_t(256.0f).bits);
    std::vector<uint16_t> b(n, jaccl::bfloat16_t(1.0f).bits);
    for (uint16_t r : reduce_vec(ReduceOp::Sum, jaccl::BFloat16, a, b)) {
      ASSERT_EQ(r, jaccl::bfloat16_t(256.0f).bits);  // 257 tie -> 256
    }
    std::fill(b.begin(), b.end(), jaccl::bfloat16_t(3.0f).bits);
    for (uint16_t r : reduce_vec(ReduceOp::Sum, jaccl::BFloat16, a, b)) {
      ASSERT_EQ(r, jaccl::bfloat16_t(260.0f).bits);  // 259 tie -> 260
    }
  }
  const uint16_t nan = 0x7fc0;
  const auto r = reduce_vec<uint16_t>(ReduceOp::Min, jaccl::BFloat16,
                                      {nan, 0x3f80}, {0x3f80, nan});
  for (uint16_t v : r) {
    EXPECT_TRUE(
        std::isnan(static_cast<float>(jaccl::bfloat16_t::from_bits(v))));
  }
  EXPECT_EQ(reduce_vec(ReduceOp::Max, jaccl::BFloat16, bf16_bits({-1.0f, 2.0f}),
                       bf16_bits({-2.0f, 1.0f})),
            bf16_bits({-1.0f, 2.0f}));
}

INSTANTIATE_TEST_SUITE_P(Kernels, ReduceSixteen, ::testing::Values(false, true),
                         [](const auto& info) {
                           return info.param ? std::string("Portable")
                                             : std::string("Dispatched");
                         });

TEST(Reduce, ComplexLexicographic) {
  // (re, im) pairs, interleaved.
  const std::vector<float> a = {1, 5, 2, -1, 1, 7, -3, 0, 4, 4};
  const std::vector<float> b = {1, 7, 1, 100, 1, 5, -3, 0, 4, 4};
  EXPECT_EQ(reduce_vec(ReduceOp::Max, jaccl::Complex64, a, b),
            (std::vector<float>{1, 7, 2, -1, 1, 7, -3, 0, 4, 4}));
  EXPECT_EQ(reduce_vec(ReduceOp::Min, jaccl::Complex64, a, b),
            (std::vector<float>{1, 5, 1, 100, 1, 5, -3, 0, 4, 4}));
  EXPECT_EQ(reduce_vec(ReduceOp::Sum, jaccl::Complex64, a, b),
            (std::vector<float>{2, 12, 3, 99, 2, 12, -6, 0, 8, 8}));
  // A NaN in either component propagates (the whole element is taken).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto m = reduce_vec<float>(ReduceOp::Max, jaccl::Complex64,
                                   {1, nan, 9, 9}, {5, 5, nan, 0});
  EXPECT_EQ(m[0], 1.0f);
  EXPECT_TRUE(std::isnan(m[1]));
  EXPECT_TRUE(std::isnan(m[2]));
  EXPECT_EQ(m[3], 0.0f);
}

// ---- errors ----

TEST(Reduce, CheckedCount) {
  EXPECT_EQ(checked_count(ReduceOp::Sum, jaccl::Float16, 10), 5u);
  EXPECT_EQ(checked_count(ReduceOp::Sum, jaccl::Complex64, 0), 0u);
  EXPECT_EQ(checked_count(ReduceOp::Min, jaccl::Bool, 3), 3u);
  EXPECT_EQ(checked_count(ReduceOp::Max, jaccl::Float64, 800), 100u);
}

std::string usage_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const jaccl::UsageError& e) {
    EXPECT_EQ(e.kind(), jaccl::ErrorKind::Usage);
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception";
  return "";
}

TEST(Reduce, UnknownDtypeIsUsageError) {
  std::string msg = usage_message([] { checked_count(ReduceOp::Sum, 99, 16); });
  EXPECT_NE(msg.find("sum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("99"), std::string::npos) << msg;
  EXPECT_NE(msg.find("16"), std::string::npos) << msg;
  msg = usage_message([] { checked_count(ReduceOp::Max, -1, 8); });
  EXPECT_NE(msg.find("-1"), std::string::npos) << msg;

  uint8_t buf[16] = {};
  msg = usage_message([&] { reduce3(ReduceOp::Min, 42, buf, buf, buf, 2); });
  EXPECT_NE(msg.find("min"), std::string::npos) << msg;
  EXPECT_NE(msg.find("42"), std::string::npos) << msg;
  msg = usage_message(
      [&] { reduce_into(ReduceOp::Sum, kNumDtypes, buf, buf, 1); });
  EXPECT_NE(msg.find(std::to_string(kNumDtypes)), std::string::npos) << msg;
}

TEST(Reduce, BadByteCountIsUsageError) {
  std::string msg =
      usage_message([] { checked_count(ReduceOp::Max, jaccl::Float32, 7); });
  EXPECT_NE(msg.find("max"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("7"), std::string::npos) << msg;
  msg =
      usage_message([] { checked_count(ReduceOp::Sum, jaccl::Complex64, 12); });
  EXPECT_NE(msg.find("complex64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("12"), std::string::npos) << msg;
}

TEST(Reduce, ZeroCountTouchesNothing) {
  for (ReduceOp op : kOps) {
    for (int dtype = 0; dtype < kNumDtypes; ++dtype) {
      reduce3(op, dtype, nullptr, nullptr, nullptr, 0);
      reduce_into(op, dtype, nullptr, nullptr, 0);
    }
  }
}

TEST(Reduce, OpNames) {
  EXPECT_STREQ(jaccl::detail::op_name(ReduceOp::Sum), "sum");
  EXPECT_STREQ(jaccl::detail::op_name(ReduceOp::Max), "max");
  EXPECT_STREQ(jaccl::detail::op_name(ReduceOp::Min), "min");
}

}  // namespace
