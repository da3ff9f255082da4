// Copyright 2026 the jaccl authors.
#include "common/reduce.h"

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "common/error.h"
#include "common/prefetch.h"
#include "jaccl/types.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace jaccl::detail {
namespace {

// Tells the compiler iterations are independent: out may equal a or b, which
// is fine element-wise but would otherwise force a runtime alias check.
#if defined(__clang__)
#define JACCL_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define JACCL_IVDEP _Pragma("GCC ivdep")
#else
#define JACCL_IVDEP
#endif

// Alignment: none required. Every element goes through memcpy, which compilers
// lower to (vector) unaligned loads/stores, since callers slice buffers at
// arbitrary byte offsets.
template <class T>
inline T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

struct ComplexF {
  float re;
  float im;
};
// Component-wise, which GCC vectorizes (a whole-struct memcpy it does not).
template <>
inline ComplexF load<ComplexF>(const unsigned char* p) {
  return ComplexF{load<float>(p), load<float>(p + sizeof(float))};
}
template <>
inline void store<ComplexF>(unsigned char* p, ComplexF v) {
  store<float>(p, v.re);
  store<float>(p + sizeof(float), v.im);
}

// ---- codecs: how an element is stored vs. the type the op computes in ----

template <class T>
struct Plain {
  using Storage = T;
  static T decode(T v) { return v; }
  static T encode(T v) { return v; }
};

struct HalfCodec {
  using Storage = uint16_t;
  static float decode(uint16_t v) { return half_bits_to_float(v); }
  static uint16_t encode(float v) { return float_to_half_bits(v); }
};

struct BFloat16Codec {
  using Storage = uint16_t;
  static float decode(uint16_t v) { return bfloat16_bits_to_float(v); }
  static uint16_t encode(float v) { return float_to_bfloat16_bits(v); }
};

// ---- element ops ----

template <class F>
using BitsOf = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;

// NaN wins; equal values combine bitwise so that max(-0, +0) = +0 and
// min(-0, +0) = -0 whatever the operand order (ranks may combine in different
// orders and must still agree). Written as selects so loops vectorize.
template <class F>
inline F float_max(F a, F b) {
  using U = BitsOf<F>;
  F r = a > b ? a : b;
  r = a == b ? std::bit_cast<F>(std::bit_cast<U>(a) & std::bit_cast<U>(b)) : r;
  r = b != b ? b : r;
  r = a != a ? a : r;
  return r;
}
template <class F>
inline F float_min(F a, F b) {
  using U = BitsOf<F>;
  F r = a < b ? a : b;
  r = a == b ? std::bit_cast<F>(std::bit_cast<U>(a) | std::bit_cast<U>(b)) : r;
  r = b != b ? b : r;
  r = a != a ? a : r;
  return r;
}

struct Sum {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return a + b;
    } else {
      // Unsigned arithmetic: signed overflow would be UB, and wrapping is the
      // documented behaviour.
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(
          static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    }
  }
};

struct Max {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return float_max(a, b);
    } else {
      return a < b ? b : a;
    }
  }
};

struct Min {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return float_min(a, b);
    } else {
      return b < a ? b : a;
    }
  }
};

struct Prod {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return a * b;
    } else {
      // Unsigned, for the reason Sum gives; uint16 promotes to int, so the
      // multiply is done in at least 32 unsigned bits.
      using U = std::make_unsigned_t<T>;
      using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
      return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) *
                                           static_cast<W>(static_cast<U>(b))));
    }
  }
};

struct BitAnd {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a & b);
  }
};
struct BitOr {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a | b);
  }
};
struct BitXor {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a ^ b);
  }
};

// Bool is a byte; any nonzero byte is true and results are 0 or 1.
struct BoolOr {
  static uint8_t apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a | b) != 0);
  }
};
struct BoolAnd {
  static uint8_t apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a != 0) & (b != 0));
  }
};
struct BoolXor {
  static uint8_t apply(uint8_t a, uint8_t b) {
    return static_cast<uint8_t>((a != 0) != (b != 0));
  }
};

