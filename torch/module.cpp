// Copyright 2026 the jaccl authors.
// The Python module jaccl_torch: importing it registers the torch.distributed
// backend "jaccl", so init_process_group("jaccl") / new_group(backend="jaccl")
// create a ProcessGroupJaccl over the store torch made for the group. A
// jaccl error reaches Python as the class of its kind, as in the jaccl
// module: jaccl_torch.Error (a RuntimeError) and its subclasses. abort,
// revoke, failed_ranks, agree_failed and shrink(group) carry a job on after
// a rank dies (docs/failures.md, "The recipe in PyTorch").
#include <pybind11/chrono.h>
#include <pybind11/eval.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "common/env.h"
#include "config_parse.h"
#include "error_classes.h"
#include "jaccl/error.h"
#include "process_group.h"

namespace py = pybind11;

namespace {

jaccl::python::ErrorClasses g_errors;

// The classes of the jaccl module (python/error_classes.h), so that a caller
// tells a lost peer from a timeout the same way under torch as under jaccl.
void register_exceptions(py::module_& m) {
  g_errors.add_to(
      m, "jaccl_torch",
      "Base of every jaccl error a jaccl process group raises (a "
      "RuntimeError). Subclasses name the kind: ConfigError, TimeoutError, "
      "PeerLostError, ProtocolError, IoError, UsageError, AbortedError, "
      "RevokedError, ExcludedError.");
  // Wherever a jaccl::Error crosses into Python: this module's functions
  // and torch's Work.wait(), which rethrows what the worker stored
  // (pybind11 tries the translators registered last first).
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const jaccl::Error& e) {
      g_errors.set(e);
    }
  });
}

// JACCL_TORCH_INLINE_BYTES, once at import: the inline limit's starting
// value, so that a program is tuned without a change to it. Throws (the
// import fails) on anything but a whole number of bytes.
void read_inline_bytes() {
  using jaccl::detail::EnvVar;
  const char* v = jaccl::detail::env_get(EnvVar::TorchInlineBytes);
  if (v == nullptr) {
    return;
  }
  const auto n = jaccl::detail::parse_int(v);
  if (!n || *n < 0) {
    throw std::invalid_argument(
        "[jaccl] " + jaccl::detail::env_describe(EnvVar::TorchInlineBytes) +
        " is not a whole number of bytes >= 0 (e.g. 1048576)");
  }
  jaccl_torch::ProcessGroupJaccl::set_inline_bytes(static_cast<size_t>(*n));
}

// init_process_group's creator: (store, rank, world_size, timeout). The
// bootstrap blocks on the other ranks, so the GIL is released meanwhile.
c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    std::chrono::milliseconds timeout) {
  py::gil_scoped_release no_gil;
  return c10::make_intrusive<jaccl_torch::ProcessGroupJaccl>(
      store, rank, world_size, timeout);
}

using PG = c10::intrusive_ptr<c10d::ProcessGroup>;

jaccl_torch::ProcessGroupJaccl& jaccl_of(const PG& pg, const char* call) {
  auto* j = dynamic_cast<jaccl_torch::ProcessGroupJaccl*>(pg.get());
  TORCH_CHECK(j != nullptr, "jaccl_torch.", call, ": process group backend '",
              pg->getBackendName(), "' is not jaccl");
  return *j;
}

std::string data_plane(const PG& pg) {
  return jaccl_of(pg, "data_plane").data_plane();
}

// Enters a group made by shrink in torch.distributed's tables, as new_group
// does, so that get_rank(group=), get_backend and destroy_process_group know
// it: its members' ranks in the default group come from an all_gather over
// it. Skipped when there is no default group or the tables are not where
// torch 1.13 (module globals) or 2.x (_world) keeps them.
constexpr const char* kRegisterGroup = R"(
def _register_group(pg):
    import torch
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    if not dist.is_initialized():
        return
    me = torch.tensor([dist.get_rank()], dtype=torch.int64)
    ranks = [torch.zeros_like(me) for _ in range(pg.size())]
    dist.all_gather(ranks, me, group=pg)
    t = getattr(c10d, "_world", None)
    pg_map = getattr(t, "pg_map", getattr(c10d, "_pg_map", None))
    names = getattr(t, "pg_names", getattr(c10d, "_pg_names", None))
    group_ranks = getattr(t, "pg_group_ranks",
                          getattr(c10d, "_pg_group_ranks", None))
    if pg_map is None or names is None or group_ranks is None:
        return
    pg_map[pg] = ("jaccl", None)
    names[pg] = "jaccl_shrink_" + str(id(pg))
    group_ranks[pg] = {int(r): i for i, r in enumerate(ranks)}
)";

