// Copyright 2026 the jaccl authors.
// A conformance suite for side channels (AllGatherFn / AllGatherFactory):
// run it against your own channel to check it does what jaccl needs.
//
// Two layers:
//  - per-rank checks (this header, inline, no GoogleTest): every rank of a
//    group calls the same check with its own fn, in the same order. They
//    throw ConformanceFailure (or the channel's jaccl::Error) on a failure.
//    Use them from processes (e.g. under mpirun: tests/workers/sc_mpi.cpp).
//  - a threaded driver (side_channel_conformance.cpp): ranks as threads of
//    one process, a fresh group per check, plus the checks that need a rank
//    to stay away (a missing rank must be named in a TimeoutError, or a
//    PeerLostError for channels that notice a departure).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bootstrap/side_channel.h"
#include "jaccl/error.h"
#include "jaccl/side_channel.h"

namespace jaccl::test {

class ConformanceFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace conformance {

// Byte i of rank r's input in a call of n bytes (distinct per rank, size and
// position, so misplaced or stale bytes are caught).
inline char pattern(int r, size_t i, size_t n, uint64_t salt = 0) {
  return static_cast<char>((static_cast<uint64_t>(r) * 131u + i * 7u + n * 13u +
                            salt * 29u + (i >> 8)) &
                           0xffu);
}

inline void fail(const std::string& check, int rank, const std::string& what) {
  throw ConformanceFailure(check + ", rank " + std::to_string(rank) + ": " +
                           what);
}

// One all-gather of n patterned bytes, checked at every position.
inline void gather_and_verify(AllGatherFn& fn, int rank, int size, size_t n,
                              uint64_t salt, const std::string& check) {
  std::vector<char> in(n), out(n * static_cast<size_t>(size) + 1, '\x5a');
  for (size_t i = 0; i < n; ++i) {
    in[i] = pattern(rank, i, n, salt);
  }
  fn(in.data(), out.data(), n);
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < n; ++i) {
      if (out[static_cast<size_t>(r) * n + i] != pattern(r, i, n, salt)) {
        fail(check, rank,
             "with n_bytes=" + std::to_string(n) + ", byte " +
                 std::to_string(i) + " of rank " + std::to_string(r) +
                 "'s slot is wrong (not that rank's input of this call)");
      }
    }
  }
  if (out.back() != '\x5a') {
    fail(check, rank,
         "wrote past size * n_bytes = " +
             std::to_string(n * static_cast<size_t>(size)));
  }
}

// Slot r holds rank r's input.
inline void check_rank_order(AllGatherFn& fn, int rank, int size) {
  int32_t mine[2] = {rank, 0x4a43 ^ rank};
  std::vector<int32_t> all(2 * static_cast<size_t>(size), -1);
  fn(reinterpret_cast<const char*>(mine), reinterpret_cast<char*>(all.data()),
     sizeof(mine));
  for (int r = 0; r < size; ++r) {
    if (all[2 * r] != r || all[2 * r + 1] != (0x4a43 ^ r)) {
      fail("rank order", rank,
           "slot " + std::to_string(r) + " holds the input of rank " +
               std::to_string(all[2 * r]));
    }
  }
}

// n_bytes from 0 to max_bytes.
inline void check_sizes(AllGatherFn& fn, int rank, int size,
                        size_t max_bytes = size_t(1) << 20) {
  const size_t sizes[] = {0,    1,     3,     8,          255,      256,
                          4096, 65536, 65537, 256 * 1024, max_bytes};
  uint64_t salt = 1;
  for (size_t n : sizes) {
    if (n <= max_bytes) {
      gather_and_verify(fn, rank, size, n, salt++, "sizes");
    }
  }
}

// Many calls in a row, each with its own data.
inline void check_repeated(AllGatherFn& fn, int rank, int size,
                           int repeats = 20) {
  for (int k = 0; k < repeats; ++k) {
    gather_and_verify(fn, rank, size, 16 + static_cast<size_t>(k % 3) * 100,
                      1000 + static_cast<uint64_t>(k), "repeated calls");
  }
}

