// Copyright 2026 the jaccl authors.
// One rank of the pmix:// side-channel checks, started by a PMIx launcher
// (`mpirun -n N sc_pmix`, `srun --mpi=pmix -n N sc_pmix`). Rank and size
// come from PMIx; MPI is never called.
//
//   sc_pmix               the conformance checks (side_channel_conformance.h)
//                         through make_side_channel_from_uri("pmix://"), and
//                         a given rank that disagrees with PMIx is a
//                         ConfigError, and Config::set_side_channel("pmix://")
//                         alone fills in rank and size. Prints "sc_pmix rank
//                         R of N ok".
//   sc_pmix stall DIR     the last rank never joins the first call; the
//                         others (1 s timeout) must get a TimeoutError that
//                         names pmix://, and a second call must fail at once.
//                         They print "sc_pmix rank R timeout: <what>" and
//                         create DIR/done.R; the last rank waits (bounded)
//                         for those files and exits.
//
// Exits 0 when the checks passed, 1 on a failure, 2 without PMIx.
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "../support/side_channel_conformance.h"
#include "bootstrap/pmix_channel.h"
#include "bootstrap/uri.h"
#include "jaccl/jaccl.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

int stall(int rank, int size, const std::string& dir) {
  using namespace jaccl;
  if (rank == size - 1) {
    // Never joins; leaves once every other rank has reported (at most 60 s).
    const auto until = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      int done = 0;
      for (int r = 0; r + 1 < size; ++r) {
        done += fs::exists(dir + "/done." + std::to_string(r)) ? 1 : 0;
      }
      if (done == size - 1) {
        std::printf("sc_pmix rank %d: stayed away\n", rank);
        return 0;
      }
      if (std::chrono::steady_clock::now() > until) {
        std::printf("sc_pmix rank %d: the others never reported\n", rank);
        return 1;
      }
      std::this_thread::sleep_for(20ms);
    }
  }
  detail::SideChannelSpec spec;
  spec.uri = "pmix://";
  spec.timeout = 1000ms;
  AllGatherFn fn = detail::make_side_channel_from_uri(spec);
  char in[8] = {}, out[8 * 64] = {};
  int status = 1;
  try {
    fn(in, out, sizeof(in));
    std::printf("sc_pmix rank %d: the call returned without rank %d\n", rank,
                size - 1);
  } catch (const TimeoutError& e) {
    std::printf("sc_pmix rank %d timeout: %s\n", rank, e.what());
    // Broken after a timeout: the next call fails at once, naming the
    // first failure, instead of waiting for a fence again (which would
    // end in a second TimeoutError). Judged by the error, not a clock: a
    // loaded machine can hold a process past any bound.
    try {
      fn(in, out, sizeof(in));
      std::printf("sc_pmix rank %d: a call after the timeout worked\n", rank);
    } catch (const TimeoutError& again) {
      std::printf(
          "sc_pmix rank %d: a call after the timeout waited again: %s\n", rank,
          again.what());
    } catch (const Error& again) {
      std::printf("sc_pmix rank %d after timeout: %s\n", rank, again.what());
      status = 0;
    }
  }
  std::fflush(stdout);
  std::ofstream(dir + "/done." + std::to_string(rank)) << "x";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace jaccl;
  int rank = -1, size = 0;
  try {
    if (!detail::pmix_channel_built()) {
      std::printf("sc_pmix: this build has no PMIx side channel\n");
      return 2;
    }
    if (!detail::pmix_rank_size(&rank, &size)) {
      std::printf("sc_pmix: not started by a PMIx launcher\n");
      return 2;
    }
    if (argc == 3 && std::string(argv[1]) == "stall") {
      return stall(rank, size, argv[2]);
    }
    detail::SideChannelSpec spec;
    spec.uri = "pmix://";
    spec.timeout = 30000ms;
    AllGatherFn fn = detail::make_side_channel_from_uri(spec);
    test::conformance::run_rank_checks(fn, rank, size, spec.timeout);
    // A second channel lives beside the first (keys namespaced per channel).
    AllGatherFn second = detail::make_side_channel_from_uri(spec);
    test::conformance::check_rank_order(second, rank, size);
    test::conformance::check_repeated(fn, rank, size, 3);
    // A given rank/size that disagrees with PMIx is a ConfigError.
    try {
      detail::make_side_channel_from_uri(
          {"pmix://", (rank + 1) % size, size, "", "", 30000ms});
      if (size > 1) {
        std::printf("sc_pmix rank %d: a wrong rank was accepted\n", rank);
        return 1;
      }
    } catch (const ConfigError& e) {
      if (std::string(e.what()).find("PMIx") == std::string::npos) {
        std::printf("sc_pmix rank %d: error does not name PMIx: %s\n", rank,
                    e.what());
        return 1;
      }
    }
    // Config::set_side_channel("pmix://") alone gives rank and size.
    Config cfg;
    cfg.set_side_channel("pmix://");
    if (cfg.get_rank() != rank || cfg.get_size() != size) {
      std::printf("sc_pmix rank %d: set_side_channel gave rank %d of %d\n",
                  rank, cfg.get_rank(), cfg.get_size());
      return 1;
    }
    std::printf("sc_pmix rank %d of %d ok\n", rank, size);
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::printf("sc_pmix rank %d: FAILED: %s\n", rank, e.what());
    std::fflush(stdout);
    return 1;
  }
}
