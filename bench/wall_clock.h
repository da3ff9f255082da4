// Copyright 2026 the jaccl authors.
// Wall-clock milliseconds since the epoch: comparable between the processes
// of one host (a kill in one, its detection in another), unlike
// steady_clock, whose origin is per boot but not promised to be shared.
#pragma once

#include <ctime>

inline double realtime_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 +
         static_cast<double>(ts.tv_nsec) / 1e6;
}
