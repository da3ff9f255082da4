// Copyright 2026 the jaccl authors.
#include "collectives/ring.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/copy.h"
#include "common/error.h"
#include "jaccl/types.h"

namespace jaccl::detail {

using ring::Mode;

namespace {

struct Geo {
  size_t in_off;
  size_t out_off;
  size_t len;
};

// Position in a stream's message list: step t, piece k, message j.
struct Cursor {
  int t = 0;
  size_t k = 0;
  size_t j = 0;
};

// starts[t]: the first message of step t; starts[steps]: the total.
void skip_empty(Cursor& c, const std::vector<size_t>& starts, int steps) {
  while (c.t < steps && c.j == starts[static_cast<size_t>(c.t) + 1]) {
    ++c.t;
    c.k = 0;
  }
}

void advance(Cursor& c, const std::vector<size_t>& starts, int steps) {
  ++c.j;
  ++c.k;
  skip_empty(c, starts, steps);
}

int step_of(const std::vector<size_t>& starts, size_t j) {
  const auto it = std::upper_bound(starts.begin(), starts.end(), j);
  return static_cast<int>(it - starts.begin()) - 1;
}

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

// Per wire, reused across ops: scratch, message lists, the wait set.
struct RingEngine::WireState {
  std::vector<char> scratch;
  std::vector<Msg> msgs[2][2];       // [direction][0 send, 1 recv]
  std::vector<size_t> starts[2][2];  // first message of each step
  std::vector<Link*> used;
  WaitSet ws;
};

// One direction of one wire: a header each way, then the schedule's chunks
// (this stream's slice of them) in pieces, one message each.
struct RingEngine::Stream {
  ring::Schedule sch;
  int steps = 0;
  Link* send_link = nullptr;
  Link* recv_link = nullptr;
  size_t a = 0;  // first element of this stream's slice
  size_t m = 0;  // elements in the slice (per chunk for AllGather/RS)
  size_t piece = 0;
  char* slots = nullptr;  // AllReduce in place: window pieces
  // ReduceScatter: step t receives into slot rs(t): a double buffer when a
  // send completes locally (TCP), else one slot per step, so no receive
  // waits for a send that itself waits for the peer's receive.
  char* rsbase = nullptr;
  size_t rsstride = 0;
  bool rsdouble = true;
  char* rs(int t) const {
    return rsbase + static_cast<size_t>(rsdouble ? (t & 1) : t) * rsstride;
  }
  OpHeader sh{};
  OpHeader rh{};
  Msg hs;  // header out
  Msg hr;  // header in
  bool checked = false;
  uint32_t rseq = 0;
  std::vector<Msg>* sends = nullptr;
  std::vector<Msg>* recvs = nullptr;
  const std::vector<size_t>* s_start = nullptr;
  const std::vector<size_t>* r_start = nullptr;
  Cursor sc;          // next send to post
  Cursor rc;          // next receive to post
  Cursor pc;          // next receive to finish (reduce)
  size_t s_comp = 0;  // sends before this one are done

