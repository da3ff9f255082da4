// Copyright 2026 the jaccl authors.
// Rank 0's half of the TCP star, shared by tcp_star_server.cpp (connecting,
// reading each call's parts) and tcp_star_reply.cpp (sending the result or
// an error to every rank). Internal to src/bootstrap.
#pragma once

#include <sys/epoll.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bootstrap/tcp_star.h"
#include "bootstrap/tcp_star_limits.h"
#include "bootstrap/tcp_star_shared.h"
#include "common/net.h"

namespace jaccl::detail::star {

// Half-open connections (port scanners, stuck strays) are dropped after this.
constexpr Millis kHandshakeLimit{10000};
// Handshakes in progress beyond the ranks still missing: past this, rank 0
// stops accepting (the kernel's queue holds the rest) until some finish or
// expire, instead of dropping connections that may be ranks.
constexpr size_t kStrayRoom = 256;
// Jobs from this size have rank 0 grow its descriptor table in one step
// (reserve_fd_table): it would double at least twice on its own.
constexpr int kReserveFdsFrom = 256;
// Accepts per wake-up, so handshakes already under way are served between
// the bursts of a mass start.
constexpr int kAcceptBatch = 256;
// Results smaller than this go uncoded (see tcp_star_codec.cpp).
constexpr size_t kCodeFrom = 16 << 10;
// Results from this size go through shared memory to the ranks that can map
// rank 0's segment (tcp_star_shared.h); smaller ones are a write or two.
constexpr size_t kShareFrom = 64 << 10;
// How long a closing star waits for its ranks to map its last shared result.
constexpr Millis kSharedLinger{10000};
// Result bytes being written at once (see send_result), and the socket
// buffers that let one reply go out in one piece.
constexpr size_t kInFlightBytes = size_t(64) << 20;
constexpr int kSocketBuffer = 4 << 20;
// Verdicts and error frames are tiny; never wait long to deliver them.
constexpr Millis kSmallSendBudget{1000};

// epoll tags: the listener, a pending handshake (by id), a rank.
constexpr uint64_t kListenerTag = 0;
constexpr uint64_t kPendingTag = uint64_t(1) << 62;
constexpr uint64_t kRankTag = uint64_t(2) << 62;
constexpr uint64_t kTagMask = uint64_t(3) << 62;

// A reply being written to one rank on a non-blocking socket.
struct Outbox {
  std::array<uint8_t, kReplyBytes> head{};
  const char* body = nullptr;
  size_t body_len = 0;
  size_t done = 0;

  size_t total() const { return kReplyBytes + body_len; }
  bool finished() const { return done == total(); }
  // Between two frames: a new frame (say, an error) may start here.
  bool at_boundary() const { return done == 0 || finished(); }

  // Writes until finished or the socket is full; errno on failure, else 0.
  int pump(int fd) { return send_frame_some(fd, head, body, body_len, &done); }
};

// Rank 0's view of one rank.
struct Conn {
  Fd fd;
  std::string from;    // peer address, for logs
  uint32_t armed = 0;  // epoll events registered
  std::array<uint8_t, kRequestBytes> req{};
  size_t req_have = 0;
  uint64_t n = 0;
  size_t have = 0;
  bool complete = false;  // this call's request read (or its size refused)
  bool coded_ok = false;  // it decodes a coded result
  uint64_t host = 0;      // its shared_host_key() (0: none)
  Outbox out;
  bool lost = false;  // the connection broke while we wrote to it
};

// An accepted connection that has not finished the handshake yet.
struct Pending {
  Fd fd;
  std::string from;
  ServerHandshake hs;
  Clock::time_point since;
};

class Server {
 public:
  explicit Server(const TcpStarOptions& o);
  void call(const char* src, char* dst, size_t n) {
    seq_ = calls_++;
    serve(src, dst, n);
  }

 private:
  std::string call_name() const {
    return "all-gather #" + std::to_string(seq_);
  }
  std::string timeout_text() const {
    return "timed out after " + format_duration(o_.timeout);
  }
  void arm(int fd, uint64_t tag, uint32_t events, int op = EPOLL_CTL_ADD);
  // Rank r's socket is watched for exactly `events` (0: not at all).
  void watch(int r, uint32_t events);
  void watch_listener(bool on);
  // Waits for events until dl (and at most cap_ms); returns how many.
  int wait_events(const Deadline& dl, int cap_ms);
  void serve(const char* src, char* dst, size_t n);
  static long long ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<Millis>(Clock::now() - t).count();
  }
  // Handshakes we let run at once: one per missing rank, plus room for
  // strays.
  size_t pending_room() const {
    return static_cast<size_t>(o_.size - 1 - connected_count_) + kStrayRoom;
  }
  Detail timeout_message();
  void accept_pending();
  void expire_pending();
  // Both return the rank admitted, or 0.
  int advance(std::map<uint64_t, Pending>::iterator it);
  int admit(Pending& p, ServerHandshake::State st);
  void read_request(int r, char* dst, size_t n);
  void check_sizes(size_t n);
  // Pumps rank r's reply; false once it is finished or lost.
  bool pump_result(int r);
  // Rank r broke (errno err) while its result went out: logged, and named
  // at the next call if it is the first.
  void lost_sending(int r, int err);
  void send_result(const char* dst, size_t total, const Deadline& dl);
  // Tells every connected rank about the failure (best effort, bounded),
  // then throws it here. Ranks in the middle of a reply cannot take another
  // frame; they see the connection close instead.
  [[noreturn]] void fail(ErrorKind kind, const Detail& what);

  TcpStarOptions o_;
  std::string address_;
  uint64_t job_;
  uint64_t calls_ = 0;
  uint64_t seq_ = 0;  // number of the call in progress
  Fd ep_;
  std::vector<epoll_event> events_ = std::vector<epoll_event>(512);
  Fd listener_;
  bool inherited_ = false;  // listener_ is JACCL_COORDINATOR_FD's
  bool listener_armed_ = false;
  ListenDrops drops_before_;
  std::map<uint64_t, Pending> pending_;  // by id = accept order
  uint64_t next_pending_ = 0;
  std::vector<Conn> conns_;  // by rank; [0] unused
  std::vector<bool> connected_;
  int connected_count_ = 0;
  int complete_ = 0;               // ranks whose request is read
  std::map<int, Detail> refused_;  // why a rank's attempt failed
  int lost_rank_ = -1;  // broke while we sent; reported at the next call
  uint64_t host_key_;   // ranks with this key map shared_
  SharedResults shared_;
};

}  // namespace jaccl::detail::star
