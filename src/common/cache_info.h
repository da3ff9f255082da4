// Copyright 2026 the jaccl authors.
// The CPU caches as this machine reports them. sysfs first: in a VM
// sysconf(_SC_LEVEL3_CACHE_SIZE) may report the host's L3 (BENCHMARKS.md,
// History).
#pragma once

#include <cstddef>

namespace jaccl::detail {

// Size of the data or unified cache of `level` serving cpu0, from sysfs
// ("512K", "32768K"); 0 if unknown.
size_t sysfs_cache_bytes(int level);

// One core's L2: sysfs, else sysconf, else 512 KiB.
size_t l2_cache_bytes();

}  // namespace jaccl::detail
