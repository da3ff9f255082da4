// Copyright 2026 the jaccl authors.
// all_to_all and all_to_allv of the shared-memory group, in one of two
// ways:
//
// Staged: each round, every rank stages a window of each block it sends
// (block j in window j - rank mod n of its slot), syncs once, and copies
// its window out of every peer's slot into its output: two copies per byte, one
// sync per round, no rank waits on a pair. The windows are a slot's share per
// rank, so blocks larger than that take several rounds (double-buffered
// slots: staging round k + 1 overlaps the peers' copy-out of round k).
// all_to_all(v)'s staged ways take smaller windows once a rank's input
// outgrows twice its core's L2 (a2a_cache_place): with whole-slot windows
// a round's 2 MiB per peer (2 ranks, 4 MiB) went to memory before the peer
// read it, and cached staging took 355-497 us where 256 KiB windows took
// 219-346 (4 ranks on 2 CPUs, 4 MiB: 1743-2084 against 950-1100 with
// 128 KiB; BENCHMARKS.md, History). A
// rank's own block goes straight from input to output, a share per round
// while the peers finish staging (between arriving at the sync and waiting
// for it), so a rank that stages first does not idle.
//
// Direct, where the host's ranks may read each other's memory
// (process_vm_readv, the kernel's cross-memory attach; probed once per
// group) and do not outnumber the cores: every rank publishes its input's
// address, reads its block straight out of every peer's input into its
// output (one copy instead of two), and a second sync keeps every input
// alive until its readers are done. With more ranks than cores a sync can
// cost a time slice, and the second one costs more than the copy it saves.
//
// Which is faster depends on the machine (a kernel copy pins every 4 KiB
// page: on some machines it runs at half a memcpy, and below two user
// copies) and on the size, so large ops let the tuner measure: staged with
// cached or streaming stores, and from kDirectBytes per block direct as a
// fourth way (shm_strategy.h, kinds kAllToAll and kAllToAllv, sized by a
// rank's input; figures in BENCHMARKS.md).
//
// all_to_allv's direct way need not leave every copy to the receivers:
// where some rank receives more than others while every rank sends as
// much (a mixture of experts' hot expert), the senders write the tails of
// the busiest receivers' blocks into their outputs (process_vm_writev) as
// a2a::balance_pushes plans from the counts, so that no rank copies much
// more than another (2 ranks, 4 MiB, 2/3 of every input to rank 0: rank 0
// read 8/3 MiB and copied as much of its own while rank 1 idled).
//
// all_to_allv shares every rank's counts at its first sync step, and its
// blocks ride that step (a2a_varying): each rank stages its first round,
// or, where the tuner would read directly, only publishes its input, as
// its own counts suggest; so with counts that agree on the op's size it
// makes as many syncs as all_to_all (before, one more: 1.25x and 2.5x
// all_to_all's time at 1 MiB, 2 and 4 ranks, in the 2026-12-04 run).
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "collectives/all_to_all.h"
#include "collectives/shm_group.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/log.h"
#include "transport/peer_copy.h"
#include "transport/shm_copy.h"

