// Copyright 2026 the jaccl authors.
// Element-wise reductions shared by every collective (all_sum, all_max,
// all_min, sum_scatter, ...), one kernel per (op, dtype) chosen once per call.
#pragma once

#include <cstddef>

#include "jaccl/reduce_op.h"

namespace jaccl::detail {

using ReduceOp = jaccl::ReduceOp;

// reduce_op_name(op).
const char* op_name(ReduceOp op);

// Whether op has a kernel for dtype (every op for every numeric dtype; the
// bitwise ops for integers and Bool only).
bool reduce_supported(ReduceOp op, int dtype);

// Element count of an n_bytes buffer of dtype. Throws jaccl::UsageError if
// dtype is unknown, op does not take it, or n_bytes is not a multiple of its
// element size; the message names the op, the dtype and n_bytes; rank is the
// calling rank.
size_t checked_count(ReduceOp op, int dtype, size_t n_bytes, int rank = -1);

// dst[i] = op(dst[i], src[i]) for count elements.
void reduce_into(ReduceOp op, int dtype, void* dst, const void* src,
                 size_t count);

// out[i] = op(a[i], b[i]) for count elements. out may be a or b (exactly the
// same pointer); partial overlap is not supported.
//
// Pointers need no alignment: any byte offset works.
// Semantics: integers wrap; Bool treats any nonzero byte as true and writes
// 0/1 (sum and max are OR, min is AND); float16/bfloat16 compute in float and
// round back to nearest even at every step; float max/min propagate NaN and
// order -0 < +0 (so they are commutative on non-NaN values); complex64 sums
// componentwise and compares lexicographically on (real, imag).
// Throws jaccl::UsageError for an unknown dtype.
void reduce3(ReduceOp op, int dtype, void* out, const void* a, const void* b,
             size_t count);

// Test hook: when on, skip CPU-specific kernels (x86 F16C for float16) so the
// portable ones can be checked on machines that have the fast path.
void reduce_force_portable(bool on);

}  // namespace jaccl::detail
