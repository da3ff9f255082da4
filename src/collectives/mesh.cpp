// Copyright 2026 the jaccl authors.
#include "collectives/mesh.h"

#include <cstring>
#include <vector>

#include "collectives/all_to_all.h"
#include "collectives/ring_math.h"
#include "common/copy.h"
#include "jaccl/types.h"

namespace jaccl::detail::mesh {

namespace {

char* slots(Links& l, size_t n_bytes) {
  const size_t need = static_cast<size_t>(l.size) * n_bytes;
  if (l.scratch.size() < need) {
    l.scratch.resize(need);
  }
  return l.scratch.data();
}

// out = src(0) op src(1) op ... op src(N-1), in rank order on every rank.
// own is this rank's contribution (user memory, may overlap out); the
// others are in slot q of the scratch.
void reduce_in_rank_order(Links& l, ReduceOp op, int dtype, const char* own,
                          void* out, size_t n_bytes, char* slot_base) {
  const size_t count = n_bytes / dtype_size(dtype);
  const int r = l.rank;
  // reduce3 allows out to be exactly one of its inputs; anything else that
  // overlaps must be copied away before out is written.
  if (overlaps(out, n_bytes, own, n_bytes) && !(out == own && r <= 1)) {
    copy_bytes(slot_base + r * n_bytes, own, n_bytes);
    own = slot_base + r * n_bytes;
  }
  auto src = [&](int q) -> const char* {
    return q == r ? own : slot_base + q * n_bytes;
  };
  reduce3(op, dtype, out, src(0), src(1), count);
  for (int q = 2; q < l.size; ++q) {
    reduce_into(op, dtype, out, src(q), count);
  }
}

}  // namespace

void all_reduce(Links& l, const OpContext& ctx, ReduceOp op, int dtype,
                const void* in, void* out, size_t n_bytes) {
  char* base = slots(l, n_bytes);
  for (int p = 0; p < l.size; ++p) {
    if (p != l.rank) {
      l.add_send(p, 0, ctx, in, n_bytes);
      l.add_recv(p, 0, base + p * n_bytes, n_bytes);
    }
  }
  l.run(ctx);
  reduce_in_rank_order(l, op, dtype, static_cast<const char*>(in), out, n_bytes,
                       base);
}

void sum_scatter(Links& l, const OpContext& ctx, int dtype, const void* in,
                 void* out, size_t n_bytes) {
  char* base = slots(l, n_bytes);
  const char* src = static_cast<const char*>(in);
  for (int p = 0; p < l.size; ++p) {
    if (p != l.rank) {
      l.add_send(p, 0, ctx, src + p * n_bytes, n_bytes);
      l.add_recv(p, 0, base + p * n_bytes, n_bytes);
    }
  }
  l.run(ctx);
  reduce_in_rank_order(l, ReduceOp::Sum, dtype, src + l.rank * n_bytes, out,
                       n_bytes, base);
}

void all_gather(Links& l, const OpContext& ctx, const void* in, void* out,
                size_t n_bytes) {
  char* dst = static_cast<char*>(out);
  char* mine = dst + l.rank * n_bytes;
  move_bytes(mine, in, n_bytes);
  // The block goes to every peer as an all_to_all block would: in step
  // order (rank + k), large ones split over the pair's wires.
  std::vector<a2a::Block> blocks;
  blocks.reserve(2 * static_cast<size_t>(l.size));
  for (int k = 1; k < l.size; ++k) {
    const int to = a2a::send_peer(l.rank, l.size, k);
    const int from = a2a::recv_peer(l.rank, l.size, k);
    blocks.push_back({to, mine, n_bytes, nullptr, 0});
    blocks.push_back({from, nullptr, 0, dst + from * n_bytes, n_bytes});
  }
  a2a::exchange(l, ctx, blocks);
}

void barrier(Links& l, const OpContext& ctx) {
  for (int p = 0; p < l.size; ++p) {
    if (p != l.rank) {
      l.add_send(p, 0, ctx, nullptr, 0);
      l.add_recv(p, 0, nullptr, 0);
    }
  }
  l.run(ctx);
}

namespace {

// Queues a message to (or from) one peer split over all wires of the pair,
// with the wire count in the header.
void add_split(Links& l, OpContext& ctx, int peer, bool is_send, char* buf,
               size_t n_bytes) {
  const size_t wires = l.wires[peer].size();
  ctx.desc.streams = static_cast<uint8_t>(wires);
  for (size_t w = 0; w < wires; ++w) {
    const ring::Range part = ring::split(n_bytes, wires, w);
    if (is_send) {
      l.add_send(peer, static_cast<int>(w), ctx, buf + part.off, part.len);
    } else {
      l.add_recv(peer, static_cast<int>(w), buf + part.off, part.len);
    }
  }
}

}  // namespace

void broadcast(Links& l, const OpContext& ctx, void* buf, size_t n_bytes,
               int root) {
  OpContext c = ctx;
  if (l.rank == root) {
    for (int p = 0; p < l.size; ++p) {
      if (p != root) {
        add_split(l, c, p, true, static_cast<char*>(buf), n_bytes);
      }
    }
  } else {
    add_split(l, c, root, false, static_cast<char*>(buf), n_bytes);
  }
  l.run(c);
}

void send(Links& l, const OpContext& ctx, const void* in, size_t n_bytes,
          int dst) {
  OpContext c = ctx;
  add_split(l, c, dst, true, const_cast<char*>(static_cast<const char*>(in)),
            n_bytes);
  l.run(c);
}

void recv(Links& l, const OpContext& ctx, void* out, size_t n_bytes, int src) {
  OpContext c = ctx;
  add_split(l, c, src, false, static_cast<char*>(out), n_bytes);
  l.run(c);
}

}  // namespace jaccl::detail::mesh
