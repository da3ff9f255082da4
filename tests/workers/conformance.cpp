// Copyright 2026 the jaccl authors.
// One rank of the conformance suite across processes: the group
// conformance checks (support/group_conformance.h, the same ones the
// in-process suite runs on every group kind) over a matrix of dtypes, sizes
// and in-place variants, each result checked against a reference computed
// independently of the library's reduction kernels.
//
// Environment: JACCL_* (Config::from_env); CONF_MATRIX = full | reduced | big;
// CONF_DIR a directory shared by the ranks (barrier check); TEST_SIDE_DIR, if
// set, bootstraps through a shared-directory all-gather factory instead of
// the TCP coordinator.
//
// Prints "FAIL <check>: ..." for the first mismatches and one line
// "SUMMARY rank=R size=N backend=B checks=C failures=F"; exits 0 when every
// check passed, 1 on a mismatch, 2 on an exception ("ERROR <kind> during
// <check>: <what>").
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "jaccl/jaccl.h"
#include "support/dir_allgather.h"
#include "support/group_conformance.h"

using jaccl::test::group_conformance::Ctx;
using jaccl::test::group_conformance::run_huge;
using jaccl::test::group_conformance::run_matrix;

int main() {
  const char* matrix_env = std::getenv("CONF_MATRIX");
  const std::string matrix = matrix_env ? matrix_env : "full";
  const char* dir_env = std::getenv("CONF_DIR");
  std::string current = "init";
  try {
    jaccl::Config cfg = jaccl::Config::from_env();
    if (const char* side = std::getenv("TEST_SIDE_DIR")) {
      std::string dir = side;
      cfg.set_all_gather_factory([dir](int rank, int size) {
        return jaccl::test::dir_all_gather(dir, rank, size);
      });
    }
    auto group = jaccl::init(cfg, true);
    Ctx c{.g = *group,
          .rank = group->rank(),
          .size = group->size(),
          .dir = dir_env ? dir_env : "/tmp",
          .on_fail = [](const std::string& what) {
            std::cout << "FAIL " << what << std::endl;
          }};
    try {
      if (matrix == "big") {
        run_huge(c);
      } else {
        run_matrix(c, matrix == "full");
      }
    } catch (...) {
      current = c.current;
      throw;
    }
    std::cout << "SUMMARY rank=" << c.rank << " size=" << c.size
              << " backend=" << group->backend_name() << " checks=" << c.checks
              << " failures=" << c.failures << " digest=" << std::hex
              << c.digest << std::dec << std::endl;
    return c.failures == 0 ? 0 : 1;
  } catch (const jaccl::Error& e) {
    std::cout << "ERROR " << jaccl::to_string(e.kind()) << " during " << current
              << ": " << e.what() << std::endl;
  } catch (const std::exception& e) {
    std::cout << "ERROR std::exception during " << current << ": " << e.what()
              << std::endl;
  }
  return 2;
}
