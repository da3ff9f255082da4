// Copyright 2026 the jaccl authors.
#include "transport/rdma_devices.h"

#include <dirent.h>

#include <array>
#include <cstring>

namespace jaccl::detail {

namespace {

// Name prefixes of device nodes in one directory ("" matches every entry but
// . and ..; nullptr: unused).
using Prefixes = std::array<const char*, 2>;

// The first entry of dir (in directory order) whose name starts with one of
// prefixes, as a path; "" if none or dir cannot be read. One pass over dir.
std::string first_entry(const std::string& dir, const Prefixes& prefixes) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return "";
  }
  std::string found;
  while (found.empty()) {
    const dirent* e = ::readdir(d);
    if (e == nullptr) {
      break;
    }
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) {
      continue;
    }
    for (const char* prefix : prefixes) {
      if (prefix != nullptr &&
          std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0) {
        found = dir + "/" + e->d_name;
        break;
      }
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
    Prefixes prefixes;
  };
  static const Place kPlaces[] = {
      {"/sys/class/infiniband", {"", nullptr}},  // verbs, efa, psm3, hfi1, rxe
      {"/dev", {"hfi1_", "cxi"}},                // psm2, opx; cxi
      {"/sys/class/cxi", {"", nullptr}},         // cxi
  };
  for (const Place& p : kPlaces) {
    std::string f = first_entry(r + p.dir, p.prefixes);
    if (!f.empty()) {
      return f.substr(r.size());
    }
  }
  return "";
}

}  // namespace jaccl::detail
