// Copyright 2026 the jaccl authors.
#include "transport/tcp_endpoint.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/copy.h"
#include "common/error.h"

namespace jaccl::detail {

namespace {

// iovecs per sendmsg/recvmsg: a header and a payload for a few messages.
constexpr int kMaxIov = 16;
// Read-ahead of a small receive (TcpLink::pump), as Open MPI's TCP BTL
// reads on into its endpoint cache.
constexpr size_t kAhead = size_t(16) << 10;
thread_local std::vector<char> t_ahead;

bool is_peer_lost(int err) {
  return err == ECONNRESET || err == EPIPE || err == ETIMEDOUT ||
         err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNABORTED ||
         err == ENOTCONN;
}

// A same-host message that fits in the socket's send buffer goes into the
// kernel in one sendmsg, the peer's data meanwhile waiting on this socket
// (and the peer doing the same), and ran at a third to a half of the speed
// of one twice the buffer's size. So a whole message (Msg::whole) sends
// with half its size of buffer, within [kMinSendBuffer, twice the buffer
// set up]; the ring's stream of pieces keeps the buffer set up (slower
// with half, and with twice it). The set-up's buffer is half an L2, so
// where the L2 is 512 KiB a 1 MiB 2-rank all_sum (one whole message each
// way) held to it took 1.4-1.8x the time it took with 512 KiB
// (BENCHMARKS.md, History, "A fifth kind of machine").
// Below kMinSendBuffer a loopback connection (64 KiB segments) stalls on
// delayed ACKs. Figures: BENCHMARKS.md, History (the 06:25 run).
constexpr size_t kMinSendBuffer = size_t(128) << 10;

// A message's header travels in a frame: the header, one byte P, then P
// zero bytes (P < 64), P chosen by the sender so that the payload starts in
// the kernel's page fragment at the payload's own address mod 64. The
// kernel copies into and out of socket buffers with `rep movsb`, which on
// some CPUs runs at a fifteenth of its speed when (destination - source)
// mod 4096 is 1-31 bytes (AMD Zen 3, 2026-12-07: 2-3 against 45 GB/s). A
// sender's fragment restarts at offset 0 once the peer has read what it
// held, so behind the bare 24-byte header a page-aligned or malloc'd (16
// mod 4096) payload fell in that window on every message (2-rank
// all_to_all of 256 KiB: twice the time of the same exchange with the
// counts in front; a fixed frame only moved the window onto other buffers;
// BENCHMARKS.md, History). The receive copy stays out of it too whenever
// the two buffers share their alignment mod 64.
// The frame is the sender's alone: a receiver may take a message in
// several receives (all_to_allv's Bruck rounds take the rows, then the
// blocks behind them), so it reads a frame's head before what follows.
constexpr size_t kFrameHead = kMsgHeaderBytes + 1;  // up to and with P
constexpr size_t kFrameAlign = 64;
static_assert(kFrameHead + kFrameAlign <= sizeof(Msg{}.priv));

// m's frame; a receive's once its head is in (frame_known).
size_t frame_bytes(const Msg& m) {
  return kFrameHead + m.priv[kMsgHeaderBytes];
}
bool frame_known(const Msg& m) {
  return m.hdr_done >= kFrameHead;
}
// A received pad past the bound: the peer sends something else (the
// caller's check of the header says what) or the stream is out of step.
bool bad_pad(const Msg& m) {
  return frame_known(m) && m.priv[kMsgHeaderBytes] >= kFrameAlign;
}

// A small receive's pad and payload are read ahead with what follows, into
// a buffer at the read's offset in the frame mod kFrameAlign (the frame's
// start taken as aligned, as the sender does), so that the copies into it
// and out of it keep the source's alignment too.
constexpr size_t kAheadAlloc = kAhead + 2 * kFrameAlign;
char* ahead_at(char* base, size_t skew) {
  const auto at = reinterpret_cast<uintptr_t>(base);
  return base + (kFrameAlign - at % kFrameAlign) % kFrameAlign + skew;
}

// The SO_SNDBUF for m; `now` where the size does not matter (a message
// shorter than kMinSendBuffer fits either way: no system call for it).
size_t send_buffer_for(const Msg& m, size_t cap, size_t now) {
  if (!m.whole) {
    return cap;
  }
  if (m.len < kMinSendBuffer) {
    return now;
  }
  return std::clamp(std::bit_floor(m.len / 2), std::min(kMinSendBuffer, cap),
                    2 * cap);
}

class TcpLink final : public Link {
 public:
  // sndbuf: the SO_SNDBUF the set-up gave the socket (0: autotuned, left
  // alone).
  TcpLink(Fd fd, int rank, int peer, int sndbuf,
          std::shared_ptr<WireCount> count)
      : fd_(std::move(fd)),
        rank_(rank),
        peer_(peer),
        cap_(static_cast<size_t>(std::max(sndbuf, 0))),
        sndbuf_(cap_),
        count_(std::move(count)) {
    if (cap_ != 0) {
      // A socket taken over from a shrunk group's parent may have been
      // left at another size.
      set_send_buffer(fd_.get(), static_cast<int>(cap_));
    }
  }