// Lexicographic on (re, im) like upstream JACCL; NaN in either component
// propagates; equal values combine bitwise as in float_max/float_min. Bitwise
// &/| and per-component selects (no branches) so the loop can vectorize.
template <bool kMax>
inline ComplexF complex_pick(ComplexF a, ComplexF b) {
  const bool a_nan = (a.re != a.re) | (a.im != a.im);
  const bool b_nan = (b.re != b.re) | (b.im != b.im);
  const bool re_eq = a.re == b.re;
  const bool eq = re_eq & (a.im == b.im);
  const bool a_wins = kMax ? (a.re > b.re) | (re_eq & (a.im > b.im))
                           : (a.re < b.re) | (re_eq & (a.im < b.im));
  auto pick = [&](float x, float y) {
    const uint32_t ux = std::bit_cast<uint32_t>(x);
    const uint32_t uy = std::bit_cast<uint32_t>(y);
    float r = a_wins ? x : y;
    r = eq ? std::bit_cast<float>(kMax ? ux & uy : ux | uy) : r;
    r = b_nan ? y : r;
    r = a_nan ? x : r;
    return r;
  };
  return ComplexF{pick(a.re, b.re), pick(a.im, b.im)};
}

struct ComplexMax {
  static ComplexF apply(ComplexF a, ComplexF b) {
    return complex_pick<true>(a, b);
  }
};
struct ComplexMin {
  static ComplexF apply(ComplexF a, ComplexF b) {
    return complex_pick<false>(a, b);
  }
};
struct ComplexProd {
  static ComplexF apply(ComplexF a, ComplexF b) {
    return ComplexF{a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  }
};

// ---- the loop ----

template <class Codec, class Op>
inline void apply_one(unsigned char* o, const unsigned char* x,
                      const unsigned char* y) {
  using S = typename Codec::Storage;
  store<S>(o, Codec::encode(Op::apply(Codec::decode(load<S>(x)),
                                      Codec::decode(load<S>(y)))));
}

// Full blocks of a compile-time length, then a scalar tail: a constant trip
// count is what lets GCC's -O2 cost model vectorize (no epilogue needed).
template <class Codec, class Op>
void kernel(void* out, const void* a, const void* b, size_t n) {
  constexpr size_t kSize = sizeof(typename Codec::Storage);
  constexpr size_t kBlock = 256 / kSize;
  auto* po = static_cast<unsigned char*>(out);
  auto* pa = static_cast<const unsigned char*>(a);
  auto* pb = static_cast<const unsigned char*>(b);
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    unsigned char* o = po + i * kSize;
    const unsigned char* x = pa + i * kSize;
    const unsigned char* y = pb + i * kSize;
    prefetch_ahead(x, kBlock * kSize);
    prefetch_ahead(y, kBlock * kSize);
    JACCL_IVDEP
    for (size_t k = 0; k < kBlock; ++k) {
      apply_one<Codec, Op>(o + k * kSize, x + k * kSize, y + k * kSize);
    }
  }
  for (; i < n; ++i) {
    apply_one<Codec, Op>(po + i * kSize, pa + i * kSize, pb + i * kSize);
  }
}

// fp16/bf16: decode a block of both inputs to float, combine, round back. Three
// simple loops vectorize independently (the encode needs per-lane shifts, which
// plain SSE2 lacks; splitting keeps the rest vectorized there).
template <class Codec, class Op>
__attribute__((always_inline)) inline void blocked_loop(void* out,
                                                        const void* a,
                                                        const void* b,
                                                        size_t n) {
  using S = typename Codec::Storage;
  constexpr size_t kSize = sizeof(S);
  constexpr size_t kBlock = 128;
  auto* po = static_cast<unsigned char*>(out);
  auto* pa = static_cast<const unsigned char*>(a);
  auto* pb = static_cast<const unsigned char*>(b);
  float fa[kBlock];
  float fb[kBlock];
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    const unsigned char* x = pa + i * kSize;
    const unsigned char* y = pb + i * kSize;
    prefetch_ahead(x, kBlock * kSize);
    prefetch_ahead(y, kBlock * kSize);
    for (size_t k = 0; k < kBlock; ++k) {
      fa[k] = Codec::decode(load<S>(x + k * kSize));
      fb[k] = Codec::decode(load<S>(y + k * kSize));
    }
    for (size_t k = 0; k < kBlock; ++k) {
      fa[k] = Op::apply(fa[k], fb[k]);
    }
    unsigned char* o = po + i * kSize;
    for (size_t k = 0; k < kBlock; ++k) {
      store<S>(o + k * kSize, Codec::encode(fa[k]));
    }
  }
  for (; i < n; ++i) {
    apply_one<Codec, Op>(po + i * kSize, pa + i * kSize, pb + i * kSize);
  }
}

