// Copyright 2026 the jaccl authors.
// torch_floor: a torch.distributed backend "floor" whose all_reduce moves
// nothing and returns a completed Work. bench/sections/torch.py times it
// beside "jaccl" in the same job: what torch's own layers (Python checks,
// pybind, the GIL, the Work object) cost per call on this machine, the
// floor under every backend's small-op figure. Bench-only: not installed.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <vector>

#include "compat.h"

namespace {

class DoneWork : public c10d::Work {
 public:
  explicit DoneWork(int rank) : c10d::Work(rank, c10d::OpType::ALLREDUCE) {
    finish();
  }
};

// Only allreduce and barrier: anything else raises torch's "not supported"
// error, which a benchmark of all_reduce never meets.
class FloorGroup : public jaccl_torch::BackendBase {
 public:
  FloorGroup(int rank, int size) : jaccl_torch::BackendBase(rank, size) {}
  const std::string getBackendName() const override { return "floor"; }
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& /*tensors*/,
      const c10d::AllreduceOptions& /*opts*/) override {
    return c10::make_intrusive<DoneWork>(rank_);
  }
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& /*opts*/) override {
    return c10::make_intrusive<DoneWork>(rank_);
  }
};

c10::intrusive_ptr<jaccl_torch::BackendBase> create(
    const c10::intrusive_ptr<c10d::Store>& /*store*/, int rank, int size,
    std::chrono::milliseconds /*timeout*/) {
  return c10::make_intrusive<FloorGroup>(rank, size);
}

}  // namespace

PYBIND11_MODULE(torch_floor, m) {
  m.doc() = "torch.distributed backend 'floor': all_reduce does nothing.";
  m.def("_create", &create, "The creator torch calls for backend 'floor'.");
  pybind11::object backend =
      pybind11::module_::import("torch.distributed").attr("Backend");
  if (!pybind11::hasattr(backend, "FLOOR"))
    backend.attr("register_backend")("floor", m.attr("_create"));
}
