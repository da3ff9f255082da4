// Copyright 2026 the jaccl authors.
// Helpers of process_group.cpp: the checks made in the caller before an op
// is queued (device, dtype, shapes, reduce op; each error names the op and
// what is wrong) and the buffers the worker hands to jaccl. Included by
// process_group.cpp only (inline, internal linkage: no extra translation
// unit of torch headers).
#pragma once

#include <exception>
#include <numeric>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "jaccl/error.h"
#include "jaccl/types.h"

namespace jaccl_torch {
namespace {

using c10d::ReduceOp;

// ---- checks (in the caller, before anything is queued) -------------------

struct DtypeEntry {
  c10::ScalarType torch;
  jaccl::Dtype jaccl;
};
constexpr DtypeEntry kDtypes[] = {
    {c10::kFloat, jaccl::Float32},
    {c10::kDouble, jaccl::Float64},
    {c10::kHalf, jaccl::Float16},
    {c10::kBFloat16, jaccl::BFloat16},
    {c10::kChar, jaccl::Int8},
    {c10::kShort, jaccl::Int16},
    {c10::kInt, jaccl::Int32},
    {c10::kLong, jaccl::Int64},
    {c10::kByte, jaccl::UInt8},
    {c10::kBool, jaccl::Bool},
    {c10::kComplexFloat, jaccl::Complex64},
};

// The jaccl dtype of t, or -1.
int find_dtype(const at::Tensor& t) {
  for (const auto& e : kDtypes) {
    if (e.torch == t.scalar_type())
      return e.jaccl;
  }
  return -1;
}

const char* op_name(const ReduceOp& op) {
  switch (op.op_) {
    case ReduceOp::SUM:
      return "SUM";
    case ReduceOp::AVG:
      return "AVG";
    case ReduceOp::PRODUCT:
      return "PRODUCT";
    case ReduceOp::MIN:
      return "MIN";
    case ReduceOp::MAX:
      return "MAX";
    case ReduceOp::BAND:
      return "BAND";
    case ReduceOp::BOR:
      return "BOR";
    case ReduceOp::BXOR:
      return "BXOR";
    case ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "UNUSED";
  }
}

// A tensor jaccl can move: defined, dense, in CPU memory. Ops that only move
// bytes (broadcast, gathers, all-to-all, send/recv) take any dtype.
void check_cpu(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "jaccl_torch: ", op, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "jaccl_torch: ", op, ": tensor on ",
              t.device().str(),
              ": the jaccl backend takes CPU tensors only (use gloo or nccl "
              "for GPU tensors)");
  TORCH_CHECK(t.layout() == c10::kStrided, "jaccl_torch: ", op, ": ",
              t.layout(), " tensors are not supported (dense tensors only)");
}

// A tensor jaccl can reduce with op.
void check_reducible(const at::Tensor& t, const ReduceOp& op,
                     const char* what) {
  check_cpu(t, what);
  TORCH_CHECK(find_dtype(t) >= 0, "jaccl_torch: ", what, ": dtype ",
              t.scalar_type(),
              " is not supported (float32, float64, float16, bfloat16, "
              "int8, int16, int32, int64, uint8, bool, complex64)");
  switch (op.op_) {
    case ReduceOp::SUM:
    case ReduceOp::MIN:
    case ReduceOp::MAX:
    case ReduceOp::PRODUCT:
      return;
    case ReduceOp::AVG:
      TORCH_CHECK(at::isFloatingType(t.scalar_type()) ||
                      at::isComplexType(t.scalar_type()),
                  "jaccl_torch: ", what,
                  ": ReduceOp.AVG needs a floating-point "
                  "or complex tensor, got ",
                  t.scalar_type());
      return;
    case ReduceOp::BAND:
    case ReduceOp::BOR:
    case ReduceOp::BXOR:
      TORCH_CHECK(at::isIntegralType(t.scalar_type(), /*includeBool=*/true),
                  "jaccl_torch: ", what, ": ReduceOp.", op_name(op),
                  " needs an integer or bool tensor, got ", t.scalar_type());
      return;
    default:
      TORCH_CHECK(false, "jaccl_torch: ", what, ": ReduceOp.", op_name(op),
                  " is not supported (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, "
                  "BXOR are)");
  }
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors,
                         const char* op) {
  TORCH_CHECK(tensors.size() == 1, "jaccl_torch: ", op,
              ": one tensor per process (multi-device lists are not "
              "supported), got ",
              tensors.size());
  return tensors[0];
}

void check_like(const at::Tensor& t, const at::Tensor& ref, const char* op,
                const char* what) {
  check_cpu(t, op);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "jaccl_torch: ", op, ": ",
              what, " has dtype ", t.scalar_type(), ", expected ",
              ref.scalar_type());
  TORCH_CHECK(t.numel() == ref.numel(), "jaccl_torch: ", op, ": ", what,
              " has ", t.numel(), " elements, expected ", ref.numel());
}

