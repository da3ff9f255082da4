// Copyright 2026 the jaccl authors.
// The Python module `jaccl`: init (with an optional all-gather factory), the
// world group, the exception hierarchy. Collectives: py_collectives.cpp.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <chrono>
#include <thread>
#include <vector>

#include "error_classes.h"
#include "jaccl_py.h"

namespace jaccl::python {

// ---------------------------------------------------------------- errors

namespace {

ErrorClasses g_errors;

void register_exceptions(py::module_& m) {
  g_errors.add_to(
      m, "jaccl",
      "Base of every error jaccl raises (a RuntimeError). Subclasses name "
      "the kind: ConfigError, TimeoutError, PeerLostError, ProtocolError, "
      "IoError, UsageError, AbortedError, RevokedError, ExcludedError.");
}

}  // namespace

PyObject* exception_type(ErrorKind kind) {
  return g_errors.of(kind);
}

void set_python_error(const Error& e) {
  g_errors.set(e);
}

py::object make_exception(ErrorKind kind, const std::string& message) {
  return py::reinterpret_borrow<py::object>(exception_type(kind))(message);
}

// ---------------------------------------------------------------- groups

namespace {

std::mutex g_handles_mu;
std::vector<std::weak_ptr<GroupHandle>> g_handles;  // for close at exit
std::shared_ptr<GroupHandle> g_world;               // guarded by the GIL
bool g_init_running = false;                        // guarded by the GIL

}  // namespace

std::shared_ptr<GroupHandle> adopt(std::shared_ptr<Group> group) {
  auto handle = std::make_shared<GroupHandle>(std::move(group));
  std::lock_guard<std::mutex> lock(g_handles_mu);
  std::erase_if(g_handles, [](auto& w) { return w.expired(); });
  g_handles.push_back(handle);
  return handle;
}

GroupHandle::GroupHandle(std::shared_ptr<Group> g)
    : group_(std::move(g)),
      rank_(group_->rank()),
      size_(group_->size()),
      backend_(group_->backend_name()) {}

GroupHandle::~GroupHandle() {
  // Tearing a group down may wait for its threads: never with the GIL held.
  // (No collective can be running: it would hold a reference to us.)
  if (group_ && Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release release;
    group_.reset();
  }
}

void GroupHandle::close(std::chrono::milliseconds wait) {
  std::unique_lock<std::timed_mutex> lock(mu_, std::defer_lock);
  if (!lock.try_lock_for(wait)) {
    return;
  }
  closed_ = true;
  std::shared_ptr<Group> g;
  {
    std::lock_guard<std::mutex> ptr_lock(ptr_mu_);
    g.swap(group_);
  }
  lock.unlock();
  g.reset();
}

std::shared_ptr<Group> GroupHandle::current() {
  std::lock_guard<std::mutex> lock(ptr_mu_);
  if (!group_) {
    throw UsageError("[jaccl] this group was closed at interpreter exit");
  }
  return group_;
}

std::shared_ptr<GroupHandle> world_group() {
  return g_world;
}

std::shared_ptr<GroupHandle> resolve_group(const py::object& group) {
  if (group.is_none()) {
    if (!g_world) {
      throw UsageError(
          "[jaccl] no group given and no world group: call jaccl.init() "
          "first (or pass group=)");
    }
    return g_world;
  }
  return group.cast<std::shared_ptr<GroupHandle>>();
}

// ---------------------------------------------------------------- init

namespace {

struct InitState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::shared_ptr<Group> group;
  std::exception_ptr error;
};

bool backend_ok(const std::string& backend) {
  return backend == "any" || backend == "jaccl";
}

py::object init(bool strict, const std::string& backend, py::object factory) {
  if (!factory.is_none() && !backend_ok(backend)) {
    throw py::value_error(
        "all_gather_factory is only supported with backend='jaccl' or "
        "backend='any', not backend='" +
        backend + "'");
  }
  if (g_world) {
    return py::cast(g_world);
  }
  if (g_init_running) {
    throw UsageError("[jaccl] jaccl.init is already running in another thread");
  }
  if (!backend_ok(backend)) {
    if (strict) {
      throw py::value_error("unknown backend '" + backend +
                            "': this module provides 'jaccl' (or 'any')");
    }
    return py::none();
  }
  if (!factory.is_none() && !PyCallable_Check(factory.ptr())) {
    throw py::type_error(std::string("all_gather_factory must be callable as "
                                     "factory(rank, size) -> f, got a ") +
                         Py_TYPE(factory.ptr())->tp_name);
  }

  g_init_running = true;
  struct Reset {
    ~Reset() { g_init_running = false; }
  } reset_running;

  Config cfg = Config::from_env();
  std::shared_ptr<Bridge> bridge;
  if (!factory.is_none()) {
    bridge = std::make_shared<Bridge>();
    cfg.set_all_gather_factory(bridge->cpp_factory());
  }

  // jaccl::init runs on its own thread so this one can notice Ctrl-C and
  // run the user's all-gather (the bridge) while it waits.
  auto st = std::make_shared<InitState>();
  std::thread([st, cfg, strict, bridge] {
    std::shared_ptr<Group> g;
    std::exception_ptr err;
    try {
      g = jaccl::init(cfg, strict);
    } catch (...) {
      err = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->group = std::move(g);
      st->error = err;
      st->done = true;
      st->cv.notify_all();
    }
    if (bridge) {
      bridge->close();  // wakes the serving caller at once
    }
  }).detach();
  py::object user_fn;  // what the factory returned, dropped on return
  for (;;) {
    bool done;
    if (bridge) {
      bridge->serve(factory, user_fn, std::chrono::milliseconds(50));
      std::lock_guard<std::mutex> lock(st->mu);
      done = st->done;
    } else {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(st->mu);
      done = st->cv.wait_for(lock, std::chrono::milliseconds(50),
                             [&] { return st->done; });
    }
    if (done) {
      break;
    }
    if (PyErr_CheckSignals() != 0) {
      // Interrupted: the bootstrap thread is abandoned; it fails (or its
      // group is dropped) on its own, bounded by JACCL_TIMEOUT.
      if (bridge) {
        bridge->close();
      }
      throw py::error_already_set();
    }
  }

  std::shared_ptr<Group> group;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    group = std::move(st->group);
    error = st->error;
  }
  if (error) {
    py::object user_error = bridge ? bridge->take_python_error() : py::none();
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      if (user_error.is_none()) {
        throw;
      }
      // The user's code (or its result) was the cause: raise that exception
      // with its own traceback, and say where jaccl was.
      if (py::hasattr(user_error, "add_note")) {
        user_error.attr("add_note")(std::string(e.what()));
      }
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(user_error.ptr())),
                      user_error.ptr());
      throw py::error_already_set();
    }
  }
  if (!group) {
    return py::none();  // non-strict and no usable configuration
  }
  auto handle = adopt(std::move(group));
  g_world = handle;
  return py::cast(handle);
}

