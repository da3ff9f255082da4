// Copyright 2026 the jaccl authors.
// The ring (bandwidth) algorithms: reduce-scatter and/or all-gather around
// the ring, in both directions (half the data each way) when there are more
// than two ranks, pipelined in pieces so sending, receiving and reducing
// overlap. With W wires per neighbour each wire carries its own slice of the
// data and is driven by its own thread (W-1 persistent helpers plus the
// caller), as in upstream MLX's multi-wire ring.
//
// On the wire every piece is one message (transport/endpoint.h): a stream's
// header, then each step's chunk in pieces of kRingPieceBytes. A piece is
// forwarded as soon as the piece of the previous step it depends on has
// arrived and been reduced; receives are posted up to kRingWindow pieces
// ahead (in-place reductions land in that many scratch pieces).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/exchange.h"
#include "collectives/ring_math.h"
#include "common/reduce.h"

namespace jaccl::detail {

// Pipeline piece: received data is reduced (and forwarded) in pieces of this
// size. Measured on loopback (2 cores): 256 KiB..1 MiB are within noise of
// each other; much smaller pieces cost syscalls, much larger ones delay the
// start of forwarding.
#ifdef JACCL_RING_PIECE_BYTES  // build-time tuning knob, for measuring
inline constexpr size_t kRingPieceBytes = JACCL_RING_PIECE_BYTES;
#else
inline constexpr size_t kRingPieceBytes = size_t(512) << 10;
#endif
// Receives posted ahead per stream.
inline constexpr size_t kRingWindow = 4;

class RingEngine {
 public:
  // Uses min(links to each neighbour) wires. links must outlive this.
  explicit RingEngine(Links& links);
  ~RingEngine();
  RingEngine(const RingEngine&) = delete;
  RingEngine& operator=(const RingEngine&) = delete;

  int wires() const { return wires_; }

  // One ring op (ctx.desc must say algo Ring and streams wires()):
  //  AllReduce:     in, out: n_bytes each (in == out allowed).
  //  AllGather:     out: size * n_bytes; in is this rank's n_bytes (may be
  //                 its own slot of out).
  //  ReduceScatter: in: size chunks of n_bytes; out: n_bytes, not
  //                 overlapping in; op must be Sum for sum_scatter.
  // Throws the group's failure (recorded in links.state) on any error.
  void run(ring::Mode mode, const OpContext& ctx, ReduceOp op, int dtype,
           const void* in, void* out, size_t n_bytes);

 private:
  struct Plan {
    ring::Mode mode = ring::Mode::AllReduce;
    OpContext ctx;
    ReduceOp op = ReduceOp::Sum;
    int dtype = 0;
    size_t es = 1;  // element size (1 for all_gather)
    const char* in = nullptr;
    char* out = nullptr;
    size_t n_bytes = 0;
    size_t elems = 0;  // elements to split over the streams
    int dirs = 1;
    uint32_t send_seq[2] = {0, 0};
    uint32_t recv_seq[2] = {0, 0};
  };
  struct Stream;

  void run_wire(int w);
  void wire_loop(Stream* streams, int w);
  void worker(int w);
  void setup_stream(Stream& s, int w, int d, char* scratch);
  bool post_sends(Stream& s) const;
  bool post_recvs(Stream& s) const;
  bool finish_recvs(Stream& s) const;
  [[noreturn]] void timeout(const Stream& s, int w) const;

  Links& links_;
  int wires_ = 1;
  Plan plan_;
  struct WireState;
  std::vector<std::unique_ptr<WireState>> wire_state_;  // per wire
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  unsigned long long gen_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace jaccl::detail
