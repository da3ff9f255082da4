// Copyright 2026 the jaccl authors.
// Reading jaccl-run's output in tests: "[rank] ..." lines, what
// launcher_probe printed through it, and what jaccl-run -v said.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace jaccl::test {

std::vector<std::string> lines_of(const std::string& text);
bool all_digits(const std::string& s);
// Splits "[rank] rest" into rank and rest; false for other lines.
bool split_prefix(const std::string& line, int& rank, std::string& rest);
// Values of "[rank] env NAME=VALUE" lines: result[rank][NAME] = VALUE.
std::map<int, std::map<std::string, std::string>> rank_envs(
    const std::string& output);
// pids the ranks printed ("[rank] pid=N"), by rank.
std::map<int, pid_t> rank_pids_by_rank(const std::string& output);
std::vector<pid_t> rank_pids(const std::string& output);
// pids jaccl-run -v reported ("jaccl-run: rank R is pid N").
std::vector<pid_t> launcher_pids(const std::string& output);
// ssh client pids jaccl-run -v reported for remote ranks, by rank
// ("jaccl-run: rank R started on H (remote pid P, ssh pid S)").
std::map<int, pid_t> ssh_pids(const std::string& output);
// The libfabric shm regions jaccl named for pid (/dev/shm/<pid>:jaccl-*).
std::vector<std::string> shm_regions_of(pid_t pid);

}  // namespace jaccl::test
