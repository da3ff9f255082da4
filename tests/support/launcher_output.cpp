// Copyright 2026 the jaccl authors.
#include "support/launcher_output.h"

#include <algorithm>
#include <sstream>

#include "transport/ofi/shm_regions.h"

namespace jaccl::test {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
}

bool split_prefix(const std::string& line, int& rank, std::string& rest) {
  size_t close = line.find("] ");
  if (line.empty() || line[0] != '[' || close == std::string::npos ||
      !all_digits(line.substr(1, close - 1))) {
    return false;
  }
  rank = std::stoi(line.substr(1, close - 1));
  rest = line.substr(close + 2);
  return true;
}

std::map<int, std::map<std::string, std::string>> rank_envs(
    const std::string& output) {
  std::map<int, std::map<std::string, std::string>> out;
  for (const auto& line : lines_of(output)) {
    int rank;
    std::string rest;
    if (split_prefix(line, rank, rest) && rest.rfind("env ", 0) == 0) {
      size_t eq = rest.find('=');
      out[rank][rest.substr(4, eq - 4)] = rest.substr(eq + 1);
    }
  }
  return out;
}

std::map<int, pid_t> rank_pids_by_rank(const std::string& output) {
  std::map<int, pid_t> pids;
  for (const auto& line : lines_of(output)) {
    int rank;
    std::string rest;
    if (split_prefix(line, rank, rest) && rest.rfind("pid=", 0) == 0 &&
        all_digits(rest.substr(4))) {
      pids[rank] = static_cast<pid_t>(std::stol(rest.substr(4)));
    }
  }
  return pids;
}

std::vector<pid_t> rank_pids(const std::string& output) {
  std::vector<pid_t> pids;
  for (const auto& [rank, pid] : rank_pids_by_rank(output)) {
    pids.push_back(pid);
  }
  return pids;
}

std::vector<pid_t> launcher_pids(const std::string& output) {
  std::vector<pid_t> pids;
  for (const auto& line : lines_of(output)) {
    size_t at = line.find(" is pid ");
    if (line.rfind("jaccl-run: rank ", 0) == 0 && at != std::string::npos &&
        all_digits(line.substr(at + 8))) {
      pids.push_back(static_cast<pid_t>(std::stol(line.substr(at + 8))));
    }
  }
  return pids;
}

std::map<int, pid_t> ssh_pids(const std::string& output) {
  std::map<int, pid_t> pids;
  const std::string head = "jaccl-run: rank ";
  for (const auto& line : lines_of(output)) {
    size_t at = line.find(", ssh pid ");
    if (line.rfind(head, 0) != 0 || at == std::string::npos ||
        line.find(" started on ") == std::string::npos) {
      continue;
    }
    std::string pid = line.substr(at + 10);
    pid = pid.substr(0, pid.find(')'));
    size_t sp = line.find(' ', head.size());
    if (all_digits(pid) &&
        all_digits(line.substr(head.size(), sp - head.size()))) {
      pids[std::stoi(line.substr(head.size(), sp - head.size()))] =
          static_cast<pid_t>(std::stol(pid));
    }
  }
  return pids;
}

std::vector<std::string> shm_regions_of(pid_t pid) {
  return jaccl::detail::ofi::shm_regions(pid);
}

}  // namespace jaccl::test
