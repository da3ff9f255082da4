// Copyright 2026 the jaccl authors.
// Argument checks shared by the groups: a usage error is thrown before any
// byte moves and leaves the group working.
//
// Every group (NetGroup, ShmGroup, HierGroup) runs an op in this order, so
// the same bad call fails the same way on one host and across hosts:
//   1. take the group's lock; a failed group rethrows its failure;
//   2. check the arguments here (UsageError; the group is not poisoned);
//   3. an op that moves zero bytes (n == 0 for all_sum/max/min, all_gather,
//      sum_scatter, broadcast, send, recv, all_to_all) returns at once: it
//      meets no peer, so it neither synchronizes nor needs its peers to
//      call it too. barrier always meets every rank, and all_to_allv always
//      exchanges its counts (only together do the ranks know the bytes).
#pragma once

#include <cstddef>
#include <string>

#include "collectives/ring_math.h"
#include "common/error.h"

namespace jaccl::detail {

[[noreturn]] inline void raise_usage(int rank, const std::string& what) {
  raise(ErrorKind::Usage, what, {.rank = rank});
}

// Null buffers are allowed only for empty transfers.
inline void check_buffers(int rank, const char* op, const void* in, size_t n_in,
                          const void* out, size_t n_out) {
  if ((in == nullptr && n_in != 0) || (out == nullptr && n_out != 0)) {
    raise_usage(rank,
                std::string(op) + ": null buffer for a non-empty transfer");
  }
}

// All-reduce buffers: the same buffer (in place) or disjoint ones.
inline void check_reduce_buffers(int rank, const char* op, const void* in,
                                 void* out, size_t n) {
  check_buffers(rank, op, in, n, out, n);
  if (in != out && ring::overlaps(in, n, out, n)) {
    raise_usage(rank, std::string(op) + ": input and output overlap partially");
  }
}

// A send/recv peer: another rank of the group.
inline void check_peer_rank(int rank, int size, const char* op, int peer,
                            const char* role) {
  if (peer < 0 || peer >= size || peer == rank) {
    raise_usage(
        rank, std::string(op) + ": " + role + " rank " + std::to_string(peer) +
                  (peer == rank ? " is this rank"
                                : " is out of range for a group of size " +
                                      std::to_string(size)));
  }
}

}  // namespace jaccl::detail
