// Copyright 2026 the jaccl authors.
// float16_t / bfloat16_t conversions against references computed here with
// double arithmetic (exact decoding with ldexp, rounding by nearest-value
// search), plus dtype_name.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "jaccl/types.h"

namespace {

using jaccl::bfloat16_t;
using jaccl::float16_t;

// ---- compile-time properties ----

static_assert(sizeof(float16_t) == 2);
static_assert(sizeof(bfloat16_t) == 2);
static_assert(std::is_trivially_copyable_v<float16_t>);
static_assert(std::is_trivially_copyable_v<bfloat16_t>);
static_assert(std::is_convertible_v<float, float16_t>);
static_assert(std::is_convertible_v<float16_t, float>);
static_assert(std::is_convertible_v<float, bfloat16_t>);
static_assert(std::is_convertible_v<bfloat16_t, float>);
// Usable in constant expressions.
static_assert(float16_t(1.0f).bits == 0x3c00);
static_assert(float16_t(-2.5f).bits == 0xc100);
static_assert(float16_t(65520.0f).bits == 0x7c00);
static_assert(float16_t(0x1p-24f).bits == 0x0001);
static_assert(static_cast<float>(float16_t::from_bits(0x3555)) ==
              0.333251953125f);
static_assert(static_cast<float>(float16_t::from_bits(0x0001)) == 0x1p-24f);
static_assert(bfloat16_t(1.0f).bits == 0x3f80);
static_assert(static_cast<float>(bfloat16_t::from_bits(0xc0a0)) == -5.0f);
static_assert(float16_t().bits == 0 && bfloat16_t().bits == 0);

uint32_t bits_of(float f) {
  return std::bit_cast<uint32_t>(f);
}
float float_of(uint32_t u) {
  return std::bit_cast<float>(u);
}

// ---- independent references ----

// Exact value of a half bit pattern (sign applied; NaN for NaNs).
double ref_half_value(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) {
    v = mant == 0 ? std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);
  } else {
    v = std::ldexp(static_cast<double>(1024 + mant), exp - 25);
  }
  return sign ? -v : v;
}

double ref_bf16_value(uint16_t b) {
  const int sign = (b >> 15) & 1;
  const int exp = (b >> 7) & 0xff;
  const int mant = b & 0x7f;
  double v;
  if (exp == 0xff) {
    v = mant == 0 ? std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -133);
  } else {
    v = std::ldexp(static_cast<double>(128 + mant), exp - 134);
  }
  return sign ? -v : v;
}

// Round-to-nearest-even by searching the sorted table of all non-negative
// finite values of the format. The entry after the largest finite value is
// the next power of two, standing for infinity: ties at the overflow
// threshold then go to the even pattern (the infinity), as IEEE requires.
class NearestTable {
 public:
  // inf_bits: bit pattern of +inf; every pattern below it is finite.
  NearestTable(uint16_t inf_bits, double (*value)(uint16_t), double beyond)
      : inf_bits_(inf_bits) {
    for (uint32_t b = 0; b < inf_bits; ++b) {
      values_.push_back(value(static_cast<uint16_t>(b)));
    }
    values_.push_back(beyond);
  }

  // Expected bits for a non-NaN double (exactly representable as float).
  uint16_t round(double d) const {
    const uint16_t sign = std::signbit(d) ? 0x8000 : 0;
    const double a = std::fabs(d);
    if (a >= values_.back()) {
      return sign | inf_bits_;
    }
    // values_[i] <= a < values_[i + 1]
    const size_t i = static_cast<size_t>(
        std::upper_bound(values_.begin(), values_.end(), a) - values_.begin() -
        1);
    const double lo = values_[i];
    const double hi = values_[i + 1];
    size_t pick;
    if (a - lo < hi - a) {
      pick = i;
    } else if (a - lo > hi - a) {
      pick = i + 1;
    } else {
      pick = (i % 2 == 0) ? i : i + 1;  // the even pattern
    }
    return static_cast<uint16_t>(sign | pick);
  }

  const std::vector<double>& values() const { return values_; }

 private:
  uint16_t inf_bits_;
  std::vector<double> values_;
};

