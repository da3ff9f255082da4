// Copyright 2026 the jaccl authors.
#include "jaccl/types.h"

namespace jaccl {

const char* dtype_name(int dtype) noexcept {
  switch (dtype) {
    case Bool:
      return "bool";
    case Int8:
      return "int8";
    case Int16:
      return "int16";
    case Int32:
      return "int32";
    case Int64:
      return "int64";
    case UInt8:
      return "uint8";
    case UInt16:
      return "uint16";
    case UInt32:
      return "uint32";
    case UInt64:
      return "uint64";
    case Float16:
      return "float16";
    case BFloat16:
      return "bfloat16";
    case Float32:
      return "float32";
    case Float64:
      return "float64";
    case Complex64:
      return "complex64";
    default:
      return "unknown";
  }
}

}  // namespace jaccl
