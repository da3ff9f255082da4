// Copyright 2026 the jaccl authors.
#include "common/cache_info.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>

namespace jaccl::detail {

namespace {

size_t read_sysfs_cache_bytes(int level) {
  for (int i = 0; i < 8; ++i) {
    std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lv(dir + "level"), ty(dir + "type"), sz(dir + "size");
    int l = 0;
    std::string type, size;
    if (!(lv >> l) || !(ty >> type) || !(sz >> size))
      continue;
    if (l != level || type == "Instruction")
      continue;
    size_t v = std::strtoull(size.c_str(), nullptr, 10);
    char unit = size.empty() ? 0 : size.back();
    if (unit == 'K')
      v <<= 10;
    else if (unit == 'M')
      v <<= 20;
    return v;
  }
  return 0;
}

}  // namespace

size_t sysfs_cache_bytes(int level) {
  // Read once per level and process (a lookup opens up to 12 files; a
  // shrunk group's set-up made three, on every survivor at once).
  static std::array<std::atomic<long long>, 5> known = {-1, -1, -1, -1, -1};
  if (level < 1 || level >= 5) {
    return read_sysfs_cache_bytes(level);
  }
  std::atomic<long long>& k = known[static_cast<size_t>(level)];
  long long v = k.load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<long long>(read_sysfs_cache_bytes(level));
    k.store(v, std::memory_order_relaxed);
  }
  return static_cast<size_t>(v);
}

size_t l2_cache_bytes() {
  size_t l2 = sysfs_cache_bytes(2);
  if (l2 == 0) {
    const long v = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
    l2 = v > 0 ? static_cast<size_t>(v) : size_t(512) << 10;
  }
  return l2;
}

}  // namespace jaccl::detail
