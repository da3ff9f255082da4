// Copyright 2026 the jaccl authors.
// Minimal leveled logging to stderr, level from JACCL_LOG.
#pragma once

#include <sstream>
#include <string>

namespace jaccl::detail {

enum class LogLevel { Off = 0, Error, Warn, Info, Debug, Trace };

// Current level (parsed once from JACCL_LOG: off|error|warn|info|debug|trace
// in any case, or 0..5; default warn, also for an unknown value, which is
// named on stderr).
LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, const std::string& msg);

}  // namespace jaccl::detail

#define JACCL_LOG(level, expr)                                              \
  do {                                                                      \
    if (::jaccl::detail::log_level() >= ::jaccl::detail::LogLevel::level) { \
      std::ostringstream jaccl_log_os_;                                     \
      jaccl_log_os_ << expr;                                                \
      ::jaccl::detail::log_write(::jaccl::detail::LogLevel::level,          \
                                 jaccl_log_os_.str());                      \
    }                                                                       \
  } while (0)
