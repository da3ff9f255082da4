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

#include "common/copy.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace jaccl::detail {

// A temporal copy for the shared-memory data planes' bulk copies (staging,
// the last hop into the caller's buffer): the load/store loop at every
// distance, not only at copy_bytes' slow ones (common/copy.h): on AMD Zen
// 3 glibc's `rep movsb` copied lines another core held at 3 GB/s where the
// loop moved 28 (bench/shm_pattern, bench/README.md). Small copies stay
// with memcpy (latency).
inline void cached_copy(void* dst, const void* src, size_t n) {
  if (n < kLoopCopyFromBytes || dst == src) {
    copy_bytes(dst, src, n);
    return;
  }
  loop_copy(dst, src, n);
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
