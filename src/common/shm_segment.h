// Copyright 2026 the jaccl authors.
// A shared-memory segment mapped by every rank of one host.
//
// Two kinds. Anonymous (create_anonymous / adopt): a sealed memfd with no
// name anywhere, handed to the other local ranks as a file descriptor (see
// shm_handoff.h); it disappears with the last process that maps it, so a
// SIGKILL at any moment leaves nothing behind. Named (create / open): a POSIX
// segment /dev/shm/<name>, the fallback when a local rank cannot reach the
// creator's hand-off socket; its creator unlinks it once every local rank has
// mapped it, and until then a SIGKILL of every local rank leaves the name.
//
// Either way the pages are reserved and pre-faulted at set-up: asking for
// more than the machine (or /dev/shm) has is an IoError naming the bytes
// asked for, never a SIGBUS on first touch. A creator may reserve only the
// first `reserve` bytes (the rest comes on first touch, as for any file):
// the whole size must still fit in what is free when it is made.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/net.h"

namespace jaccl::detail {

class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(ShmSegment&& o) noexcept;
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  // Named: creates /dev/shm<name> (exclusively), sizes and maps `bytes`,
  // pre-faulted. The creator unlinks the name on destruction unless
  // unlink() ran first. A full /dev/shm is an IoError naming the size.
  static ShmSegment create(const std::string& name, size_t bytes, int rank,
                           size_t reserve = SIZE_MAX);
  // Named: maps an existing segment of `bytes`.
  static ShmSegment open(const std::string& name, size_t bytes, int rank);

  // Anonymous: a memfd labelled `label` (shown in /proc/<pid>/maps as
  // /memfd:<label>), `bytes` reserved, sealed against shrinking and growing,
  // mapped. Keeps the descriptor (fd()) for handing to the other ranks.
  // Errors name what chose the size (`sized_by`).
  static ShmSegment create_anonymous(const std::string& label, size_t bytes,
                                     int rank, size_t reserve = SIZE_MAX,
                                     const char* sized_by = "JACCL_SHM_BUDGET");
  // Anonymous: maps a memfd received from the creator after checking it is a
  // sealed regular file of exactly `bytes` (else ProtocolError).
  static ShmSegment adopt(Fd fd, size_t bytes, int rank,
                          const std::string& label,
                          const char* sized_by = "JACCL_SHM_BUDGET");

  // Removes the name of a named segment this rank created (the mapping
  // stays valid). Idempotent; nothing for anonymous segments.
  void unlink();
  // The memfd of an anonymous segment this rank holds (-1 if none); close
  // it once handed over (the mapping stays valid).
  int fd() const { return fd_.get(); }
  void close_fd() { fd_.reset(); }

  char* data() const { return static_cast<char*>(base_); }
  size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }

 private:
  // Unmaps, unlinks (if the owner) and closes; the object stays valid.
  void release() noexcept;
  // `bytes` of fd mapped, under `name`.
  static ShmSegment mapped(const std::string& name, int fd, size_t bytes,
                           const std::string& address, int rank);

  void* base_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
  bool owner_ = false;  // named, created here, not yet unlinked
  Fd fd_;
};

// The memfd labelled `label` that process `pid` holds as descriptor
// `fd_no`, opened through /proc/<pid>/fd/<fd_no> (the same user and pid
// namespace; the kernel checks we may). Invalid, with *why and errno (0
// when the descriptor is another file), when it cannot be opened or is not
// that memfd.
Fd open_memfd_of(int pid, int fd_no, const std::string& label,
                 std::string* why);

// Bytes this process could still fill with shared memory without the kernel
// killing something: MemAvailable + SwapFree, capped by the room left in
// this process's cgroup (v2) memory limits. 0 if unknown.
size_t shm_available_bytes();

}  // namespace jaccl::detail
