// Copyright 2026 the jaccl authors.
// The exception classes a jaccl error becomes in Python: <module>.Error (a
// RuntimeError) and one subclass per kind, whose instances carry the
// error's fields (kind, rank, peer, peers, address, errno, detail). Shared by
// the jaccl module and jaccl_torch, so a caller tells a lost peer from a
// timeout, and finds the rank, the same way under both. Header-only: the two
// modules are built apart.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "jaccl/error.h"

namespace jaccl::python {

class ErrorClasses {
 public:
  // Adds Error and its subclasses to m, named "<module>.<class>".
  void add_to(pybind11::module_& m, const char* module, const char* base_doc) {
    namespace py = pybind11;
    base_ = make(m, module, "Error", PyExc_RuntimeError, base_doc);
    auto sub = [&](ErrorKind kind, const char* name, const char* doc,
                   PyObject* extra_base = nullptr) {
      py::tuple bases =
          extra_base != nullptr
              ? py::make_tuple(py::handle(base_), py::handle(extra_base))
              : py::make_tuple(py::handle(base_));
      by_kind_[static_cast<int>(kind)] =
          make(m, module, name, bases.ptr(), doc);
    };
    sub(ErrorKind::Config, "ConfigError",
        "Invalid or incomplete configuration, token mismatch, rejected "
        "connection.");
    sub(ErrorKind::Timeout, "TimeoutError",
        "A deadline expired (bootstrap, connect, an operation).");
    sub(ErrorKind::PeerLost, "PeerLostError",
        "A peer died, closed its connection or stopped sending heartbeats.");
    sub(ErrorKind::Protocol, "ProtocolError",
        "Ranks disagree (operation, size, call number) or a peer broke the "
        "protocol.");
    sub(ErrorKind::Io, "IoError", "The OS refused (bind, resolve, mmap ...).");
    sub(ErrorKind::Usage, "UsageError",
        "The API was called wrongly (also a ValueError).", PyExc_ValueError);
    sub(ErrorKind::Aborted, "AbortedError",
        "This rank aborted the group (elastic groups).");
    sub(ErrorKind::Revoked, "RevokedError",
        "A member revoked the group; peers names it (elastic groups).");
    sub(ErrorKind::Excluded, "ExcludedError",
        "The other members declared this rank failed and left it out of the "
        "group (elastic groups).");
    by_kind_[static_cast<int>(ErrorKind::Internal)] = base_;
    // Class-level defaults, so every instance has the attributes (an error
    // raised from Python by class name, a message-only error).
    for (int k = 0; k < kKinds; ++k) {
      py::handle cls(by_kind_[k]);
      cls.attr("kind") = to_string(static_cast<ErrorKind>(k));
      cls.attr("rank") = py::none();
      cls.attr("peer") = py::none();
      cls.attr("peers") = py::list();
      cls.attr("address") = py::none();
      cls.attr("errno") = py::none();
      cls.attr("detail") = py::none();
    }
  }

  // Sets the Python error indicator to an instance of e's class carrying
  // e's fields: kind ("PeerLost"), rank, peer (None when unknown), peers
  // (every rank involved), address, errno (None when absent), detail (the
  // message without the "[jaccl] rank N:" prefix and the notes).
  void set(const Error& e) const {
    namespace py = pybind11;
    PyObject* type = of(e.kind());
    py::object x = py::reinterpret_borrow<py::object>(type)(e.what());
    auto opt = [](int v, int none) {
      return v == none ? py::object(py::none()) : py::object(py::int_(v));
    };
    x.attr("kind") = to_string(e.kind());
    x.attr("rank") = opt(e.rank(), -1);
    x.attr("peer") = opt(e.peer(), -1);
    py::list peers;
    for (int r : e.peers()) {
      peers.append(r);
    }
    x.attr("peers") = peers;
    x.attr("address") = e.address().empty() ? py::object(py::none())
                                            : py::object(py::str(e.address()));
    x.attr("errno") = opt(e.sys_errno(), 0);
    x.attr("detail") = e.detail();
    PyErr_SetObject(type, x.ptr());
  }

  // The class of `kind` (Error for Internal or an unknown kind).
  PyObject* of(ErrorKind kind) const {
    const int k = static_cast<int>(kind);
    if (k >= 0 && k < kKinds && by_kind_[k] != nullptr) {
      return by_kind_[k];
    }
    return base_;
  }

 private:
  static constexpr int kKinds = static_cast<int>(ErrorKind::Internal) + 1;

  static PyObject* make(pybind11::module_& m, const char* module,
                        const char* name, PyObject* bases, const char* doc) {
    const std::string qualified = std::string(module) + "." + name;
    PyObject* type =
        PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
    if (type == nullptr) {
      throw pybind11::error_already_set();
    }
    m.add_object(name, pybind11::reinterpret_borrow<pybind11::object>(type));
    return type;  // the new reference is kept for the life of the process
  }

  PyObject* base_ = nullptr;
  PyObject* by_kind_[kKinds] = {};
};

}  // namespace jaccl::python
