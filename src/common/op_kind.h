// Copyright 2026 the jaccl authors.
// What an op is, as every layer that carries ops tags them: the network op
// header (collectives/exchange.h), the shared-memory sync step
// (transport/shm_channel.h) and the op skeleton (collectives/op_runner.h).
// The values travel between ranks: append, never renumber.
#pragma once

#include <cstdint>

namespace jaccl::detail {

enum class OpKind : uint8_t {
  AllSum = 1,
  AllMax,
  AllMin,
  AllGather,
  SumScatter,
  SendRecv,  // both ends of a send/recv pair carry this kind
  Barrier,
  Broadcast,
  AllToAll,
  AllToAllv,
  AllProd,  // all_reduce with the ops all_sum/max/min do not cover
  AllBitAnd,
  AllBitOr,
  AllBitXor,
};

// "all_sum", for messages; "send/recv" for SendRecv.
constexpr const char* op_kind_name(OpKind kind) {
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
    case OpKind::AllToAll:
      return "all_to_all";
    case OpKind::AllToAllv:
      return "all_to_allv";
    case OpKind::AllProd:
      return "all_reduce(prod)";
    case OpKind::AllBitAnd:
      return "all_reduce(bitand)";
    case OpKind::AllBitOr:
      return "all_reduce(bitor)";
    case OpKind::AllBitXor:
      return "all_reduce(bitxor)";
  }
  return "unknown op";
}

}  // namespace jaccl::detail
