// Copyright 2026 the jaccl authors.
// Copies between this process's memory and another process's through the
// kernel (cross-memory attach: process_vm_readv / process_vm_writev), what
// the shared-memory group's direct ways use instead of staging. The kernel
// copies with `rep movsb`, which on some CPUs crawls at certain distances
// between destination and source (peer_copy.cpp); these functions keep
// every copy at full speed whatever the buffers' alignments.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace jaccl::detail {

// Moves len bytes from address `addr` in process pid into dst. Returns 0
// once all moved, else the errno of the failure (EFAULT for a short copy).
int read_peer(pid_t pid, uint64_t addr, char* dst, size_t len);

// Moves len bytes from src to address `addr` in process pid; as read_peer.
int write_peer(pid_t pid, uint64_t addr, const char* src, size_t len);

}  // namespace jaccl::detail