  size_t n_s() const { return sends->size(); }
  size_t n_r() const { return recvs->size(); }
  bool done() const {
    return hs.done && checked && sc.j == n_s() && s_comp == n_s() &&
           pc.j == n_r();
  }
};

RingEngine::RingEngine(Links& links) : links_(links) {
  const int n = links.size;
  const int right = ring::mod(links.rank + 1, n);
  const int left = ring::mod(links.rank - 1, n);
  const size_t w =
      std::min(links.wires[right].size(), links.wires[left].size());
  wires_ = static_cast<int>(std::clamp<size_t>(w, 1, 64));
  for (int i = 0; i < wires_; ++i) {
    wire_state_.push_back(std::make_unique<WireState>());
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
    move_bytes(mine, p.in, n_bytes);
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

void RingEngine::setup_stream(Stream& s, int w, int d, char* scratch) {
  const Plan& p = plan_;
  WireState& ws = *wire_state_[static_cast<size_t>(w)];
  s.sch = ring::Schedule{links_.size, links_.rank, d == 0 ? 1 : -1, p.mode};
  s.steps = s.sch.steps();
  s.send_link = links_.wires[s.sch.to()][w];
  s.recv_link = links_.wires[s.sch.from()][w];
  const ring::Range slice = ring::split(
      p.elems, static_cast<size_t>(wires_) * p.dirs, w * p.dirs + d);
  s.a = slice.off;
  s.m = slice.len;
  s.piece = ring::piece_bytes(kRingPieceBytes, p.es);
  s.sh = make_header(p.ctx.desc, p.send_seq[d]);
  s.rseq = p.recv_seq[d];
  s.slots = scratch;
  s.rsbase = scratch;
  s.rsstride = s.m * p.es;
  s.rsdouble = links_.local_send_completion;
  // The message lists: every step's chunk in pieces.
  for (int side = 0; side < 2; ++side) {
    std::vector<size_t>& starts = ws.starts[d][side];
    starts.assign(static_cast<size_t>(s.steps) + 1, 0);
    for (int t = 0; t < s.steps; ++t) {
      const int c = side == 0 ? s.sch.send_chunk(t) : s.sch.recv_chunk(t);
      const size_t len = geo(p.mode, p.es, p.n_bytes, s.sch.n, s.a, s.m, c).len;
      starts[static_cast<size_t>(t) + 1] =
          starts[static_cast<size_t>(t)] + (len + s.piece - 1) / s.piece;
    }
    ws.msgs[d][side].resize(starts.back());
  }
  s.sends = &ws.msgs[d][0];
  s.recvs = &ws.msgs[d][1];
  s.s_start = &ws.starts[d][0];
  s.r_start = &ws.starts[d][1];
  skip_empty(s.sc, *s.s_start, s.steps);
  skip_empty(s.rc, *s.r_start, s.steps);
  skip_empty(s.pc, *s.r_start, s.steps);
  s.hs.prepare(&s.sh, nullptr, 0);
  s.hr.prepare(&s.rh, nullptr, 0);
}

void RingEngine::run_wire(int w) {
  const Plan& p = plan_;
  WireState& ws = *wire_state_[static_cast<size_t>(w)];
  // Scratch: the receive window's pieces per direction for in-place
  // all-reduce, two chunk slices per direction for reduce-scatter.
  const size_t slice_bytes =
      (p.elems / (static_cast<size_t>(wires_) * p.dirs) + 1) * p.es;
  size_t per_dir = 0;
  if (p.mode == Mode::AllReduce && p.in == p.out) {
    per_dir = kRingWindow * ring::piece_bytes(kRingPieceBytes, p.es);
  } else if (p.mode == Mode::ReduceScatter) {
    const size_t slots =
        links_.local_send_completion ? 2 : static_cast<size_t>(links_.size - 1);
    per_dir = slots * slice_bytes;
  }
  if (ws.scratch.size() < per_dir * p.dirs) {
    ws.scratch.resize(per_dir * p.dirs);
  }
  Stream streams[2];
  ws.used.clear();
  for (int d = 0; d < p.dirs; ++d) {
    setup_stream(streams[d], w, d, ws.scratch.data() + d * per_dir);
    for (Link* l : {streams[d].send_link, streams[d].recv_link}) {
      if (std::find(ws.used.begin(), ws.used.end(), l) == ws.used.end()) {
        ws.used.push_back(l);
      }
    }
  }
  struct Clear {
    std::vector<Link*>& v;
    ~Clear() {
      for (Link* l : v) {
        l->clear();
      }
    }
  } clear{ws.used};
  try {
    wire_loop(streams, w);
  } catch (...) {
    // A mismatch (or any failure) here: let the peers we owe a header see
    // ours (best effort), so they report the mismatch instead of waiting.
    for (int d = 0; d < p.dirs; ++d) {
      streams[d].send_link->flush_headers();
    }
    throw;
  }
}

void RingEngine::wire_loop(Stream* streams, int w) {
  const Plan& p = plan_;
  WireState& ws = *wire_state_[static_cast<size_t>(w)];
  // Headers first: they leave before a mismatch can stop us.
  for (int d = 0; d < p.dirs; ++d) {
    streams[d].send_link->post_send(streams[d].hs);
    streams[d].recv_link->post_recv(streams[d].hr);
  }
  ws.ws.progressed();
  for (;;) {
    bool work = false;
    for (int d = 0; d < p.dirs; ++d) {
      work |= post_sends(streams[d]);
      work |= post_recvs(streams[d]);
    }
    for (Link* l : ws.used) {
      work |= l->progress(p.ctx.name);
    }
    bool all_done = true;
    for (int d = 0; d < p.dirs; ++d) {
      Stream& s = streams[d];
      if (!s.checked && s.hr.hdr_in) {
        check_header(s.rh, p.ctx.desc, s.rseq, p.ctx.rank,
                     p.ctx.who(s.sch.from()));
        s.checked = true;
        s.recv_link->accept(s.hr);
        work = true;
      }
      work |= finish_recvs(s);
      while (s.s_comp < s.sc.j && (*s.sends)[s.s_comp].done) {
        ++s.s_comp;
        work = true;
      }
      all_done = all_done && s.done();
    }
    if (all_done) {
      return;
    }
    if (work) {
      ws.ws.progressed();
      continue;
    }
    ws.ws.clear();
    for (Link* l : ws.used) {
      l->want(ws.ws);
    }
    if (!ws.ws.wait(p.ctx.deadline, *p.ctx.state, p.ctx.spin_us, p.ctx.yield,
                    p.ctx.name, p.ctx.rank)) {
      for (int d = 0; d < p.dirs; ++d) {
        if (!streams[d].done()) {
          timeout(streams[d], w);
        }
      }
    }
  }
}

bool RingEngine::post_sends(Stream& s) const {
  const Plan& p = plan_;
  bool posted = false;
  while (s.sc.j < s.n_s()) {
    const int t = s.sc.t;
    const size_t k = s.sc.k;
    // What step t forwards is what step t-1 received (and reduced).
    if (t > 0 && s.pc.j <= (*s.r_start)[static_cast<size_t>(t) - 1] + k) {
      break;
    }
    const Geo g =
        geo(p.mode, p.es, p.n_bytes, s.sch.n, s.a, s.m, s.sch.send_chunk(t));
    const size_t off = k * s.piece;
    const size_t len = std::min(s.piece, g.len - off);
    const char* src = nullptr;
    if (p.mode == Mode::AllReduce) {
      src = (t == 0 ? p.in : p.out) + g.in_off + off;
    } else if (p.mode == Mode::AllGather) {
      src = p.out + g.out_off + off;
    } else {
      src = (t == 0 ? p.in + g.in_off : s.rs(t - 1)) + off;
    }
    Msg& msg = (*s.sends)[s.sc.j];
    msg.prepare(nullptr, src, len);
    s.send_link->post_send(msg);
    advance(s.sc, *s.s_start, s.steps);
    posted = true;
  }
  return posted;
}

bool RingEngine::post_recvs(Stream& s) const {
  const Plan& p = plan_;
  bool posted = false;
  while (s.rc.j < s.n_r() && s.rc.j - s.pc.j < kRingWindow) {
    const int t = s.rc.t;
    const size_t k = s.rc.k;
    const Geo g =
        geo(p.mode, p.es, p.n_bytes, s.sch.n, s.a, s.m, s.sch.recv_chunk(t));
    const size_t off = k * s.piece;
    const size_t len = std::min(s.piece, g.len - off);
    char* dst = nullptr;
    if (p.mode == Mode::ReduceScatter) {
      if (t >= 2 && s.rsdouble) {
        // rs(t) is still being forwarded by send step t-1.
        const size_t sj = (*s.s_start)[static_cast<size_t>(t) - 1] + k;
        if (s.sc.j <= sj || !(*s.sends)[sj].done) {
          break;
        }
      }
      dst = s.rs(t) + off;
    } else if (s.sch.reduces(t) && p.in == p.out) {
      dst = s.slots + (s.rc.j % kRingWindow) * s.piece;
    } else {
      dst = p.out + g.out_off + off;
    }
    Msg& msg = (*s.recvs)[s.rc.j];
    msg.prepare(nullptr, dst, len);
    s.recv_link->post_recv(msg);
    advance(s.rc, *s.r_start, s.steps);
    posted = true;
  }
  return posted;
}

bool RingEngine::finish_recvs(Stream& s) const {
  const Plan& p = plan_;
  bool any = false;
  while (s.checked && s.pc.j < s.rc.j && (*s.recvs)[s.pc.j].done) {
    const int t = s.pc.t;
    const Msg& msg = (*s.recvs)[s.pc.j];
    if (s.sch.reduces(t)) {
      const Geo g =
          geo(p.mode, p.es, p.n_bytes, s.sch.n, s.a, s.m, s.sch.recv_chunk(t));
      const size_t at = s.pc.k * s.piece;
      const size_t cnt = msg.len / p.es;
      if (p.mode == Mode::AllReduce) {
        const char* mine = p.in == p.out ? msg.buf : p.in + g.in_off + at;
        reduce_into(p.op, p.dtype, p.out + g.out_off + at, mine, cnt);
      } else if (t + 1 < s.steps) {
        reduce_into(p.op, p.dtype, msg.buf, p.in + g.in_off + at, cnt);
      } else {
        reduce3(p.op, p.dtype, p.out + g.out_off + at, msg.buf,
                p.in + g.in_off + at, cnt);
      }
    }
    advance(s.pc, *s.r_start, s.steps);
    any = true;
  }
  return any;
}

void RingEngine::timeout(const Stream& s, int w) const {
  const bool recv_side = !s.checked || s.pc.j < s.n_r();
  const auto& starts = recv_side ? *s.r_start : *s.s_start;
  const auto& msgs = recv_side ? *s.recvs : *s.sends;
  const size_t first = recv_side ? s.pc.j : s.s_comp;
  const int step = std::min(step_of(starts, first), s.steps - 1);
  size_t bytes = 0;
  const size_t posted = recv_side ? s.rc.j : s.sc.j;
  for (size_t j = starts[static_cast<size_t>(step)];
       j < std::min(posted, starts[static_cast<size_t>(step) + 1]); ++j) {
    bytes += msgs[j].moved;
  }
  std::string detail = std::string(recv_side ? "received " : "sent ") +
                       std::to_string(bytes) + " bytes of ring step " +
                       std::to_string(step + 1) + "/" +
                       std::to_string(s.steps) + " on wire " +
                       std::to_string(w) + (recv_side ? " from it" : " to it");
  raise_timeout(plan_.ctx, recv_side ? s.sch.from() : s.sch.to(), detail);
}

}  // namespace jaccl::detail
