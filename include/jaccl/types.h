// Copyright 2026 the jaccl authors.
// Element types: the Dtype ids of standalone JACCL (same values, same order)
// and the 16-bit float types.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace jaccl {

enum Dtype {
  Bool = 0,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,
};

// Size in bytes of one element of dtype, or 0 for an unknown id.
constexpr size_t dtype_size(int dtype) noexcept {
  switch (dtype) {
    case Bool:
    case Int8:
    case UInt8:
      return 1;
    case Int16:
    case UInt16:
    case Float16:
    case BFloat16:
      return 2;
    case Int32:
    case UInt32:
    case Float32:
      return 4;
    case Int64:
    case UInt64:
    case Float64:
    case Complex64:
      return 8;
    default:
      return 0;
  }
}

// Name of a dtype for messages ("float32"), or "unknown".
const char* dtype_name(int dtype) noexcept;

namespace detail {

// Bit-level conversions: integer arithmetic (plus one exact float multiply),
// so results do not depend on the FP environment (rounding mode, FTZ/DAZ) and
// are usable in constexpr.
// Written as straight-line selects so loops over them can vectorize.

constexpr float half_bits_to_float(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  // Normal: rebias the exponent (15 -> 127).
  uint32_t bits = ((exp + 112u) << 23) | (mant << 13);
  // Inf / NaN: keep the payload, so NaNs stay NaNs.
  bits = exp == 0x1f ? (0x7f800000u | (mant << 13)) : bits;
  // Subnormal (or zero): mant * 2^-24, exact in float (and a normal float, so
  // FTZ/DAZ cannot touch it).
  const uint32_t sub = std::bit_cast<uint32_t>(
      static_cast<float>(static_cast<int32_t>(mant)) * 0x1p-24f);
  // Blended last with a mask, not ?:, so the multiply stays unconditional:
  // GCC will not speculate a (maybe trapping) FP op out of a branch, and a
  // branch stops vectorization.
  const uint32_t is_sub = 0u - static_cast<uint32_t>(exp == 0);
  bits = (sub & is_sub) | (bits & ~is_sub);
  return std::bit_cast<float>(sign | bits);
}

constexpr uint16_t float_to_half_bits(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  // Normal half range [2^-14, 65520): rebias, then round to nearest even at
  // bit 13 (a carry into the exponent is the correct result).
  const uint32_t normal =
      ((ax - (112u << 23)) + 0xfffu + ((ax >> 13) & 1u)) >> 13;
  // Below 2^-14: a subnormal half is round(|f| * 2^24). With the implicit bit
  // m = 1.mant * 2^23, |f| * 2^24 = m >> (126 - e); shifts past 25 all round
  // to zero, so clamp (this also covers zero and float subnormals).
  const uint32_t e = ax >> 23;
  const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t e_clamped = e > 113u ? 113u : e;  // keeps shifts in range
  const uint32_t s = 126u - e_clamped > 25u ? 25u : 126u - e_clamped;
  // Round to nearest even: add just under one half, plus one if the
  // truncated result is odd.
  const uint32_t subnormal =
      (m + ((1u << (s - 1u)) - 1u) + ((m >> s) & 1u)) >> s;
  uint32_t r = ax < 0x38800000u ? subnormal : normal;
  // >= 65520 rounds to infinity (65520 is the tie between 65504 and 2^16).
  r = ax >= 0x477ff000u ? 0x7c00u : r;
  // NaN: keep the top payload bits, set the quiet bit.
  r = ax > 0x7f800000u ? (0x7e00u | ((ax >> 13) & 0x3ffu)) : r;
  return static_cast<uint16_t>(sign | r);
}

constexpr float bfloat16_bits_to_float(uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

constexpr uint16_t float_to_bfloat16_bits(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  // Round to nearest even at bit 16; overflow carries into Inf by itself.
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  // NaN: truncate (keeping sign and top payload) and set the quiet bit.
  const bool nan = (x & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(nan ? ((x >> 16) | 0x40u) : rounded);
}

}  // namespace detail

// IEEE 754 binary16. Storage only: arithmetic happens in float through the
// implicit conversions, and the result rounds back (to nearest, ties to even)
// when assigned to a float16_t.
struct float16_t {
  uint16_t bits = 0;

  constexpr float16_t() noexcept = default;
  // Implicit, like upstream JACCL, so `float16_t h = x + y;` works. Note a
  // double goes through float first (double rounding is possible there).
  constexpr float16_t(float f) noexcept : bits(detail::float_to_half_bits(f)) {}
  static constexpr float16_t from_bits(uint16_t b) noexcept {
    float16_t h;
    h.bits = b;
    return h;
  }
  constexpr operator float() const noexcept {
    return detail::half_bits_to_float(bits);
  }
};

// bfloat16: the top half of a float32 (8-bit exponent, 7-bit mantissa).
struct bfloat16_t {
  uint16_t bits = 0;

  constexpr bfloat16_t() noexcept = default;
  constexpr bfloat16_t(float f) noexcept
      : bits(detail::float_to_bfloat16_bits(f)) {}
  static constexpr bfloat16_t from_bits(uint16_t b) noexcept {
    bfloat16_t h;
    h.bits = b;
    return h;
  }
  constexpr operator float() const noexcept {
    return detail::bfloat16_bits_to_float(bits);
  }
};

static_assert(sizeof(float16_t) == 2 && alignof(float16_t) == 2);
static_assert(sizeof(bfloat16_t) == 2 && alignof(bfloat16_t) == 2);
static_assert(std::is_trivially_copyable_v<float16_t>);
static_assert(std::is_trivially_copyable_v<bfloat16_t>);

}  // namespace jaccl
