// Copyright 2026 the jaccl authors.
#include "collectives/ring.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"
#include "jaccl/types.h"

namespace jaccl::detail {

using ring::Mode;

// One direction of one wire: a header, then the schedule's chunks (this
// stream's slice of them), with a send cursor and a receive cursor. A send at
// step t may go as far as the receive of step t-1 has arrived (and been
// reduced); a receive proceeds piece by piece, reducing each piece.
struct RingEngine::Stream {
  ring::Schedule sch;
  int steps = 0;
  int send_fd = -1;
  int recv_fd = -1;
  size_t a = 0;  // first element of this stream's slice
  size_t m = 0;  // elements in the slice (per chunk for AllGather/RS)
  size_t piece = 0;
  char* pbuf = nullptr;                 // AllReduce in place: one piece
  char* rsbuf[2] = {nullptr, nullptr};  // ReduceScatter: double buffer
  WireHeader sh{};
  WireHeader rh{};
  size_t shdr = 0;
  size_t rhdr = 0;
  uint32_t rseq = 0;
  int st = 0;
  int rt = 0;
  size_t sdone = 0;
  size_t rgot = 0;
  size_t rproc = 0;
  bool swait = false;
  bool rwait = false;

  bool done() const {
    return st == steps && rt == steps && shdr == kHeaderBytes &&
           rhdr == kHeaderBytes;
  }
};

namespace {

struct Geo {
  size_t in_off;
  size_t out_off;
  size_t len;
};

}  // namespace

RingEngine::RingEngine(Links& links) : links_(links) {
  const int n = links.size;
  const int right = ring::mod(links.rank + 1, n);
  const int left = ring::mod(links.rank - 1, n);
  const size_t w = std::min(links.fds[right].size(), links.fds[left].size());
  wires_ = static_cast<int>(std::clamp<size_t>(w, 1, 64));
  scratch_.resize(wires_);
  pfds_.resize(wires_);
  for (auto& v : pfds_) {
    v.reserve(8);
  }
  for (int i = 1; i < wires_; ++i) {
    threads_.emplace_back([this, i] { worker(i); });
  }
}

RingEngine::~RingEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    t.join();
  }
}

void RingEngine::worker(int w) {
  unsigned long long seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || gen_ != seen; });
    if (stop_) {
      return;
    }
    seen = gen_;
    lock.unlock();
    try {
      run_wire(w);
    } catch (...) {
      links_.state->fail(std::current_exception());
    }
    lock.lock();
    if (--pending_ == 0) {
      done_cv_.notify_all();
    }
  }
}

void RingEngine::run(Mode mode, const OpContext& ctx, ReduceOp op, int dtype,
                     const void* in, void* out, size_t n_bytes) {
  Plan& p = plan_;
  p.mode = mode;
  p.ctx = ctx;
  p.op = op;
  p.dtype = dtype;
  p.es = mode == Mode::AllGather ? 1 : dtype_size(dtype);
  p.in = static_cast<const char*>(in);
  p.out = static_cast<char*>(out);
  p.n_bytes = n_bytes;
  p.elems = n_bytes / p.es;
  p.dirs = ring::directions(links_.size);
  if (mode == Mode::AllGather) {
    char* mine = p.out + links_.rank * n_bytes;
    if (mine != p.in) {
      std::memmove(mine, p.in, n_bytes);
    }
  }
  for (int d = 0; d < p.dirs; ++d) {
    const ring::Schedule s{links_.size, links_.rank, d == 0 ? 1 : -1, mode};
    p.send_seq[d] = links_.send_seq[s.to()]++;
    p.recv_seq[d] = links_.recv_seq[s.from()]++;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++gen_;
    pending_ = wires_ - 1;
  }
  cv_.notify_all();
  try {
    run_wire(0);
  } catch (...) {
    links_.state->fail(std::current_exception());
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
  }
  links_.state->throw_if_failed();
}

void RingEngine::setup_stream(Stream& s, int w, int d, char* scratch) const {
  const Plan& p = plan_;
  s = Stream{};
  s.sch = ring::Schedule{links_.size, links_.rank, d == 0 ? 1 : -1, p.mode};
  s.steps = s.sch.steps();
  s.send_fd = links_.fds[s.sch.to()][w];
  s.recv_fd = links_.fds[s.sch.from()][w];
  const ring::Range slice = ring::split(
      p.elems, static_cast<size_t>(wires_) * p.dirs, w * p.dirs + d);
  s.a = slice.off;
  s.m = slice.len;
  s.piece = ring::piece_bytes(kRingPieceBytes, p.es);
  s.sh = make_header(p.ctx.desc, p.send_seq[d]);
  s.rseq = p.recv_seq[d];
  s.pbuf = scratch;
  s.rsbuf[0] = scratch;
  s.rsbuf[1] = scratch + s.m * p.es;
}

