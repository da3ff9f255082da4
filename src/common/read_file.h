// Copyright 2026 the jaccl authors.
// Whole small files (/proc, /sys, cgroup files) read with plain read(2):
// a process's /proc file can fail half-way with ESRCH when it exits, and
// std::filebuf throws from underflow on such an error even with no
// exception mask set.
#pragma once

#include <string>

namespace jaccl::detail {

// The file's bytes into *out; false on any error, with errno in *err
// (ENOENT, ESRCH, ...) when err is given.
bool read_file(const std::string& path, std::string* out, int* err = nullptr);

// The file's bytes, "" when it cannot be read.
std::string read_file_or_empty(const std::string& path);

// A symbolic link's target (/proc/self/ns/*, /proc/<pid>/fd/*), "" when it
// cannot be read (errno then says why).
std::string read_link_or_empty(const std::string& path);

}  // namespace jaccl::detail
