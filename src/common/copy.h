// Copyright 2026 the jaccl authors.
// The library's bulk copies between buffers of this process: memcpy,
// except where the CPU's string copy has a cliff. glibc's memcpy copies
// with `rep movsb` from a few KiB up to about the L2 size on CPUs that
// report ERMS/FSRM, and on some (AMD Zen 3) `rep movsb` crawls whenever the
// destination is 1-31 bytes past the source, mod 4096: 1.6 GB/s against
// 42 at 4-256 KiB on a Zen 3 VM (memcpy from a page-aligned buffer into a
// malloc'd one at page + 16 is such a case). A plain 16-byte load/store
// loop has no such cliff. The kernel's copies have the same one
// (transport/peer_copy.cpp, and the TCP frame in transport/tcp_endpoint).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/prefetch.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace jaccl::detail {

// Whether two byte ranges [a, a+na) and [b, b+nb) overlap.
inline bool overlaps(const void* a, size_t na, const void* b, size_t nb) {
  const auto pa = reinterpret_cast<uintptr_t>(a);
  const auto pb = reinterpret_cast<uintptr_t>(b);
  return na != 0 && nb != 0 && pa < pb + nb && pb < pa + na;
}

// Copies this short take memcpy's path whatever the distance (its vector
// loops, not `rep movsb`), and a loop's set-up would cost more.
inline constexpr size_t kLoopCopyFromBytes = 1024;

// Whether a copy from src to dst has a distance `rep movsb` crawls at:
// dst 1-31 bytes past src, mod 4096.
inline bool slow_copy_distance(uintptr_t dst, uintptr_t src) {
  const uintptr_t d = (dst - src) % 4096;
  return d != 0 && d < 32;
}

#if defined(__x86_64__)
// The first `body` bytes (a multiple of 64), a line per step through 16-byte
// loads and ordinary (Stream false) or non-temporal (true; dst 16-aligned)
// stores.
template <bool Stream>
inline void copy_lines(char* d, const char* s, size_t body) {
  for (size_t i = 0; i < body; i += 64) {
    prefetch_ahead(s + i, 64);
    auto* from = reinterpret_cast<const __m128i*>(s + i);
    auto* to = reinterpret_cast<__m128i*>(d + i);
    __m128i a = _mm_loadu_si128(from);
    __m128i b = _mm_loadu_si128(from + 1);
    __m128i c = _mm_loadu_si128(from + 2);
    __m128i e = _mm_loadu_si128(from + 3);
    if constexpr (Stream) {
      _mm_stream_si128(to, a);
      _mm_stream_si128(to + 1, b);
      _mm_stream_si128(to + 2, c);
      _mm_stream_si128(to + 3, e);
    } else {
      _mm_storeu_si128(to, a);
      _mm_storeu_si128(to + 1, b);
      _mm_storeu_si128(to + 2, c);
      _mm_storeu_si128(to + 3, e);
    }
  }
}
#endif

// n bytes through the load/store loop (x86-64; memcpy elsewhere).
inline void loop_copy(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  const size_t body = n & ~size_t(63);
  copy_lines<false>(d, s, body);
  if (n != body)
    std::memcpy(d + body, s + body, n - body);
#else
  std::memcpy(dst, src, n);
#endif
}

// memcpy that accepts what memcpy does not (n == 0 with a null pointer, an
// empty vector's data(); dst == src, an in-place op) and steps around the
// `rep movsb` cliff above.
inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n == 0 || dst == src)
    return;
  if (n >= kLoopCopyFromBytes &&
      slow_copy_distance(reinterpret_cast<uintptr_t>(dst),
                         reinterpret_cast<uintptr_t>(src))) {
    loop_copy(dst, src, n);
    return;
  }
  std::memcpy(dst, src, n);
}

// memmove with copy_bytes' step around the cliff where the two ranges do
// not overlap (memmove takes the same `rep movsb` path as memcpy).
inline void move_bytes(void* dst, const void* src, size_t n) {
  if (dst != src && overlaps(dst, n, src, n)) {
    std::memmove(dst, src, n);
    return;
  }
  copy_bytes(dst, src, n);
}

}  // namespace jaccl::detail
