// Copyright 2026 the jaccl authors.
// libfabric is opened with dlopen on first use instead of being linked.
// Why: Debian's libfabric links the psm provider's libinfinipath, whose
// load-time constructor installs SIGINT and SIGILL handlers that exit(1), so
// every program linking libjaccl (Python included) lost its own Ctrl-C even
// when it never used ofi. Loading late, and restoring any signal disposition
// the load changed, keeps the process's signals its own. Only six libfabric
// entry points are real symbols; the rest are inline calls through the
// objects' ops tables, so nothing else needs resolving.
#pragma once

#if JACCL_HAVE_OFI

#include <rdma/fabric.h>

#include <string>

namespace jaccl::detail::ofi {

struct Lib {
  decltype(&::fi_getinfo) getinfo = nullptr;
  decltype(&::fi_freeinfo) freeinfo = nullptr;
  decltype(&::fi_dupinfo) dupinfo = nullptr;  // dupinfo(nullptr): allocinfo
  decltype(&::fi_fabric) fabric = nullptr;
  decltype(&::fi_strerror) strerror = nullptr;
  decltype(&::fi_version) version = nullptr;  // may be absent: nullptr
};

// The loaded library, or nullptr with *why saying what failed (dlerror).
// Loaded once per process; thread-safe.
const Lib* try_lib(std::string* why);
// The same; a ConfigError naming rank and the package to install when
// libfabric cannot be loaded.
const Lib& lib(int rank = -1);

}  // namespace jaccl::detail::ofi

#endif  // JACCL_HAVE_OFI
