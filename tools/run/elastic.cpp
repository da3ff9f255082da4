// Copyright 2026 the jaccl authors.
#include "run/elastic.h"

#include <algorithm>
#include <iterator>

namespace jaccl::run {

namespace {

bool is_var(const std::string& kv, const std::string& name) {
  return kv.size() > name.size() && kv.compare(0, name.size(), name) == 0 &&
         kv[name.size()] == '=';
}

}  // namespace

std::string env_value(const std::vector<std::string>& env,
                      const std::string& name) {
  for (const auto& kv : env) {
    if (is_var(kv, name)) {
      return kv.substr(name.size() + 1);
    }
  }
  return "";
}

void add_grow_channel(std::vector<std::string>& env, const std::string& uri) {
  if (env_value(env, "JACCL_GROW_CHANNEL").empty()) {
    env.push_back("JACCL_GROW_CHANNEL=" + uri);
  }
}

std::vector<std::string> replacement_env(const std::vector<std::string>& env,
                                         int generation) {
  std::vector<std::string> out;
  for (const auto& kv : env) {
    static const char* const kDropped[] = {
        "JACCL_RANK",     "JACCL_SIZE", "MLX_RANK",
        "MLX_WORLD_SIZE", "JACCL_JOIN", "JACCL_COORDINATOR_FD"};
    const bool drop =
        std::any_of(std::begin(kDropped), std::end(kDropped),
                    [&](const char* name) { return is_var(kv, name); });
    if (!drop) {
      out.push_back(kv);
    }
  }
  out.push_back("JACCL_JOIN=" + std::to_string(generation));
  return out;
}

}  // namespace jaccl::run
