// Copyright 2026 the jaccl authors.
// Every check of a Group op's arguments, for every group: a call is
// described once (OpCall) and checked here before any byte moves, so the
// same bad call fails the same way on one host and across hosts. A bad
// call is a UsageError and leaves the group working (op_runner.h runs the
// checks in every op).
//
// Zero bytes: an op that moves zero bytes (n == 0 for all_sum/max/min,
// all_gather, sum_scatter, broadcast, send, recv, all_to_all) returns at
// once after its checks: it meets no peer, so it neither synchronizes nor
// needs its peers to call it too. barrier always meets every rank, and
// all_to_allv always exchanges its counts (only together do the ranks know
// the bytes).
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "common/error_detail.h"
#include "common/op_kind.h"
#include "common/reduce.h"

namespace jaccl::detail {

// One call of a Group op, as the caller made it.
struct OpCall {
  OpKind kind = OpKind::Barrier;
  const char* name = "";  // the API's name, for messages ("send", "recv")
  const void* in = nullptr;
  void* out = nullptr;   // broadcast: the buffer
  size_t n = 0;          // n_bytes as passed
  int dtype = -1;        // reductions and sum_scatter
  int peer = -1;         // send: destination; recv: source; broadcast: root
  bool inbound = false;  // recv (peer is the source)
  // An op one group runs for another (HierGroup's cross-host exchange):
  // its caller checked the arguments, and it always runs.
  bool internal = false;
  std::span<const size_t> send_counts{};  // all_to_allv
  std::span<const size_t> recv_counts{};
};

// The calls, as the Group API takes them.
namespace call {
inline OpCall all_reduce(OpKind kind, const void* in, void* out, size_t n,
                         int dtype) {
  return {.kind = kind,
          .name = op_kind_name(kind),
          .in = in,
          .out = out,
          .n = n,
          .dtype = dtype};
}
inline OpCall all_gather(const void* in, void* out, size_t n) {
  return {.kind = OpKind::AllGather,
          .name = "all_gather",
          .in = in,
          .out = out,
          .n = n};
}
inline OpCall sum_scatter(const void* in, void* out, size_t n, int dtype) {
  return {.kind = OpKind::SumScatter,
          .name = "sum_scatter",
          .in = in,
          .out = out,
          .n = n,
          .dtype = dtype};
}
inline OpCall send(const void* in, size_t n, int dst) {
  return {
      .kind = OpKind::SendRecv, .name = "send", .in = in, .n = n, .peer = dst};
}
inline OpCall recv(void* out, size_t n, int src) {
  return {.kind = OpKind::SendRecv,
          .name = "recv",
          .out = out,
          .n = n,
          .peer = src,
          .inbound = true};
}
inline OpCall barrier() {
  return {.kind = OpKind::Barrier, .name = "barrier"};
}
inline OpCall broadcast(void* buf, size_t n, int root) {
  return {.kind = OpKind::Broadcast,
          .name = "broadcast",
          .out = buf,
          .n = n,
          .peer = root};
}
inline OpCall all_to_all(const void* in, void* out, size_t n) {
  return {.kind = OpKind::AllToAll,
          .name = "all_to_all",
          .in = in,
          .out = out,
          .n = n};
}
inline OpCall all_to_allv(const void* in, std::span<const size_t> send,
                          void* out, std::span<const size_t> recv) {
  return {.kind = OpKind::AllToAllv,
          .name = "all_to_allv",
          .in = in,
          .out = out,
          .send_counts = send,
          .recv_counts = recv};
}
}  // namespace call

// The OpKind of an all-reduce with op (AllSum for Sum, ...), and back (Sum
// for a kind that is not an all-reduce). An op id outside ReduceOp is a
// UsageError.
OpKind all_reduce_kind(ReduceOp op);
ReduceOp reduce_op_of(OpKind kind);

// Throws the UsageError for the first thing wrong with c, for the member
// `member` of a group of `size`; job_rank names this rank in messages.
void check_call(const OpCall& c, int member, int size, int job_rank);

// The zero-byte rule above.
inline bool moves_no_bytes(const OpCall& c) {
  return c.n == 0 && !c.internal && c.kind != OpKind::Barrier &&
         c.kind != OpKind::AllToAllv;
}

[[noreturn]] void raise_usage(int rank, const Detail& what);

// Null buffers are allowed only for empty transfers.
void check_buffers(int rank, const char* op, const void* in, size_t n_in,
                   const void* out, size_t n_out);

// A send/recv peer: another rank of the group.
void check_peer_rank(int rank, int size, const char* op, int peer,
                     const char* role, int job_rank);

// all_to_all(v): no null buffer for non-empty data, input and output apart
// (in place is not supported).
void check_a2a_buffers(int rank, const char* op, const void* in, size_t n_in,
                       const void* out, size_t n_out);

// all_to_allv: spans of `size` entries whose sums fit, then
// check_a2a_buffers.
void check_a2a_v_args(int rank, int size, const void* in,
                      std::span<const size_t> send, const void* out,
                      std::span<const size_t> recv);

}  // namespace jaccl::detail