// Group.split: None for a negative color, else the child (closed at exit
// like every group).
py::object split(const std::shared_ptr<GroupHandle>& self, int color, int key) {
  std::shared_ptr<Group> child;
  self->run([&](Group& g) { child = g.split(color, key); });
  if (!child) {
    return py::none();
  }
  return py::cast(adopt(std::move(child)));
}

void clear_backends() {
  std::shared_ptr<GroupHandle> w;
  w.swap(g_world);
  if (w) {
    py::gil_scoped_release release;
    w.reset();  // the group goes if nobody else holds it
  }
}

// atexit: close every group while the interpreter is fully alive, so no
// group teardown happens during finalization.
void shutdown() {
  g_world.reset();
  std::vector<std::shared_ptr<GroupHandle>> live;
  {
    std::lock_guard<std::mutex> lock(g_handles_mu);
    for (auto& w : g_handles) {
      if (auto h = w.lock()) {
        live.push_back(std::move(h));
      }
    }
    g_handles.clear();
  }
  py::gil_scoped_release release;
  for (auto& h : live) {
    h->close(std::chrono::seconds(2));
  }
  live.clear();
}

}  // namespace

}  // namespace jaccl::python

namespace jp = jaccl::python;
namespace py = pybind11;

PYBIND11_MODULE(jaccl, m) {
  m.doc() = R"(jaccl: collective communication on ordinary Linux machines.

Mirrors mlx.core.distributed: init() -> Group, then all_sum, all_max, all_min,
all_gather, sum_scatter, send, recv, recv_like, barrier, broadcast (each with
an optional group=; the world group by default). Inputs are any buffer (numpy
arrays, bytes, memoryview); non-contiguous or unaligned arrays are copied
first (as np.ascontiguousarray would). Outputs are new numpy arrays of the
input's dtype. dtypes: bool, int8..int64, uint8..uint64, float16, float32,
float64, complex64; bfloat16 as uint16 bits with dtype="bfloat16".

The GIL is released while a collective runs. Ctrl-C (SIGINT) does not
interrupt a running collective: it completes (or fails at its deadline,
JACCL_OP_TIMEOUT, or when a peer is lost), then KeyboardInterrupt is raised.
Ctrl-C during init raises KeyboardInterrupt at once.)";
  jp::register_exceptions(m);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) {
        std::rethrow_exception(p);
      }
    } catch (const jaccl::Error& e) {
      jp::set_python_error(e);
    }
  });

  py::class_<jp::GroupHandle, std::shared_ptr<jp::GroupHandle>> group(
      m, "Group", "A communication group (returned by jaccl.init).");
  group.def("rank", &jp::GroupHandle::rank, "This process's rank.")
      .def("size", &jp::GroupHandle::size, "Number of ranks.")
      .def_property_readonly("backend_name", &jp::GroupHandle::backend_name,
                             "The data plane and algorithm, for logs.")
      .def("split", &jp::split, py::arg("color"), py::arg("key") = -1,
           R"(Splits this group (every rank calls it): ranks passing the same
color form a new group, ordered by key (ties and key -1 by rank here). A
negative color joins no group and returns None. The child works with every
collective's group= argument, from other threads at the same time as this
group, and after this group is gone.)")
      .def("__eq__",
           [](const jp::GroupHandle& a, const py::object& b) {
             return py::isinstance<jp::GroupHandle>(b) &&
                    &a == b.cast<jp::GroupHandle*>();
           })
      .def(
          "__hash__",
          [](const jp::GroupHandle& a) { return std::hash<const void*>()(&a); })
      .def("__repr__", [](const jp::GroupHandle& g) {
        return "<jaccl.Group rank " + std::to_string(g.rank()) + " of " +
               std::to_string(g.size()) + " (" + g.backend_name() + ")" +
               (g.closed() ? ", closed>" : ">");
      });
  jp::bind_elastic(group);

  m.def("init", &jp::init, py::arg("strict") = false,
        py::arg("backend") = "any", py::kw_only(),
        py::arg("all_gather_factory") = py::none(),
        R"(Initializes the world group from the environment (JACCL_RANK, ...).

With all_gather_factory, the side channel is yours: the factory is called once
with (rank, size) and returns f(src: bytes, n_bytes: int) -> bytes giving
size * n_bytes bytes, every rank's input in rank order (used during init only;
the factory and f run on the thread that called init, while Ctrl-C is still
noticed).

Returns the group, or None when strict is False and there is no usable
configuration. A second call returns the same world group until
clear_backends(). Errors raised by the factory or f propagate with a note
saying where jaccl was; jaccl's own failures raise jaccl.Error subclasses.)");
  m.def("clear_backends", &jp::clear_backends,
        "Forgets the world group (and, once unreferenced, closes it).");
  m.def("is_available", &jaccl::is_available,
        "Whether groups can be created here.");
  m.def("_shutdown", &jp::shutdown);
  m.attr("__version__") = "0.1.0";

  jp::bind_collectives(m);

  py::module_::import("atexit").attr("register")(m.attr("_shutdown"));
}