  void post_send(Msg& m) override {
    if (cap_ != 0) {
      const size_t want = send_buffer_for(m, cap_, sndbuf_);
      if (want != sndbuf_) {
        set_send_buffer(fd_.get(), static_cast<int>(want));
        sndbuf_ = want;
      }
    }
    if (m.hdr != nullptr) {
      // The frame: the payload at buf's offset mod kFrameAlign.
      const auto at = reinterpret_cast<uintptr_t>(m.buf);
      const size_t pad = m.len == 0 ? 0 : (at - kFrameHead) % kFrameAlign;
      std::memcpy(m.priv, m.hdr, kMsgHeaderBytes);
      m.priv[kMsgHeaderBytes] = static_cast<unsigned char>(pad);
      std::memset(m.priv + kFrameHead, 0, pad);
    }
    post(sends_, m);
  }
  void post_recv(Msg& m) override { post(recvs_, m); }
  void accept(Msg& m) override { m.accepted = true; }

  bool progress(const char* op) override {
    bool moved = false;
    if (!sends_.empty()) {
      moved |= pump(sends_, true, op);
    }
    if (!recvs_.empty()) {
      moved |= pump(recvs_, false, op);
    }
    return moved;
  }

  void want(WaitSet& ws) override {
    if (!recvs_.empty() && ahead_len_ != 0) {
      ws.ready_now();  // bytes read ahead wait for a receive
    }
    ws.add_fd(fd_.get(), !recvs_.empty(), !sends_.empty());
  }

  void flush_headers() override {
    // Only the head message's header starts at the stream's current
    // position; a later one would land in the middle of a payload.
    Msg* m = sends_.head;
    if (m == nullptr || m->hdr == nullptr || m->moved != 0) {
      return;
    }
    while (m->hdr_done < frame_bytes(*m)) {
      const ssize_t n =
          ::send(fd_.get(), m->priv + m->hdr_done,
                 frame_bytes(*m) - m->hdr_done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0 && errno != EINTR) {
        return;
      }
      m->hdr_done += n > 0 ? static_cast<size_t>(n) : 0;
      counted(n, true);
    }
  }

  void clear() override {
    sends_ = MsgQueue{};
    recvs_ = MsgQueue{};
  }

 private:
  static void post(MsgQueue& q, Msg& m) {
    if (m.hdr == nullptr && m.len == 0) {
      m.done = true;  // nothing to move
      return;
    }
    q.push(m);
  }

