// Copyright 2026 the jaccl authors.
#include "transport/rdma_devices.h"

#include <dirent.h>

#include <cstring>

namespace jaccl::detail {

namespace {

// The first entry of dir whose name starts with prefix ("" matches every
// entry but . and ..), as a path; "" if none or dir cannot be read.
std::string first_entry(const std::string& dir, const char* prefix) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return "";
  }
  std::string found;
  const size_t n = std::strlen(prefix);
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) {
      continue;
    }
    if (std::strncmp(e->d_name, prefix, n) == 0) {
      found = dir + "/" + e->d_name;
      break;
    }
  }
  ::closedir(d);
  return found;
}

}  // namespace

std::string find_rdma_device(const std::string& root) {
  const std::string r = root.empty() || root.back() != '/'
                            ? root
                            : root.substr(0, root.size() - 1);
  struct Place {
    const char* dir;
    const char* prefix;
  };
  static const Place kPlaces[] = {
      {"/sys/class/infiniband", ""},  // verbs, efa, psm3, hfi1, rxe
      {"/dev", "hfi1_"},              // psm2, opx
      {"/dev", "cxi"},                // cxi
      {"/sys/class/cxi", ""},         // cxi
  };
  for (const Place& p : kPlaces) {
    std::string f = first_entry(r + p.dir, p.prefix);
    if (!f.empty()) {
      return f.substr(r.size());
    }
  }
  return "";
}

}  // namespace jaccl::detail