namespace jaccl::detail {

namespace {

// all_to_allv ops up to this size a rank (on average) stage as the first
// round did, untuned: the counts are known only after it.
constexpr size_t kTunedBytes = 32 * 1024;
// all_to_allv's blocks that ride behind the counts stage with streaming
// stores from this size: cached stores into the lines the peer read at the
// last call crawled. Not for all_to_all's small rounds, where two ranks
// sharing a core would read the staged lines from memory instead of their
// cache (both measured: BENCHMARKS.md, History).
constexpr size_t kRideStreamBytes = 4096;
// Direct reads are a way from blocks of this size (on average over a
// rank's input, by size class: the same ways for every call of a class):
// below, the system call and the page pinning cost more than a copy.
constexpr size_t kDirectBytes = 64 * 1024;
// The least window of a2a_cache_place (a round's syncs cost more than
// smaller windows gain).
constexpr size_t kCacheWindowMin = 64 * 1024;

// The share of `left` bytes of the own block copied in one of `rounds`
// rounds: an even share in 64-byte multiples (the last round's shorter).
size_t own_share(size_t left, size_t rounds) {
  return std::min(left, ((left + rounds - 1) / rounds + 63) / 64 * 64);
}

}  // namespace

ShmGroup::A2aPlace ShmGroup::a2a_place(size_t off) const {
  const auto P = static_cast<size_t>(size_);
  size_t window = std::max<size_t>((layout_.slot_bytes - off) / P, 1);
  if (window >= 64)
    window = window / 64 * 64;
  return A2aPlace{off, window};
}

ShmGroup::A2aPlace ShmGroup::a2a_cache_place() const {
  // Half a core's L2 (the creator's chunk, the same on every rank) for a
  // round's windows, shared by the ranks that share the core: what a rank
  // stages and what it reads in one round then fit in its L2 together.
  const size_t per_core = ch_.oversubscribed() ? 4 : 2;
  const size_t cap = std::max<size_t>(
      ch_.header().chunk_bytes / per_core / 64 * 64, kCacheWindowMin);
  return A2aPlace{0, std::min(a2a_whole_.window, cap)};
}

bool ShmGroup::a2a_in_cache(size_t total) const {
  return total > 2 * ch_.header().chunk_bytes;
}

bool ShmGroup::a2a_direct_size(size_t total) const {
  // By size class, so that every call of a class has the same ways.
  const size_t cls_bytes = size_t(1) << ShmTuner::class_of(total);
  return size_ > 1 && cls_bytes >= kDirectBytes * static_cast<size_t>(size_);
}

void ShmGroup::a2a_blocks(const ShmStepDesc& d, const A2aBlocks& b) {
  const bool tuned = b.total >= kShmTunedFromBytes;
  // The tuner's size class decides whether direct is a way (and the probe
  // verdict, the same on every rank), so every call of a class has the
  // same ways on every rank.
  const int ways = tuner_ways(tuned && a2a_direct_size(b.total), d);
  const ShmWay way = tuned ? tuner_.begin(ShmTuner::kAllToAll, b.total,
                                          a2a_guess(b.total), ways)
                           : ShmWay{};
  const uint64_t t0 = tuned ? now_ns() : 0;  // clock reads cost small ops
  if (way.direct && ways == kShmWays)
    a2a_direct(d, b, false, 0);
  else
    a2a_rounds(d, b, way, a2a_in_cache(b.total) ? a2a_cache_ : a2a_whole_,
               false, 0);
  if (tuned)
    tuner_.finish(now_ns() - t0);
}

void ShmGroup::a2a_rounds(const ShmStepDesc& d, const A2aBlocks& b,
                          const ShmWay& way, const A2aPlace& pl, bool staged0,
                          size_t own_done) {
  const auto P = static_cast<size_t>(size_);
  const auto r = static_cast<size_t>(rank_);
  const size_t window = pl.window;
  const size_t rounds = a2a::rounds(b.largest, window);
  const size_t own = b.send[r];
  for (size_t k = 0; k < rounds; ++k) {
    if (k > 0 || !staged0) {
      char* mine = slot(rank_, steps() + 1) + pl.off;
      for (size_t q = 0; q < P; ++q) {
        const a2a::Part p = a2a::round_part(b.send[q], window, k);
        if (q != r && p.len != 0)
          copy_with(
              mine + a2a_window(r, q) * window, b.in + b.soff[q] + p.off, p.len,
              stage_stream(static_cast<int>(q), b.send[q],
                           way.stream_stage || b.send[q] >= b.stream_from));
      }
      arrive(d);
      // A share of the own block (64-byte multiples) while the peers
      // finish staging: what is left, over the rounds left.
      const size_t share = own_share(own - own_done, rounds - k);
      if (share != 0)
        cached_copy(b.out + b.roff[r] + own_done, b.in + b.soff[r] + own_done,
                    share);
      own_done += share;
      await();
    }
    for (size_t i = 1; i < P; ++i) {
      const size_t q = (r + i) % P;  // spread the readers over the slots
      const a2a::Part p = a2a::round_part(b.recv[q], window, k);
      if (p.len != 0)
        copy_with(b.out + b.roff[q] + p.off,
                  slot(static_cast<int>(q), steps()) + pl.off +
                      a2a_window(q, r) * window,
                  p.len, way.stream_out);
    }
  }
  if (own_done < own)
    cached_copy(b.out + b.roff[r] + own_done, b.in + b.soff[r] + own_done,
                own - own_done);
}

int ShmGroup::tuner_ways(bool eligible, const ShmStepDesc& d) {
  const bool allowed = tuner_.forced() == ShmStrategy::Auto ||
                       tuner_.forced() == ShmStrategy::Direct;
  return eligible && allowed && a2a_direct_ok(d) ? kShmWays : kStoreWays;
}

bool ShmGroup::a2a_direct_ok(const ShmStepDesc& d) {
  if (direct_ >= 0)
    return direct_ == 1;
  // Every rank publishes its pid and the address of a word whose value it
  // also stages in its slot; every rank reads every peer's word and
  // compares (another pid namespace's pid, or a refused ptrace check, fails
  // here instead of reading the wrong process); then the verdicts.
  probe_word_ = now_ns() ^ (static_cast<uint64_t>(rank_ + 1) << 48) ^
                reinterpret_cast<uintptr_t>(this);
  std::memcpy(slot(rank_, steps() + 1), &probe_word_, sizeof(probe_word_));
  ShmStepDesc p = d;
  p.aux = pid_;
  p.addr = reinterpret_cast<uintptr_t>(&probe_word_);
  step(p);
  int ok = 1, why = 0, whom = -1;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_)
      continue;
    const ShmStepDesc& o = ch_.announced(q);
    uint64_t got = 0, want = 0;
    std::memcpy(&want, slot(q, steps()), sizeof(want));
    const int err = read_peer(static_cast<pid_t>(o.aux), o.addr,
                              reinterpret_cast<char*>(&got), sizeof(got));
    if (err != 0 || got != want) {
      ok = 0;
      why = err;
      whom = q;
    }
  }
  // Whether ranks outnumber cores is part of the verdict, so that every
  // rank takes the same way even if they counted cores differently.
  ShmStepDesc v = d;
  v.aux = ok && !ch_.oversubscribed();
  step(v);
  for (int q = 0; q < size_; ++q)
    ok = ok && ch_.announced(q).aux == 1;
  direct_ = ok;
  if (!ok && whom >= 0) {
    JACCL_LOG(Info, "rank "
                        << who(rank_) << ": cannot read rank " << who(whom)
                        << "'s memory (process_vm_readv: "
                        << (why != 0 ? std::strerror(why) : "other data")
                        << "): all_to_all and all_gather stage every block");
  }
  return direct_ == 1;
}