  // The iovecs of the queue's head messages (at most kMaxIov); want gets
  // their length. Returns the count; *all: every queued message is in.
  // A receive whose frame is not known yet ends the list: a small one's pad
  // and payload are read ahead (*all; *skew: the read-ahead's offset in
  // the frame), a large one's come in place by the next call.
  static int gather(const MsgQueue& q, bool is_send, iovec* iov, size_t& want,
                    bool* all, size_t* skew) {
    int n_iov = 0;
    want = 0;
    const Msg* m = q.head;
    for (; m != nullptr && n_iov + 2 <= kMaxIov; m = m->next) {
      if (m->hdr != nullptr) {
        auto* frame = const_cast<unsigned char*>(m->priv);
        if (!is_send && !frame_known(*m)) {
          iov[n_iov++] = {frame + m->hdr_done, kFrameHead - m->hdr_done};
          want += kFrameHead - m->hdr_done;
          *all = m->len + kFrameAlign <= kAhead;
          *skew = kFrameHead;
          return n_iov;
        }
        const size_t f = frame_bytes(*m);
        if (m->hdr_done < f) {
          iov[n_iov++] = {frame + m->hdr_done, f - m->hdr_done};
          want += f - m->hdr_done;
        }
      }
      if (m->moved < m->len) {
        const size_t left = std::min(m->len - m->moved, kMaxIoSlice - want);
        iov[n_iov++] = {m->buf + m->moved, left};
        want += left;
      }
      if (want >= kMaxIoSlice) {
        break;
      }
    }
    *all = m == nullptr && want < kMaxIoSlice;
    *skew = 0;
    return n_iov;
  }

  // Copies bytes read ahead into the posted receives; returns how many.
  size_t take_ahead(const iovec* iov, int n_iov) {
    size_t n = 0;
    for (int i = 0; i < n_iov && n < ahead_len_; ++i) {
      const size_t k = std::min(iov[i].iov_len, ahead_len_ - n);
      copy_bytes(iov[i].iov_base, ahead_.get() + ahead_off_ + n, k);
      n += k;
    }
    ahead_off_ += n;
    ahead_len_ -= n;
    return n;
  }

  // One sendmsg/recvmsg over the queue's head messages; pops what is done.
  // Returns whether bytes moved.
  bool pump(MsgQueue& q, bool is_send, const char* op) {
    bool moved = false;
    while (!q.empty()) {
      if (!is_send && bad_pad(*q.head)) {
        // Its header is in: the caller's check names a peer doing another
        // op; past that check the stream itself is out of step.
        if (!q.head->accepted) {
          return moved;
        }
        raise(ErrorKind::Protocol,
              std::string("during ") + op + ": a message's frame says " +
                  std::to_string(q.head->priv[kMsgHeaderBytes]) +
                  " bytes of padding (at most " +
                  std::to_string(kFrameAlign - 1) +
                  "): the stream is out of step with the peer",
              {.rank = rank_, .peer = peer_});
      }
      iovec iov[kMaxIov + 1];
      size_t want = 0;
      bool all = false;
      size_t skew = 0;
      int n_iov = gather(q, is_send, iov, want, &all, &skew);
      if (!is_send && ahead_len_ != 0) {
        account(q, take_ahead(iov, n_iov), false);
        moved = true;
        continue;
      }
      // Small receives read on into a buffer of this link: what a peer
      // sends right behind (all_to_allv's block behind its counts) then
      // costs a copy instead of another recvmsg.
      // A link gets its own buffer once it has read ahead (a scratch of
      // the thread's until then: a rank of thousands of links that never
      // read ahead keeps none).
      const bool ahead = !is_send && all && want < kAhead;
      char* into = nullptr;
      if (ahead) {
        if (!ahead_ && t_ahead.empty()) {
          t_ahead.resize(kAheadAlloc);
        }
        into = ahead_at(ahead_ ? ahead_.get() : t_ahead.data(), skew);
        iov[n_iov++] = {into, kAhead};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(n_iov);
      const ssize_t got =
          is_send ? ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT)
                  : ::recvmsg(fd_.get(), &msg, MSG_DONTWAIT);
      if (got < 0) {
        if (errno == EINTR) {
          continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          return moved;
        }
        fail(errno, is_send ? "send" : "recv", op);
      }
      if (got == 0 && !is_send) {
        raise(ErrorKind::PeerLost,
              std::string("connection closed by the peer during ") + op,
              {.rank = rank_, .peer = peer_});
      }
      moved = moved || got > 0;
      counted(got, is_send);
      const auto n = static_cast<size_t>(got);
      account(q, std::min(n, want), is_send);
      if (n > want) {
        char* at = into;
        if (!ahead_) {
          ahead_ = std::make_unique_for_overwrite<char[]>(kAheadAlloc);
          at = ahead_at(ahead_.get(), skew);
          std::memcpy(at, into, n - want);
        }
        ahead_off_ = static_cast<size_t>(at - ahead_.get());
        ahead_len_ = n - want;
      }
      if (n < want + (ahead ? kAhead : 0)) {
        return moved;  // drained (recv) or full (send): let poll() decide
      }
    }
    return moved;
  }

