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

std::vector<std::string> shm_regions(long pid) {
  const std::string prefix = std::to_string(pid) + kShmRegionTag;
  std::vector<std::string> names;
  // increment(ec), not operator++, which throws on an error: jaccl-run
  // calls this while reaping.
  std::error_code ec;
  std::filesystem::directory_iterator it("/dev/shm", ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) == 0) {
      names.push_back(std::move(name));
    }
  }
  return names;
}

int remove_shm_regions(long pid) {
  int removed = 0;
  for (const std::string& name : shm_regions(pid)) {
    std::error_code ec;
    if (std::filesystem::remove(std::filesystem::path("/dev/shm") / name, ec)) {
      ++removed;
    }
  }
  return removed;
}

}  // namespace jaccl::detail::ofi
