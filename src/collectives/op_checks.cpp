// Copyright 2026 the jaccl authors.
#include "collectives/op_checks.h"

#include "collectives/all_to_all_math.h"
#include "collectives/ring_math.h"
#include "common/copy.h"
#include "common/error.h"
#include "common/reduce.h"

namespace jaccl::detail {

void raise_usage(int rank, const Detail& what) {
  raise(ErrorKind::Usage, what, {.rank = rank});
}

void check_buffers(int rank, const char* op, const void* in, size_t n_in,
                   const void* out, size_t n_out) {
  if ((in == nullptr && n_in != 0) || (out == nullptr && n_out != 0)) {
    raise_usage(rank,
                std::string(op) + ": null buffer for a non-empty transfer");
  }
}

void check_peer_rank(int rank, int size, const char* op, int peer,
                     const char* role, int job_rank) {
  if (peer == rank) {
    raise_usage(job_rank, std::string(op) + ": " + role + " " +
                              rank_ref(job_rank) + " is this rank");
  }
  if (peer < 0 || peer >= size) {
    // Not a rank: a number, not a rank reference.
    raise_usage(job_rank, std::string(op) + ": " + role + " rank " +
                              std::to_string(peer) +
                              " is out of range for a group of size " +
                              std::to_string(size));
  }
}

void check_a2a_buffers(int rank, const char* op, const void* in, size_t n_in,
                       const void* out, size_t n_out) {
  check_buffers(rank, op, in, n_in, out, n_out);
  if ((in != nullptr && in == out) || overlaps(in, n_in, out, n_out)) {
    raise_usage(rank, std::string(op) +
                          ": input and output overlap (in place is not "
                          "supported: pass separate buffers)");
  }
}

void check_a2a_v_args(int rank, int size, const void* in,
                      std::span<const size_t> send, const void* out,
                      std::span<const size_t> recv) {
  const auto n = static_cast<size_t>(size);
  if (send.size() != n || recv.size() != n) {
    raise_usage(rank, "all_to_allv: " + std::to_string(send.size()) +
                          " send counts and " + std::to_string(recv.size()) +
                          " receive counts for a group of size " +
                          std::to_string(size) + " (want one per rank)");
  }
  size_t sent = 0, received = 0;
  if (!a2a::sum(send.data(), n, &sent) ||
      !a2a::sum(recv.data(), n, &received)) {
    raise_usage(rank,
                "all_to_allv: the counts add up to more than fits in "
                "size_t");
  }
  check_a2a_buffers(rank, "all_to_allv", in, sent, out, received);
}

OpKind all_reduce_kind(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return OpKind::AllSum;
    case ReduceOp::Max:
      return OpKind::AllMax;
    case ReduceOp::Min:
      return OpKind::AllMin;
    case ReduceOp::Prod:
      return OpKind::AllProd;
    case ReduceOp::BitAnd:
      return OpKind::AllBitAnd;
    case ReduceOp::BitOr:
      return OpKind::AllBitOr;
    case ReduceOp::BitXor:
      return OpKind::AllBitXor;
  }
  raise(ErrorKind::Usage, "all_reduce: unknown reduce op " +
                              std::to_string(static_cast<int>(op)));
}

ReduceOp reduce_op_of(OpKind kind) {
  switch (kind) {
    case OpKind::AllMax:
      return ReduceOp::Max;
    case OpKind::AllMin:
      return ReduceOp::Min;
    case OpKind::AllProd:
      return ReduceOp::Prod;
    case OpKind::AllBitAnd:
      return ReduceOp::BitAnd;
    case OpKind::AllBitOr:
      return ReduceOp::BitOr;
    case OpKind::AllBitXor:
      return ReduceOp::BitXor;
    default:
      return ReduceOp::Sum;
  }
}

void check_call(const OpCall& c, int member, int size, int job_rank) {
  if (c.internal) {
    return;  // its caller checked the arguments
  }
  const int me = job_rank;
  const size_t all = c.n * static_cast<size_t>(size);
  switch (c.kind) {
    case OpKind::AllSum:
    case OpKind::AllMax:
    case OpKind::AllMin:
    case OpKind::AllProd:
    case OpKind::AllBitAnd:
    case OpKind::AllBitOr:
    case OpKind::AllBitXor:
      checked_count(reduce_op_of(c.kind), c.dtype, c.n, me);
      check_buffers(me, c.name, c.in, c.n, c.out, c.n);
      // The same buffer (in place) or disjoint ones.
      if (c.in != c.out && overlaps(c.in, c.n, c.out, c.n)) {
        raise_usage(
            me, std::string(c.name) + ": input and output overlap partially");
      }
      return;
    case OpKind::AllGather: {
      check_buffers(me, c.name, c.in, c.n, c.out, all);
      // In place means the input is this rank's slot of the output.
      const char* slot =
          static_cast<const char*>(c.out) + static_cast<size_t>(member) * c.n;
      if (overlaps(c.in, c.n, c.out, all) && c.in != slot) {
        raise_usage(me, std::string(c.name) +
                            ": input overlaps output other than at this "
                            "rank's slot");
      }
      return;
    }
    case OpKind::SumScatter:
      checked_count(ReduceOp::Sum, c.dtype, c.n, me);
      check_buffers(me, c.name, c.in, all, c.out, c.n);
      return;
    case OpKind::SendRecv:
      check_peer_rank(member, size, c.name, c.peer,
                      c.inbound ? "source" : "destination", me);
      check_buffers(me, c.name, c.inbound ? c.out : c.in, c.n, nullptr, 0);
      return;
    case OpKind::Barrier:
      return;
    case OpKind::Broadcast:
      if (c.peer < 0 || c.peer >= size) {
        raise_usage(me, std::string(c.name) + ": root " +
                            std::to_string(c.peer) +
                            " is out of range for a group of size " +
                            std::to_string(size));
      }
      check_buffers(me, c.name, c.out, c.n, nullptr, 0);
      return;
    case OpKind::AllToAll:
      check_a2a_buffers(me, c.name, c.in, all, c.out, all);
      return;
    case OpKind::AllToAllv:
      check_a2a_v_args(me, size, c.in, c.send_counts, c.out, c.recv_counts);
      return;
  }
  raise(ErrorKind::Internal, std::string("unknown op ") + c.name, {.rank = me});
}

}  // namespace jaccl::detail