// Through detail::SideChannel framing: a rank passing another n_bytes is a
// ProtocolError at every rank, and the channel stays usable afterwards.
inline void check_framing_mismatch(AllGatherFn& fn, int rank, int size,
                                   std::chrono::milliseconds timeout) {
  const std::string check = "framing mismatch";
  detail::SideChannel sc(rank, size, 0x1234, fn, "conformance", timeout, false);
  auto ranks = sc.all_gather_value(static_cast<int32_t>(rank));
  for (int r = 0; r < size; ++r) {
    if (ranks[r] != r)
      fail(check, rank, "framed all_gather_value returned wrong ranks");
  }
  const size_t n = rank == size - 1 ? 8 : 16;
  std::vector<char> in(n, 1), out(16 * static_cast<size_t>(size));
  try {
    sc.all_gather(in.data(), out.data(), n);
    fail(check, rank,
         "rank " + std::to_string(size - 1) +
             " passed n_bytes=8 and the others 16, but no error was raised");
  } catch (const ProtocolError& e) {
    if (std::string(e.what()).find("n_bytes") == std::string::npos) {
      fail(check, rank,
           std::string("ProtocolError does not mention n_bytes: ") + e.what());
    }
  }
  sc.barrier();
  auto again = sc.all_gather_bytes("rank" + std::to_string(rank));
  for (int r = 0; r < size; ++r) {
    if (again[r] != "rank" + std::to_string(r))
      fail(check, rank, "the channel is unusable after a mismatch");
  }
}

// Everything that works from processes (no rank withheld).
inline void run_rank_checks(AllGatherFn& fn, int rank, int size,
                            std::chrono::milliseconds timeout,
                            size_t max_bytes = size_t(1) << 20,
                            int repeats = 20) {
  check_rank_order(fn, rank, size);
  check_sizes(fn, rank, size, max_bytes);
  check_repeated(fn, rank, size, repeats);
  check_framing_mismatch(fn, rank, size, timeout);
}

// True if msg names rank r in a list after "rank"/"ranks" ("waiting for
// ranks 2, 5").
inline bool message_names_rank(const std::string& msg, int r) {
  const std::string want = std::to_string(r);
  for (size_t pos = msg.find("rank"); pos != std::string::npos;
       pos = msg.find("rank", pos + 4)) {
    size_t i = pos + 4;
    if (i < msg.size() && msg[i] == 's')
      ++i;
    while (i < msg.size() && msg[i] == ' ') {
      ++i;
      size_t j = i;
      while (j < msg.size() && msg[j] >= '0' && msg[j] <= '9')
        ++j;
      if (j == i)
        break;
      if (msg.compare(i, j - i, want) == 0 && j - i == want.size())
        return true;
      i = j;
      if (i < msg.size() && msg[i] == ',')
        ++i;
    }
  }
  return false;
}

}  // namespace conformance

// ---- threaded driver (side_channel_conformance.cpp) -------------------------

// Runs body(rank) on n threads; returns each rank's exception (or null).
std::vector<std::exception_ptr> run_ranks(
    int n, const std::function<void(int rank)>& body);

struct ThreadedTarget {
  std::string name;
  // A factory for a fresh group of `size` ranks whose calls time out after
  // `timeout` (a new job namespace each time). Called once per check.
  std::function<AllGatherFactory(int size, std::chrono::milliseconds timeout)>
      make_group;
};

struct ConformanceOptions {
  int ranks = 4;
  int many_ranks = 64;
  int repeats = 20;
  size_t max_bytes = size_t(1) << 20;
  std::chrono::milliseconds timeout{30000};       // for passing checks
  std::chrono::milliseconds short_timeout{1500};  // for missing-rank checks
  bool missing_rank_checks = true;
};

// Runs every check; returns one line per failure ("" none). Never hangs
// longer than the channel's own deadlines.
std::vector<std::string> run_threaded_conformance(
    const ThreadedTarget& target, const ConformanceOptions& options = {});

}  // namespace jaccl::test
