// Copyright 2026 the jaccl authors.
#include "collectives/exchange.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "common/error.h"
#include "common/net.h"
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

bool is_peer_lost(int err) {
  return err == ECONNRESET || err == EPIPE || err == ETIMEDOUT ||
         err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNABORTED ||
         err == ENOTCONN;
}

[[noreturn]] void raise_io(int err, const char* verb, int peer,
                           const OpContext& ctx) {
  const std::string what = std::string(verb) + " failed during " + ctx.name;
  raise(is_peer_lost(err) ? ErrorKind::PeerLost : ErrorKind::Io, what,
        {.rank = ctx.rank, .peer = ctx.who(peer), .sys_errno = err});
}

// Fills iov with the rest of the header and the payload.
int fill_iov(iovec* iov, const void* h, size_t hdr_done, const void* p,
             size_t len) {
  int n = 0;
  if (hdr_done < kHeaderBytes) {
    iov[n].iov_base = const_cast<char*>(static_cast<const char*>(h) + hdr_done);
    iov[n].iov_len = kHeaderBytes - hdr_done;
    ++n;
  }
  if (len != 0) {
    iov[n].iov_base = const_cast<void*>(p);
    iov[n].iov_len = std::min(len, kMaxIoSlice);
    ++n;
  }
  return n;
}

void account(size_t moved, size_t& hdr_done, size_t& done) {
  const size_t h = std::min(moved, kHeaderBytes - hdr_done);
  hdr_done += h;
  done += moved - h;
}

}  // namespace

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::AllSum:
      return "all_sum";
    case OpKind::AllMax:
      return "all_max";
    case OpKind::AllMin:
      return "all_min";
    case OpKind::AllGather:
      return "all_gather";
    case OpKind::SumScatter:
      return "sum_scatter";
    case OpKind::SendRecv:
      return "send/recv";
    case OpKind::Barrier:
      return "barrier";
    case OpKind::Broadcast:
      return "broadcast";
  }
  return "unknown op";
}

WireHeader make_header(const OpDesc& op, uint32_t seq) {
  WireHeader h;
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

void check_header(const WireHeader& got, const OpDesc& mine, uint32_t seq,
                  int rank, int peer) {
  const ErrorContext ec{.rank = rank, .peer = peer};
  if (got.magic != kOpMagic) {
    raise(ErrorKind::Protocol,
          std::string("garbage instead of an op header during ") +
              op_kind_name(mine.kind) + " (stream out of step?)",
          ec);
  }
  const WireHeader want = make_header(mine, seq);
  const auto kind = static_cast<OpKind>(got.kind);
  if (mine.kind == OpKind::SendRecv && got.kind == want.kind &&
      got.n_bytes != want.n_bytes && got.seq == want.seq) {
    raise(ErrorKind::Protocol,
          "recv of " + std::to_string(mine.n_bytes) + " bytes from rank " +
              std::to_string(peer) + ", but rank " + std::to_string(peer) +
              " sent " + std::to_string(got.n_bytes) + " bytes",
          ec);
  }
  if (got.kind != want.kind || got.dtype != want.dtype ||
      got.n_bytes != want.n_bytes || got.aux != want.aux) {
    raise(ErrorKind::Protocol,
          "operation mismatch: this rank called " +
              describe(mine.kind, want.dtype, mine.n_bytes, mine.aux) +
              " but rank " + std::to_string(peer) + " called " +
              describe(kind, got.dtype, got.n_bytes, got.aux),
          ec);
  }
  if (got.seq != want.seq) {
    raise(ErrorKind::Protocol,
          std::string("ranks out of step in ") + op_kind_name(mine.kind) +
              ": rank " + std::to_string(rank) + " expected op #" +
              std::to_string(seq) + " from rank " + std::to_string(peer) +
              ", but rank " + std::to_string(peer) + " sent op #" +
              std::to_string(got.seq),
          ec);
  }
  if (got.algo != want.algo || got.streams != want.streams) {
    raise(ErrorKind::Protocol,
          std::string("configuration mismatch in ") + op_kind_name(mine.kind) +
              ": this rank uses the " +
              (want.algo == uint8_t(Algo::Ring) ? "ring" : "mesh") + " over " +
              std::to_string(want.streams) + " wire(s), rank " +
              std::to_string(peer) + " the " +
              (got.algo == uint8_t(Algo::Ring) ? "ring" : "mesh") + " over " +
              std::to_string(got.streams) +
              " (JACCL_RING / JACCL_WIRES differ?)",
          ec);
  }
}

bool send_step(int fd, const WireHeader& h, size_t& hdr_done, const char* p,
               size_t len, size_t& done, int peer, const OpContext& ctx) {
  iovec iov[2];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = fill_iov(iov, &h, hdr_done, p + done, len - done);
  if (msg.msg_iovlen == 0) {
    return true;
  }
  for (;;) {
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      account(static_cast<size_t>(n), hdr_done, done);
      return true;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return false;
    }
    raise_io(errno, "send", peer, ctx);
  }
}