void ShmGroup::note_peer_inputs() {
  a2a_peers_.resize(static_cast<size_t>(size_));
  for (int q = 0; q < size_; ++q) {
    const ShmStepDesc& o = ch_.announced(q);
    PeerInput& pi = a2a_peers_[static_cast<size_t>(q)];
    pi.pid = o.aux < 0 ? -o.aux : o.aux;
    pi.addr = o.addr;
  }
}

void ShmGroup::a2a_direct(const ShmStepDesc& d, const A2aBlocks& b,
                          bool published, size_t own_done) {
  const auto r = static_cast<size_t>(rank_);
  const size_t own = b.send[r] - own_done;
  const char* own_from = b.in + b.soff[r] + own_done;
  char* own_to = b.out + b.roff[r] + own_done;
  // The own block with non-temporal stores once the ranks' buffers outgrow
  // the last-level cache (the stream ways' guess): its output lines are
  // then not read in first, nor do they evict what the kernel copy reads
  // next (2 ranks, 16-64 MiB: 0.75-0.85x the time; at 1 MiB ordinary stores
  // won; BENCHMARKS.md, History).
  const bool stream_own = a2a_guess(b.total) == ShmStrategy::Stream;
  if (!published) {
    ShmStepDesc p = d;
    p.aux = pid_;
    p.addr = reinterpret_cast<uintptr_t>(b.in);
    arrive(p);
    if (own != 0)  // while the peers arrive
      copy_with(own_to, own_from, own, stream_own);
    await();
    note_peer_inputs();
  } else if (own != 0) {
    copy_with(own_to, own_from, own, stream_own);
  }
  auto failed = [&](int q, const char* what, const char* call, int err) {
    raise(ErrorKind::Io,
          std::string(op_kind_name(d.op)) + ": " + what + " " +
              rank_ref(who(q)) + "'s block failed (" + call + ")",
          {.rank = who(rank_), .peer = who(q), .sys_errno = err});
  };
  const auto P = static_cast<size_t>(size_);
  for (int i = 1; i < size_; ++i) {
    const int q = (rank_ + i) % size_;
    const auto uq = static_cast<size_t>(q);
    const size_t len = b.recv[uq] - (b.pushes ? b.pushes[uq * P + r] : 0);
    if (len == 0)
      continue;
    const PeerInput& o = a2a_peers_[uq];
    const int err = read_peer(static_cast<pid_t>(o.pid),
                              o.addr + b.peer_off[uq], b.out + b.roff[uq], len);
    if (err != 0)
      failed(q, "reading", "process_vm_readv", err);
  }
  for (int i = 1; b.pushes && i < size_; ++i) {
    const int q = (rank_ + i) % size_;
    const auto uq = static_cast<size_t>(q);
    const size_t len = b.pushes[r * P + uq];
    if (len == 0)
      continue;
    const size_t tail = b.send[uq] - len;
    const int err = write_peer(static_cast<pid_t>(a2a_peers_[uq].pid),
                               a2a_peers_[uq].out + b.peer_roff[uq] + tail,
                               b.in + b.soff[uq] + tail, len);
    if (err != 0)
      failed(q, "writing", "process_vm_writev", err);
  }
  step(d);  // every block copied: the buffers may change again
}

