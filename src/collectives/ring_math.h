// Copyright 2026 the jaccl authors.
// Pure rank and chunk arithmetic of the ring and mesh algorithms: no sockets,
// no allocation, constexpr, so it is unit-tested on its own.
#pragma once

#include <cstddef>
#include <cstdint>

namespace jaccl::detail::ring {

struct Range {
  size_t off = 0;
  size_t len = 0;
  constexpr bool operator==(const Range&) const = default;
};

// Part i of `total` items split into `parts` nearly equal parts: the first
// total % parts parts get one item more. Parts are contiguous and in order.
constexpr Range split(size_t total, size_t parts, size_t i) {
  const size_t base = total / parts;
  const size_t extra = total % parts;
  return {i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

// x mod n in [0, n).
constexpr int mod(long long x, int n) {
  const long long m = x % n;
  return static_cast<int>(m < 0 ? m + n : m);
}

enum class Mode {
  AllReduce,      // reduce-scatter then all-gather: 2(n-1) steps
  AllGather,      // n-1 steps, no reduction
  ReduceScatter,  // n-1 steps; rank r ends with the reduction of chunk r
};

// One direction of a ring of n ranks as seen from rank r. sign = +1 sends to
// r+1 and receives from r-1 ("clockwise"); sign = -1 is the mirror image.
// At step t the rank sends chunk send_chunk(t) and receives recv_chunk(t);
// what it sends at step t+1 is what it received at step t, so a piece can go
// on as soon as it arrived (and was reduced).
struct Schedule {
  int n = 1;
  int r = 0;
  int sign = 1;
  Mode mode = Mode::AllReduce;

  constexpr int to() const { return mod(r + sign, n); }
  constexpr int from() const { return mod(r - sign, n); }
  // Reduce-scatter is shifted by one so that rank r ends with chunk r.
  constexpr int shift() const { return mode == Mode::ReduceScatter ? 1 : 0; }
  constexpr int steps() const {
    return mode == Mode::AllReduce ? 2 * (n - 1) : n - 1;
  }
  constexpr int send_chunk(int t) const {
    return mod(r - static_cast<long long>(sign) * (t + shift()), n);
  }
  constexpr int recv_chunk(int t) const {
    return mod(r - static_cast<long long>(sign) * (t + 1 + shift()), n);
  }
  // Whether what arrives at step t is combined with this rank's input.
  constexpr bool reduces(int t) const {
    return mode == Mode::ReduceScatter ||
           (mode == Mode::AllReduce && t < n - 1);
  }
};

// Directions used around the ring: two halves (one each way) when the two
// neighbours differ; with two ranks one direction already uses both halves of
// the full-duplex link.
constexpr int directions(int n) {
  return n > 2 ? 2 : 1;
}

// A pipeline piece of about `want` bytes, a whole number of elements.
constexpr size_t piece_bytes(size_t want, size_t elem_size) {
  const size_t p = want - want % elem_size;
  return p == 0 ? elem_size : p;
}

}  // namespace jaccl::detail::ring