const NearestTable& half_table() {
  static const NearestTable t(0x7c00, ref_half_value, 65536.0);
  return t;
}
const NearestTable& bf16_table() {
  static const NearestTable t(0x7f80, ref_bf16_value, std::ldexp(1.0, 128));
  return t;
}

// Floats within a few ulps of every representable value and every midpoint
// of the 16-bit format, both signs: the places where rounding can go wrong.
std::vector<float> boundary_floats(const NearestTable& t) {
  std::vector<float> out;
  const auto& v = t.values();
  for (size_t i = 0; i + 1 < v.size(); ++i) {
    const double points[2] = {v[i], (v[i] + v[i + 1]) / 2};
    for (double p : points) {
      const auto f = static_cast<float>(p);
      EXPECT_EQ(static_cast<double>(f), p) << "midpoint not exact in float";
      float up = f;
      float down = f;
      out.push_back(f);
      for (int k = 0; k < 3; ++k) {
        up = std::nextafter(up, std::numeric_limits<float>::infinity());
        down = std::nextafter(down, -std::numeric_limits<float>::infinity());
        out.push_back(up);
        out.push_back(down);
      }
    }
  }
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) {
    out.push_back(-out[i]);
  }
  return out;
}

// ---- float16 ----

TEST(Float16, DecodeAllPatternsExactly) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float got = float16_t::from_bits(h);
    const double want = ref_half_value(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
      // Payload kept: the top mantissa bits of the float are the half's.
      ASSERT_EQ((bits_of(got) >> 13) & 0x3ff, b & 0x3ffu) << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << b;
    }
    ASSERT_EQ(std::signbit(got), (b & 0x8000) != 0) << std::hex << b;
  }
}

TEST(Float16, RoundTripAllPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const uint16_t back =
        float16_t(static_cast<float>(float16_t::from_bits(h))).bits;
    const bool nan = (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0;
    if (!nan) {
      ASSERT_EQ(back, h) << std::hex << b;
    } else {
      // Still NaN, same sign and payload; signaling NaNs come back quiet.
      ASSERT_EQ(back & 0x7c00, 0x7c00) << std::hex << b;
      ASSERT_EQ(back, h | 0x0200) << std::hex << b;
    }
  }
}

TEST(Float16, EncodeNearBoundaries) {
  const auto& t = half_table();
  const std::vector<float> xs = boundary_floats(t);
  ASSERT_GT(xs.size(), 500000u);
  for (float f : xs) {
    ASSERT_EQ(float16_t(f).bits, t.round(f))
        << "f=" << f << " bits=" << std::hex << bits_of(f);
  }
}

TEST(Float16, EncodeSpecialValues) {
  struct Case {
    float f;
    uint16_t want;
  };
  const Case cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {65504.0f, 0x7bff},                        // largest finite
      {std::nextafter(65520.0f, 0.0f), 0x7bff},  // just below the tie
      {65520.0f, 0x7c00},                        // tie -> even = inf
      {-65520.0f, 0xfc00},
      {1e10f, 0x7c00},
      {std::numeric_limits<float>::max(), 0x7c00},
      {std::numeric_limits<float>::infinity(), 0x7c00},
      {-std::numeric_limits<float>::infinity(), 0xfc00},
      {0x1p-14f, 0x0400},   // smallest normal
      {0x1p-24f, 0x0001},   // smallest subnormal
      {0x1p-25f, 0x0000},   // tie between 0 and 2^-24 -> 0
      {-0x1p-25f, 0x8000},  // sign kept on underflow
      {std::nextafter(0x1p-25f, 1.0f), 0x0001},
      {0x3p-25f, 0x0002},      // tie between 1 and 2 ulps -> 2
      {0x5p-25f, 0x0002},      // tie between 2 and 3 ulps -> 2
      {0x1.ff8p-15f, 0x03ff},  // largest subnormal
      {0x1.ffcp-15f, 0x0400},  // tie -> even: smallest normal
      {std::numeric_limits<float>::denorm_min(), 0x0000},
      {-std::numeric_limits<float>::denorm_min(), 0x8000},
      {1.0f + 0x1p-11f, 0x3c00},  // tie -> even (down)
      {1.0f + 0x3p-11f, 0x3c02},  // tie -> even (up)
  };
  for (const auto& c : cases) {
    EXPECT_EQ(float16_t(c.f).bits, c.want)
        << "f=" << c.f << " got " << std::hex << float16_t(c.f).bits;
  }
}