void ShmGroup::plan_pushes(const a2a::Counts& c, A2aBlocks& b) {
  const auto P = static_cast<size_t>(size_);
  a2a_pushes_.resize(P * P + 2 * P);
  uint64_t* plan = a2a_pushes_.data();
  // Whole pages a side, so that no page is pinned by two copies at once.
  a2a::balance_pushes(c, plan, plan + P * P, 4096);
  if (std::all_of(plan, plan + P * P, [](uint64_t x) { return x == 0; }))
    return;
  uint64_t* peer_roff = plan + P * P + P;
  for (size_t q = 0; q < P; ++q)
    peer_roff[q] = c.output_offset(static_cast<int>(q), rank_);
  b.pushes = plan;
  b.peer_roff = peer_roff;
}

void ShmGroup::all_to_all(const void* in, void* out, size_t n) {
  ops_.run(call::all_to_all(in, out, n), [&](const Deadline&) {
    a2a_fixed(static_cast<const char*>(in), static_cast<char*>(out), n);
  });
}

void ShmGroup::a2a_fixed(const char* src, char* dst, size_t n) {
  const auto P = static_cast<size_t>(size_);
  a2a_scratch_.resize(3 * P);
  size_t* counts = a2a_scratch_.data();
  size_t* offs = counts + P;
  size_t* peer_off = offs + P;
  for (size_t q = 0; q < P; ++q) {
    counts[q] = n;
    offs[q] = q * n;
    peer_off[q] = static_cast<size_t>(rank_) * n;
  }
  a2a_blocks(
      ShmStepDesc{OpKind::AllToAll, -1, n, 0, 0, 0},
      A2aBlocks{src, counts, offs, dst, counts, offs, peer_off, n, n * P});
}

void ShmGroup::all_to_allv(const void* in, std::span<const size_t> send,
                           void* out, std::span<const size_t> recv) {
  ops_.run(call::all_to_allv(in, send, out, recv), [&](const Deadline&) {
    a2a_varying(static_cast<const char*>(in), send, static_cast<char*>(out),
                recv);
  });
}

