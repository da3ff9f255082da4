// Copyright 2026 the jaccl authors.
// The reference semantics the group conformance checks compare against
// (support/group_conformance.h), computed here independently of the
// library's reduction kernels: the element type of every dtype, the inputs
// (small integer-valued floats make every sum exact, so every reduction
// order gives the same bits; integers use most of their range, so sums
// wrap), and how two elements combine. No gtest: the workers use it too.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "jaccl/reduce_op.h"
#include "jaccl/types.h"

namespace jaccl::test::group_conformance {

// ---- element types -------------------------------------------------------

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
    std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

inline constexpr int kAllDtypes[] = {
    Bool,   Int8,   Int16,   Int32,    Int64,   UInt8,   UInt16,
    UInt32, UInt64, Float16, BFloat16, Float32, Float64, Complex64};

// f(Tag<T>{}) with T the element type of dtype.
template <class F>
void dispatch(int dtype, F&& f) {
  switch (dtype) {
    case Bool:
      return f(Tag<B8>{});
    case Int8:
      return f(Tag<int8_t>{});
    case Int16:
      return f(Tag<int16_t>{});
    case Int32:
      return f(Tag<int32_t>{});
    case Int64:
      return f(Tag<int64_t>{});
    case UInt8:
      return f(Tag<uint8_t>{});
    case UInt16:
      return f(Tag<uint16_t>{});
    case UInt32:
      return f(Tag<uint32_t>{});
    case UInt64:
      return f(Tag<uint64_t>{});
    case Float16:
      return f(Tag<float16_t>{});
    case BFloat16:
      return f(Tag<bfloat16_t>{});
    case Float32:
      return f(Tag<float>{});
    case Float64:
      return f(Tag<double>{});
    case Complex64:
      return f(Tag<C64>{});
  }
  throw std::logic_error("bad dtype");
}

// ---- inputs --------------------------------------------------------------

// A small integer in [-8, 8], different per rank, element and salt.
inline int base(int r, size_t i, int salt) {
  return static_cast<int>((static_cast<size_t>(r) * 7 + (i % 17) * 13 +
                           static_cast<size_t>(salt) * 5 + (i / 17) % 5) %
                          17) -
         8;
}

// Element i of rank r's input. Integers use most of their range (sums wrap,
// as documented); floats stay small multiples of a power of two (sums are
// exact in every type).
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
// check_gen_period() checks it before anything relies on it.
inline constexpr size_t kGenPeriod = 510;

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

// n bytes that depend on who, position and salt (send/recv, broadcast,
// all_to_all blocks).
inline std::vector<uint8_t> pattern(int who, size_t n, int salt) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<uint8_t>((i * 31 + static_cast<size_t>(who) * 7 +
                                 static_cast<size_t>(salt) * 13 + (i >> 8)) &
                                0xff);
  }
  return v;
}

// ---- how elements combine ------------------------------------------------

using Op = ReduceOp;
inline constexpr Op kAllOps[] = {Op::Sum,    Op::Max,   Op::Min,   Op::Prod,
                                 Op::BitAnd, Op::BitOr, Op::BitXor};

// The call an op makes: all_sum, all_max, all_min, else all_reduce.
inline std::string op_name(Op op) {
  return op == Op::Sum   ? "all_sum"
         : op == Op::Max ? "all_max"
         : op == Op::Min ? "all_min"
                         : std::string("all_reduce ") + reduce_op_name(op);
}

inline bool is_bitwise(Op op) {
  return op == Op::BitAnd || op == Op::BitOr || op == Op::BitXor;
}

// Whether op takes T (the bitwise ops take integers and bool only).
template <class T>
constexpr bool takes(Op op) {
  return !is_bitwise(op) || std::is_same_v<T, B8> || std::is_integral_v<T>;
}

// Element i of rank r's input to op: gen(), except that a product of
// floats multiplies powers of two (and a complex product small integers),
// which every order of multiplication gives exactly.
template <class T>
T gen_for(Op op, int r, size_t i, int salt) {
  constexpr bool floaty = std::is_floating_point_v<T> || is_half<T>;
  if constexpr (std::is_same_v<T, C64>) {
    if (op == Op::Prod) {
      return C64{static_cast<float>((base(r, i, salt) + 8) % 3 - 1),
                 static_cast<float>((base(r, i, salt + 1) + 8) % 3 - 1)};
    }
  } else if constexpr (floaty) {
    if (op == Op::Prod) {
      const int b = base(r, i, salt) + 8;  // 0..16
      const float mag = b % 3 == 0 ? 0.5f : b % 3 == 1 ? 1.0f : 2.0f;
      return T((b / 3) % 2 == 0 ? mag : -mag);
    }
  }
  return gen<T>(r, i, salt);
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

// a op b, as reduce_op.h defines it.
template <class T>
T apply(Op op, T a, T b) {
  if constexpr (std::is_same_v<T, B8>) {
    const bool x = a.v != 0, y = b.v != 0;
    const bool both = op == Op::Min || op == Op::Prod || op == Op::BitAnd;
    return B8{static_cast<uint8_t>(both               ? (x && y)
                                   : op == Op::BitXor ? (x != y)
                                                      : (x || y))};
  } else if constexpr (std::is_same_v<T, C64>) {
    if (op == Op::Sum)
      return C64{a.re + b.re, a.im + b.im};
    if (op == Op::Prod)
      return C64{a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
    bool a_gt = a.re > b.re || (a.re == b.re && a.im > b.im);
    bool a_lt = a.re < b.re || (a.re == b.re && a.im < b.im);
    return (op == Op::Max ? a_gt : a_lt) ? a : b;
  } else if constexpr (is_half<T>) {
    return T(apply<float>(op, static_cast<float>(a), static_cast<float>(b)));
  } else if constexpr (std::is_floating_point_v<T>) {
    return op == Op::Sum    ? a + b
           : op == Op::Prod ? a * b
           : op == Op::Max  ? fmax_ref(a, b)
                            : fmin_ref(a, b);
  } else {
    using U = std::make_unsigned_t<T>;
    // At least unsigned int wide: uint16 * uint16 would promote to int.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    const W x = static_cast<U>(a), y = static_cast<U>(b);
    switch (op) {
      case Op::Sum:
        return static_cast<T>(static_cast<U>(x + y));
      case Op::Prod:
        return static_cast<T>(static_cast<U>(x * y));
      case Op::BitAnd:
        return static_cast<T>(static_cast<U>(x & y));
      case Op::BitOr:
        return static_cast<T>(static_cast<U>(x | y));
      case Op::BitXor:
        return static_cast<T>(static_cast<U>(x ^ y));
      case Op::Max:
        return a < b ? b : a;
      case Op::Min:
        return b < a ? b : a;
    }
    return a;
  }
}

// Element i of op over the inputs of ranks 0..size-1, in rank order.
template <class T>
T fold(Op op, int size, size_t i, int salt) {
  T acc = gen_for<T>(op, 0, i, salt);
  for (int r = 1; r < size; ++r)
    acc = apply(op, acc, gen_for<T>(op, r, i, salt));
  return acc;
}

// The sign of a zero component of a complex product depends on the order
// of the multiplications (x * 0 - y * 0): results and references of one
// are compared with their zeros made +0.
template <class T>
void unsign_zeros(Op op, std::vector<T>& v) {
  if constexpr (std::is_same_v<T, C64>) {
    if (op == Op::Prod) {
      for (C64& z : v) {
        z.re += 0.0f;
        z.im += 0.0f;
      }
    }
  }
}

// Equal bits, or both NaN.
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

}  // namespace jaccl::test::group_conformance
