// Copyright 2026 the jaccl authors.
#include "collectives/all_to_all.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "collectives/exchange.h"
#include "collectives/ring_math.h"
#include "common/copy.h"
#include "common/error.h"
#include "jaccl/group.h"

namespace jaccl {

// The defaults, for Group implementations outside jaccl (every jaccl group
// overrides them).
void Group::all_to_all(const void*, void*, size_t) {
  detail::raise(ErrorKind::Usage,
                std::string("all_to_all is not supported by this group (") +
                    backend_name() + ")",
                {.rank = rank()});
}
void Group::all_to_allv(const void*, std::span<const size_t>, void*,
                        std::span<const size_t>) {
  detail::raise(ErrorKind::Usage,
                std::string("all_to_allv is not supported by this group (") +
                    backend_name() + ")",
                {.rank = rank()});
}

}  // namespace jaccl

namespace jaccl::detail::a2a {

void fill_row(std::span<const size_t> send, std::span<const size_t> recv,
              uint64_t* row) {
  for (size_t i = 0; i < send.size(); ++i) {
    row[i] = send[i];
  }
  for (size_t i = 0; i < recv.size(); ++i) {
    row[send.size() + i] = recv[i];
  }
}

void check_matrix(const Counts& c, int rank,
                  const std::function<int(int)>& who) {
  const Mismatch m = find_mismatch(c);
  if (!m.found()) {
    return;
  }
  const Detail a = rank_ref(who(m.receiver));
  const Detail b = rank_ref(who(m.sender));
  raise(ErrorKind::Protocol,
        "all_to_allv: " + a + " expects " + std::to_string(m.expects) +
            " bytes from " + b + ", but " + b + " sends " +
            std::to_string(m.sends) + " bytes to " + a +
            " (every rank checked the same counts)",
        {.rank = rank});
}

void offsets_of(std::span<const size_t> counts, std::vector<size_t>& out) {
  out.resize(counts.size());
  size_t off = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    out[i] = off;
    off += counts[i];
  }
}

namespace {

void add_parts(Links& l, const OpContext& ctx, int peer, bool is_send,
               char* buf, size_t bytes) {
  if (bytes == 0) {
    return;
  }
  const size_t wires =
      wires_for(bytes, l.wires[static_cast<size_t>(peer)].size(), kSplitBytes);
  for (size_t w = 0; w < wires; ++w) {
    const ring::Range part = ring::split(bytes, wires, w);
    if (is_send) {
      l.add_send(peer, static_cast<int>(w), ctx, buf + part.off, part.len);
    } else {
      l.add_recv(peer, static_cast<int>(w), buf + part.off, part.len);
    }
  }
}

}  // namespace

void exchange(Links& l, const OpContext& ctx, std::span<const Block> blocks) {
  for (const Block& b : blocks) {
    add_parts(l, ctx, b.peer, true, const_cast<char*>(b.send), b.send_bytes);
  }
  for (const Block& b : blocks) {
    add_parts(l, ctx, b.peer, false, b.recv, b.recv_bytes);
  }
  if (!l.xfers.empty()) {
    l.run(ctx);
  }
}

void all_to_all(Links& l, const OpContext& ctx, const char* in, char* out,
                size_t n) {
  const int r = l.rank;
  copy_bytes(out + static_cast<size_t>(r) * n, in + static_cast<size_t>(r) * n,
             n);
  std::vector<Block> blocks;
  blocks.reserve(static_cast<size_t>(l.size));
  for (int k = 1; k < l.size; ++k) {
    const int to = send_peer(r, l.size, k);
    const int from = recv_peer(r, l.size, k);
    // Sends go out in step order; receives are all posted before any
    // progress, so their order does not matter.
    blocks.push_back({to, in + static_cast<size_t>(to) * n, n, nullptr, 0});
    blocks.push_back(
        {from, nullptr, 0, out + static_cast<size_t>(from) * n, n});
  }
  exchange(l, ctx, blocks);
}

