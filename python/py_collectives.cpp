// Copyright 2026 the jaccl authors.
// The collectives of the Python module, mirroring mlx.core.distributed: any
// buffer in, a new numpy array of the input's dtype and shape out.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <vector>

#include "common/copy.h"
#include "jaccl_py.h"

namespace jaccl::python {

namespace {

// numpy flag bits (numpy/ndarraytypes.h).
constexpr int kCContiguous = 0x0001;
constexpr int kAligned = 0x0100;

[[noreturn]] void usage(const std::string& what) {
  throw UsageError("[jaccl] " + what);
}

// Leaked on purpose: a static py::object would be released after the
// interpreter is gone.
py::module_& numpy() {
  static auto* np = new py::module_(py::module_::import("numpy"));
  return *np;
}

// An input as a C-contiguous, aligned, native-order numpy array: numpy
// arrays as they are (copied if strided or unaligned), other buffers
// (bytes, bytearray, memoryview, array.array ...) through memoryview.
py::array as_array(const py::handle& x, const char* fn) {
  py::object arr;
  if (py::isinstance<py::array>(x)) {
    arr = py::reinterpret_borrow<py::object>(x);
  } else if (PyObject_CheckBuffer(x.ptr())) {
    arr = numpy().attr("asarray")(
        py::reinterpret_steal<py::object>(PyMemoryView_FromObject(x.ptr())));
  } else if (py::isinstance(x, numpy().attr("generic"))) {
    arr = numpy().attr("asarray")(x);  // numpy scalar
  } else {
    throw py::type_error(
        std::string("jaccl.") + fn +
        ": expected an object with the buffer protocol (numpy array, bytes, "
        "memoryview ...), got " +
        Py_TYPE(x.ptr())->tp_name);
  }
  py::array a = py::reinterpret_borrow<py::array>(arr);
  if ((a.flags() & (kCContiguous | kAligned)) != (kCContiguous | kAligned)) {
    a = py::reinterpret_borrow<py::array>(numpy().attr("array")(
        a, py::arg("order") = "C", py::arg("copy") = true));
  }
  return a;
}

std::string dtype_str(const py::dtype& dt) {
  return py::str(static_cast<const py::handle&>(dt)).cast<std::string>();
}

// The jaccl dtype of a numpy dtype, or TypeError naming it. "bfloat16" as
// override (or ml_dtypes' bfloat16) reinterprets 2-byte data as bfloat16.
// Reads the descriptor's fields: dtype.name is Python code in numpy, and
// was most of a small collective's cost. Only user-defined dtypes (type
// numbers from NPY_USERDEF on, such as ml_dtypes' bfloat16) are named.
int jaccl_dtype(const py::dtype& dt, const py::object& override_,
                const char* fn) {
  constexpr int kUserDefined = 256;  // NPY_USERDEF
  auto name = [&] { return py::str(dt.attr("name")).cast<std::string>(); };
  if (!override_.is_none()) {
    std::string want = py::str(override_).cast<std::string>();
    if (want != "bfloat16") {
      throw py::value_error(std::string("jaccl.") + fn +
                            ": dtype= accepts only 'bfloat16' (to treat "
                            "uint16 data as bfloat16), got '" +
                            want + "'");
    }
    if (dt.itemsize() != 2 || (dt.kind() != 'u' && name() != "bfloat16")) {
      throw py::type_error(std::string("jaccl.") + fn +
                           ": dtype='bfloat16' needs uint16 data (the raw "
                           "bfloat16 bits), got " +
                           dtype_str(dt));
    }
    return BFloat16;
  }
  const char order = dt.byteorder();
  if (order == '>' || (order == '<' && !PY_LITTLE_ENDIAN)) {
    throw py::type_error(std::string("jaccl.") + fn +
                         ": non-native byte order is not supported (dtype " +
                         dtype_str(dt) + "); use arr.astype(arr.dtype." +
                         "newbyteorder('='))");
  }
  if (dt.num() >= kUserDefined && dt.itemsize() == 2 && name() == "bfloat16") {
    return BFloat16;
  }
  switch (dt.kind()) {
    case 'b':
      if (dt.itemsize() == 1)
        return Bool;
      break;
    case 'i':
      switch (dt.itemsize()) {
        case 1:
          return Int8;
        case 2:
          return Int16;
        case 4:
          return Int32;
        case 8:
          return Int64;
      }
      break;
    case 'u':
      switch (dt.itemsize()) {
        case 1:
          return UInt8;
        case 2:
          return UInt16;
        case 4:
          return UInt32;
        case 8:
          return UInt64;
      }
      break;
    case 'f':
      switch (dt.itemsize()) {
        case 2:
          return Float16;
        case 4:
          return Float32;
        case 8:
          return Float64;
      }
      break;
    case 'c':
      if (dt.itemsize() == 8)
        return Complex64;
      break;
  }
  throw py::type_error(
      std::string("jaccl.") + fn + ": unsupported dtype " + dtype_str(dt) +
      " (supported: bool, int8-64, uint8-64, float16, float32, float64, "
      "complex64, and bfloat16 as uint16 with dtype='bfloat16')");
}

std::vector<py::ssize_t> shape_of(const py::array& a) {
  return std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim());
}

// The shape of `size` inputs stacked along axis 0 (a 0-d input: a vector).
std::vector<py::ssize_t> stacked_shape(const py::array& a, int size) {
  auto shape = shape_of(a);
  if (shape.empty()) {
    shape.push_back(size);
  } else {
    shape[0] *= size;
  }
  return shape;
}

// a's shape, after checking that axis 0 splits into `size` equal parts.
std::vector<py::ssize_t> splittable_shape(const py::array& a, int size,
                                          const char* fn) {
  auto shape = shape_of(a);
  if (shape.empty() || shape[0] % size != 0) {
    usage(std::string(fn) + ": the input's first axis (" +
          (shape.empty() ? std::string("none: a 0-d array")
                         : std::to_string(shape[0])) +
          ") must be divisible by the group size " + std::to_string(size));
  }
  return shape;
}

// A new C-contiguous array of a's dtype and shape, made by numpy from a's
// shape directly (py::array's constructor copies it into two vectors).
py::array empty_like(const py::array& a) {
  auto& api = py::detail::npy_api::get();
  PyObject* descr = a.dtype().release().ptr();  // stolen by NewFromDescr
  PyObject* out = api.PyArray_NewFromDescr_(
      api.PyArray_Type_, descr, static_cast<int>(a.ndim()), a.shape(), nullptr,
      nullptr, 0, nullptr);
  if (out == nullptr) {
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::array>(out);
}

size_t nbytes(const py::array& a) {
  return static_cast<size_t>(a.nbytes());
}

void check_peer(const GroupHandle& g, int peer, const char* fn,
                const char* role, bool allow_self) {
  if (peer < 0 || peer >= g.size()) {
    usage(std::string(fn) + ": " + role + "=" + std::to_string(peer) +
          " is not a rank of this group (size " + std::to_string(g.size()) +
          ")");
  }
  if (!allow_self && peer == g.rank()) {
    usage(std::string(fn) + ": " + role + "=" + std::to_string(peer) +
          " is this rank itself");
  }
}

// all_reduce's and reduce's op= names, as include/jaccl/reduce_op.h's
// reduce_op_name gives them.
ReduceOp reduce_op_named(const std::string& name, const char* fn) {
  for (auto op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod,
                  ReduceOp::BitAnd, ReduceOp::BitOr, ReduceOp::BitXor}) {
    if (name == reduce_op_name(op)) {
      return op;
    }
  }
  throw py::value_error(std::string("jaccl.") + fn + ": unknown op '" + name +
                        "' (sum, max, min, prod, bitand, bitor, bitxor)");
}

enum class Op { Sum, Max, Min };

py::array reduce(Op op, const py::object& x, const py::object& group,
                 const py::object& dtype, const char* fn) {
  auto g = resolve_group(group);
  py::array in = as_array(x, fn);
  int dt = jaccl_dtype(in.dtype(), dtype, fn);
  py::array out = empty_like(in);
  size_t n = nbytes(in);
  if (n == 0) {
    return out;
  }
  const void* src = in.data();
  void* dst = out.mutable_data();
  g->run([&](Group& grp) {
    switch (op) {
      case Op::Sum:
        grp.all_sum(src, dst, n, dt);
        break;
      case Op::Max:
        grp.all_max(src, dst, n, dt);
        break;
      case Op::Min:
        grp.all_min(src, dst, n, dt);
        break;
    }
  });
  return out;
}

py::array all_reduce(const py::object& x, const std::string& op_name,
                     const py::object& group, const py::object& dtype) {
  const ReduceOp op = reduce_op_named(op_name, "all_reduce");
  auto g = resolve_group(group);
  py::array in = as_array(x, "all_reduce");
  int dt = jaccl_dtype(in.dtype(), dtype, "all_reduce");
  py::array out = empty_like(in);
  size_t n = nbytes(in);
  if (n == 0) {
    return out;
  }
  const void* src = in.data();
  void* dst = out.mutable_data();
  g->run([&](Group& grp) { grp.all_reduce(src, dst, n, dt, op); });
  return out;
}

// The result on the root, None on the other ranks.
py::object rooted_reduce(const py::object& x, int root,
                         const std::string& op_name, const py::object& group,
                         const py::object& dtype) {
  const ReduceOp op = reduce_op_named(op_name, "reduce");
  auto g = resolve_group(group);
  check_peer(*g, root, "reduce", "root", true);
  py::array in = as_array(x, "reduce");
  int dt = jaccl_dtype(in.dtype(), dtype, "reduce");
  const bool me_root = g->rank() == root;
  py::array out = empty_like(in);
  const size_t n = nbytes(in);
  if (n > 0) {
    const void* src = in.data();
    void* dst = me_root ? out.mutable_data() : nullptr;
    g->run([&](Group& grp) { grp.reduce(src, dst, n, dt, op, root); });
  }
  return me_root ? py::object(out) : py::object(py::none());
}

py::object gather(const py::object& x, int root, const py::object& group) {
  auto g = resolve_group(group);
  check_peer(*g, root, "gather", "root", true);
  py::array in = as_array(x, "gather");
  jaccl_dtype(in.dtype(), py::none(), "gather");
  const bool me_root = g->rank() == root;
  auto shape = stacked_shape(in, g->size());
  py::array out(in.dtype(), me_root ? shape : std::vector<py::ssize_t>{0});
  const size_t n = nbytes(in);
  const void* src = in.data();
  void* dst = me_root ? out.mutable_data() : nullptr;
  g->run([&](Group& grp) { grp.gather(src, dst, n, root); });
  return me_root ? py::object(out) : py::object(py::none());
}

py::array scatter(const py::object& x, int root, const py::object& group) {
  auto g = resolve_group(group);
  check_peer(*g, root, "scatter", "root", true);
  py::array in = as_array(x, "scatter");
  jaccl_dtype(in.dtype(), py::none(), "scatter");
  auto shape = splittable_shape(in, g->size(), "scatter");
  shape[0] /= g->size();
  py::array out(in.dtype(), shape);
  const size_t n = nbytes(out);
  const void* src = g->rank() == root ? in.data() : nullptr;
  void* dst = out.mutable_data();
  g->run([&](Group& grp) { grp.scatter(src, dst, n, root); });
  return out;
}

py::array all_gather(const py::object& x, const py::object& group) {
  auto g = resolve_group(group);
  py::array in = as_array(x, "all_gather");
  jaccl_dtype(in.dtype(), py::none(), "all_gather");
  auto shape = stacked_shape(in, g->size());
  py::array out(in.dtype(), shape);
  size_t n = nbytes(in);
  if (n == 0) {
    return out;
  }
  const void* src = in.data();
  void* dst = out.mutable_data();
  g->run([&](Group& grp) { grp.all_gather(src, dst, n); });
  return out;
}

py::array sum_scatter(const py::object& x, const py::object& group,
                      const py::object& dtype) {
  auto g = resolve_group(group);
  py::array in = as_array(x, "sum_scatter");
  int dt = jaccl_dtype(in.dtype(), dtype, "sum_scatter");
  auto shape = splittable_shape(in, g->size(), "sum_scatter");
  shape[0] /= g->size();
  py::array out(in.dtype(), shape);
  size_t n = nbytes(out);
  if (n == 0) {
    return out;
  }
  const void* src = in.data();
  void* dst = out.mutable_data();
  g->run([&](Group& grp) { grp.sum_scatter(src, dst, n, dt); });
  return out;
}

py::array send(const py::object& x, int dst_rank, const py::object& group) {
  auto g = resolve_group(group);
  check_peer(*g, dst_rank, "send", "dst", false);
  py::array in = as_array(x, "send");
  jaccl_dtype(in.dtype(), py::none(), "send");
  size_t n = nbytes(in);
  if (n > 0) {
    const void* src = in.data();
    g->run([&](Group& grp) { grp.send(src, n, dst_rank); });
  }
  return in;
}

py::dtype recv_dtype(const py::object& dtype) {
  if (py::isinstance<py::str>(dtype) &&
      dtype.cast<std::string>() == "bfloat16") {
    return py::dtype("uint16");  // the raw bits
  }
  return py::dtype::from_args(dtype);
}

py::array recv_impl(std::vector<py::ssize_t> shape, const py::dtype& dt,
                    int src_rank, const py::object& group, const char* fn) {
  auto g = resolve_group(group);
  check_peer(*g, src_rank, fn, "src", false);
  jaccl_dtype(dt, py::none(), fn);
  py::array out(dt, shape);
  size_t n = nbytes(out);
  if (n > 0) {
    void* dst = out.mutable_data();
    g->run([&](Group& grp) { grp.recv(dst, n, src_rank); });
  }
  return out;
}

py::array recv(const py::object& shape, const py::object& dtype, int src,
               const py::object& group) {
  std::vector<py::ssize_t> dims;
  if (py::isinstance<py::int_>(shape)) {
    dims.push_back(shape.cast<py::ssize_t>());
  } else {
    dims = shape.cast<std::vector<py::ssize_t>>();
  }
  for (auto d : dims) {
    if (d < 0) {
      usage("recv: negative dimension in shape");
    }
  }
  return recv_impl(dims, recv_dtype(dtype), src, group, "recv");
}

py::array recv_like(const py::object& x, int src, const py::object& group) {
  py::array like = as_array(x, "recv_like");
  return recv_impl(shape_of(like), like.dtype(), src, group, "recv_like");
}

void barrier(const py::object& group) {
  auto g = resolve_group(group);
  g->run([](Group& grp) { grp.barrier(); });
}

py::array broadcast(const py::object& x, int root, const py::object& group) {
  auto g = resolve_group(group);
  check_peer(*g, root, "broadcast", "root", true);
  py::array in = as_array(x, "broadcast");
  jaccl_dtype(in.dtype(), py::none(), "broadcast");
  py::array out = empty_like(in);
  size_t n = nbytes(in);
  if (n == 0) {
    return out;
  }
  if (g->rank() == root) {
    // numpy's allocations land anywhere mod 4096: copy_bytes steps around
    // the rep movsb cliff (common/copy.h).
    jaccl::detail::copy_bytes(out.mutable_data(), in.data(), n);
  }
  void* buf = out.mutable_data();
  g->run([&](Group& grp) { grp.broadcast(buf, n, root); });
  return out;
}

// Bytes of one row along axis 0 (the product of the other axes).
size_t row_bytes(const py::array& a) {
  size_t b = static_cast<size_t>(a.itemsize());
  for (py::ssize_t d = 1; d < a.ndim(); ++d) {
    b *= static_cast<size_t>(a.shape(d));
  }
  return b;
}

py::array all_to_all(const py::object& x, const py::object& group) {
  auto g = resolve_group(group);
  py::array in = as_array(x, "all_to_all");
  jaccl_dtype(in.dtype(), py::none(), "all_to_all");
  auto shape = splittable_shape(in, g->size(), "all_to_all");
  py::array out(in.dtype(), shape);
  const size_t n = nbytes(in) / static_cast<size_t>(g->size());
  if (n == 0) {
    return out;
  }
  const void* src = in.data();
  void* dst = out.mutable_data();
  g->run([&](Group& grp) { grp.all_to_all(src, dst, n); });
  return out;
}

// Split sizes along axis 0 (rows), as byte counts; `rows` their sum.
std::vector<size_t> byte_counts(const std::vector<py::ssize_t>& split,
                                size_t row, int size, const char* what,
                                py::ssize_t* rows) {
  if (static_cast<int>(split.size()) != size) {
    usage("all_to_allv: " + std::to_string(split.size()) + " " + what +
          " for a group of size " + std::to_string(size) +
          " (want one per rank)");
  }
  std::vector<size_t> out;
  *rows = 0;
  for (py::ssize_t c : split) {
    if (c < 0) {
      usage(std::string("all_to_allv: negative entry in ") + what);
    }
    *rows += c;
    out.push_back(static_cast<size_t>(c) * row);
  }
  return out;
}

py::array all_to_allv(const py::object& x,
                      const std::vector<py::ssize_t>& send_counts,
                      const std::vector<py::ssize_t>& recv_counts,
                      const py::object& group) {
  auto g = resolve_group(group);
  py::array in = as_array(x, "all_to_allv");
  jaccl_dtype(in.dtype(), py::none(), "all_to_allv");
  auto shape = shape_of(in);
  if (shape.empty()) {
    usage("all_to_allv: x must have at least one axis (got a 0-d array)");
  }
  const size_t row = row_bytes(in);
  py::ssize_t sent = 0, got = 0;
  auto send = byte_counts(send_counts, row, g->size(), "send_counts", &sent);
  auto recv = byte_counts(recv_counts, row, g->size(), "recv_counts", &got);
  if (sent != shape[0]) {
    usage("all_to_allv: send_counts add up to " + std::to_string(sent) +
          " rows but x has " + std::to_string(shape[0]));
  }
  shape[0] = got;
  py::array out(in.dtype(), shape);
  const void* src = in.data();
  void* dst = out.mutable_data();
  g->run([&](Group& grp) { grp.all_to_allv(src, send, dst, recv); });
  return out;
}

}  // namespace

