// Copyright 2026 the jaccl authors.
#include "collectives/shm_group.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "collectives/ring_math.h"
#include "common/affinity.h"
#include "common/cache_info.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/shm_copy.h"

namespace jaccl::detail {

namespace {

constexpr size_t kSmallBytes = 32 * 1024;  // one-sync path up to here
// From this many ranks a small reduction is rank 0's alone, and the others
// copy the result after a second sync: every rank reducing all N inputs
// costs N x N reads, and on first use N x N page faults (each maps a whole
// slot through fault-around; dear where a VM traps page-table writes, and
// at 1024 ranks they were most of the CPU before the first all_sum).
constexpr int kRootReduceRanks = 64;
// all_gather may read peers' inputs directly (process_vm_readv) from here:
// below, the system call and the page pinning cost more than a copy.
constexpr size_t kDirectGatherBytes = 64 * 1024;

// Large ops move data in chunks meant to stay in cache between staging and
// copy-out: one core's L2 (read from sysfs; `getconf` may report another
// level's or the host's figure), 256 KiB .. 1 MiB; the chunk size matters
// little once the copy-out avoids `rep movsb` (shm_copy.h). Oversubscribed
// ranks sync slowly (a sync may wait for a time slice), so they take fewer,
// larger chunks. Figures: BENCHMARKS.md, History ("Shared memory on a
// second kind of machine").
constexpr size_t kOversubscribedChunkBytes = 2 * 1024 * 1024;
// all_sums and small all_gathers from this size move their staging from
// call to call (band_of).
constexpr size_t kBandMinBytes = 4096;
// The pipeline's three jobs advance in pieces of about this size.
constexpr size_t kPieceBytes = 32 * 1024;

// Last-level cache, only for the first guess of the copy-out strategy
// (the choice itself is measured: shm_strategy.h).
size_t llc_bytes() {
  size_t v = sysfs_cache_bytes(3);
  if (v == 0)
    v = sysfs_cache_bytes(2);
  return v != 0 ? v : size_t(32) << 20;
}

ShmStrategy guess_of(bool stream) {
  return stream ? ShmStrategy::Stream : ShmStrategy::Cached;
}

// Slice r of a chunk of len bytes split N ways on 64-byte boundaries (which
// are multiples of every element size). Later slices may be empty.
void slice_of(size_t len, int n, int r, size_t* off, size_t* bytes) {
  size_t q = ShmLayout::align((len + n - 1) / n, 64);
  size_t begin = std::min(len, q * static_cast<size_t>(r));
  size_t end = std::min(len, begin + q);
  *off = begin;
  *bytes = end - begin;
}

}  // namespace

uint64_t ShmGroup::default_chunk_bytes() {
  return std::clamp<size_t>(l2_cache_bytes(), 256 * 1024, 1024 * 1024);
}

// A store into a line that a peer's cache still holds must first take the
// line back from that core: a fifth to a seventh of a copy's rate on the
// machine of BENCHMARKS.md (memcpy_bench's xcore_write). An all_sum or a
// small all_gather that fits the caches would pay it for every staged byte
// of every call, since its peers read the same lines the call before.
// Moving the staging from call to call, one band after the other (every
// rank alike: the same ops count the same bands), through a window of one
// L2 (the large ops' chunk, the same on every rank), lets the peers' caches
// give a band up before it is written again, while the window stays in the
// shared L3 and the TLB (the whole 4 MiB slot was slower over the first
// thousand calls, and from 128 KiB slower still when this VM's vCPUs sat
// far apart: BENCHMARKS.md). Below a few KiB a call is a handoff of a few
// lines, nearer in the peer's cache than anywhere else, and an op of more
// than half the window evicts its own lines. Ranks that outnumber the
// cores still have peers on the other core: bands took 4 ranks on 2 cores
// 0.69-0.87x the time from 32 to 256 KiB (all_sum) and 0.71-0.88x at
// 16-64 KiB (all_gather), level from 512 KiB in their larger window, so
// theirs stop at a quarter of it.
size_t ShmGroup::band_of(size_t bytes) {
  if (bytes < kBandMinBytes)
    return 0;
  // The window serves the large all_sums' chunks as well: mapped for the
  // first op that stages into it, banded or not.
  if (!populated_) {
    ch_.populate_staging(chunk_bytes_);
    populated_ = true;
  }
  const size_t span = ShmLayout::align(bytes, kCacheLine);
  const size_t most = chunk_bytes_ / (ch_.oversubscribed() ? 4 : 2);
  if (span > most)
    return 0;
  return bands_++ % (chunk_bytes_ / span) * span;
}

ShmGroup::ShmGroup(ShmChannel ch, Millis op_timeout)
    : ch_(std::move(ch)),
      rank_(ch_.rank()),
      size_(ch_.size()),
      layout_(ch_.layout()),
      ops_(rank_, size_, who(rank_), ch_.shared_state(), op_timeout),
      chunk_bytes_(
          std::min<size_t>(layout_.slot_bytes, ch_.oversubscribed()
                                                   ? kOversubscribedChunkBytes
                                                   : ch_.header().chunk_bytes) /
          64 * 64),
      llc_bytes_(llc_bytes()),
      l2_bytes_(l2_cache_bytes()),
      tuner_(static_cast<ShmStrategy>(ch_.header().strategy)),
      pid_(static_cast<int32_t>(::getpid())),
      a2a_whole_(a2a_place(0)),
      a2a_after_row_(a2a_place(a2a_row_bytes())),
      a2a_cache_(a2a_cache_place()) {}

ShmGroup::~ShmGroup() = default;

void ShmGroup::arrive(const ShmStepDesc& d, std::span<const char> carry) {
  ShmStepDesc mine = d;
  mine.report = tuner_.take_report();
  ch_.arrive(mine, carry);
}

void ShmGroup::await() {
  const uint64_t slowest = ch_.await(ops_.deadline());
  if (tuner_.reported()) {
    tuner_.absorb(slowest);
    log_decision();
  }
}

void ShmGroup::log_decision() const {
  int kind = 0, ways = 0;
  size_t cls = 0;
  ShmStrategy pick{};
  std::array<double, kShmWays> ns{};
  if (rank_ != 0 || !tuner_.decided(&kind, &cls, &pick, &ns, &ways))
    return;
  static const char* const kKinds[] = {"all_sum",     "all_gather",
                                       "broadcast",   "all_to_all",
                                       "all_to_allv", "small all_sum"};
  std::ostringstream msg;
  msg << "shm " << kKinds[kind] << " from " << (size_t(1) << cls) << " bytes"
      << ": " << shm_strategy_name(pick) << " (slowest rank, ns/byte:";
  for (int w = 0; w < ways; ++w)
    msg << " " << shm_strategy_name(static_cast<ShmStrategy>(w + 1)) << " "
        << ns[static_cast<size_t>(w)];
  msg << ")";
  JACCL_LOG(Debug, msg.str());
}

void ShmGroup::reduce_all(ReduceOp op, OpKind kind, const void* in, void* out,
                          size_t n, int dtype) {
  ops_.run(call::all_reduce(kind, in, out, n, dtype), [&](const Deadline&) {
    ShmStepDesc d{kind, dtype, n, 0, 0, 0};
    const size_t esz = dtype_size(dtype);
    if (size_ == 1) {
      move_bytes(out, in, n);
      step(d);
      return;
    }
    if (n <= kCarriedBytes && size_ < kRootReduceRanks) {
      // In rank order, as below: the same bits as the slots' path.
      step(d, {static_cast<const char*>(in), n});
      if (n == 0)
        return;
      std::memcpy(out, ch_.carried(0), n);
      for (int q = 1; q < size_; ++q) {
        reduce_into(op, dtype, out, ch_.carried(q), n / esz);
      }
      return;
    }
    if (n <= kSmallBytes && n <= layout_.slot_bytes) {
      // Cached staging moves from call to call (band_of); streaming
      // staging stays put. Which is faster is measured (kSmallReduce).
      const bool tuned = n >= kShmTunedFromBytes;
      const uint64_t t0 = tuned ? now_ns() : 0;
      const ShmWay way = tuned ? tuner_.begin(ShmTuner::kSmallReduce, n,
                                              ShmStrategy::Cached, kStageWays)
                               : ShmWay{};
      const size_t band = way.stream_stage ? 0 : band_of(n);
      copy_with(slot(rank_, steps() + 1) + band, in, n, way.stream_stage);
      step(d);
      reduce_small(op, d, static_cast<const char*>(in), static_cast<char*>(out),
                   n, dtype, band);
      if (tuned)
        tuner_.finish(now_ns() - t0);
      return;
    }
    reduce_large(op, d, static_cast<const char*>(in), static_cast<char*>(out),
                 n, dtype);
  });
}

void ShmGroup::reduce_small(ReduceOp op, const ShmStepDesc& d, const char* in,
                            char* out, size_t n, int dtype, size_t band) {
  const size_t count = n / dtype_size(dtype);
  // This rank's operand from its input, still in its cache, rather than
  // from its staged copy (which a streaming store sent to memory); in
  // place, the output overwrites the input first. The same operands in the
  // same order either way: the same bits.
  auto operand = [&](int q) -> const char* {
    return q == rank_ && in != out ? in : slot(q, steps()) + band;
  };
  auto reduce_to = [&](char* dst) {
    reduce3(op, dtype, dst, operand(0), operand(1), count);
    for (int q = 2; q < size_; ++q)
      reduce_into(op, dtype, dst, operand(q), count);
  };
  if (size_ >= kRootReduceRanks) {
    // Rank 0 reduces (in rank order, as below) and the others copy its
    // result after one more sync: N reads in all instead of N x N.
    if (rank_ == 0)
      reduce_to(result(steps() + 1) + band);
    step(d);
    cached_copy(out, result(steps()) + band, n);
    return;
  }
  reduce_to(out);
}

// Piece j of `parts` of [0, total), bounds on 64-byte multiples (which every
// element size divides).
static size_t piece_bound(size_t total, size_t j, size_t parts) {
  return j >= parts ? total : total * j / parts / 64 * 64;
}

void ShmGroup::reduce_large(ReduceOp op, const ShmStepDesc& d, const char* src,
                            char* dst, size_t n, int dtype) {
  // A software pipeline over cache-sized chunks, one sync per chunk. Body k
  // stages chunk k (the slices peers reduce), reduces this rank's slice of
  // chunk k - 1 (its own part straight from `src`) into `dst` and publishes
  // it in the result, and copies the peers' slices of chunk k - 2 out of the
  // result. Each body reads what was written before the previous sync and
  // writes the parity of the next one, as the layout requires. The three
  // jobs advance in small interleaved pieces so DRAM reads (stage, reduce)
  // and writes (copy-out) overlap as in a memcpy.
  // Every store into the segment (staging, the result) goes to lines a peer
  // read two steps before: a cached store must first take each line back
  // from that peer's cache (on the machine of BENCHMARKS.md a fifth of the
  // rate of a non-temporal store), which is why the ways that stream
  // staging stream the result too, and why the result is reduced into the
  // caller's buffer (private lines) and copied from there while in L1.
  const size_t esz = dtype_size(dtype);
  const size_t chunk = chunk_bytes_;
  const size_t chunks = (n + chunk - 1) / chunk;
  const uint64_t t0 = now_ns();
  // How this op stores: cached, stream-stage or stream, measured on the
  // first calls of its size class (shm_strategy.h has why: which wins
  // depends on the machine).
  const ShmWay way =
      tuner_.begin(ShmTuner::kReduce, n, guess_of(streaming(2 * n)));
  // One chunk of at most half the window moves as the small ops do.
  const size_t band = band_of(n);
  // In place, a rank after the first two would overwrite its own input
  // (the third operand in rank order) with the first two's sum: it reduces
  // into a private piece first.
  const bool scratch = src == dst && rank_ >= 2;
  if (scratch && reduce_scratch_.size() < kPieceBytes)
    reduce_scratch_.resize(kPieceBytes);
  auto len_of = [&](size_t k) { return std::min(chunk, n - k * chunk); };
  for (size_t k = 0; k <= chunks + 1; ++k) {
    const size_t ls = k < chunks ? len_of(k) : 0;
    const size_t lr = k >= 1 && k - 1 < chunks ? len_of(k - 1) : 0;
    const size_t lc = k >= 2 ? len_of(k - 2) : 0;
    size_t sso = 0, ssb = 0, rso = 0, rsb = 0, cso = 0, csb = 0;
    slice_of(ls, size_, rank_, &sso, &ssb);  // own slice: not staged
    slice_of(lr, size_, rank_, &rso, &rsb);
    slice_of(lc, size_, rank_, &cso, &csb);  // own slice: already in dst
    const size_t stage_total = ls - ssb;
    const size_t out_total = lc - csb;
    const char* stage_from = ls != 0 ? src + k * chunk : nullptr;
    char* stage_to = slot(rank_, steps() + 1) + band;
    const char* own = lr != 0 ? src + (k - 1) * chunk + rso : nullptr;
    char* own_out = lr != 0 ? dst + (k - 1) * chunk + rso : nullptr;
    char* res = result(steps() + 1) + band + rso;
    const char* out_from = result(steps()) + band;
    char* out_to = lc != 0 ? dst + (k - 2) * chunk : nullptr;
    const size_t parts =
        std::max<size_t>(1, std::max({ls, lr, lc}) / kPieceBytes);
    for (size_t j = 0; j < parts; ++j) {
      // Stage: the chunk minus this rank's slice, in logical offsets.
      size_t a = piece_bound(stage_total, j, parts);
      size_t b = piece_bound(stage_total, j + 1, parts);
      if (a < sso)
        copy_with(stage_to + a, stage_from + a, std::min(b, sso) - a,
                  way.stream_stage);
      if (b > sso) {
        size_t x = std::max(a, sso);
        copy_with(stage_to + x + ssb, stage_from + x + ssb, b - x,
                  way.stream_stage);
      }
      // Reduce, in rank order as the small path: bit-identical floats.
      a = piece_bound(rsb, j, parts);
      b = piece_bound(rsb, j + 1, parts);
      for (size_t x = a; x < b; x += kPieceBytes) {
        const size_t len = std::min(kPieceBytes, b - x);
        auto part = [&](int q) -> const char* {
          return q == rank_ ? own + x : slot(q, steps()) + band + rso + x;
        };
        char* to = scratch ? reduce_scratch_.data() : own_out + x;
        reduce3(op, dtype, to, part(0), part(1), len / esz);
        for (int q = 2; q < size_; ++q)
          reduce_into(op, dtype, to, part(q), len / esz);
        if (scratch)
          cached_copy(own_out + x, to, len);
        copy_with(res + x, to, len, way.stream_stage);
      }
      // Copy out: the chunk minus this rank's slice.
      a = piece_bound(out_total, j, parts);
      b = piece_bound(out_total, j + 1, parts);
      if (a < cso)
        copy_with(out_to + a, out_from + a, std::min(b, cso) - a,
                  way.stream_out);
      if (b > cso) {
        size_t x = std::max(a, cso);
        copy_with(out_to + x + csb, out_from + x + csb, b - x, way.stream_out);
      }
    }
    if (k <= chunks)
      step(d);
  }
  tuner_.finish(now_ns() - t0);
}

void ShmGroup::all_sum(const void* in, void* out, size_t n, int dtype) {
  reduce_all(ReduceOp::Sum, OpKind::AllSum, in, out, n, dtype);
}
void ShmGroup::all_max(const void* in, void* out, size_t n, int dtype) {
  reduce_all(ReduceOp::Max, OpKind::AllMax, in, out, n, dtype);
}
void ShmGroup::all_min(const void* in, void* out, size_t n, int dtype) {
  reduce_all(ReduceOp::Min, OpKind::AllMin, in, out, n, dtype);
}

void ShmGroup::all_reduce(const void* in, void* out, size_t n, int dtype,
                          ReduceOp op) {
  reduce_all(op, all_reduce_kind(op), in, out, n, dtype);
}

void ShmGroup::all_gather(const void* in, void* out, size_t n) {
  ops_.run(call::all_gather(in, out, n), [&](const Deadline&) {
    const char* src = static_cast<const char*>(in);
    char* dst = static_cast<char*>(out);
    ShmStepDesc d{OpKind::AllGather, -1, n, 0, 0, 0};
    if (n != 0 && n <= kCarriedBytes) {
      step(d, {src, n});
      for (int q = 0; q < size_; ++q) {
        std::memcpy(dst + static_cast<size_t>(q) * n, ch_.carried(q), n);
      }
      return;
    }
    const bool large = n > kSmallBytes;
    const bool tuned = n >= kShmTunedFromBytes;
    const uint64_t t0 = tuned ? now_ns() : 0;
    const bool guess = streaming(n * (static_cast<size_t>(size_) + 1));
    // Direct reads are a fourth way from kDirectGatherBytes, where the
    // probe allows them (one probe per group, the same verdict everywhere).
    const int ways =
        tuner_ways(large && n >= kDirectGatherBytes && size_ > 1, d);
    const ShmWay way =
        tuned ? tuner_.begin(ShmTuner::kGather, n, guess_of(guess), ways)
              : ShmWay{};
    if (way.direct && ways == kShmWays) {
      gather_direct(d, src, dst, n);
      tuner_.finish(now_ns() - t0);
      return;
    }
    const bool stream = way.stream_out;
    // Cache-sized chunks pay off once the output streams to DRAM, and once
    // a rank's block outgrows twice the chunk (a whole slot's staging left
    // the caches before the peer read it: 2 ranks, cached, 4 MiB output
    // 275-722 us against 219-302, 16 MiB 3048-4031 against 2204-3211);
    // below, whole slots mean fewer syncs (256 KiB .. 1 MiB: ~15 % faster).
    const size_t chunk =
        stream || n > 2 * chunk_bytes_ ? chunk_bytes_ : layout_.slot_bytes;
    // Streaming staging stays put (it leaves no lines in a cache).
    const size_t band = large || way.stream_stage ? 0 : band_of(n);
    for (size_t off = 0; off < n; off += chunk) {
      size_t len = std::min(chunk, n - off);
      copy_with(slot(rank_, steps() + 1) + band, src + off, len,
                way.stream_stage);
      arrive(d);
      // This rank's block from its input, not from its slot (reading the
      // slot back while the peers read it slows the next op's staging too;
      // see BENCHMARKS.md, History), while the peers arrive.
      char* own = dst + static_cast<size_t>(rank_) * n + off;
      if (own != src + off)
        copy_with(own, src + off, len, stream);
      await();
      for (int i = 1; i < size_; ++i) {
        const int q = (rank_ + i) % size_;  // spread the readers
        copy_with(dst + static_cast<size_t>(q) * n + off,
                  slot(q, steps()) + band, len, stream);
      }
    }
    if (tuned)
      tuner_.finish(now_ns() - t0);
  });
}

void ShmGroup::gather_direct(const ShmStepDesc& d, const char* src, char* dst,
                             size_t n) {
  // all_gather as an all_to_all whose every block is the whole input.
  const auto P = static_cast<size_t>(size_);
  a2a_scratch_.resize(4 * P);
  size_t* counts = a2a_scratch_.data();
  size_t* soff = counts + P;
  size_t* roff = soff + P;
  size_t* peer_off = roff + P;
  for (size_t q = 0; q < P; ++q) {
    counts[q] = n;
    soff[q] = 0;
    roff[q] = q * n;
    peer_off[q] = 0;
  }
  a2a_direct(
      d, A2aBlocks{src, counts, soff, dst, counts, roff, peer_off, n, n * P},
      false, 0);
}

void ShmGroup::sum_scatter(const void* in, void* out, size_t n, int dtype) {
  ops_.run(call::sum_scatter(in, out, n, dtype), [&](const Deadline&) {
    const size_t P = static_cast<size_t>(size_);
    ShmStepDesc d{OpKind::SumScatter, dtype, n, 0, 0, 0};
    const size_t esz = dtype_size(dtype);
    const char* src = static_cast<const char*>(in);
    char* dst = static_cast<char*>(out);
    const size_t window =
        std::max<size_t>(layout_.slot_bytes / P / 64 * 64, 64);
    for (size_t off = 0; off < n; off += window) {
      size_t len = std::min(window, n - off);
      char* mine = slot(rank_, steps() + 1);
      for (size_t q = 0; q < P; ++q) {
        cached_copy(mine + q * window, src + q * n + off, len);
      }
      step(d);
      const size_t at = static_cast<size_t>(rank_) * window;
      if (size_ == 1) {
        cached_copy(dst + off, slot(0, steps()) + at, len);
      } else {
        reduce3(ReduceOp::Sum, dtype, dst + off, slot(0, steps()) + at,
                slot(1, steps()) + at, len / esz);
        for (int q = 2; q < size_; ++q) {
          reduce_into(ReduceOp::Sum, dtype, dst + off, slot(q, steps()) + at,
                      len / esz);
        }
      }
    }
  });
}

void ShmGroup::broadcast(void* buf, size_t n, int root) {
  ops_.run(call::broadcast(buf, n, root), [&](const Deadline&) {
    ShmStepDesc d{OpKind::Broadcast, -1, n, root, 0, 0};
    char* p = static_cast<char*>(buf);
    if (n != 0 && n <= kCarriedBytes) {
      step(d, {p, rank_ == root ? n : 0});
      if (rank_ != root)
        std::memcpy(p, ch_.carried(root), n);
      return;
    }
    const size_t chunk = chunk_bytes_;
    const bool large = n > kSmallBytes;
    const uint64_t t0 = now_ns();
    const ShmWay way =
        large ? tuner_.begin(ShmTuner::kBroadcast, n, guess_of(streaming(n)))
              : ShmWay{};
    for (size_t off = 0; off < n; off += chunk) {
      size_t len = std::min(chunk, n - off);
      if (rank_ == root)
        copy_with(slot(rank_, steps() + 1), p + off, len, way.stream_stage);
      step(d);
      if (rank_ != root)
        copy_with(p + off, slot(root, steps()), len, way.stream_out);
    }
    if (large)
      tuner_.finish(now_ns() - t0);
  });
}

void ShmGroup::barrier() {
  ops_.run(call::barrier(), [&](const Deadline&) {
    step(ShmStepDesc{OpKind::Barrier, -1, 0, 0, 0, 0});
  });
}

void ShmGroup::send(const void* in, size_t n, int dst) {
  ops_.run(call::send(in, n, dst),
           [&](const Deadline& dl) { ch_.send(in, n, dst, dl); });
}

void ShmGroup::recv(void* out, size_t n, int src) {
  ops_.run(call::recv(out, n, src),
           [&](const Deadline& dl) { ch_.recv(out, n, src, dl); });
}

}  // namespace jaccl::detail