void RingEngine::run_wire(int w) {
  const Plan& p = plan_;
  // Scratch: a piece per direction for in-place all-reduce, two chunk
  // slices per direction for reduce-scatter.
  const size_t slice_bytes =
      (p.elems / (static_cast<size_t>(wires_) * p.dirs) + 1) * p.es;
  size_t per_dir = 0;
  if (p.mode == Mode::AllReduce && p.in == p.out) {
    per_dir = ring::piece_bytes(kRingPieceBytes, p.es);
  } else if (p.mode == Mode::ReduceScatter) {
    per_dir = 2 * slice_bytes;
  }
  std::vector<char>& scratch = scratch_[w];
  if (scratch.size() < per_dir * p.dirs) {
    scratch.resize(per_dir * p.dirs);
  }
  Stream streams[2];
  for (int d = 0; d < p.dirs; ++d) {
    setup_stream(streams[d], w, d, scratch.data() + d * per_dir);
  }
  try {
    wire_loop(streams, w);
  } catch (...) {
    // A mismatch (or any failure) here: let the peers we owe a header see
    // ours (best effort), so they report the mismatch instead of waiting.
    for (int d = 0; d < p.dirs; ++d) {
      push_header(streams[d].send_fd, streams[d].sh, streams[d].shdr);
    }
    throw;
  }
}

void RingEngine::wire_loop(Stream* streams, int w) {
  const Plan& p = plan_;
  std::vector<pollfd>& pfds = pfds_[w];
  for (;;) {
    bool progress = true;
    while (progress) {
      progress = false;
      // Sends first: headers leave before a mismatch can stop us.
      for (int d = 0; d < p.dirs; ++d) {
        streams[d].swait = false;
        progress |= pump_send(streams[d]);
      }
      for (int d = 0; d < p.dirs; ++d) {
        streams[d].rwait = false;
        progress |= pump_recv(streams[d]);
      }
    }
    pfds.clear();
    bool all_done = true;
    for (int d = 0; d < p.dirs; ++d) {
      const Stream& s = streams[d];
      all_done = all_done && s.done();
      if (s.swait) {
        pfds.push_back({s.send_fd, POLLOUT, 0});
      }
      if (s.rwait) {
        pfds.push_back({s.recv_fd, POLLIN, 0});
      }
    }
    if (all_done) {
      return;
    }
    if (pfds.empty()) {
      raise(ErrorKind::Internal,
            std::string("ring ") + p.ctx.name + " stalled on wire " +
                std::to_string(w),
            {.rank = p.ctx.rank});
    }
    if (!wait_ready(pfds, p.ctx)) {
      for (int d = 0; d < p.dirs; ++d) {
        if (!streams[d].done()) {
          timeout(streams[d], w);
        }
      }
    }
  }
}

namespace {

Geo geo(ring::Mode mode, size_t es, size_t n_bytes, int n, size_t a, size_t m,
        int c) {
  switch (mode) {
    case Mode::AllReduce: {
      const ring::Range cr = ring::split(m, n, c);
      const size_t off = (a + cr.off) * es;
      return {off, off, cr.len * es};
    }
    case Mode::AllGather: {
      const size_t off = c * n_bytes + a;
      return {off, off, m};
    }
    case Mode::ReduceScatter:
      return {c * n_bytes + a * es, a * es, m * es};
  }
  return {0, 0, 0};
}

}  // namespace

bool RingEngine::pump_send(Stream& s) const {
  const Plan& p = plan_;
  bool progress = false;
  for (;;) {
    Geo g{0, 0, 0};
    for (;;) {
      if (s.st == s.steps) {
        break;
      }
      g = geo(p.mode, p.es, p.n_bytes, s.sch.n, s.a, s.m,
              s.sch.send_chunk(s.st));
      if (s.sdone < g.len) {
        break;
      }
      ++s.st;
      s.sdone = 0;
    }
    const char* src = nullptr;
    size_t lim = 0;
    if (s.st < s.steps) {
      const int t = s.st;
      // What step t forwards is what step t-1 received.
      lim = t == 0 || s.rt >= t ? g.len : (s.rt == t - 1 ? s.rproc : 0);
      if (p.mode == Mode::AllReduce) {
        src = (t == 0 ? p.in : p.out) + g.in_off;
      } else if (p.mode == Mode::AllGather) {
        src = p.out + g.out_off;
      } else {
        src = t == 0 ? p.in + g.in_off : s.rsbuf[(t - 1) & 1];
      }
    }
    if (s.shdr == kHeaderBytes && s.sdone >= lim) {
      return progress;  // finished, or waiting for a receive
    }
    size_t moved = 0;
    const size_t h0 = s.shdr;
    const bool ready = send_step(s.send_fd, s.sh, s.shdr, src + s.sdone,
                                 lim - s.sdone, moved, s.sch.to(), p.ctx);
    s.sdone += moved;
    progress = progress || moved != 0 || s.shdr != h0;
    if (!ready) {
      s.swait = true;
      return progress;
    }
  }
}

