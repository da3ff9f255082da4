// Copyright 2026 the jaccl authors.
// Rank lists as the elastic worker prints them and its tests read them.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace jaccl::test {

// "0,2,3" (no spaces; empty for none).
inline std::string rank_list(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

inline bool has_rank(const std::vector<int>& v, int rank) {
  return std::find(v.begin(), v.end(), rank) != v.end();
}

}  // namespace jaccl::test
