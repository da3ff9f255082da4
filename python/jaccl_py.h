// Copyright 2026 the jaccl authors.
// Shared pieces of the Python module `jaccl`: exception types, the group
// wrapper, the bridge that runs a Python all-gather for the C++ side channel.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jaccl/jaccl.h"

namespace jaccl::python {

namespace py = pybind11;

// ---- exceptions (jaccl_module.cpp) ---------------------------------------

// The Python class for an error kind (jaccl.Error for unknown kinds).
PyObject* exception_type(ErrorKind kind);
// Sets the Python error indicator from a jaccl::Error.
void set_python_error(const Error& e);
// Builds (without raising) an instance of the exception class for kind.
py::object make_exception(ErrorKind kind, const std::string& message);

// ---- groups (jaccl_module.cpp) -------------------------------------------

// What a Python `jaccl.Group` holds. Collectives on one group are serialized
// (the C++ groups expect one caller at a time); close() drops the C++ group
// (at interpreter exit), after which every call raises jaccl.UsageError.
// abort, revoke and failed_ranks are not serialized (run_now): they must
// reach a group whose collective is stuck on another thread.
class GroupHandle {
 public:
  explicit GroupHandle(std::shared_ptr<Group> g);
  ~GroupHandle();

  // Runs fn(group) with the GIL released and the group's lock held, then
  // raises KeyboardInterrupt etc. if a signal arrived meanwhile. A template:
  // a std::function would allocate on every collective.
  template <class F>
  void run(F&& fn);
  // The same without the group's lock, for the calls the C++ group allows
  // from any thread at any time.
  template <class F>
  void run_now(F&& fn);
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string backend_name() const { return backend_; }
  bool closed() const { return closed_; }
  // Drops the C++ group (GIL released by the caller). A group busy in a
  // collective on another thread for more than `wait` is left alone (the
  // process is exiting anyway).
  void close(std::chrono::milliseconds wait);

 private:
  // The group or UsageError if closed (under ptr_mu_, not mu_).
  std::shared_ptr<Group> current();

  std::timed_mutex mu_;
  std::mutex ptr_mu_;  // guards group_ for run_now; close() takes both
  std::atomic<bool> closed_{false};
  std::shared_ptr<Group> group_;
  int rank_;
  int size_;
  std::string backend_;
};

template <class F>
void GroupHandle::run(F&& fn) {
  // Explicit save/restore rather than an RAII guard: on a daemon thread at
  // interpreter exit, re-taking the GIL ends the thread, which must not
  // happen inside a destructor.
  std::exception_ptr error;
  PyThreadState* ts = PyEval_SaveThread();
  try {
    std::lock_guard<std::timed_mutex> lock(mu_);
    if (!group_) {
      throw UsageError("[jaccl] this group was closed at interpreter exit");
    }
    fn(*group_);
  } catch (...) {
    error = std::current_exception();
  }
  PyEval_RestoreThread(ts);
  if (error) {
    std::rethrow_exception(error);
  }
  // A Ctrl-C that arrived while the collective ran is raised now.
  if (PyErr_CheckSignals() != 0) {
    throw py::error_already_set();
  }
}

template <class F>
void GroupHandle::run_now(F&& fn) {
  std::exception_ptr error;
  {
    py::gil_scoped_release release;
    try {
      std::shared_ptr<Group> g = current();
      fn(*g);
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) {
    std::rethrow_exception(error);
  }
}

// A handle for a new C++ group (split, shrink), registered for close at
// exit (jaccl_module.cpp).
std::shared_ptr<GroupHandle> adopt(std::shared_ptr<Group> group);
// The world group (None if not initialized).
std::shared_ptr<GroupHandle> world_group();
// `group` argument of a collective: None -> the world group (or UsageError).
std::shared_ptr<GroupHandle> resolve_group(const py::object& group);

// ---- collectives (py_collectives.cpp) ------------------------------------

void bind_collectives(py::module_& m);

// ---- elastic groups (py_elastic.cpp) -------------------------------------

// Group.abort, revoke, failed_ranks, agree_failed, shrink.
void bind_elastic(py::class_<GroupHandle, std::shared_ptr<GroupHandle>>& group);

// ---- factory bridge (py_bridge.cpp) ---------------------------------------

// Runs the Python all-gather factory and the function it returns for the C++
// side channel, on the Python thread that called jaccl.init: jaccl::init runs
// on a C++ thread (so that thread's caller can notice Ctrl-C), and each
// side-channel call it makes waits here until the calling thread, which
// serves the bridge while it waits for init, has run it. So the user's code
// runs where it was called from (a zmq socket, an MPI communicator or an
// asyncio loop made on that thread is used on that thread), and no Python
// code ever runs on a C++-created thread. The bridge serves during init
// only: jaccl uses the side channel to set up the group and never after.
class Bridge : public std::enable_shared_from_this<Bridge> {
 public:
  Bridge() = default;
  ~Bridge();

  // The C++ factory to put in the Config; it forwards to the serving thread.
  AllGatherFactory cpp_factory();

  // With the GIL held: serves the queued calls (factory(rank, size), then
  // the function it returned, kept in fn) until none is queued, then waits
  // up to `wait` (GIL released) for one. Returns whether close() was called.
  bool serve(py::object& factory, py::object& fn,
             std::chrono::milliseconds wait);

  // No more calls are served; callers waiting for one get an error.
  void close();

  // The Python exception raised by the user's code (or by our checks of its
  // result), if any, taken out of the bridge (GIL held).
  py::object take_python_error();

 private:
  // One call for the serving thread. It owns its buffers, so a caller that
  // gives up (closed bridge) never leaves the server writing into its memory.
  struct Job {
    bool is_factory = false;  // factory(rank, size), else fn(in, n)
    int rank = 0, size = 0;
    size_t n = 0;
    std::vector<char> in, out;
    bool done = false;
    std::string error;  // non-empty: the call failed
  };
  // Queues job and waits for it; throws std::runtime_error if it failed.
  void submit(const std::shared_ptr<Job>& job);
  // With the GIL: runs one job, stashing a Python exception in pending_.
  void run_job(Job& job, py::object& factory, py::object& fn);
  void fail(Job& job, ErrorKind kind, PyObject* type,
            const std::string& message);
  void stash(PyObject* exc);  // steals exc

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool closed_ = false;
  PyObject* pending_ = nullptr;  // strong reference, taken with the GIL
};

}  // namespace jaccl::python
