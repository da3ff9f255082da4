// Copyright 2026 the jaccl authors.
#include "collectives/all_to_all.h"

#include <cstring>
#include <string>

#include "collectives/exchange.h"
#include "collectives/ring_math.h"
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
            " (the counts were checked on every rank before any data moved)",
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
  std::memcpy(out + static_cast<size_t>(r) * n, in + static_cast<size_t>(r) * n,
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

}  // namespace jaccl::detail::a2a
