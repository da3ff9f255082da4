// Copyright 2026 the jaccl authors.
// One rank of the side-channel conformance checks over mpi://, started by
// `mpirun -n N sc_mpi`. Rank and size come from MPI. Prints
// "sc_mpi rank R of N ok" and exits 0, or prints the failure and exits 1.
#include <chrono>
#include <cstdio>
#include <exception>

#include "../support/side_channel_conformance.h"
#include "bootstrap/mpi_channel.h"
#include "bootstrap/uri.h"

int main() {
  using namespace jaccl;
  int rank = -1, size = 0;
  try {
    if (!detail::mpi_rank_size(&rank, &size)) {
      std::printf("sc_mpi: this build has no MPI side channel\n");
      return 2;
    }
    detail::SideChannelSpec spec;
    spec.uri = "mpi://";
    AllGatherFn fn = detail::make_side_channel_from_uri(spec);
    test::conformance::run_rank_checks(fn, rank, size,
                                       std::chrono::milliseconds(30000));
    // A given rank/size that disagrees with MPI is a ConfigError.
    try {
      detail::make_side_channel_from_uri(
          {"mpi://", (rank + 1) % size, size, "", "", {}});
      if (size > 1) {
        std::printf("sc_mpi rank %d: a wrong rank was accepted\n", rank);
        return 1;
      }
    } catch (const ConfigError&) {
    }
    std::printf("sc_mpi rank %d of %d ok\n", rank, size);
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::printf("sc_mpi rank %d: FAILED: %s\n", rank, e.what());
    std::fflush(stdout);
    return 1;
  }
}
