// Copyright 2026 the jaccl authors.
#include "transport/ofi/shm_regions.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

namespace jaccl::detail::ofi {

std::string shm_region_name(long pid, uint64_t nonce) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(nonce));
  return std::to_string(pid) + kShmRegionTag + hex;
}

int remove_shm_regions(long pid) {
  const std::string prefix = std::to_string(pid) + kShmRegionTag;
  int removed = 0;
  // Never throws (jaccl-run calls it while reaping): the iterator's
  // increment(ec), not operator++, which throws on an error.
  std::error_code ec;
  std::filesystem::directory_iterator it("/dev/shm", ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code rm;
    if (it->path().filename().string().rfind(prefix, 0) == 0 &&
        std::filesystem::remove(it->path(), rm)) {
      ++removed;
    }
  }
  return removed;
}

}  // namespace jaccl::detail::ofi
