// Copyright 2026 the jaccl authors.
// Copies for the shared-memory data planes. For the last hop into the
// caller's buffer: past the last-level cache, all ranks of a host share one
// memory bus (here one core's memcpy already saturates it), so a large op is
// as fast as the bytes it moves to and from DRAM: non-temporal stores write the
// output without first reading it in (a third of a copy's traffic) and do not
// evict the staging buffers that are about to be reused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/prefetch.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace jaccl::detail {

// memcpy that accepts what memcpy does not: n == 0 with a null pointer (an
// empty vector's data()) and dst == src (an in-place op).
inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n != 0 && dst != src)
    std::memcpy(dst, src, n);
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

// A temporal copy for the shared-memory data planes' bulk copies (staging,
// the last hop into the caller's buffer), instead of memcpy. glibc's memcpy
// uses `rep movsb` from a few KiB up to the L2 size when the CPU reports
// ERMS/FSRM, and on some CPUs (AMD Zen 3) `rep movsb` runs at a tenth of
// its speed whenever (dst - src) mod 4096 is in 1..~32: the case of a
// malloc'd buffer (page + 16) copied from a page-aligned segment. A plain
// 16-byte load/store loop has no such cliff (bench/shm_pattern; figures in
// BENCHMARKS.md). Small copies stay with memcpy (latency).
inline void cached_copy(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  if (n < 1024 || dst == src) {
    copy_bytes(dst, src, n);
    return;
  }
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  const size_t body = n & ~size_t(63);
  copy_lines<false>(d, s, body);
  if (n != body)
    std::memcpy(d + body, s + body, n - body);
#else
  copy_bytes(dst, src, n);
#endif
}

// memcpy through non-temporal stores where the CPU has them. Ends with a
// store fence, so the data is ordered before any later (release) store.
inline void stream_copy(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  if (head > n)
    head = n;
  if (head != 0)
    std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  const size_t body = n & ~size_t(63);
  copy_lines<true>(d, s, body);
  if (n != body)
    std::memcpy(d + body, s + body, n - body);
  _mm_sfence();
#else
  if (n != 0)
    std::memcpy(dst, src, n);
#endif
}

// The first hop (into the segment, for the peers) and the last (into the
// caller's buffer): ordinary or non-temporal stores (shm_strategy.h).
inline void copy_with(void* dst, const void* src, size_t n, bool stream) {
  if (stream)
    stream_copy(dst, src, n);
  else
    cached_copy(dst, src, n);
}

}  // namespace jaccl::detail