template <class Codec, class Op>
void blocked_kernel(void* out, const void* a, const void* b, size_t n) {
  blocked_loop<Codec, Op>(out, a, b, n);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// bf16 needs no conversion instruction (its decode and round-to-nearest-even
// encode are 32-bit shifts, adds and selects), but SSE2 has no 32-to-16-bit
// unsigned pack and does 4 lanes at once: the same loop compiled for AVX2,
// picked at run time, took bf16 all_sums 0.5-0.7x the time from 64 KiB to
// 16 MiB, shm and TCP (BENCHMARKS.md, History, "bf16 reductions through
// AVX2"). Same operations in the same order: bit-identical results.
template <class Op>
__attribute__((target("avx2"))) void bf16_avx2_kernel(void* out, const void* a,
                                                      const void* b, size_t n) {
  blocked_loop<BFloat16Codec, Op>(out, a, b, n);
}

#define JACCL_F16C_DISPATCH 1
// x86 without -march flags has no vector per-lane shift, so the portable fp16
// encode runs scalar (~0.5 G elements/s). F16C converts 8 at a time in
// hardware; it is picked at run time when the CPU has it. The immediate
// rounding mode (nearest even) ignores MXCSR; VCVTPS2PH matches
// float_to_half_bits bit for bit (NaNs included), and VCVTPH2PS differs only
// in quieting signaling NaNs early, which the final encode does anyway.
template <class Op>
__attribute__((target("avx2,f16c"))) void f16c_kernel(void* out, const void* a,
                                                      const void* b, size_t n) {
  constexpr size_t kBlock = 128;
  auto* po = static_cast<unsigned char*>(out);
  auto* pa = static_cast<const unsigned char*>(a);
  auto* pb = static_cast<const unsigned char*>(b);
  alignas(32) float fa[kBlock];
  alignas(32) float fb[kBlock];
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    prefetch_ahead(pa + i * 2, kBlock * 2);
    prefetch_ahead(pb + i * 2, kBlock * 2);
    for (size_t k = 0; k < kBlock; k += 8) {
      const size_t off = (i + k) * 2;
      _mm256_store_ps(fa + k, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(pa + off))));
      _mm256_store_ps(fb + k, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(pb + off))));
    }
    for (size_t k = 0; k < kBlock; ++k) {
      fa[k] = Op::apply(fa[k], fb[k]);
    }
    for (size_t k = 0; k < kBlock; k += 8) {
      _mm_storeu_si128(
          reinterpret_cast<__m128i*>(po + (i + k) * 2),
          _mm256_cvtps_ph(_mm256_load_ps(fa + k),
                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
  for (; i < n; ++i) {
    apply_one<HalfCodec, Op>(po + i * 2, pa + i * 2, pb + i * 2);
  }
}

// "avx2" also checks that the OS saves AVX state.
bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

bool cpu_has_f16c() {
  // F16C comes from CPUID directly (clang's __builtin_cpu_supports does not
  // know "f16c").
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return cpu_has_avx2() && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & bit_F16C) != 0;
  }();
  return has;
}
#endif

// Complex sum is a float sum over twice as many floats.
void complex_sum(void* out, const void* a, const void* b, size_t n) {
  kernel<Plain<float>, Sum>(out, a, b, 2 * n);
}

std::atomic<bool> g_force_portable{false};