TEST(Float16, EncodeNaNStaysQuietNaNWithSign) {
  const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu,
                           0x7f802000u, 0xffc00000u, 0xff800001u, 0xffffe000u};
  for (uint32_t n : nans) {
    const uint16_t h = float16_t(float_of(n)).bits;
    EXPECT_EQ(h & 0x7c00, 0x7c00) << std::hex << n;
    EXPECT_NE(h & 0x0200, 0) << "quiet bit " << std::hex << n;
    EXPECT_EQ(h >> 15, n >> 31) << "sign " << std::hex << n;
    EXPECT_EQ(h & 0x1ff, (n >> 13) & 0x1ff) << "payload " << std::hex << n;
  }
}

TEST(Float16, EncodeRandomFloats) {
  const auto& t = half_table();
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> wide(-70000.0f, 70000.0f);
  std::uniform_real_distribution<float> tiny(-0x1p-13f, 0x1p-13f);
  for (int i = 0; i < 1000000; ++i) {
    const float fs[3] = {float_of(static_cast<uint32_t>(rng())), wide(rng),
                         tiny(rng)};
    for (float f : fs) {
      if (std::isnan(f)) {
        ASSERT_TRUE(std::isnan(static_cast<float>(float16_t(f))));
        continue;
      }
      ASSERT_EQ(float16_t(f).bits, t.round(f))
          << "f=" << f << " bits=" << std::hex << bits_of(f);
    }
  }
}

// A strided sweep over every float bit pattern (both signs, every exponent).
TEST(Float16, EncodeStridedSweep) {
  const auto& t = half_table();
  for (uint64_t u = 0; u < (1ull << 32); u += 101) {
    const float f = float_of(static_cast<uint32_t>(u));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(static_cast<float>(float16_t(f))));
      continue;
    }
    ASSERT_EQ(float16_t(f).bits, t.round(f)) << std::hex << u;
  }
}

TEST(Float16, ArithmeticThroughFloat) {
  const float16_t a = 1.5f;
  const float16_t b = 2.25f;
  const float16_t c = a + b;  // computed in float, rounded on assignment
  EXPECT_EQ(static_cast<float>(c), 3.75f);
  const float16_t d = 2048.0f + 1.0f;  // 2049 is a tie -> even (2048)
  EXPECT_EQ(static_cast<float>(d), 2048.0f);
}

// ---- bfloat16 ----

TEST(BFloat16, DecodeAllPatternsExactly) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float got = bfloat16_t::from_bits(h);
    const double want = ref_bf16_value(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << b;
    }
    ASSERT_EQ(bits_of(got), b << 16) << std::hex << b;
  }
}

TEST(BFloat16, RoundTripAllPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const uint16_t back =
        bfloat16_t(static_cast<float>(bfloat16_t::from_bits(h))).bits;
    const bool nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
    if (!nan) {
      ASSERT_EQ(back, h) << std::hex << b;
    } else {
      ASSERT_EQ(back, h | 0x0040) << std::hex << b;  // quieted, payload kept
    }
  }
}

TEST(BFloat16, EncodeNearBoundaries) {
  const auto& t = bf16_table();
  const std::vector<float> xs = boundary_floats(t);
  ASSERT_GT(xs.size(), 500000u);
  for (float f : xs) {
    ASSERT_EQ(bfloat16_t(f).bits, t.round(f))
        << "f=" << f << " bits=" << std::hex << bits_of(f);
  }
}

