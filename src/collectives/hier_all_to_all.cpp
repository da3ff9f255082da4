// Copyright 2026 the jaccl authors.
// all_to_all and all_to_allv of the hierarchical group, as direct pairs in
// three phases: (1) the pairs on this host through the host's shared-memory
// group, (2) leader-to-leader pairs over the leaders' network group, (3)
// every other cross-host pair at once over the send/recv group
// (net_exchange). Each phase waits only on ranks that reach it after
// phases that do not wait on it, so the phases cannot deadlock, and every
// byte crosses the network once, straight to its rank. (Gathering a host's
// blocks at its leader would put all of them through one rank's wires and
// add a copy inside each host on both ends.)
#include <cstring>

#include "collectives/all_to_all.h"
#include "collectives/hier_group.h"
#include "collectives/net_group.h"
#include "common/error.h"
#include "transport/shm_copy.h"

namespace jaccl::detail {

namespace {

// Blocks of `ranks` (job ranks, ascending) out of a packed buffer laid out
// by job rank: their counts into sub, and their bytes, contiguous; the
// buffer itself when they already are (consecutive ranks), else a copy in
// tmp (pack = true) or tmp sized for them (pack = false).
char* blocks_of(char* base, const size_t* cnt, const size_t* off,
                const std::vector<int>& ranks, std::vector<size_t>& sub,
                std::vector<char>& tmp, bool pack) {
  sub.clear();
  size_t total = 0;
  for (int q : ranks) {
    sub.push_back(cnt[q]);
    total += cnt[q];
  }
  const bool consecutive =
      ranks.back() - ranks.front() + 1 == static_cast<int>(ranks.size());
  if (consecutive) {
    return base + off[ranks.front()];
  }
  if (tmp.size() < total) {
    tmp.resize(total);
  }
  if (pack) {
    size_t at = 0;
    for (int q : ranks) {
      copy_bytes(tmp.data() + at, base + off[q], cnt[q]);
      at += cnt[q];
    }
  }
  return tmp.data();
}

// The inverse of blocks_of(pack = false) for a buffer it returned.
void unpack(char* base, const size_t* cnt, const size_t* off,
            const std::vector<int>& ranks, const char* from) {
  if (from == base + off[ranks.front()]) {
    return;
  }
  for (int q : ranks) {
    copy_bytes(base + off[q], from, cnt[q]);
    from += cnt[q];
  }
}

}  // namespace

void HierGroup::a2a_phases(bool fixed, uint64_t header_bytes, const char* in,
                           const size_t* send, const size_t* soff, char* out,
                           const size_t* recv, const size_t* roff) {
  char* src = const_cast<char*>(in);  // only read
  const auto me = static_cast<size_t>(rank_);
  // (1) this host.
  const auto& mine = map_.hosts[static_cast<size_t>(host_)];
  if (local_) {
    std::vector<size_t> sc, rc;
    char* s = blocks_of(src, send, soff, mine, sc, tmp_, true);
    char* d = blocks_of(out, recv, roff, mine, rc, tmp2_, false);
    if (fixed)
      local_->all_to_all(s, d, send[me]);
    else
      local_->all_to_allv(s, sc, d, rc);
    unpack(out, recv, roff, mine, d);
  } else if (send[me] != 0) {
    copy_bytes(out + roff[me], in + soff[me], send[me]);
  }
  // (2) the leaders: this leader's blocks for the other leaders (its own
  // slot empty in the variable form; in the fixed form a copy of its own
  // block, whose result is dropped).
  if (leaders_) {
    const std::vector<int> heads = map_.leaders();
    const size_t H = heads.size();
    std::vector<size_t> sc(H), rc(H);
    size_t st = 0, rt = 0;
    for (size_t h = 0; h < H; ++h) {
      const auto q = static_cast<size_t>(heads[h]);
      sc[h] = q == me && !fixed ? 0 : send[q];
      rc[h] = q == me && !fixed ? 0 : recv[q];
      st += sc[h];
      rt += rc[h];
    }
    if (tmp_.size() < st)
      tmp_.resize(st);
    if (tmp2_.size() < rt)
      tmp2_.resize(rt);
    for (size_t h = 0, at = 0; h < H; ++h) {
      copy_bytes(tmp_.data() + at, in + soff[heads[h]], sc[h]);
      at += sc[h];
    }
    if (fixed)
      leaders_->all_to_all(tmp_.data(), tmp2_.data(), send[me]);
    else
      leaders_->all_to_allv(tmp_.data(), sc, tmp2_.data(), rc);
    for (size_t h = 0, at = 0; h < H; ++h) {
      if (static_cast<size_t>(heads[h]) != me)
        copy_bytes(out + roff[heads[h]], tmp2_.data() + at, rc[h]);
      at += rc[h];
    }
  }
  // (3) every other pair across hosts, at once.
  std::vector<a2a::Block> blocks;
  for (int p = 0; p < size(); ++p) {
    const auto up = static_cast<size_t>(p);
    if (map_.host_of[up] == host_ || (leader_ && map_.index_of[up] == 0))
      continue;
    blocks.push_back({p, in + soff[up], send[up], out + roff[up], recv[up]});
  }
  if (!blocks.empty()) {
    net_exchange(*p2p_, fixed ? OpKind::AllToAll : OpKind::AllToAllv,
                 header_bytes, blocks);
  }
}

void HierGroup::all_to_all(const void* in, void* out, size_t n) {
  ops_.run(call::all_to_all(in, out, n), [&](const Deadline&) {
    a2a_fixed(static_cast<const char*>(in), static_cast<char*>(out), n);
  });
}

void HierGroup::a2a_fixed(const char* in, char* out, size_t n) {
  const auto P = static_cast<size_t>(size());
  a2a_scratch_.resize(2 * P);
  size_t* counts = a2a_scratch_.data();
  size_t* offs = counts + P;
  for (size_t q = 0; q < P; ++q) {
    counts[q] = n;
    offs[q] = q * n;
  }
  a2a_phases(true, n, in, counts, offs, out, counts, offs);
}

void HierGroup::all_to_allv(const void* in, std::span<const size_t> send,
                            void* out, std::span<const size_t> recv) {
  ops_.run(call::all_to_allv(in, send, out, recv), [&](const Deadline&) {
    a2a_varying(static_cast<const char*>(in), send, static_cast<char*>(out),
                recv);
  });
}

void HierGroup::a2a_varying(const char* in, std::span<const size_t> send,
                            char* out, std::span<const size_t> recv) {
  const auto P = static_cast<size_t>(size());
  // The counts matrix over the whole job, checked on every rank.
  const size_t row = 2 * P;
  std::vector<uint64_t> mine(row);
  a2a::fill_row(send, recv, mine.data());
  counts_.resize(row * P);
  gather_body(mine.data(), counts_.data(), row * sizeof(uint64_t));
  const a2a::Counts c{counts_.data(), size()};
  ops_.agreed([&] { a2a::check_matrix(c, rank_, [](int q) { return q; }); });
  if (c.total() == 0)
    return;
  a2a_scratch_.resize(2 * P);
  size_t* soff = a2a_scratch_.data();
  size_t* roff = soff + P;
  for (size_t q = 0, s = 0, t = 0; q < P; ++q) {
    soff[q] = s;
    roff[q] = t;
    s += send[q];
    t += recv[q];
  }
  a2a_phases(false, c.total(), in, send.data(), soff, out, recv.data(), roff);
}

}  // namespace jaccl::detail
