// Copyright 2026 the jaccl authors.
// Software prefetch for the bulk loops (copies through the shared-memory
// segment, reduction kernels). Their reads come from another core's cache or
// from DRAM, and the hardware's own prefetchers do not run far enough ahead
// to cover that latency: asking for the line a few KiB ahead took a 2-rank
// shm all_sum 7-18 % less time from 64 KiB to 16 MiB (BENCHMARKS.md,
// History, "Prefetching ahead in the bulk loops"; 1 and 2 KiB ahead gained
// less, 8 KiB lost part of it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace jaccl::detail {

inline constexpr size_t kPrefetchAhead = 4096;

// Asks for the lines of [p, p + len) kPrefetchAhead bytes further on. Not
// bounded by the caller's buffer: the large ops call a loop per piece of a
// chunk, and what lies past a piece is the next piece (stopping at each
// piece's end cost 8 % of the gain); a prefetch never faults.
inline void prefetch_ahead(const void* p, size_t len) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p) + kPrefetchAhead;
  for (size_t l = 0; l < len; l += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(at + l));
}

}  // namespace jaccl::detail
