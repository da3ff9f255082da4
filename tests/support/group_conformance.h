// Copyright 2026 the jaccl authors.
// A conformance suite for groups (jaccl::Group): the same checks for every
// group kind -- TCP mesh and ring, shared memory, hierarchical, libfabric.
// Modelled on the side channels' suite (support/side_channel_conformance.h):
//  - per-rank checks (this header, no GoogleTest): every rank of a group
//    calls the same check with its own Group, in the same order; a wrong
//    result is counted in Ctx and reported through Ctx::on_fail, an
//    unexpected jaccl::Error propagates. Processes use them
//    (tests/workers/conformance.cpp, one rank per process) and so do
//    threads (tests/unit/test_group_conformance.cpp, every kind in one
//    process);
//  - the reference they compare with: support/group_reference.h.
// Each check names itself in Ctx::current, so a failure or an exception
// says which call it was.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "jaccl/jaccl.h"
#include "support/group_reference.h"

namespace jaccl::test::group_conformance {

struct Ctx {
  Group& g;
  int rank;
  int size;
  // A directory every rank of the group sees (the barrier check).
  std::string dir;
  // Called with each failure, "<check>: <what>" (the first 20).
  std::function<void(const std::string&)> on_fail;
  long checks = 0, failures = 0;
  // An FNV-1a-style hash over every result checked, in order: the same on
  // runs that must produce bit-identical results (JACCL_SHM_STRATEGY forced
  // each way).
  uint64_t digest = 0xcbf29ce484222325ull;
  int salt = 0;
  std::string current;  // the check in progress, for messages
};

void fail(Ctx& c, const std::string& what);

// Counts a check; a mismatch is a failure naming the first wrong element.
template <class T>
void compare(Ctx& c, const T* got, const T* want, size_t count,
             const char* what = "result") {
  ++c.checks;
  // Eight bytes a step (a byte a step was the slowest part of a big check).
  const auto* bytes = reinterpret_cast<const unsigned char*>(got);
  const size_t len = count * sizeof(T);
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes + i, 8);
    c.digest = (c.digest ^ w) * 0x100000001b3ull;
  }
  for (; i < len; ++i)
    c.digest = (c.digest ^ bytes[i]) * 0x100000001b3ull;
  size_t bad = 0, first = 0;
  for (size_t k = 0; k < count; ++k) {
    if (!same(got[k], want[k]) && bad++ == 0)
      first = k;
  }
  if (bad > 0) {
    fail(c, std::string(what) + ": " + std::to_string(bad) + " of " +
                std::to_string(count) + " elements differ, first at " +
                std::to_string(first) + ": got " + show(got[first]) +
                ", want " + show(want[first]));
  }
}

// Runs f, which must throw a jaccl::Error of `kind` whose message holds
// `needle`.
void expect_error(Ctx& c, ErrorKind kind, const std::string& needle,
                  const std::function<void()>& f);

// ---- the checks (group_conformance*.cpp) ---------------------------------

// gen() repeats every kGenPeriod elements (the references rely on it).
void check_gen_period(Ctx& c);

// all_sum/max/min of every dtype at each count, out of place and in place
// (the input left alone, the output fully written); float specials (signed
// zeros, NaN, infinities, overflow).
void run_reductions(Ctx& c, const std::vector<size_t>& counts);
// all_reduce with prod and the bitwise ops (every dtype they take) at each
// count, out of place and in place; with sum, max and min once per dtype.
void run_all_reduce_ops(Ctx& c, const std::vector<size_t>& counts);
// reduce, gather and scatter from three roots, every op and dtype for
// reduce, in place on the root, null buffers where the op allows them
// (group_conformance_rooted.cpp).
void run_rooted(Ctx& c, const std::vector<size_t>& counts);
// all_gather and sum_scatter of every dtype at each count, out of place and
// in place (the input at this rank's slot of the output).
void run_gather_scatter(Ctx& c, const std::vector<size_t>& counts);
// Sizes around the mesh/ring switch, buffers at odd addresses, and inexact
// float sums that every rank must end with bit for bit.
void run_edges(Ctx& c);
// 4 MiB plus a few elements (no chunking divides it evenly); full: every op
// and several dtypes, else one all_sum.
void run_big(Ctx& c, bool full);
// broadcast from three roots and send/recv in a ring at each size; two
// messages between every ordered pair at each of pair_sizes.
void run_point_to_point(Ctx& c, const std::vector<size_t>& sizes,
                        const std::vector<size_t>& pair_sizes);
// Nobody leaves a barrier before every rank has entered it (files in dir).
void check_barrier(Ctx& c, int rounds);
// all_to_all and all_to_allv: every element size class, empty and odd
// blocks, unaligned buffers, one large skewed block (full: larger still),
// overlap and mismatched counts (group_conformance_a2a.cpp).
void run_all_to_all(Ctx& c, bool full);
// Null and partly overlapping buffers, bad dtypes, ops, counts, peers and
// roots: a
// UsageError on the calling rank alone, no bytes moved, the group working
// after (group_conformance_rules.cpp).
void run_usage_errors(Ctx& c);
// An op of zero bytes returns at once without its peers; the streams stay
// in step (group_conformance_rules.cpp).
void run_zero_bytes(Ctx& c);

// Everything above (what the conformance worker runs); full adds sizes.
void run_matrix(Ctx& c, bool full);
// 64 MiB of float32 (plus a few elements), out of place and in place.
void run_huge(Ctx& c);

}  // namespace jaccl::test::group_conformance
