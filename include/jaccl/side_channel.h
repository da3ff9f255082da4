// Copyright 2026 the jaccl authors.
// The side channel: the byte-level all-gather ranks use to exchange
// connection metadata before any data moves.
#pragma once

#include <cstddef>
#include <functional>

namespace jaccl {

// f(src, dst, n_bytes): every rank passes n_bytes at src; on return dst holds
// size * n_bytes bytes, every rank's input in rank order. Called by one thread
// at a time (jaccl serializes calls).
using AllGatherFn =
    std::function<void(const char* src, char* dst, size_t n_bytes)>;

// Called exactly once per init with (rank, size); returns the all-gather.
using AllGatherFactory = std::function<AllGatherFn(int rank, int size)>;

}  // namespace jaccl