void ShmGroup::a2a_varying(const char* src, std::span<const size_t> send,
                           char* dst, std::span<const size_t> recv) {
  const auto P = static_cast<size_t>(size_);
  const auto r = static_cast<size_t>(rank_);
  const size_t row = 2 * P;  // counts; then the output's address
  const size_t row_bytes = a2a_row_bytes();
  if ((row + 1) * sizeof(uint64_t) > layout_.slot_bytes) {
    raise(ErrorKind::Internal,
          "all_to_allv: the counts of " + std::to_string(P) +
              " ranks do not fit a staging slot",
          {.rank = who(rank_)});
  }
  counts_.resize(row * P);
  // The counts matrix: every rank stages its row, one sync, all read all.
  // A rank's row goes where its slot has no block, at the end of its own
  // window (the first: a2a_window), where a row fits a window: then the
  // rounds have whole slots (all_to_all's windows: blocks of a slot's share
  // per rank take one round, not two), no rank writes a line next to
  // another's (rows side by side in a shared buffer cost small ops a
  // cross-core miss), and the next rank finds its block on the row's page,
  // right behind it (two ranks: every reader). Else the rows go at the
  // head of every slot, before the windows.
  const bool rows_apart = P * row_bytes <= layout_.slot_bytes;
  const A2aPlace& whole = rows_apart ? a2a_whole_ : a2a_after_row_;
  auto row_of = [&](int q, uint64_t s) {
    return rows_apart ? slot(q, s) + whole.window - row_bytes : slot(q, s);
  };
  // Large ops take all_to_all's cache-sized windows too (a2a_in_cache),
  // where those leave the rows alone. Which windows the first round used
  // is each rank's guess from its own input's size; every rank reads every
  // guess back from the counts, and where one differs from the op's
  // windows every rank stages again.
  const bool cache_fits =
      rows_apart && P * a2a_cache_.window + row_bytes <= whole.window;
  auto cache_for = [&](uint64_t total) {
    return cache_fits && total > kTunedBytes &&
           a2a_in_cache(static_cast<size_t>(total));
  };
  auto* my_row = reinterpret_cast<uint64_t*>(row_of(rank_, steps() + 1));
  a2a::fill_row(send, recv, my_row);
  my_row[row] = reinterpret_cast<uintptr_t>(dst);
  // The blocks ride behind the counts: only together do the ranks know the
  // op's size (and so its way), but each knows its own counts, and when
  // every rank sends as much (uniform counts; mixture-of-experts routing,
  // where every rank sends all its tokens) the op's size is this rank's.
  // So from that guess each rank either stages its blocks' first round in
  // the rows' step, or, where the tuner would read directly, only
  // publishes its input (its pid and address, as the direct way does:
  // aux is +pid after staging, -pid without). After the step, the real
  // size decides; a rank whose guess was wrong costs a step (every rank
  // stages again) or a wasted staging, never a wrong byte.
  size_t mine_total = 0, mine_largest = 0;
  for (size_t q = 0; q < P; ++q) {
    mine_total += send[q];
    if (q != r)
      mine_largest = std::max(mine_largest, send[q]);
  }
  auto ways_known = [&](size_t total) {
    // The probe's verdict where it is in; a guess makes no sync step.
    const bool allowed = tuner_.forced() == ShmStrategy::Auto ||
                         tuner_.forced() == ShmStrategy::Direct;
    return allowed && direct_ == 1 && a2a_direct_size(total) ? kShmWays
                                                             : kStoreWays;
  };
  ShmWay guess{};
  const bool large_guess = mine_total > kTunedBytes;
  const A2aPlace& pl0 = cache_for(mine_total) ? a2a_cache_ : whole;
  if (large_guess) {
    const int ways = ways_known(mine_total);
    guess = tuner_.peek(ShmTuner::kAllToAllv, mine_total, a2a_guess(mine_total),
                        ways);
    guess.direct = guess.direct && ways == kShmWays;
  }
  // The tuner times a large op from here (clock reads cost small ones).
  uint64_t t0 = large_guess ? now_ns() : 0;
  const bool own_ok = send[r] == recv[r];  // else the check throws below
  size_t own_done = 0;
  size_t soff_r = 0, roff_r = 0;
  for (size_t q = 0; q < r; ++q) {
    soff_r += send[q];
    roff_r += recv[q];
  }
  // Small blocks stage with streaming stores from kRideStreamBytes, unless
  // ranks share cores (then a peer on this core would read them from
  // memory instead of the cache: 4 ranks on 2 CPUs, 16 KiB, 16.2 us
  // against all_to_all's 8.5 with cached stores).
  const size_t ride_stream = ch_.oversubscribed() ? SIZE_MAX : kRideStreamBytes;
  if (!guess.direct) {
    char* mine = slot(rank_, steps() + 1) + pl0.off;
    for (size_t q = 0, off = 0; q < P; off += send[q], ++q) {
      const a2a::Part p = a2a::round_part(send[q], pl0.window, 0);
      if (q != r && p.len != 0)
        copy_with(mine + a2a_window(r, q) * pl0.window, src + off, p.len,
                  stage_stream(static_cast<int>(q), send[q],
                               large_guess ? guess.stream_stage
                                           : send[q] >= ride_stream));
    }
  }
  ShmStepDesc rows{OpKind::AllToAllv, -1, row * sizeof(uint64_t), 0, 0, 0};
  rows.aux = guess.direct ? -pid_ : pid_;
  rows.addr = reinterpret_cast<uintptr_t>(src);
  arrive(rows);
  if (own_ok && send[r] != 0) {
    // The own block (or the first round's share of it) while the peers
    // arrive.
    own_done = send[r];
    if (!guess.direct && mine_largest > pl0.window) {
      own_done = own_share(send[r], a2a::rounds(mine_largest, pl0.window));
    }
    cached_copy(dst + roff_r, src + soff_r, own_done);
  }
  await();
  bool all_staged = true;
  for (int q = 0; q < size_; ++q) {
    std::memcpy(counts_.data() + static_cast<size_t>(q) * row,
                row_of(q, steps()), row * sizeof(uint64_t));
    all_staged = all_staged && ch_.announced(q).aux > 0;
  }
  const a2a::Counts c{counts_.data(), size_};
  ops_.agreed([&] {
    a2a::check_matrix(c, who(rank_), [this](int m) { return who(m); });
  });
  // The tuner's size: a rank's input, on average (all_to_all's measure).
  const uint64_t all_bytes = c.total();
  const bool large = all_bytes > kTunedBytes * P;
  const auto total = static_cast<size_t>(large ? all_bytes / P : 0);
  const uint64_t largest = c.largest();
  const bool cache = large && cache_for(total);
  const A2aPlace& pl = cache ? a2a_cache_ : whole;
  for (int q = 0; q < size_ && all_staged; ++q)
    all_staged = cache_for(c.input_offset(q, size_)) == cache;
  if (!large && all_staged && largest <= pl.window) {
    // A small op in one round: every block is in its sender's slot.
    for (size_t q = 0, ro = 0; q < P; ro += recv[q], ++q) {
      if (q != r)
        cached_copy(dst + ro,
                    slot(static_cast<int>(q), steps()) + pl.off +
                        a2a_window(q, r) * pl.window,
                    recv[q]);
    }
    if (own_done < send[r])
      cached_copy(dst + roff_r + own_done, src + soff_r + own_done,
                  send[r] - own_done);
    return;
  }
  if (large) {
    // Before a probe's steps (tuner_ways) reuse the slots: the inputs'
    // addresses, and the outputs' from the rows.
    note_peer_inputs();
    for (int q = 0; q < size_; ++q) {
      std::memcpy(&a2a_peers_[static_cast<size_t>(q)].out,
                  row_of(q, steps()) + row * sizeof(uint64_t),
                  sizeof(uint64_t));
    }
  }
  a2a_scratch_.resize(3 * P);
  size_t* soff = a2a_scratch_.data();
  size_t* roff = soff + P;
  size_t* peer_off = roff + P;  // block `rank` in rank q's input
  for (size_t q = 0, s = 0, t = 0; q < P; ++q) {
    soff[q] = s;
    roff[q] = t;
    s += send[q];
    t += recv[q];
    peer_off[q] = c.input_offset(static_cast<int>(q), rank_);
  }
  const ShmStepDesc d{OpKind::AllToAllv, -1, all_bytes, 0, 0, 0};
  // Every rank decides from the same matrix: the same ways (and probe).
  const int ways = large ? tuner_ways(a2a_direct_size(total), d) : kStoreWays;
  const ShmWay way =
      large ? tuner_.begin(ShmTuner::kAllToAllv, total, a2a_guess(total), ways)
            : ShmWay{};
  if (large && !large_guess)
    t0 = now_ns();
  // Small ops stage as the first round did: streaming from
  // kRideStreamBytes a block.
  A2aBlocks b{
      src,  send.data(), soff,    dst,   recv.data(),
      roff, peer_off,    largest, total, large ? SIZE_MAX : ride_stream};
  if (way.direct && ways == kShmWays) {
    plan_pushes(c, b);
    a2a_direct(d, b, true, own_done);
  } else
    a2a_rounds(d, b, way, pl, all_staged, own_done);
  if (large)
    tuner_.finish(now_ns() - t0);
}

}  // namespace jaccl::detail
