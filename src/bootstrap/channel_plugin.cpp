// Copyright 2026 the jaccl authors.
#include "bootstrap/channel_plugin.h"

#if JACCL_CHANNEL_PLUGINS

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "common/log.h"

namespace jaccl::detail {

namespace {

// The directory libjaccl was loaded from ("" if unknown).
std::string our_directory() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&channel_plugin), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

struct Loaded {
  const ChannelPlugin* table = nullptr;
  std::string why;
};

Loaded open_plugin(const std::string& name) {
  Loaded out;
  const std::string file = "libjaccl-" + name + ".so";
  const std::string beside = our_directory() + file;
  // RTLD_GLOBAL: Open MPI and PMIx open their own components, which expect
  // the library's symbols in the global scope. The plugin exports nothing
  // else (its code is hidden), so nothing of ours is shadowed.
  void* h = ::dlopen(beside.c_str(), RTLD_NOW | RTLD_GLOBAL);
  std::string first = h == nullptr ? ::dlerror() : "";
  if (h == nullptr) {
    h = ::dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);  // the loader's path
  }
  if (h == nullptr) {
    out.why = "cannot open the plugin " + beside + " (" + first + ")";
    return out;
  }
  const std::string entry = "jaccl_" + name + "_plugin";
  using Entry = const ChannelPlugin* (*)();
  auto fn = reinterpret_cast<Entry>(::dlsym(h, entry.c_str()));
  const ChannelPlugin* t = fn != nullptr ? fn() : nullptr;
  if (t == nullptr || t->abi != kChannelPluginAbi ||
      t->bytes != sizeof(ChannelPlugin)) {
    out.why = "the plugin " + file + " is not of this libjaccl (no " + entry +
              " of ABI " + std::to_string(kChannelPluginAbi) +
              "): install the libjaccl and plugins of one build";
    return out;
  }
  JACCL_LOG(Debug, "side-channel plugin " << file << " loaded");
  out.table = t;
  return out;
}

}  // namespace

const ChannelPlugin* channel_plugin(const std::string& name, std::string* why) {
  static std::mutex mu;
  static std::map<std::string, Loaded> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it == cache.end()) {
    it = cache.emplace(name, open_plugin(name)).first;
  }
  if (it->second.table == nullptr && why != nullptr) {
    *why = it->second.why;
  }
  return it->second.table;
}

}  // namespace jaccl::detail

#endif  // JACCL_CHANNEL_PLUGINS
