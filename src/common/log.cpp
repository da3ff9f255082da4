// Copyright 2026 the jaccl authors.
#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/env.h"

namespace jaccl::detail {

namespace {

// Case aside (NCCL's users write NCCL_DEBUG=INFO). An unknown value keeps
// the default and says so once: the level is read before any config exists,
// so it cannot make one invalid as the other variables do.
LogLevel parse_level(const char* s) {
  if (s == nullptr || *s == '\0') {
    return LogLevel::Warn;
  }
  std::string v(s);
  for (char& c : v)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "off" || v == "0")
    return LogLevel::Off;
  if (v == "error" || v == "1")
    return LogLevel::Error;
  if (v == "warn" || v == "warning" || v == "2")
    return LogLevel::Warn;
  if (v == "info" || v == "3")
    return LogLevel::Info;
  if (v == "debug" || v == "4")
    return LogLevel::Debug;
  if (v == "trace" || v == "5")
    return LogLevel::Trace;
  log_write(LogLevel::Warn,
            "JACCL_LOG='" + std::string(s) +
                "' is not a level (off, error, warn, info, debug, trace or "
                "0-5); logging at warn");
  return LogLevel::Warn;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{
      static_cast<int>(parse_level(env_get(EnvVar::Log)))};
  return level;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::Error:
      return "error";
    case LogLevel::Warn:
      return "warn";
    case LogLevel::Info:
      return "info";
    case LogLevel::Debug:
      return "debug";
    case LogLevel::Trace:
      return "trace";
    default:
      return "";
  }
}

}  // namespace

LogLevel log_level() {
  return static_cast<LogLevel>(level_ref().load(std::memory_order_relaxed));
}

void set_log_level(LogLevel level) {
  level_ref() = static_cast<int>(level);
}

void log_write(LogLevel level, const std::string& msg) {
  // One write per line so lines of concurrent ranks/threads do not interleave.
  std::string line = "[jaccl " + std::string(level_name(level)) + " pid " +
                     std::to_string(::getpid()) + "] " + msg + "\n";
  [[maybe_unused]] auto n = ::write(2, line.data(), line.size());
}

}  // namespace jaccl::detail
