// Copyright 2026 the jaccl authors.
#include "common/cache_info.h"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <mutex>
#include <string>

#include "common/read_file.h"

namespace jaccl::detail {

namespace {

constexpr int kLevels = 5;  // 1-4; index 0 unused

// Every data or unified cache of cpu0 by level, in one pass over its
// index directories with plain reads (the first of these is what a rank
// reads of sysfs at init: at 1024 ranks on one host, iostreams over a dozen
// files each were a third of a millisecond a rank).
std::array<size_t, kLevels> read_sysfs_caches() {
  std::array<size_t, kLevels> out{};
  for (int i = 0; i < 8; ++i) {
    const std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::string level, type, size;
    if (!read_file(dir + "level", &level)) {
      break;  // the indices are consecutive
    }
    const int l = std::atoi(level.c_str());
    if (l < 1 || l >= kLevels || out[static_cast<size_t>(l)] != 0 ||
        !read_file(dir + "type", &type) || type.rfind("Instruction", 0) == 0 ||
        !read_file(dir + "size", &size)) {
      continue;
    }
    char* end = nullptr;
    size_t v = std::strtoull(size.c_str(), &end, 10);
    if (*end == 'K') {
      v <<= 10;
    } else if (*end == 'M') {
      v <<= 20;
    }
    out[static_cast<size_t>(l)] = v;
  }
  return out;
}

}  // namespace

size_t sysfs_cache_bytes(int level) {
  // Read once per process (a shrunk group's set-up asked three times, on
  // every survivor at once).
  static std::once_flag once;
  static std::array<size_t, kLevels> known{};
  std::call_once(once, [] { known = read_sysfs_caches(); });
  return level >= 1 && level < kLevels ? known[static_cast<size_t>(level)] : 0;
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