  void counted(ssize_t n, bool is_send) {
    if (count_ && n > 0) {
      (is_send ? count_->sent : count_->received)
          .fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    }
  }

  static void account(MsgQueue& q, size_t n, bool is_send) {
    while (!q.empty()) {
      Msg& m = *q.head;
      if (m.hdr != nullptr) {
        auto take = [&](size_t upto) {
          const size_t h = std::min(n, upto - m.hdr_done);
          m.hdr_done += h;
          n -= h;
          return m.hdr_done == upto;
        };
        // A receive's header is the caller's to check once it is in.
        if (!is_send && !m.hdr_in) {
          if (!take(kFrameHead)) {
            return;
          }
          std::memcpy(m.hdr, m.priv, kMsgHeaderBytes);
          m.hdr_in = true;
        }
        if (bad_pad(m) || !take(frame_bytes(m))) {
          return;  // a bad pad: held (pump)
        }
      }
      const size_t p = std::min(n, m.len - m.moved);
      m.moved += p;
      n -= p;
      if (m.moved < m.len) {
        return;
      }
      m.done = true;
      q.pop();
    }
  }

  [[noreturn]] void fail(int err, const char* verb, const char* op) const {
    raise(is_peer_lost(err) ? ErrorKind::PeerLost : ErrorKind::Io,
          std::string(verb) + " failed during " + op,
          {.rank = rank_, .peer = peer_, .sys_errno = err});
  }

  Fd fd_;
  int rank_;
  int peer_;
  size_t cap_;     // the set-up's SO_SNDBUF (0: not ours to change)
  size_t sndbuf_;  // the SO_SNDBUF set now
  std::shared_ptr<WireCount> count_;  // may be null
  MsgQueue sends_;
  MsgQueue recvs_;
  // Bytes of the stream read past the posted receives, for the next ones
  // (allocated on the first small receive; kept across ops: stream order).
  std::unique_ptr<char[]> ahead_;
  size_t ahead_off_ = 0;
  size_t ahead_len_ = 0;
};

}  // namespace

std::unique_ptr<Link> make_tcp_link(Fd fd, int rank, int peer, int sndbuf,
                                    std::shared_ptr<WireCount> count) {
  return std::make_unique<TcpLink>(std::move(fd), rank, peer, sndbuf,
                                   std::move(count));
}

Network make_tcp_network(ControlBlock conns) {
  Network net;
  net.rank = conns.rank;
  net.size = conns.size;
  net.names = conns.names;
  net.op_timeout = conns.op_timeout;
  net.state = conns.state;
  net.keepalive = conns.keepalive;
  net.transport = "tcp";
  net.host_ranks = conns.host_ranks;
  net.host_index = conns.host_index;
  net.host_cpus = conns.host_cpus;
  net.links.resize(conns.wires.size());
  WireBank* bank = conns.bank.get();
  if (bank != nullptr) {
    bank->fds.assign(conns.wires.size(), {});
    bank->counts.assign(conns.wires.size(), {});
    bank->send_buffer = conns.send_buffer;
    bank->send_buffer.resize(conns.wires.size(), 0);
    bank->ops = std::make_shared<std::mutex>();
    net.op_lock = bank->ops;
  }
  auto who = [&](int member) {
    return conns.names.empty() ? member
                               : conns.names[static_cast<size_t>(member)];
  };
  for (size_t p = 0; p < conns.wires.size(); ++p) {
    const int sndbuf = p < conns.send_buffer.size() ? conns.send_buffer[p] : 0;
    for (Fd& fd : conns.wires[p]) {
      std::shared_ptr<WireCount> count;
      if (bank != nullptr) {
        count = std::make_shared<WireCount>();
        bank->fds[p].push_back(fd.get());
        bank->counts[p].push_back(count);
      }
      net.links[p].push_back(make_tcp_link(std::move(fd), who(conns.rank),
                                           who(static_cast<int>(p)), sndbuf,
                                           std::move(count)));
    }
  }
  return net;
}

}  // namespace jaccl::detail
