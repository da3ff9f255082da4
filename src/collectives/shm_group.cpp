// Copyright 2026 the jaccl authors.
#include "collectives/shm_group.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "collectives/ring_math.h"
#include "collectives/shm_copy.h"
#include "common/affinity.h"
#include "common/cache_info.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/log.h"

namespace jaccl::detail {

namespace {

constexpr uint64_t kP2pMagic = 0x50325048534c4341ull;  // "ACLSHP2P"
constexpr size_t kSmallBytes = 32 * 1024;  // one-sync path up to here
// A rank that finds itself on the CPU of a rank it waits for moves off it
// at most once per this many sync steps (ShmGroup::wait_mode).
constexpr uint64_t kMoveEverySteps = 1024;
// all_gather may read peers' inputs directly (process_vm_readv) from here:
// below, the system call and the page pinning cost more than a copy.
constexpr size_t kDirectGatherBytes = 64 * 1024;

// Large ops move data in chunks meant to stay in cache between staging and
// copy-out: one core's L2 (read from sysfs; `getconf` may report another
// level's or the host's figure), 256 KiB .. 1 MiB. On the 2026-12-01 VM (L2
// 512 KiB) 128 KiB .. 2 MiB chunks were within 10 % of each other once the
// copy-out avoided `rep movsb` (shm_copy.h); the copy mechanism, not the
// chunk, was what made the middle sizes slow. Oversubscribed ranks sync
// slowly (a sync may wait for a time slice), so they take fewer, larger
// chunks (2 MiB: 4 ranks on 2 cores 5.6 -> 6.7 GB/s at 16 MiB).
constexpr size_t kOversubscribedChunkBytes = 2 * 1024 * 1024;
// The pipeline's three jobs advance in pieces of about this size.
constexpr size_t kPieceBytes = 32 * 1024;

size_t chunk_for_cache() {
  return std::clamp<size_t>(l2_cache_bytes(), 256 * 1024, 1024 * 1024);
}

// Last-level cache, only for the first guess of the copy-out strategy
// (the choice itself is measured: shm_strategy.h).
size_t llc_bytes() {
  size_t v = sysfs_cache_bytes(3);
  if (v == 0)
    v = sysfs_cache_bytes(2);
  return v != 0 ? v : size_t(32) << 20;
}

// The first hop (into the segment, for the peers) and the last (into the
// caller's buffer): ordinary or non-temporal stores (shm_strategy.h).
inline void copy_with(void* dst, const void* src, size_t n, bool stream) {
  if (stream)
    stream_copy(dst, src, n);
  else
    cached_copy(dst, src, n);
}

ShmStrategy guess_of(bool stream) {
  return stream ? ShmStrategy::Stream : ShmStrategy::Cached;
}

struct P2pHeader {
  uint64_t magic;
  uint64_t n_bytes;
};

}  // namespace

void ShmGroup::init_segment(char* base, const ShmLayout& layout,
                            ShmStrategy strategy) {
  std::memset(base, 0, layout.slots_off());
  for (int from = 0; from < layout.nranks; ++from) {
    for (int to = 0; to < layout.nranks; ++to) {
      new (base + layout.ring_ctl_off(from, to)) RingCtl();
    }
  }
  auto* h = new (base) ShmHeader();
  h->magic = kShmMagic;
  h->nranks = static_cast<uint32_t>(layout.nranks);
  h->strategy = static_cast<uint32_t>(strategy);
  h->slot_bytes = layout.slot_bytes;
  h->ring_bytes = layout.ring_bytes;
  // Chosen once, here, so that every rank stages the same chunks.
  h->chunk_bytes = chunk_for_cache();
  new (base + layout.wake_off()) WakeWord();
  for (int r = 0; r < layout.nranks; ++r) {
    new (base + layout.ctl_off(r)) RankCtl();
  }
}

ShmGroup::ShmGroup(int rank, int size, std::vector<int> names, ShmSegment seg,
                   ShmLayout layout, std::shared_ptr<FailureState> state,
                   Millis op_timeout, std::shared_ptr<void> keepalive)
    : rank_(rank),
      size_(size),
      names_(std::move(names)),
      seg_(std::move(seg)),
      layout_(layout),
      base_(seg_.data()),
      keepalive_(std::move(keepalive)),
      ops_(rank, size, who(rank), std::move(state), op_timeout),
      oversubscribed_(size > allowed_cpu_count()),
      chunk_bytes_(std::min(layout_.slot_bytes, oversubscribed_
                                                    ? kOversubscribedChunkBytes
                                                    : header_chunk()) /
                   64 * 64),
      llc_bytes_(llc_bytes()),
      tuner_(static_cast<ShmStrategy>(
          reinterpret_cast<const ShmHeader*>(base_)->strategy)) {}

ShmGroup::~ShmGroup() = default;

void ShmGroup::check_alive(const Deadline& dl, const char* waiting_for) {
  ops_.state().throw_if_failed();
  if (dl.expired()) {
    raise(ErrorKind::Timeout,
          std::string("timed out after ") + format_duration(dl.total()) +
              " waiting for " + waiting_for,
          {.rank = who(rank_), .address = "shared memory"});
  }
}

WaitMode ShmGroup::wait_mode(int peer) {
  if (oversubscribed_)
    return WaitMode::kYield;
  const int me = ::sched_getcpu();
  if (me < 0)
    return WaitMode::kSpin;
  int lowest = -1;  // the lowest rank waited for that last ran on this CPU
  for (int q = 0; q < size_ && lowest < 0; ++q) {
    const bool waited =
        peer >= 0 ? q == peer
                  : q != rank_ &&
                        ctl(q).arrive.load(std::memory_order_relaxed) < step_;
    if (waited && ctl(q).cpu.load(std::memory_order_relaxed) == me)
      lowest = q;
  }
  if (lowest < 0)
    return WaitMode::kSpin;
  // Two ranks on one CPU both see it; only the higher one moves, and only
  // now and then, so that a mask of one CPU or a scheduler that keeps them
  // together costs a system call per many steps, not per poll.
  if (rank_ > lowest && step_ >= next_move_step_) {
    next_move_step_ = step_ + kMoveEverySteps;
    if (move_off_this_cpu()) {
      ++cpu_moves_;
      note_cpu();
      JACCL_LOG(Debug, "rank " << who(rank_) << ": shared CPU " << me
                               << " with rank " << who(lowest)
                               << ", moved to CPU " << ::sched_getcpu());
      return WaitMode::kSpin;
    }
  }
  return WaitMode::kYield;
}

void ShmGroup::step(const ShmStepDesc& d) {
  ++step_;
  const uint64_t s = step_;
  RankCtl& me = ctl(rank_);
  me.desc[s & 1] = d;
  me.desc[s & 1].report = tuner_.take_report();
  note_cpu();
  me.arrive.store(s, std::memory_order_release);
  wake().bump();
  auto ready = [&] {
    for (int q = 0; q < size_; ++q) {
      if (ctl(q).arrive.load(std::memory_order_acquire) < s)
        return false;
    }
    return true;
  };
  const Deadline& deadline = ops_.deadline();
  wait(ready, [&] {
    ops_.state().throw_if_failed();
    if (deadline.expired()) {
      std::vector<int> missing;
      for (int q = 0; q < size_; ++q) {
        if (ctl(q).arrive.load(std::memory_order_acquire) < s)
          missing.push_back(who(q));
      }
      raise(ErrorKind::Timeout,
            std::string(op_kind_name(d.op)) + " timed out after " +
                format_duration(deadline.total()) + " waiting for " +
                ranks_phrase(missing),
            {.rank = who(rank_), .address = "shared memory"});
    }
  });
  uint64_t slowest = 0;
  for (int q = 0; q < size_; ++q) {
    const ShmStepDesc& o = ctl(q).desc[s & 1];
    slowest = std::max(slowest, o.report);
    if (o.op != d.op || o.n_bytes != d.n_bytes || o.dtype != d.dtype ||
        o.root != d.root) {
      std::ostringstream msg;
      msg << "ranks disagree: this rank called " << op_kind_name(d.op)
          << "(n_bytes=" << d.n_bytes << ", dtype=" << d.dtype << ") but rank "
          << who(q) << " called " << op_kind_name(o.op)
          << "(n_bytes=" << o.n_bytes << ", dtype=" << o.dtype << ")";
      raise(ErrorKind::Protocol, msg.str(),
            {.rank = who(rank_), .peer = who(q)});
    }
  }
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
  static const char* const kKinds[] = {"all_sum", "all_gather", "broadcast",
                                       "all_to_all"};
  std::ostringstream msg;
  msg << "shm " << kKinds[kind] << " from " << (size_t(1) << cls) << " bytes"
      << ": " << shm_strategy_name(pick) << " (slowest rank, ns/byte:";
  for (int w = 0; w < ways; ++w)
    msg << " " << shm_strategy_name(static_cast<ShmStrategy>(w + 1)) << " "
        << ns[static_cast<size_t>(w)];
  msg << ")";
  JACCL_LOG(Debug, msg.str());
}

void ShmGroup::reduce(ReduceOp op, OpKind kind, const void* in, void* out,
                      size_t n, int dtype) {
  ops_.run(call::all_reduce(kind, in, out, n, dtype), [&](const Deadline&) {
    ShmStepDesc d{kind, dtype, n, 0, 0, 0};
    const size_t esz = dtype_size(dtype);
    if (size_ == 1) {
      if (in != out)
        std::memmove(out, in, n);
      step(d);
      return;
    }
    if (n <= kSmallBytes && n <= layout_.slot_bytes) {
      cached_copy(slot(rank_, step_ + 1), in, n);
      step(d);
      cached_copy(out, slot(0, step_), n);
      for (int q = 1; q < size_; ++q) {
        reduce_into(op, dtype, out, slot(q, step_), n / esz);
      }
      return;
    }
    reduce_large(op, d, static_cast<const char*>(in), static_cast<char*>(out),
                 n, dtype);
  });
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
  // chunk k - 1 (its own part straight from `src`) into the result, and
  // copies chunk k - 2's result out. Each body reads what was written
  // before the previous sync and writes the parity of the next one, as the
  // layout requires. Only `src` and `dst` reach DRAM; staging stays in
  // cache. The three jobs advance in small interleaved pieces so DRAM reads
  // (stage, reduce) and writes (copy-out) overlap as in a memcpy.
  const size_t esz = dtype_size(dtype);
  const size_t chunk = chunk_bytes_;
  const size_t chunks = (n + chunk - 1) / chunk;
  const uint64_t t0 = now_ns();
  // How this op stores: cached, stream-stage or stream, measured on the
  // first calls of its size class (shm_strategy.h has why: on the
  // 2026-12-01 VM the peers read non-temporally staged lines faster, and
  // constants tuned on one VM lost 2-10x on the next).
  const ShmWay way =
      tuner_.begin(ShmTuner::kReduce, n, guess_of(streaming(2 * n)));
  auto len_of = [&](size_t k) { return std::min(chunk, n - k * chunk); };
  for (size_t k = 0; k <= chunks + 1; ++k) {
    const size_t ls = k < chunks ? len_of(k) : 0;
    const size_t lr = k >= 1 && k - 1 < chunks ? len_of(k - 1) : 0;
    const size_t lc = k >= 2 ? len_of(k - 2) : 0;
    size_t sso = 0, ssb = 0, rso = 0, rsb = 0;
    slice_of(ls, size_, rank_, &sso, &ssb);  // own slice: not staged
    slice_of(lr, size_, rank_, &rso, &rsb);
    const size_t stage_total = ls - ssb;
    const char* stage_from = ls != 0 ? src + k * chunk : nullptr;
    char* stage_to = slot(rank_, step_ + 1);
    const char* own = lr != 0 ? src + (k - 1) * chunk + rso : nullptr;
    char* res = result(step_ + 1) + rso;
    const char* out_from = result(step_);
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
      if (b > a) {
        auto part = [&](int q) -> const char* {
          return q == rank_ ? own + a : slot(q, step_) + rso + a;
        };
        reduce3(op, dtype, res + a, part(0), part(1), (b - a) / esz);
        for (int q = 2; q < size_; ++q)
          reduce_into(op, dtype, res + a, part(q), (b - a) / esz);
      }
      // Copy out.
      a = piece_bound(lc, j, parts);
      b = piece_bound(lc, j + 1, parts);
      copy_with(out_to + a, out_from + a, b - a, way.stream_out);
    }
    if (k <= chunks)
      step(d);
  }
  tuner_.finish(now_ns() - t0);
}

