// Copyright 2026 the jaccl authors.
// The names jaccl gives libfabric's shm regions (/dev/shm/<pid>:jaccl-<hex>)
// and the sweep of those a killed process left. libfabric unlinks a region
// when its endpoint closes and when its process exits or takes SIGINT or
// SIGTERM, but nothing of the process runs on SIGKILL (the OOM killer's, or
// a launcher's last resort), so whoever reaped the process removes them.
// No libfabric header here: jaccl-run uses it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace jaccl::detail::ofi {

// What follows the pid in every region name jaccl gives.
inline constexpr const char* kShmRegionTag = ":jaccl-";
// What precedes a region name in an shm endpoint's address.
inline constexpr const char* kShmAddressPrefix = "fi_shm://";

// "<pid>:jaccl-<nonce, 16 hex digits>".
std::string shm_region_name(long pid, uint64_t nonce);

// The region an shm endpoint address names ("fi_shm://<name>", NUL
// terminated, as fi_getname gives it), or "" when it names no jaccl region.
std::string shm_region_of_address(const std::vector<uint8_t>& address);

// The names of /dev/shm/<pid>:jaccl-* (never throws).
std::vector<std::string> shm_regions(long pid);

// Unlinks every /dev/shm/<pid>:jaccl-* and returns how many. Only for a
// process the caller knows is dead (it reaped it): a live one's regions are
// in use.
int remove_shm_regions(long pid);

}  // namespace jaccl::detail::ofi
