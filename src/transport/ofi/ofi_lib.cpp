// Copyright 2026 the jaccl authors.
#include "transport/ofi/ofi_lib.h"

#if JACCL_HAVE_OFI

#include <dlfcn.h>
#include <signal.h>

#include <array>
#include <mutex>

#include "common/error.h"

namespace jaccl::detail::ofi {

namespace {

struct Loaded {
  Lib lib;
  bool ok = false;
  std::string why;
};

template <typename F>
bool resolve(void* h, const char* name, F& out, std::string& why) {
  out = reinterpret_cast<F>(::dlsym(h, name));
  if (out == nullptr) {
    why = std::string("libfabric.so.1 has no ") + name;
    return false;
  }
  return true;
}

Loaded load() {
  Loaded l;
  // Save every disposition, load, put back what the load changed.
  std::array<struct sigaction, NSIG> saved{};
  for (int s = 1; s < NSIG; ++s) {
    ::sigaction(s, nullptr, &saved[static_cast<size_t>(s)]);
  }
  // RTLD_LOCAL: libfabric's symbols stay out of the global namespace, so a
  // program with its own libfabric is not disturbed. Never unloaded.
  void* h = ::dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
  for (int s = 1; s < NSIG; ++s) {
    struct sigaction now {};
    ::sigaction(s, nullptr, &now);
    if (now.sa_handler != saved[static_cast<size_t>(s)].sa_handler) {
      ::sigaction(s, &saved[static_cast<size_t>(s)], nullptr);
    }
  }
  if (h == nullptr) {
    const char* e = ::dlerror();
    l.why = e != nullptr ? e : "dlopen(libfabric.so.1) failed";
    return l;
  }
  l.ok = resolve(h, "fi_getinfo", l.lib.getinfo, l.why) &&
         resolve(h, "fi_freeinfo", l.lib.freeinfo, l.why) &&
         resolve(h, "fi_dupinfo", l.lib.dupinfo, l.why) &&
         resolve(h, "fi_fabric", l.lib.fabric, l.why) &&
         resolve(h, "fi_strerror", l.lib.strerror, l.why);
  // Optional: only the shm lock rescue asks for the version.
  l.lib.version =
      reinterpret_cast<decltype(l.lib.version)>(::dlsym(h, "fi_version"));
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const Lib* try_lib(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok && why != nullptr) {
    *why = l.why;
  }
  return l.ok ? &l.lib : nullptr;
}

const Lib& lib(int rank) {
  std::string why;
  const Lib* l = try_lib(&why);
  if (l == nullptr) {
    raise(ErrorKind::Config,
          "the ofi transport cannot load libfabric (" + why +
              "): install libfabric1 (Debian) or put libfabric.so.1 on the "
              "loader's path",
          {.rank = rank});
  }
  return *l;
}

}  // namespace jaccl::detail::ofi

#endif  // JACCL_HAVE_OFI