void all_to_all_bruck(Links& l, const OpContext& ctx, const char* in, char* out,
                      size_t n, std::vector<char>& scratch) {
  const int r = l.rank;
  const int size = l.size;
  const auto us = static_cast<size_t>(size);
  // tmp[i]: the block at distance i (to rank r + i, then from rank r - i);
  // sb / rb: one round's packed blocks.
  const size_t most = static_cast<size_t>(bruck_blocks(size, 0)) * n;
  if (scratch.size() < us * n + 2 * most) {
    scratch.resize(us * n + 2 * most);
  }
  char* tmp = scratch.data();
  char* sb = tmp + us * n;
  char* rb = sb + most;
  for (int i = 0; i < size; ++i) {
    copy_bytes(tmp + static_cast<size_t>(i) * n,
               in + static_cast<size_t>((r + i) % size) * n, n);
  }
  for (int k = 0; k < bruck_rounds(size); ++k) {
    size_t len = 0;
    for (int i = 1; i < size; ++i) {
      if ((i >> k) & 1) {
        copy_bytes(sb + len, tmp + static_cast<size_t>(i) * n, n);
        len += n;
      }
    }
    const int to = (r + (1 << k)) % size;
    const int from = ((r - (1 << k)) % size + size) % size;
    l.add_send(to, 0, ctx, sb, len);
    l.add_recv(from, 0, rb, len);
    l.run(ctx);
    len = 0;
    for (int i = 1; i < size; ++i) {
      if ((i >> k) & 1) {
        copy_bytes(tmp + static_cast<size_t>(i) * n, rb + len, n);
        len += n;
      }
    }
  }
  for (int i = 0; i < size; ++i) {
    copy_bytes(out + static_cast<size_t>(((r - i) % size + size) % size) * n,
               tmp + static_cast<size_t>(i) * n, n);
  }
}

namespace {

struct VRun {
  Links& l;
  VState& st;
  std::span<const size_t> recv;
  char* dst;
};

// A peer's row is in: post its block's receives on the pair's wires, cut
// as the sender cut them (add_parts).
bool on_row(void* self, Transfer& x) {
  auto& v = *static_cast<VRun*>(self);
  if (x.bare) {
    return false;  // a block's part
  }
  const auto p = static_cast<size_t>(x.peer);
  const size_t s = Counts{v.st.counts.data(), v.l.size}.sends(x.peer, v.l.rank);
  char* buf = v.dst + v.st.roff[p];
  if (s != v.recv[p]) {
    v.st.drop[p].resize(s);
    buf = v.st.drop[p].data();
  }
  const size_t all = v.l.wires[p].size();
  const size_t wires = s == 0 ? 0 : wires_for(s, all, kSplitBytes);
  for (size_t w = 0; w < all; ++w) {
    const ring::Range part =
        w < wires ? ring::split(s, wires, w) : ring::Range{};
    arm(v.l.xfers[v.st.first[p] + w], buf + part.off, part.len);
  }
  return true;
}

}  // namespace

Counts all_to_allv(Links& l, const OpContext& ctx, const char* src,
                   std::span<const size_t> send, char* dst,
                   std::span<const size_t> recv, VState& st) {
  const int n = l.size;
  const int r = l.rank;
  const size_t row = 2 * static_cast<size_t>(n);
  st.counts.resize(row * static_cast<size_t>(n));
  uint64_t* mine = st.counts.data() + static_cast<size_t>(r) * row;
  fill_row(send, recv, mine);
  offsets_of(send, st.soff);
  offsets_of(recv, st.roff);
  st.first.assign(static_cast<size_t>(n), 0);
  st.drop.resize(static_cast<size_t>(n));
  const size_t row_bytes = row * sizeof(uint64_t);
  for (int k = 1; k < n; ++k) {
    const int to = send_peer(r, n, k);
    const auto ut = static_cast<size_t>(to);
    l.add_send(to, 0, ctx, mine, row_bytes);
    const size_t before = l.xfers.size();
    add_parts(l, ctx, to, true, const_cast<char*>(src + st.soff[ut]), send[ut]);
    for (size_t i = before; i < l.xfers.size(); ++i) {
      l.xfers[i].bare = true;
    }
  }
  for (int k = 1; k < n; ++k) {
    const int from = recv_peer(r, n, k);
    const auto uf = static_cast<size_t>(from);
    l.add_recv(from, 0, st.counts.data() + uf * row, row_bytes);
    st.first[uf] = l.xfers.size();
    for (size_t w = 0; w < l.wires[uf].size(); ++w) {
      Transfer& x = l.add_recv(from, static_cast<int>(w), nullptr, 0);
      x.bare = x.deferred = true;
    }
  }
  VRun v{l, st, recv, dst};
  l.run(ctx, {on_row, &v});
  for (auto& d : st.drop) {
    std::vector<char>().swap(d);  // only an error needed them
  }
  return {st.counts.data(), n};
}