bool RingEngine::pump_recv(Stream& s) const {
  const Plan& p = plan_;
  bool progress = false;
  for (;;) {
    Geo g{0, 0, 0};
    for (;;) {
      if (s.rt == s.steps) {
        break;
      }
      g = geo(p.mode, p.es, p.n_bytes, s.sch.n, s.a, s.m,
              s.sch.recv_chunk(s.rt));
      if (s.rproc < g.len) {
        break;
      }
      ++s.rt;
      s.rgot = s.rproc = 0;
    }
    const int t = s.rt;
    const bool reduces = t < s.steps && s.sch.reduces(t);
    char* dst = nullptr;
    size_t lim = 0;
    if (t < s.steps) {
      lim = reduces ? std::min(g.len, s.rproc + s.piece) : g.len;
      if (p.mode == Mode::ReduceScatter) {
        dst = s.rsbuf[t & 1] + s.rgot;
        if (t >= 2) {
          // rsbuf[t & 1] is still being forwarded by send step t-1.
          size_t sent = s.st > t - 1 ? g.len : (s.st == t - 1 ? s.sdone : 0);
          sent -= sent % p.es;
          lim = std::min(lim, sent);
        }
      } else if (reduces && p.in == p.out) {
        dst = s.pbuf + (s.rgot - s.rproc);
      } else {
        dst = p.out + g.out_off + s.rgot;
      }
    }
    if (s.rhdr == kHeaderBytes && s.rgot >= lim) {
      return progress;  // finished, or waiting for a send (RS scratch)
    }
    size_t moved = 0;
    const size_t h0 = s.rhdr;
    const bool ready = recv_step(s.recv_fd, s.rh, s.rhdr, dst, lim - s.rgot,
                                 moved, s.sch.from(), p.ctx);
    if (h0 < kHeaderBytes && s.rhdr == kHeaderBytes) {
      check_header(s.rh, p.ctx.desc, s.rseq, p.ctx.rank,
                   p.ctx.who(s.sch.from()));
    }
    s.rgot += moved;
    progress = progress || moved != 0 || s.rhdr != h0;
    if (t < s.steps) {
      if (!reduces) {
        s.rproc = s.rgot;
      } else if (s.rgot == lim && s.rgot > s.rproc) {
        const size_t cnt = (s.rgot - s.rproc) / p.es;
        const size_t at = s.rproc;
        if (p.mode == Mode::AllReduce) {
          const char* mine = p.in == p.out ? s.pbuf : p.in + g.in_off + at;
          reduce_into(p.op, p.dtype, p.out + g.out_off + at, mine, cnt);
        } else if (t + 1 < s.steps) {
          reduce_into(p.op, p.dtype, s.rsbuf[t & 1] + at, p.in + g.in_off + at,
                      cnt);
        } else {
          reduce3(p.op, p.dtype, p.out + g.out_off + at, s.rsbuf[t & 1] + at,
                  p.in + g.in_off + at, cnt);
        }
        s.rproc = s.rgot;
      }
    }
    if (!ready) {
      s.rwait = true;
      return progress;
    }
  }
}

void RingEngine::timeout(const Stream& s, int w) const {
  const bool recv_side = s.rt < s.steps || s.rhdr < kHeaderBytes;
  const int step = recv_side ? s.rt : s.st;
  std::string detail = std::string(recv_side ? "received " : "sent ") +
                       std::to_string(recv_side ? s.rgot : s.sdone) +
                       " bytes of ring step " +
                       std::to_string(std::min(step + 1, s.steps)) + "/" +
                       std::to_string(s.steps) + " on wire " +
                       std::to_string(w) + (recv_side ? " from it" : " to it");
  raise_timeout(plan_.ctx, recv_side ? s.sch.from() : s.sch.to(), detail);
}

}  // namespace jaccl::detail
