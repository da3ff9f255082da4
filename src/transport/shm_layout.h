// Copyright 2026 the jaccl authors.
// Layout of a host's shared-memory segment, the format every rank of the
// host reads (pure arithmetic, no OS calls):
//
//   [header][wake word][rank controls x N][slots: N x 2 x slot][result: 2 x
//   slot][p2p rings: N x N x ring]
//
// Data written for sync step s lives in the parity s % 2 buffers and is read
// only between waiting for step s and arriving at step s + 1, so two
// buffers are enough for a rank to run one step ahead of the slowest.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/op_kind.h"
#include "transport/shm_sync.h"

namespace jaccl::detail {

// Also the layout's version: a change of layout changes it, so ranks of
// different builds refuse each other's segment instead of misreading it.
inline constexpr uint64_t kShmMagic = 0x334853434c43414aull;  // "JACLCSH3"

struct alignas(kCacheLine) ShmHeader {
  uint64_t magic;
  uint32_t nranks;
  uint32_t strategy;  // the group's copy-out policy, the creator's for all
  uint64_t slot_bytes;
  uint64_t ring_bytes;
  uint64_t chunk_bytes;  // large ops' chunk, the creator's choice for all
  std::atomic<uint32_t> mapped;  // ranks that have mapped the segment
};

// What a rank announces at each sync step.
struct ShmStepDesc {
  OpKind op;
  int32_t dtype;
  uint64_t n_bytes;
  int32_t root;
  // Not compared: all_to_all's direct path (shm_all_to_all.cpp), this
  // rank's pid or its probe verdict.
  int32_t aux;
  // Set by the rank, not compared: how long this rank's previous large op
  // took (ns + 1; 0 = none), for the copy-out choice (shm_strategy.h).
  uint64_t report;
  // Not compared: all_to_all's direct path, the address peers read from.
  uint64_t addr;
};

// Operand bytes a step line carries (StepLine::carried).
inline constexpr size_t kCarriedBytes = 8;

// A rank's announcement of one sync step, in one cache line, so that a peer
// waiting for the step reads the arrival and the op from one line (a
// descriptor straddling two lines cost every other step an extra miss).
struct alignas(kCacheLine) StepLine {
  // The last sync step of this line's parity this rank arrived at.
  std::atomic<uint64_t> arrive;
  // The CPU this rank ran on when it last arrived or started to wait
  // (sched_getcpu; -1 unknown): a rank waiting for it on the same CPU
  // yields at once instead of spinning (shm_sync.h).
  std::atomic<int32_t> cpu{-1};
  ShmStepDesc desc;
  // A reduction of at most kCarriedBytes travels here instead of through
  // the slots: peers have the operands with the arrival, one cache miss
  // instead of two.
  unsigned char carried[kCarriedBytes];
};
static_assert(sizeof(StepLine) == kCacheLine);

// Step s is announced in line[s % 2].
struct RankCtl {
  StepLine line[2];
};

// A single-producer single-consumer byte ring for send/recv of one pair.
struct alignas(kCacheLine) RingCtl {
  alignas(kCacheLine) std::atomic<uint64_t> head;  // bytes written (producer)
  alignas(kCacheLine) std::atomic<uint64_t> tail;  // bytes read (consumer)
};

struct ShmLayout {
  int nranks = 0;
  size_t slot_bytes = 0;
  size_t ring_bytes = 0;
  // The send/recv rings outgrow the budget (N x N rings of 4 KiB at least:
  // 4.4 GB at 1024 ranks): they are then left out of the pages reserved at
  // set-up and a ring's pages come when its pair first sends.
  bool lazy_rings = false;

  static size_t align(size_t v, size_t a) { return (v + a - 1) / a * a; }

  // Sizes from a byte budget: a quarter goes to the N x (N-1) send/recv
  // rings (256 KiB each at most, 4 KiB at least), the rest to the 2N + 2
  // staging slots (64 KiB .. 4 MiB each). Both shrink as N grows, so 64
  // ranks do not map a gigabyte of rings each.
  static ShmLayout for_budget(int n, size_t budget) {
    ShmLayout l;
    l.nranks = n;
    const size_t pairs = static_cast<size_t>(n) * std::max(n - 1, 1);
    size_t ring = budget / 4 / pairs / 4096 * 4096;
    l.ring_bytes = std::clamp<size_t>(ring, 4096, 256 * 1024);
    size_t rings =
        static_cast<size_t>(n) * n * (l.ring_bytes + sizeof(RingCtl));
    size_t left = budget > rings ? budget - rings : 0;
    size_t slot = left / (2 * static_cast<size_t>(n) + 2);
    slot = std::clamp<size_t>(slot, 64 * 1024, 4 * 1024 * 1024);
    l.slot_bytes = slot / 4096 * 4096;
    l.lazy_rings = rings > budget;
    return l;
  }

  size_t header_off() const { return 0; }
  size_t wake_off() const { return align(sizeof(ShmHeader), 4096); }
  size_t ctl_off(int r) const {
    return wake_off() + sizeof(WakeWord) +
           static_cast<size_t>(r) * sizeof(RankCtl);
  }
  size_t slots_off() const { return align(ctl_off(nranks), 4096); }
  size_t slot_off(int r, int parity) const {
    return slots_off() + (static_cast<size_t>(r) * 2 + parity) * slot_bytes;
  }
  size_t result_off(int parity) const {
    return slots_off() +
           (static_cast<size_t>(nranks) * 2 + parity) * slot_bytes;
  }
  size_t rings_off() const { return result_off(2); }
  size_t ring_ctl_off(int from, int to) const {
    return rings_off() +
           (static_cast<size_t>(from) * nranks + to) * sizeof(RingCtl);
  }
  size_t ring_data_off(int from, int to) const {
    return align(ring_ctl_off(nranks, 0), 4096) +
           (static_cast<size_t>(from) * nranks + to) * ring_bytes;
  }
  size_t total() const { return ring_data_off(nranks, 0); }
  // The bytes set-up reserves (and zeroes): all, or all but the rings.
  size_t reserved() const { return lazy_rings ? rings_off() : total(); }
};

}  // namespace jaccl::detail