using Kernel = void (*)(void*, const void*, const void*, size_t);

constexpr int kNumDtypes = Complex64 + 1;

// Integer dtypes only (the bitwise ops).
template <class Op>
constexpr Kernel integer_kernel(int dtype) {
  switch (dtype) {
    case Int8:
      return kernel<Plain<int8_t>, Op>;
    case Int16:
      return kernel<Plain<int16_t>, Op>;
    case Int32:
      return kernel<Plain<int32_t>, Op>;
    case Int64:
      return kernel<Plain<int64_t>, Op>;
    case UInt8:
      return kernel<Plain<uint8_t>, Op>;
    case UInt16:
      return kernel<Plain<uint16_t>, Op>;
    case UInt32:
      return kernel<Plain<uint32_t>, Op>;
    case UInt64:
      return kernel<Plain<uint64_t>, Op>;
    default:
      return nullptr;
  }
}

// Every dtype but complex64 (the integer ones, and the floats).
template <class Op>
constexpr Kernel numeric_kernel(int dtype) {
  switch (dtype) {
    case Float16:
      return blocked_kernel<HalfCodec, Op>;
    case BFloat16:
      return blocked_kernel<BFloat16Codec, Op>;
    case Float32:
      return kernel<Plain<float>, Op>;
    case Float64:
      return kernel<Plain<double>, Op>;
    default:
      return integer_kernel<Op>(dtype);
  }
}

constexpr int kNumOps = static_cast<int>(ReduceOp::BitXor) + 1;

constexpr int op_index(ReduceOp op) {
  return static_cast<int>(op);
}

// k[op][dtype]; nullptr where op does not take dtype.
struct KernelTable {
  Kernel k[kNumOps][kNumDtypes] = {};
  constexpr KernelTable() {
    for (int d = 0; d < kNumDtypes; ++d) {
      k[op_index(ReduceOp::Sum)][d] = numeric_kernel<Sum>(d);
      k[op_index(ReduceOp::Max)][d] = numeric_kernel<Max>(d);
      k[op_index(ReduceOp::Min)][d] = numeric_kernel<Min>(d);
      k[op_index(ReduceOp::Prod)][d] = numeric_kernel<Prod>(d);
      k[op_index(ReduceOp::BitAnd)][d] = integer_kernel<BitAnd>(d);
      k[op_index(ReduceOp::BitOr)][d] = integer_kernel<BitOr>(d);
      k[op_index(ReduceOp::BitXor)][d] = integer_kernel<BitXor>(d);
    }
    k[op_index(ReduceOp::Sum)][Bool] = kernel<Plain<uint8_t>, BoolOr>;
    k[op_index(ReduceOp::Max)][Bool] = kernel<Plain<uint8_t>, BoolOr>;
    k[op_index(ReduceOp::Min)][Bool] = kernel<Plain<uint8_t>, BoolAnd>;
    k[op_index(ReduceOp::Prod)][Bool] = kernel<Plain<uint8_t>, BoolAnd>;
    k[op_index(ReduceOp::BitAnd)][Bool] = kernel<Plain<uint8_t>, BoolAnd>;
    k[op_index(ReduceOp::BitOr)][Bool] = kernel<Plain<uint8_t>, BoolOr>;
    k[op_index(ReduceOp::BitXor)][Bool] = kernel<Plain<uint8_t>, BoolXor>;
    k[op_index(ReduceOp::Sum)][Complex64] = complex_sum;
    k[op_index(ReduceOp::Max)][Complex64] = kernel<Plain<ComplexF>, ComplexMax>;
    k[op_index(ReduceOp::Min)][Complex64] = kernel<Plain<ComplexF>, ComplexMin>;
    k[op_index(ReduceOp::Prod)][Complex64] =
        kernel<Plain<ComplexF>, ComplexProd>;
  }
};

constexpr KernelTable kKernels;

std::string dtype_label(int dtype) {
  if (dtype_size(dtype) == 0) {
    return "unknown dtype " + std::to_string(dtype);
  }
  return std::string("dtype ") + dtype_name(dtype);
}

