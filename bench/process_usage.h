// Copyright 2026 the jaccl authors.
// What this process has used so far (every thread): the bootstrap
// benchmarks difference two readings around a phase.
#pragma once

#include <sys/resource.h>

// CPU ms (user + system) and minor page faults, from one getrusage.
inline void process_usage(double* cpu_ms, double* faults) {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e3 +
           static_cast<double>(t.tv_usec) / 1e3;
  };
  *cpu_ms = ms(ru.ru_utime) + ms(ru.ru_stime);
  *faults = static_cast<double>(ru.ru_minflt);
}