TEST(BFloat16, EncodeSpecialValues) {
  struct Case {
    uint32_t f;
    uint16_t want;
  };
  const Case cases[] = {
      {0x00000000u, 0x0000}, {0x80000000u, 0x8000},
      {0x3f808000u, 0x3f80},  // tie at bit 16 -> even (down)
      {0x3f818000u, 0x3f82},  // tie at bit 16 -> even (up)
      {0x3f808001u, 0x3f81},  // just above the tie
      {0x3f807fffu, 0x3f80},  // just below the tie
      {0x7f7fffffu, 0x7f80},  // FLT_MAX rounds to inf
      {0x7f7f7fffu, 0x7f7f},  // stays the largest finite
      {0x7f7f8000u, 0x7f80},  // tie at the top -> even = inf
      {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80},
      {0x00000001u, 0x0000},  // float subnormal below half an ulp
      {0x00008000u, 0x0000},  // tie -> 0
      {0x00018000u, 0x0002},  // tie -> even (up)
      {0x807fffffu, 0x8080},  // largest negative subnormal rounds up
  };
  for (const auto& c : cases) {
    EXPECT_EQ(bfloat16_t(float_of(c.f)).bits, c.want)
        << std::hex << c.f << " got " << bfloat16_t(float_of(c.f)).bits;
  }
}

TEST(BFloat16, EncodeNaNStaysQuietNaNWithSign) {
  // 0x7f800001 is the trap for naive rounding/truncation: its payload lives
  // only in the dropped bits, so it must not become infinity.
  const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0x7fffffffu,
                           0xff800001u, 0xffc00001u, 0x7fbf8000u};
  for (uint32_t n : nans) {
    const uint16_t h = bfloat16_t(float_of(n)).bits;
    EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16_t::from_bits(h))))
        << std::hex << n;
    EXPECT_NE(h & 0x0040, 0) << "quiet bit " << std::hex << n;
    EXPECT_EQ(h >> 15, n >> 31) << "sign " << std::hex << n;
    EXPECT_EQ(h & 0x3f, (n >> 16) & 0x3f) << "payload " << std::hex << n;
  }
}

TEST(BFloat16, EncodeRandomFloats) {
  const auto& t = bf16_table();
  std::mt19937 rng(777);
  std::uniform_real_distribution<float> unit(-4.0f, 4.0f);
  for (int i = 0; i < 1000000; ++i) {
    const float fs[2] = {float_of(static_cast<uint32_t>(rng())), unit(rng)};
    for (float f : fs) {
      if (std::isnan(f)) {
        ASSERT_TRUE(std::isnan(static_cast<float>(bfloat16_t(f))));
        continue;
      }
      ASSERT_EQ(bfloat16_t(f).bits, t.round(f))
          << "f=" << f << " bits=" << std::hex << bits_of(f);
    }
  }
}

TEST(BFloat16, EncodeStridedSweep) {
  const auto& t = bf16_table();
  for (uint64_t u = 0; u < (1ull << 32); u += 103) {
    const float f = float_of(static_cast<uint32_t>(u));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(static_cast<float>(bfloat16_t(f))));
      continue;
    }
    ASSERT_EQ(bfloat16_t(f).bits, t.round(f)) << std::hex << u;
  }
}

// ---- dtype names ----

TEST(Dtype, Names) {
  struct Case {
    int dtype;
    const char* name;
    size_t size;
  };
  const Case cases[] = {
      {jaccl::Bool, "bool", 1},         {jaccl::Int8, "int8", 1},
      {jaccl::Int16, "int16", 2},       {jaccl::Int32, "int32", 4},
      {jaccl::Int64, "int64", 8},       {jaccl::UInt8, "uint8", 1},
      {jaccl::UInt16, "uint16", 2},     {jaccl::UInt32, "uint32", 4},
      {jaccl::UInt64, "uint64", 8},     {jaccl::Float16, "float16", 2},
      {jaccl::BFloat16, "bfloat16", 2}, {jaccl::Float32, "float32", 4},
      {jaccl::Float64, "float64", 8},   {jaccl::Complex64, "complex64", 8},
  };
  for (const auto& c : cases) {
    EXPECT_STREQ(jaccl::dtype_name(c.dtype), c.name);
    EXPECT_EQ(jaccl::dtype_size(c.dtype), c.size) << c.name;
  }
  for (int bad : {-1, 14, 100, std::numeric_limits<int>::min()}) {
    EXPECT_STREQ(jaccl::dtype_name(bad), "unknown") << bad;
    EXPECT_EQ(jaccl::dtype_size(bad), 0u) << bad;
  }
}

}  // namespace
