// Copyright 2026 the jaccl authors.
// A POSIX shared-memory segment, created by one local rank and mapped by the
// others. The name carries a per-job random nonce so two jobs on one machine
// never meet, and the creator unlinks it as soon as every local rank has
// mapped it, so a SIGKILL at any later moment leaves nothing in /dev/shm.
#pragma once

#include <cstddef>
#include <string>

namespace jaccl::detail {

class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(ShmSegment&& o) noexcept;
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  // Creates (exclusively), sizes and maps `bytes`, pre-faulted. A full
  // /dev/shm is an IoError naming the size asked for.
  static ShmSegment create(const std::string& name, size_t bytes, int rank);
  // Maps an existing segment of `bytes`.
  static ShmSegment open(const std::string& name, size_t bytes, int rank);

  // Removes the name (the mapping stays valid). Idempotent.
  void unlink();

  char* data() const { return static_cast<char*>(base_); }
  size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
  bool owner_ = false;
};

}  // namespace jaccl::detail
