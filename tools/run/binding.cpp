// Copyright 2026 the jaccl authors.
#include "run/binding.h"

namespace jaccl::run {

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

}  // namespace jaccl::run
