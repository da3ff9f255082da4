// Copyright 2026 the jaccl authors.
// One rank of a job that reports whether libnettle is mapped in its process:
// jaccl::init from JACCL_*, one all_sum, then /proc/self/maps. libjaccl opens
// libnettle only for a job token (common/crypto.h), so a tokenless job must
// never map it.
//
// Prints "SUM=<sum of rank+1>" and "CRYPTO_LIB=mapped" or "CRYPTO_LIB=absent";
// exits 0, or 2 on a jaccl error ("ERROR <kind>: <what>").
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>

#include "common/crypto.h"
#include "jaccl/jaccl.h"

int main() {
  try {
    auto group = jaccl::init(jaccl::Config::from_env(), true);
    int32_t in = group->rank() + 1, out = 0;
    group->all_sum(&in, &out, sizeof(in), jaccl::Int32);
    std::ifstream maps("/proc/self/maps");
    std::string line;
    bool mapped = false;
    while (std::getline(maps, line)) {
      mapped = mapped || line.find(jaccl::detail::crypto_library_name()) !=
                             std::string::npos;
    }
    std::cout << "SUM=" << out
              << "\nCRYPTO_LIB=" << (mapped ? "mapped" : "absent") << std::endl;
    return 0;
  } catch (const jaccl::Error& e) {
    std::cout << "ERROR " << jaccl::to_string(e.kind()) << ": " << e.what()
              << std::endl;
  }
  return 2;
}
