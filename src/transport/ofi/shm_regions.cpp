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

std::string shm_region_of_address(const std::vector<uint8_t>& address) {
  std::string name(address.begin(), address.end());
  name = name.substr(0, name.find('\0'));
  const std::string prefix = kShmAddressPrefix;
  if (name.rfind(prefix, 0) != 0 ||
      name.find(kShmRegionTag) == std::string::npos ||
      name.find('/', prefix.size()) != std::string::npos) {
    return "";
  }
  return name.substr(prefix.size());
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