void ShmGroup::all_sum(const void* in, void* out, size_t n, int dtype) {
  reduce(ReduceOp::Sum, OpKind::AllSum, in, out, n, dtype);
}
void ShmGroup::all_max(const void* in, void* out, size_t n, int dtype) {
  reduce(ReduceOp::Max, OpKind::AllMax, in, out, n, dtype);
}
void ShmGroup::all_min(const void* in, void* out, size_t n, int dtype) {
  reduce(ReduceOp::Min, OpKind::AllMin, in, out, n, dtype);
}

void ShmGroup::all_gather(const void* in, void* out, size_t n) {
  ops_.run(call::all_gather(in, out, n), [&](const Deadline&) {
    const char* src = static_cast<const char*>(in);
    char* dst = static_cast<char*>(out);
    ShmStepDesc d{OpKind::AllGather, -1, n, 0, 0, 0};
    const bool large = n > kSmallBytes;
    const uint64_t t0 = now_ns();
    const bool guess = streaming(n * (static_cast<size_t>(size_) + 1));
    // Direct reads are a fourth way from kDirectGatherBytes, where the
    // probe allows them (one probe per group, the same verdict everywhere).
    const int ways = large && n >= kDirectGatherBytes && size_ > 1 &&
                             (tuner_.forced() == ShmStrategy::Auto ||
                              tuner_.forced() == ShmStrategy::Direct) &&
                             a2a_direct_ok(d)
                         ? kShmWays
                         : kStoreWays;
    const ShmWay way =
        large ? tuner_.begin(ShmTuner::kGather, n, guess_of(guess), ways)
              : ShmWay{};
    if (way.direct && ways == kShmWays) {
      gather_direct(d, src, dst, n);
      tuner_.finish(now_ns() - t0);
      return;
    }
    const bool stream = way.stream_out;
    // Cache-sized chunks pay off once the output streams to DRAM; below,
    // whole slots mean fewer syncs (256 KiB .. 1 MiB: ~15 % faster).
    const size_t chunk = stream ? chunk_bytes_ : layout_.slot_bytes;
    for (size_t off = 0; off < n; off += chunk) {
      size_t len = std::min(chunk, n - off);
      copy_with(slot(rank_, step_ + 1), src + off, len, way.stream_stage);
      step(d);
      for (int q = 0; q < size_; ++q) {
        // This rank's block from its input, not from its slot: reading the
        // slot back while the peers read it made the next op's staging
        // slower too (a replay of this loop on the 2026-12-01 VM, 512 KiB a
        // rank, median of 5: 6.4 GB/s from the slot, 10.5 from the input).
        char* to = dst + static_cast<size_t>(q) * n + off;
        const char* from = q == rank_ ? src + off : slot(q, step_);
        if (to != from)
          copy_with(to, from, len, stream);
      }
    }
    if (large)
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
  a2a_direct(d, src, counts, soff, dst, counts, roff, peer_off);
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
      char* mine = slot(rank_, step_ + 1);
      for (size_t q = 0; q < P; ++q) {
        cached_copy(mine + q * window, src + q * n + off, len);
      }
      step(d);
      const size_t at = static_cast<size_t>(rank_) * window;
      if (size_ == 1) {
        cached_copy(dst + off, slot(0, step_) + at, len);
      } else {
        reduce3(ReduceOp::Sum, dtype, dst + off, slot(0, step_) + at,
                slot(1, step_) + at, len / esz);
        for (int q = 2; q < size_; ++q) {
          reduce_into(ReduceOp::Sum, dtype, dst + off, slot(q, step_) + at,
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
    const size_t chunk = chunk_bytes_;
    const bool large = n > kSmallBytes;
    const uint64_t t0 = now_ns();
    const ShmWay way =
        large ? tuner_.begin(ShmTuner::kBroadcast, n, guess_of(streaming(n)))
              : ShmWay{};
    for (size_t off = 0; off < n; off += chunk) {
      size_t len = std::min(chunk, n - off);
      if (rank_ == root)
        copy_with(slot(rank_, step_ + 1), p + off, len, way.stream_stage);
      step(d);
      if (rank_ != root)
        copy_with(p + off, slot(root, step_), len, way.stream_out);
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
  ops_.run(call::send(in, n, dst), [&](const Deadline& dl) {
    note_cpu();
    RingCtl& rc = ring(rank_, dst);
    char* data = ring_data(rank_, dst);
    const size_t cap = layout_.ring_bytes;
    P2pHeader h{kP2pMagic, n};
    auto put = [&](const char* p, size_t len) {
      uint64_t head = rc.head.load(std::memory_order_relaxed);
      size_t done = 0;
      while (done < len) {
        uint64_t tail = 0;
        wait(
            [&] {
              tail = rc.tail.load(std::memory_order_acquire);
              return head - tail < cap;
            },
            [&] {
              check_alive(
                  dl,
                  ("rank " + std::to_string(who(dst)) + " to receive").c_str());
            },
            dst);
        size_t room = cap - (head - tail);
        size_t at = head % cap;
        size_t k = std::min({len - done, room, cap - at});
        cached_copy(data + at, p + done, k);
        done += k;
        head += k;
        rc.head.store(head, std::memory_order_release);
        wake().bump();
      }
    };
    put(reinterpret_cast<const char*>(&h), sizeof(h));
    put(static_cast<const char*>(in), n);
  });
}

void ShmGroup::recv(void* out, size_t n, int src) {
  ops_.run(call::recv(out, n, src), [&](const Deadline& dl) {
    note_cpu();
    RingCtl& rc = ring(src, rank_);
    const char* data = ring_data(src, rank_);
    const size_t cap = layout_.ring_bytes;
    auto get = [&](char* p, size_t len) {
      uint64_t tail = rc.tail.load(std::memory_order_relaxed);
      size_t done = 0;
      while (done < len) {
        uint64_t head = 0;
        wait(
            [&] {
              head = rc.head.load(std::memory_order_acquire);
              return head != tail;
            },
            [&] {
              check_alive(
                  dl,
                  ("a message from rank " + std::to_string(who(src))).c_str());
            },
            src);
        size_t at = tail % cap;
        size_t k = std::min({len - done, size_t(head - tail), cap - at});
        cached_copy(p + done, data + at, k);
        done += k;
        tail += k;
        rc.tail.store(tail, std::memory_order_release);
        wake().bump();
      }
    };
    P2pHeader h{};
    get(reinterpret_cast<char*>(&h), sizeof(h));
    if (h.magic != kP2pMagic) {
      raise(ErrorKind::Protocol,
            "corrupt message header from rank " + std::to_string(who(src)),
            {.rank = who(rank_), .peer = who(src)});
    }
    if (h.n_bytes != n) {
      raise(ErrorKind::Protocol,
            "rank " + std::to_string(who(src)) + " sent " +
                std::to_string(h.n_bytes) +
                " bytes but this rank's recv expects " + std::to_string(n),
            {.rank = who(rank_), .peer = who(src)});
    }
    get(static_cast<char*>(out), n);
  });
}

}  // namespace jaccl::detail