bool recv_step(int fd, WireHeader& h, size_t& hdr_done, char* p, size_t len,
               size_t& done, int peer, const OpContext& ctx) {
  iovec iov[2];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = fill_iov(iov, &h, hdr_done, p + done, len - done);
  if (msg.msg_iovlen == 0) {
    return true;
  }
  for (;;) {
    const ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT);
    if (n > 0) {
      account(static_cast<size_t>(n), hdr_done, done);
      return true;
    }
    if (n == 0) {
      raise(ErrorKind::PeerLost,
            std::string("connection closed by the peer during ") + ctx.name,
            {.rank = ctx.rank, .peer = ctx.who(peer)});
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return false;
    }
    raise_io(errno, "recv", peer, ctx);
  }
}

bool wait_ready(std::vector<pollfd>& fds, const OpContext& ctx) {
  fds.push_back({ctx.state->wake_fd(), POLLIN, 0});
  const auto spin_until =
      std::chrono::steady_clock::now() + std::chrono::microseconds(ctx.spin_us);
  for (;;) {
    const bool spin =
        ctx.spin_us > 0 && std::chrono::steady_clock::now() < spin_until;
    const int rc =
        ::poll(fds.data(), fds.size(), spin ? 0 : ctx.deadline.poll_ms());
    if (fds.back().revents != 0) {
      ctx.state->throw_if_failed();
    }
    if (rc > 0) {
      fds.pop_back();
      return true;
    }
    if (rc < 0 && errno != EINTR) {
      raise(ErrorKind::Io, std::string("poll failed during ") + ctx.name,
            {.rank = ctx.rank, .sys_errno = errno});
    }
    if (!spin && ctx.deadline.expired()) {
      fds.pop_back();
      return false;
    }
  }
}

void raise_timeout(const OpContext& ctx, int peer, const std::string& detail) {
  raise(ErrorKind::Timeout,
        std::string(ctx.name) + " timed out after " +
            format_duration(ctx.deadline.total()) + " waiting for rank " +
            std::to_string(ctx.who(peer)) + " (" + detail + ")",
        {.rank = ctx.rank, .peer = ctx.who(peer)});
}

void push_header(int fd, const WireHeader& h, size_t& hdr_done) {
  while (hdr_done < kHeaderBytes) {
    const ssize_t n =
        ::send(fd, reinterpret_cast<const char*>(&h) + hdr_done,
               kHeaderBytes - hdr_done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0 && errno != EINTR) {
      return;
    }
    hdr_done += n > 0 ? static_cast<size_t>(n) : 0;
  }
}

namespace {

// A mismatch found on one link: let every peer we owe a header see ours
// (best effort), so each of them reports the mismatch too instead of
// waiting for us until the deadline.
void check_or_flush(std::span<Transfer> xs, const Transfer& got,
                    const OpContext& ctx) {
  try {
    check_header(got.hdr, ctx.desc, got.seq, ctx.rank, ctx.who(got.peer));
  } catch (...) {
    for (Transfer& x : xs) {
      if (x.is_send) {
        push_header(x.fd, x.hdr, x.hdr_done);
      }
    }
    throw;
  }
}

}  // namespace

void run_transfers(std::span<Transfer> xs, const OpContext& ctx,
                   std::vector<pollfd>& pfds) {
  for (;;) {
    pfds.clear();
    // Sends first, so headers leave before a mismatch can stop us.
    for (int pass = 0; pass < 2; ++pass)
      for (Transfer& x : xs) {
        if (x.is_send != (pass == 0)) {
          continue;
        }
        bool ready = true;
        while (!x.finished() && ready) {
          const size_t before = x.hdr_done;
          if (x.is_send) {
            ready = send_step(x.fd, x.hdr, x.hdr_done, x.buf, x.len, x.done,
                              x.peer, ctx);
          } else {
            ready = recv_step(x.fd, x.hdr, x.hdr_done, x.buf, x.len, x.done,
                              x.peer, ctx);
            if (before < kHeaderBytes && x.hdr_done == kHeaderBytes) {
              check_or_flush(xs, x, ctx);
            }
          }
        }
        if (!x.finished()) {
          pfds.push_back(
              {x.fd, static_cast<short>(x.is_send ? POLLOUT : POLLIN), 0});
        }
      }
    if (pfds.empty()) {
      return;
    }
    if (!wait_ready(pfds, ctx)) {
      // Name the first peer we still wait for.
      for (const Transfer& x : xs) {
        if (!x.finished()) {
          raise_timeout(ctx, x.peer,
                        std::string(x.is_send ? "sent " : "received ") +
                            std::to_string(x.done) + " of " +
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
  x.fd = fds[peer][wire];
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
  x.fd = fds[peer][wire];
  x.peer = peer;
  x.seq = recv_seq[peer];
  x.buf = static_cast<char*>(buf);
  x.len = len;
  return x;
}

void Links::run(const OpContext& ctx) {
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
  run_transfers(xfers, ctx, pfds);
}

}  // namespace jaccl::detail