// The UsageError of an op without a kernel for dtype; rank: the caller's.
[[noreturn]] void raise_unsupported(ReduceOp op, int dtype, int rank = -1) {
  raise(ErrorKind::Usage,
        std::string("reduce ") + op_name(op) + ": " + dtype_label(dtype) +
            " is not supported" +
            (op_index(op) > op_index(ReduceOp::Prod)
                 ? " (bitwise ops take integer and bool dtypes)"
                 : ""),
        {.rank = rank});
}

#ifdef JACCL_F16C_DISPATCH
// pick(Op{}) for the arithmetic ops (a run-time dispatched kernel family's
// instance); nullptr for the others, which keep the portable kernels.
template <class Pick>
Kernel arith_kernel(ReduceOp op, Pick pick) {
  switch (op) {
    case ReduceOp::Sum:
      return pick(Sum{});
    case ReduceOp::Max:
      return pick(Max{});
    case ReduceOp::Min:
      return pick(Min{});
    case ReduceOp::Prod:
      return pick(Prod{});
    default:
      return nullptr;
  }
}
#endif

Kernel find_kernel(ReduceOp op, int dtype) {
  const int o = op_index(op);
  if (dtype < 0 || dtype >= kNumDtypes || o < 0 || o >= kNumOps ||
      kKernels.k[o][dtype] == nullptr) {
    raise_unsupported(op, dtype);
  }
#ifdef JACCL_F16C_DISPATCH
  if (!g_force_portable.load(std::memory_order_relaxed)) {
    Kernel k = nullptr;
    if (dtype == BFloat16 && cpu_has_avx2())
      k = arith_kernel(
          op, [](auto o) -> Kernel { return bf16_avx2_kernel<decltype(o)>; });
    else if (dtype == Float16 && cpu_has_f16c())
      k = arith_kernel(
          op, [](auto o) -> Kernel { return f16c_kernel<decltype(o)>; });
    if (k != nullptr)
      return k;
  }
#endif
  return kKernels.k[o][dtype];
}

}  // namespace

const char* op_name(ReduceOp op) {
  return reduce_op_name(op);
}

bool reduce_supported(ReduceOp op, int dtype) {
  const int o = op_index(op);
  return dtype >= 0 && dtype < kNumDtypes && o >= 0 && o < kNumOps &&
         kKernels.k[o][dtype] != nullptr;
}

size_t checked_count(ReduceOp op, int dtype, size_t n_bytes, int rank) {
  const size_t size = dtype_size(dtype);
  if (size != 0 && !reduce_supported(op, dtype)) {
    raise_unsupported(op, dtype, rank);
  }
  if (size == 0) {
    raise(ErrorKind::Usage,
          std::string("reduce ") + op_name(op) + ": " + dtype_label(dtype) +
              " (n_bytes " + std::to_string(n_bytes) + ")",
          {.rank = rank});
  }
  if (n_bytes % size != 0) {
    raise(ErrorKind::Usage,
          std::string("reduce ") + op_name(op) + ": n_bytes " +
              std::to_string(n_bytes) + " is not a multiple of the " +
              dtype_name(dtype) + " element size " + std::to_string(size),
          {.rank = rank});
  }
  return n_bytes / size;
}

void reduce3(ReduceOp op, int dtype, void* out, const void* a, const void* b,
             size_t count) {
  const Kernel k = find_kernel(op, dtype);
  if (count != 0) {
    k(out, a, b, count);
  }
}

void reduce_force_portable(bool on) {
  g_force_portable.store(on, std::memory_order_relaxed);
}

void reduce_into(ReduceOp op, int dtype, void* dst, const void* src,
                 size_t count) {
  reduce3(op, dtype, dst, dst, src, count);
}

}  // namespace jaccl::detail

namespace jaccl {

const char* reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Prod:
      return "prod";
    case ReduceOp::BitAnd:
      return "bitand";
    case ReduceOp::BitOr:
      return "bitor";
    case ReduceOp::BitXor:
      return "bitxor";
  }
  return "unknown";
}

}  // namespace jaccl
