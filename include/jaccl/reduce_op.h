// Copyright 2026 the jaccl authors.
// The reductions of Group::all_reduce and Group::reduce (jaccl extensions;
// standalone JACCL has all_sum, all_max and all_min only).
#pragma once

#include <cstdint>

namespace jaccl {

// Semantics per dtype are those of all_sum/all_max/all_min (integers wrap,
// float16/bfloat16 compute in float and round at every step, Bool treats
// any nonzero byte as true). Prod of Bool is AND; of complex64 the complex
// product. The bitwise ops take integer and Bool dtypes only (any other is
// a UsageError).
enum class ReduceOp : uint8_t { Sum, Max, Min, Prod, BitAnd, BitOr, BitXor };

// "sum", "max", "min", "prod", "bitand", "bitor", "bitxor" ("unknown"
// otherwise).
const char* reduce_op_name(ReduceOp op) noexcept;

}  // namespace jaccl
