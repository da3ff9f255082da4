// Copyright 2026 the jaccl authors.
#include "collectives/exchange.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "jaccl/types.h"

namespace jaccl::detail {

namespace {

constexpr uint32_t kOpMagic = 0x4a434f50;  // "JCOP"

std::string describe(OpKind kind, int dtype, uint64_t n_bytes, uint32_t aux) {
  std::string s = op_kind_name(kind);
  s += " of " + std::to_string(n_bytes) + " bytes";
  if (dtype >= 0 && dtype != 0xff) {
    s += std::string(" (") + dtype_name(dtype) + ")";
  }
  if (kind == OpKind::Broadcast) {
    s += " from root " + std::to_string(aux);
  }
  return s;
}

const char* algo_name(uint8_t a) {
  switch (static_cast<Algo>(a)) {
    case Algo::Ring:
      return "ring";
    case Algo::Bruck:
      return "Bruck all_to_all";
    case Algo::Mesh:
      break;
  }
  return "mesh";
}

}  // namespace

OpHeader make_header(const OpDesc& op, uint32_t seq) {
  OpHeader h;
  h.magic = kOpMagic;
  h.seq = seq;
  h.kind = static_cast<uint8_t>(op.kind);
  h.dtype = static_cast<uint8_t>(op.dtype < 0 ? 0xff : op.dtype);
  h.algo = static_cast<uint8_t>(op.algo);
  h.streams = op.streams;
  h.aux = op.aux;
  h.n_bytes = op.n_bytes;
  return h;
}

void check_header(const OpHeader& got, const OpDesc& mine, uint32_t seq,
                  int rank, int peer) {
  const ErrorContext ec{.rank = rank, .peer = peer};
  if (got.magic != kOpMagic) {
    raise(ErrorKind::Protocol,
          std::string("garbage instead of an op header during ") +
              op_kind_name(mine.kind) + " (stream out of step?)",
          ec);
  }
  const OpHeader want = make_header(mine, seq);
  const auto kind = static_cast<OpKind>(got.kind);
  if (mine.kind == OpKind::SendRecv && got.kind == want.kind &&
      got.n_bytes != want.n_bytes && got.seq == want.seq) {
    raise(ErrorKind::Protocol,
          "recv of " + std::to_string(mine.n_bytes) + " bytes from " +
              rank_ref(peer) + ", but " + rank_ref(peer) + " sent " +
              std::to_string(got.n_bytes) + " bytes",
          ec);
  }
  if (got.kind != want.kind || got.dtype != want.dtype ||
      got.n_bytes != want.n_bytes || got.aux != want.aux) {
    raise(ErrorKind::Protocol,
          "operation mismatch: this rank called " +
              describe(mine.kind, want.dtype, mine.n_bytes, mine.aux) +
              " but " + rank_ref(peer) + " called " +
              describe(kind, got.dtype, got.n_bytes, got.aux),
          ec);
  }
  if (got.seq != want.seq) {
    raise(ErrorKind::Protocol,
          std::string("ranks out of step in ") + op_kind_name(mine.kind) +
              ": " + rank_ref(rank) + " expected op #" + std::to_string(seq) +
              " from " + rank_ref(peer) + ", but " + rank_ref(peer) +
              " sent op #" + std::to_string(got.seq),
          ec);
  }
  if (got.algo != want.algo || got.streams != want.streams) {
    raise(ErrorKind::Protocol,
          std::string("configuration mismatch in ") + op_kind_name(mine.kind) +
              ": this rank uses the " + algo_name(want.algo) + " over " +
              std::to_string(want.streams) + " wire(s), " + rank_ref(peer) +
              " the " + algo_name(got.algo) + " over " +
              std::to_string(got.streams) +
              " (JACCL_RING / JACCL_WIRES differ?)",
          ec);
  }
}

void raise_timeout(const OpContext& ctx, int peer, const std::string& detail) {
  raise(ErrorKind::Timeout,
        std::string(ctx.name) + " timed out after " +
            format_duration(ctx.deadline.total()) + " waiting for " +
            rank_ref(ctx.who(peer)) + " (" + detail + ")",
        {.rank = ctx.rank, .peer = ctx.who(peer)});
}

namespace {

// A mismatch found on one link: let every peer we owe a header see ours
// (best effort), so each of them reports the mismatch too instead of
// waiting for us until the deadline.
void check_or_flush(std::span<Link*> links, const Transfer& got,
                    const OpContext& ctx) {
  try {
    check_header(got.hdr, ctx.desc, got.seq, ctx.rank, ctx.who(got.peer));
  } catch (...) {
    for (Link* l : links) {
      l->flush_headers();
    }
    throw;
  }
}

}  // namespace

void arm(Transfer& x, char* buf, size_t len) {
  x.buf = buf;
  x.len = len;
  x.msg.prepare(nullptr, buf, len);
  x.msg.whole = true;
  x.link->post_recv(x.msg);
}

void run_transfers(std::span<Transfer> xs, const OpContext& ctx, WaitSet& ws,
                   std::vector<Link*>& used, RecvDone on_done) {
  used.clear();
  for (Transfer& x : xs) {
    if (std::find(used.begin(), used.end(), x.link) == used.end()) {
      used.push_back(x.link);
    }
  }
  struct Clear {
    std::vector<Link*>& v;
    ~Clear() {
      for (Link* l : v) {
        l->clear();
      }
    }
  } clear{used};
  // Sends first, so headers leave before a mismatch can stop us.
  for (int pass = 0; pass < 2; ++pass) {
    for (Transfer& x : xs) {
      if (x.is_send != (pass == 0)) {
        continue;
      }
      x.checked = x.reported = false;
      if (x.deferred) {
        x.msg.prepare(nullptr, nullptr, 0);  // not done until armed
        continue;
      }
      x.msg.prepare(x.bare ? nullptr : &x.hdr, x.buf, x.len);
      x.msg.whole = true;
      if (x.is_send) {
        x.link->post_send(x.msg);
      } else {
        x.link->post_recv(x.msg);
      }
    }
  }
  ws.progressed();
  for (;;) {
    bool moved = false;
    for (Link* l : used) {
      moved |= l->progress(ctx.name);
    }
    bool all = true;
    bool armed = false;
    for (Transfer& x : xs) {
      if (!x.is_send && x.msg.hdr_in && !x.checked) {
        check_or_flush(used, x, ctx);
        x.checked = true;
        x.link->accept(x.msg);
      }
      if (!x.is_send && x.msg.done && !x.reported && on_done.fn != nullptr) {
        x.reported = true;
        armed = on_done.fn(on_done.self, x) || armed;
      }
      all = all && x.msg.done;
    }
    if (all) {
      return;
    }
    if (moved) {
      ws.progressed();
    }
    if (armed) {
      continue;  // what it armed may be in already
    }
    ws.clear();
    for (Link* l : used) {
      l->want(ws);
    }
    if (!ws.wait(ctx.deadline, *ctx.state, ctx.spin_us, ctx.yield, ctx.name,
                 ctx.rank)) {
      // Name the first peer we still wait for.
      for (const Transfer& x : xs) {
        if (!x.msg.done) {
          raise_timeout(ctx, x.peer,
                        std::string(x.is_send ? "sent " : "received ") +
                            std::to_string(x.msg.moved) + " of " +
                            std::to_string(x.len) + " bytes" +
                            (x.is_send ? " to it" : " from it"));
        }
      }
    }
  }
}

Transfer& Links::add_send(int peer, int wire, const OpContext& ctx,
                          const void* buf, size_t len) {
  Transfer& x = xfers.emplace_back();
  x.link = wires[peer][wire];
  x.peer = peer;
  x.is_send = true;
  x.seq = send_seq[peer];
  x.hdr = make_header(ctx.desc, x.seq);
  x.buf = const_cast<char*>(static_cast<const char*>(buf));
  x.len = len;
  return x;
}

Transfer& Links::add_recv(int peer, int wire, void* buf, size_t len) {
  Transfer& x = xfers.emplace_back();
  x.link = wires[peer][wire];
  x.peer = peer;
  x.seq = recv_seq[peer];
  x.buf = static_cast<char*>(buf);
  x.len = len;
  return x;
}

void Links::run(const OpContext& ctx, RecvDone on_done) {
  // Count the op once per link and direction (several wires share a count).
  for (const Transfer& x : xfers) {
    auto& seq = x.is_send ? send_seq[x.peer] : recv_seq[x.peer];
    if (seq == x.seq) {
      ++seq;
    }
  }
  struct Clear {
    std::vector<Transfer>& v;
    ~Clear() { v.clear(); }
  } clear{xfers};
  run_transfers(xfers, ctx, ws, used, on_done);
}

}  // namespace jaccl::detail
