// Copyright 2026 the jaccl authors.
// Parsing shared by Config's setters and Config::from_env.
#pragma once

#include <charconv>
#include <cstddef>
#include <optional>
#include <string_view>

namespace jaccl::detail {

// Parses a whole decimal integer; nullopt on anything else.
inline std::optional<long long> parse_int(std::string_view s) {
  long long v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) {
    return std::nullopt;
  }
  return v;
}

// Config's shared-memory settings: the budget's range in MiB, and the
// strategies (collectives/shm_strategy.h) for messages.
inline constexpr size_t kMaxShmBudgetMib = size_t(1) << 20;
inline constexpr const char* kShmStrategies =
    "auto, cached, stream-stage, stream, direct";

}  // namespace jaccl::detail
