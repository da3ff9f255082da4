// Copyright 2026 the jaccl authors.
#include "run/binding.h"

#include <sched.h>

namespace jaccl::run {

std::vector<int> our_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) {
    return out;
  }
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<std::vector<int>> cpu_shares(int n, const std::vector<int>& cpus) {
  std::vector<std::vector<int>> out(static_cast<size_t>(n));
  const size_t c = cpus.size();
  for (size_t r = 0; r < out.size(); ++r) {
    const size_t from = r * c / out.size();
    const size_t to = (r + 1) * c / out.size();
    out[r].assign(cpus.begin() + static_cast<std::ptrdiff_t>(from),
                  cpus.begin() + static_cast<std::ptrdiff_t>(to));
  }
  return out;
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) {
      ++j;
    }
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]);
    if (j > i) {
      out += "-" + std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

bool bind_to(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    CPU_SET(c, &set);
  }
  return ::sched_setaffinity(0, sizeof(set), &set) == 0;
}

}  // namespace jaccl::run