void check_list(const std::vector<at::Tensor>& list, const at::Tensor& ref,
                int size, const char* op, const char* what) {
  TORCH_CHECK(static_cast<int>(list.size()) == size, "jaccl_torch: ", op, ": ",
              what, " has ", list.size(), " tensors, the group has ", size,
              " ranks");
  for (const auto& t : list)
    check_like(t, ref, op, what);
}

void check_root(int64_t root, int size, const char* op) {
  TORCH_CHECK(root >= 0 && root < size, "jaccl_torch: ", op, ": root rank ",
              root, " is out of range for a group of size ", size);
}

size_t nbytes(const at::Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.element_size();
}

size_t list_bytes(const std::vector<at::Tensor>& list) {
  size_t n = 0;
  for (const auto& t : list)
    n += nbytes(t);
  return n;
}

// ---- buffers (on the worker thread) -------------------------------------

// A contiguous view of t: t itself when it is contiguous (jaccl gets its data
// pointer, nothing is copied); otherwise a contiguous copy, which
// write_back() copies into t after the op. `alias` forces a copy when the
// input shares memory with an output jaccl must not read while writing.
struct Dense {
  at::Tensor orig, t;
  explicit Dense(const at::Tensor& x, bool copy = false)
      : orig(x),
        t(copy ? x.clone(at::MemoryFormat::Contiguous) : x.contiguous()) {}
  void* ptr() { return t.data_ptr(); }
  size_t bytes() const { return nbytes(t); }
  void write_back() {
    if (!t.is_same(orig))
      orig.copy_(t);
  }
};

// Split sizes along dim 0 (empty: equal parts) as byte counts and offsets.
void splits(const at::Tensor& t, const std::vector<int64_t>& split_sizes,
            int size, const char* what, std::vector<size_t>& counts,
            std::vector<size_t>& offsets) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const size_t row_bytes = rows == 0 ? 0 : nbytes(t) / rows;
  std::vector<int64_t> parts = split_sizes;
  if (parts.empty()) {
    TORCH_CHECK(rows % size == 0, "jaccl_torch: all_to_all_single: ", what,
                " dim 0 (", rows, ") does not divide equally across ", size,
                " ranks");
    parts.assign(size, rows / size);
  }
  TORCH_CHECK(static_cast<int>(parts.size()) == size,
              "jaccl_torch: all_to_all_single: ", parts.size(), " ", what,
              " split sizes for a group of size ", size);
  TORCH_CHECK(std::accumulate(parts.begin(), parts.end(), int64_t{0}) == rows,
              "jaccl_torch: all_to_all_single: ", what,
              " split sizes do not add up to dim 0 (", rows, ")");
  counts.resize(size);
  offsets.resize(size);
  size_t off = 0;
  for (int r = 0; r < size; ++r) {
    TORCH_CHECK(parts[r] >= 0, "jaccl_torch: all_to_all_single: negative ",
                what, " split size");
    counts[r] = static_cast<size_t>(parts[r]) * row_bytes;
    offsets[r] = off;
    off += counts[r];
  }
}

std::string what_of(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) {
    return c->what_without_backtrace();
  }
  return e.what();
}

}  // namespace
}  // namespace jaccl_torch
