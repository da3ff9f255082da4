// Copyright 2026 the jaccl authors.
// Bridge: the Python all-gather factory, served on the thread that called
// jaccl.init for the C++ side channel running on init's thread (jaccl_py.h).
#include <cstring>

#include "jaccl_py.h"

namespace jaccl::python {

namespace {

std::string type_name(PyObject* o) {
  return Py_TYPE(o)->tp_name;
}

// "ValueError: boom" for an exception instance (GIL held).
std::string describe(PyObject* exc) {
  std::string msg = type_name(exc);
  PyObject* s = PyObject_Str(exc);
  if (s != nullptr) {
    const char* text = PyUnicode_AsUTF8(s);
    if (text != nullptr && *text != '\0') {
      msg += ": ";
      msg += text;
    }
    Py_DECREF(s);
  }
  PyErr_Clear();
  return msg;
}

}  // namespace

Bridge::~Bridge() {
  // Whatever is still stashed was never taken: it is leaked on purpose,
  // since this may run on a C++ thread without the GIL.
}

AllGatherFactory Bridge::cpp_factory() {
  auto self = shared_from_this();
  return [self](int rank, int size) -> AllGatherFn {
    auto job = std::make_shared<Job>();
    job->is_factory = true;
    job->rank = rank;
    job->size = size;
    self->submit(job);
    return [self, size](const char* src, char* dst, size_t n) {
      auto call = std::make_shared<Job>();
      call->size = size;
      call->n = n;
      call->in.assign(src, src + n);
      self->submit(call);
      std::memcpy(dst, call->out.data(), call->out.size());
    };
  };
}

void Bridge::submit(const std::shared_ptr<Job>& job) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) {
    throw std::runtime_error(
        "the Python all-gather is no longer served (jaccl.init returned or "
        "was interrupted)");
  }
  queue_.push_back(job);
  cv_.notify_all();
  cv_.wait(lock, [&] { return job->done || closed_; });
  if (!job->done) {
    throw std::runtime_error(
        "the Python all-gather was abandoned (jaccl.init returned or was "
        "interrupted)");
  }
  if (!job->error.empty()) {
    throw std::runtime_error(job->error);
  }
}

void Bridge::close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

void Bridge::stash(PyObject* exc) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_ == nullptr) {
    pending_ = exc;  // keeps the first one: later failures follow from it
  } else {
    Py_DECREF(exc);
  }
}

py::object Bridge::take_python_error() {
  std::lock_guard<std::mutex> lock(mu_);
  PyObject* exc = pending_;
  pending_ = nullptr;
  if (exc == nullptr) {
    return py::none();
  }
  return py::reinterpret_steal<py::object>(exc);
}

// Fails the job with a Python exception (ours) that init will raise.
void Bridge::fail(Job& job, ErrorKind kind, PyObject* type,
                  const std::string& message) {
  py::object exc = type != nullptr
                       ? py::reinterpret_borrow<py::object>(type)(message)
                       : make_exception(kind, message);
  job.error = message;
  stash(exc.release().ptr());
}

void Bridge::run_job(Job& job, py::object& factory, py::object& fn) {
  try {
    if (job.is_factory) {
      py::object f = factory(job.rank, job.size);
      if (!PyCallable_Check(f.ptr())) {
        fail(job, ErrorKind::Usage, PyExc_TypeError,
             "all_gather_factory(" + std::to_string(job.rank) + ", " +
                 std::to_string(job.size) + ") returned a " +
                 type_name(f.ptr()) +
                 ", which is not callable: it must return f(src: bytes, "
                 "n_bytes: int) -> bytes");
        return;
      }
      fn = std::move(f);
      return;
    }
    if (!fn) {
      fail(job, ErrorKind::Internal, nullptr,
           "the all-gather was called before the factory");
      return;
    }
    py::bytes src(job.in.data(), job.in.size());
    py::object result = fn(src, job.n);
    Py_buffer view;
    if (PyObject_GetBuffer(result.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      fail(job, ErrorKind::Usage, PyExc_TypeError,
           std::string("Custom all-gather returned a ") +
               type_name(result.ptr()) +
               " but must return bytes (or another contiguous buffer)");
      return;
    }
    size_t expected = job.n * static_cast<size_t>(job.size);
    size_t got = static_cast<size_t>(view.len);
    if (got != expected) {
      PyBuffer_Release(&view);
      fail(job, ErrorKind::Protocol, nullptr,
           "Custom all-gather returned " + std::to_string(got) +
               " bytes but expected " + std::to_string(expected) + " (" +
               std::to_string(job.size) + " ranks x " + std::to_string(job.n) +
               " bytes)");
      return;
    }
    job.out.assign(static_cast<const char*>(view.buf),
                   static_cast<const char*>(view.buf) + got);
    PyBuffer_Release(&view);
  } catch (py::error_already_set& e) {
    // The user's code raised: keep the exception (with its traceback) so
    // init raises it, and give the C++ side channel its description.
    e.restore();
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != nullptr && value != nullptr) {
      PyException_SetTraceback(value, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
    if (value == nullptr) {
      job.error = "the Python all-gather raised an unknown exception";
      return;
    }
    job.error =
        (job.is_factory ? "all_gather_factory raised " : "") + describe(value);
    stash(value);
  }
}

bool Bridge::serve(py::object& factory, py::object& fn,
                   std::chrono::milliseconds wait) {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      py::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, wait,
                        [&] { return closed_ || !queue_.empty(); })) {
        return false;
      }
      if (closed_) {
        return true;
      }
      job = queue_.front();
      queue_.pop_front();
    }
    run_job(*job, factory, fn);
    std::lock_guard<std::mutex> lock(mu_);
    job->done = true;
    cv_.notify_all();
  }
}

}  // namespace jaccl::python