namespace {

struct BruckV {
  Links& l;
  VState& st;
  int k = 0;        // the round
  int from = 0;     // its sender
  size_t rows = 0;  // rows it carries
  size_t data = 0;  // index of its blocks' receive in l.xfers
  std::vector<size_t>* lens = nullptr;  // per distance with bit k: length
};

// Row r - j of the matrix (mod n).
uint64_t* row_of(VState& st, int n, int r, int j) {
  const int who = ((r - j) % n + n) % n;
  return st.counts.data() +
         static_cast<size_t>(who) * 2 * static_cast<size_t>(n);
}

// A round's rows are in: store them, then post its blocks' receive with
// the length they give.
bool on_rows(void* self, Transfer& x) {
  auto& b = *static_cast<BruckV*>(self);
  if (x.bare) {
    return false;  // the blocks
  }
  const int n = b.l.size;
  const size_t row = 2 * static_cast<size_t>(n);
  for (size_t j = 0; j < b.rows; ++j) {
    copy_bytes(row_of(b.st, n, b.from, static_cast<int>(j)),
               b.st.rows.data() + j * row, row * sizeof(uint64_t));
  }
  const Counts c{b.st.counts.data(), n};
  const int d = 1 << b.k;
  size_t total = 0;
  b.lens->clear();
  for (int i = 1; i < n; ++i) {
    if (((i >> b.k) & 1) == 0) {
      continue;
    }
    const int origin = ((b.from - i % d) % n + n) % n;
    const size_t len = c.sends(origin, (origin + i) % n);
    b.lens->push_back(len);
    total += len;
  }
  auto& buf = b.st.in[static_cast<size_t>(b.k)];
  buf.resize(total);
  arm(b.l.xfers[b.data], buf.data(), total);
  return true;
}

}  // namespace

Counts all_to_allv_bruck(Links& l, const OpContext& ctx, const char* src,
                         std::span<const size_t> send, char* dst,
                         std::span<const size_t> recv, VState& st) {
  const int n = l.size;
  const int r = l.rank;
  const auto un = static_cast<size_t>(n);
  const size_t row = 2 * un;
  const size_t row_bytes = row * sizeof(uint64_t);
  st.counts.assign(row * un, 0);
  fill_row(send, recv, st.counts.data() + static_cast<size_t>(r) * row);
  offsets_of(send, st.soff);
  offsets_of(recv, st.roff);
  st.at.resize(un);
  st.len.resize(un);
  for (size_t i = 0; i < un; ++i) {
    const size_t to = (static_cast<size_t>(r) + i) % un;
    st.at[i] = src + st.soff[to];
    st.len[i] = send[to];
  }
  const int rounds = bruck_rounds(n);
  st.in.resize(static_cast<size_t>(rounds));
  std::vector<size_t> lens;
  for (int k = 0; k < rounds; ++k) {
    const int d = 1 << k;
    const auto m = static_cast<size_t>(std::min(d, n - d));
    size_t bytes = m * row_bytes;
    for (int i = 1; i < n; ++i) {
      if ((i >> k) & 1) {
        bytes += st.len[static_cast<size_t>(i)];
      }
    }
    st.out.resize(bytes);
    char* p = st.out.data();
    for (size_t j = 0; j < m; ++j) {
      copy_bytes(p, row_of(st, n, r, static_cast<int>(j)), row_bytes);
      p += row_bytes;
    }
    for (int i = 1; i < n; ++i) {
      const auto ui = static_cast<size_t>(i);
      if (((i >> k) & 1) != 0 && st.len[ui] != 0) {
        copy_bytes(p, st.at[ui], st.len[ui]);
        p += st.len[ui];
      }
    }
    const int to = (r + d) % n;
    const int from = ((r - d) % n + n) % n;
    st.rows.resize(m * row);
    l.add_send(to, 0, ctx, st.out.data(), bytes);
    l.add_recv(from, 0, st.rows.data(), m * row_bytes);
    BruckV b{l, st, k, from, m, l.xfers.size(), &lens};
    Transfer& x = l.add_recv(from, 0, nullptr, 0);
    x.bare = x.deferred = true;
    l.run(ctx, {on_rows, &b});
    size_t off = 0;
    size_t next = 0;
    for (int i = 1; i < n; ++i) {
      const auto ui = static_cast<size_t>(i);
      if ((i >> k) & 1) {
        st.at[ui] = st.in[static_cast<size_t>(k)].data() + off;
        st.len[ui] = lens[next];
        off += lens[next++];
      }
    }
  }
  // Distance i now holds the block of rank r - i.
  for (size_t i = 1; i < un; ++i) {
    const size_t origin = (static_cast<size_t>(r) + un - i) % un;
    if (st.len[i] == recv[origin] && st.len[i] != 0) {
      copy_bytes(dst + st.roff[origin], st.at[i], st.len[i]);
    }
  }
  for (auto& b : st.in) {
    if (b.capacity() > (size_t(1) << 20)) {
      std::vector<char>().swap(b);  // a large op's: not kept
    }
  }
  return {st.counts.data(), n};
}

}  // namespace jaccl::detail::a2a