// jaccl_torch.<name>(group): call on the group's ProcessGroupJaccl, with
// the GIL released (it may wait on peers or on the group's worker).
template <class R>
void def_call(py::module_& m, const char* name,
              R (jaccl_torch::ProcessGroupJaccl::*call)(), const char* doc) {
  m.def(
      name,
      [name, call](const PG& pg) {
        auto& j = jaccl_of(pg, name);
        py::gil_scoped_release no_gil;
        return (j.*call)();
      },
      py::arg("group"), doc);
}

// The elastic calls (docs/failures.md).
void bind_elastic(py::module_& m) {
  using J = jaccl_torch::ProcessGroupJaccl;
  py::exec(kRegisterGroup, m.attr("__dict__"));
  def_call(m, "abort", &J::abort,
           "Any thread, any time: every op of this jaccl process group in "
           "flight ends promptly with AbortedError, and so does every later "
           "one; the peers see this rank as failed.");
  def_call(m, "revoke", &J::revoke,
           "Not collective: every member's pending and later ops on this "
           "group fail with RevokedError naming this rank, also members that "
           "are idle.");
  def_call(m, "failed_ranks", &J::failed_ranks,
           "The ranks of this group this rank knows to have failed, "
           "ascending.");
  def_call(m, "agree_failed", &J::agree_failed,
           "Collective over the live members: the same failed ranks "
           "everywhere.");
  m.def(
      "shrink",
      [](const PG& pg, const std::vector<int>& exclude) -> py::object {
        auto& j = jaccl_of(pg, "shrink");
        PG child;
        {
          py::gil_scoped_release no_gil;
          child = j.shrink(exclude);
        }
        if (!child)
          return py::none();
        py::object out = py::cast(child);
        py::module_::import("jaccl_torch").attr("_register_group")(out);
        return out;
      },
      py::arg("group"), py::arg("exclude") = std::vector<int>{},
      R"(Collective over the live members (ranks in exclude need not call it;
every caller passes the same list): a new jaccl ProcessGroup of the live ranks
not in exclude, numbered in the old group's order (so new rank = position in
the survivors), set up without the store (which may have died with rank 0).
Use it with DDP(process_group=) and as group= of torch.distributed's calls.
None on a rank in exclude; ExcludedError on a rank the others declared
failed.)");
}

}  // namespace

PYBIND11_MODULE(jaccl_torch, m) {
  m.doc() =
      "torch.distributed backend 'jaccl': import registers it; then "
      "dist.init_process_group('jaccl', ...).";
  py::module_ dist = py::module_::import("torch.distributed");
  register_exceptions(m);
  read_inline_bytes();
  m.def("_create_process_group", &create_process_group, py::arg("store"),
        py::arg("rank"), py::arg("world_size"), py::arg("timeout"),
        "The creator torch calls for backend 'jaccl'.");
  m.def("data_plane", &data_plane, py::arg("group"),
        "The jaccl data plane of a jaccl process group (e.g. 'shm', 'tcp').");
  bind_elastic(m);
  m.def(
      "_shutdown",
      [] {
        py::gil_scoped_release no_gil;
        jaccl_torch::ProcessGroupJaccl::shutdown_all();
      },
      "Stops every jaccl process group's worker (registered with atexit).");
  m.def(
      "set_inline_bytes",
      [](size_t n) { jaccl_torch::ProcessGroupJaccl::set_inline_bytes(n); },
      py::arg("n"),
      "Ops of at most n bytes run on the calling thread when their group has "
      "nothing queued or running, and return a completed Work (default 64 "
      "KiB); larger ones run on the group's worker thread, so that an "
      "async_op=True call returns at once, unless the two large ops before "
      "it were waited for at once (synchronous calls). 0 sends every op to "
      "the worker. "
      "JACCL_TORCH_INLINE_BYTES sets the starting value at import.");
  m.def(
      "inline_bytes",
      [] { return jaccl_torch::ProcessGroupJaccl::inline_bytes(); },
      "The limit set_inline_bytes() sets.");
  // At exit, while the interpreter is whole: a worker dropping a Python
  // tensor later would take the GIL during finalization.
  py::module_::import("atexit").attr("register")(m.attr("_shutdown"));
  m.attr("BACKEND") = "jaccl";
  py::object backend = dist.attr("Backend");
  if (!py::hasattr(backend, "JACCL")) {
    backend.attr("register_backend")("jaccl", m.attr("_create_process_group"));
  }
}
