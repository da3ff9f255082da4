// Copyright 2026 the jaccl authors.
#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/env.h"

namespace jaccl::detail {

namespace {

LogLevel parse_level(const char* s) {
  if (s == nullptr || *s == '\0') {
    return LogLevel::Warn;
  }
  std::string_view v(s);
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