void bind_collectives(py::module_& m) {
  auto group = py::arg("group") = py::none();
  auto dtype = py::arg("dtype") = py::none();
  m.def(
      "all_sum",
      [](const py::object& x, const py::object& g, const py::object& dt) {
        return reduce(Op::Sum, x, g, dt, "all_sum");
      },
      py::arg("x"), py::kw_only(), group, dtype,
      "Element-wise sum over all ranks; returns a new array like x. "
      "dtype='bfloat16' treats uint16 data as bfloat16.");
  m.def(
      "all_max",
      [](const py::object& x, const py::object& g, const py::object& dt) {
        return reduce(Op::Max, x, g, dt, "all_max");
      },
      py::arg("x"), py::kw_only(), group, dtype,
      "Element-wise maximum over all ranks.");
  m.def(
      "all_min",
      [](const py::object& x, const py::object& g, const py::object& dt) {
        return reduce(Op::Min, x, g, dt, "all_min");
      },
      py::arg("x"), py::kw_only(), group, dtype,
      "Element-wise minimum over all ranks.");
  m.def("all_reduce", &all_reduce, py::arg("x"), py::arg("op") = "sum",
        py::kw_only(), group, dtype,
        "Element-wise reduction over all ranks with op: 'sum', 'max', "
        "'min', 'prod', 'bitand', 'bitor' or 'bitxor' (the bitwise ops take "
        "integer and bool arrays); returns a new array like x.");
  m.def("reduce", &rooted_reduce, py::arg("x"), py::arg("root"),
        py::arg("op") = "sum", py::kw_only(), group, dtype,
        "all_reduce whose result only root gets: root returns it, the other "
        "ranks None.");
  m.def("gather", &gather, py::arg("x"), py::arg("root"), py::kw_only(), group,
        "Every rank's x concatenated along axis 0 on root (as all_gather); "
        "the other ranks get None. Every rank passes the same shape.");
  m.def("scatter", &scatter, py::arg("x"), py::arg("root"), py::kw_only(),
        group,
        "root's x split in size() parts along axis 0; rank r gets part r. "
        "Every rank passes an array of the same shape and dtype; only root's "
        "content is used.");
  m.def("all_gather", &all_gather, py::arg("x"), py::kw_only(), group,
        "Every rank's x concatenated along axis 0, in rank order (a 0-d x "
        "gives shape (size,)).");
  m.def("sum_scatter", &sum_scatter, py::arg("x"), py::kw_only(), group, dtype,
        "x's axis 0 split in size() parts; returns this rank's part summed "
        "over all ranks.");
  m.def("send", &send, py::arg("x"), py::arg("dst"), py::kw_only(), group,
        "Sends x to rank dst (which must recv the same shape and dtype); "
        "returns x as an array.");
  m.def("recv", &recv, py::arg("shape"), py::arg("dtype"), py::arg("src"),
        py::kw_only(), group,
        "Receives an array of shape and dtype from rank src "
        "(dtype='bfloat16' gives the raw bits as uint16).");
  m.def("recv_like", &recv_like, py::arg("x"), py::arg("src"), py::kw_only(),
        group, "recv(x.shape, x.dtype, src).");
  m.def("barrier", &barrier, py::kw_only(), group,
        "Returns once every rank has called it.");
  m.def("broadcast", &broadcast, py::arg("x"), py::arg("root"), py::kw_only(),
        group,
        "Returns root's x on every rank (every rank passes an array of the "
        "same shape and dtype; only root's content is used).");
  m.def("all_to_all", &all_to_all, py::arg("x"), py::kw_only(), group,
        "x's axis 0 split in size() equal parts, part j sent to rank j; "
        "returns an array like x whose part i came from rank i.");
  m.def("all_to_allv", &all_to_allv, py::arg("x"), py::arg("send_counts"),
        py::arg("recv_counts"), py::kw_only(), group,
        "Variable all-to-all along axis 0 (torch's all_to_all_single with "
        "split sizes): send_counts[j] rows of x (in order) go to rank j; "
        "returns recv_counts[i] rows from each rank i, in rank order, shape "
        "(sum(recv_counts),) + x.shape[1:]. The counts are checked across "
        "ranks (ProtocolError naming the pair).");
}

}  // namespace jaccl::python
