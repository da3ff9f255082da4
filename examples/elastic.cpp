// Copyright 2026 the jaccl authors.
// Carrying on after a rank dies (docs/failures.md, "Elastic groups"): a
// loop of all_sums that, when a step fails, revokes the group, agrees on
// who failed, shrinks to the survivors and repeats the step on them.
//
//   elastic [steps] [crash_rank] [crash_step]
//
// crash_rank leaves at the start of crash_step without closing its group,
// as a crash would (default: none). The group's rank 0 prints each step.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "jaccl/jaccl.h"

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 6;
  const int crash_rank = argc > 2 ? std::atoi(argv[2]) : -1;
  const int crash_step = argc > 3 ? std::atoi(argv[3]) : -1;
  std::shared_ptr<jaccl::Group> group = jaccl::init(/*strict=*/true);
  const int job_rank = group->rank();
  for (int step = 0; step < steps;) {
    if (job_rank == crash_rank && step == crash_step) {
      std::_Exit(9);  // no goodbye: the others see a crash
    }
    try {
      float mine = static_cast<float>(job_rank + 1), sum = 0;
      group->all_sum(&mine, &sum, sizeof(float), jaccl::Float32);
      if (group->rank() == 0) {
        std::printf("step %d: %d ranks, sum %g\n", step, group->size(), sum);
      }
      ++step;
    } catch (const jaccl::Error& e) {
      if (e.kind() != jaccl::ErrorKind::PeerLost &&
          e.kind() != jaccl::ErrorKind::Revoked) {
        throw;  // not a lost peer: a bug to fix, not to survive
      }
      group->revoke();  // every member stops, also one that is idle
      std::vector<int> failed = group->agree_failed();  // the same everywhere
      group = group->shrink();  // the survivors, numbered in the old order
      if (group->rank() == 0) {
        std::printf("step %d failed: %zu rank(s) lost, carrying on with %d\n",
                    step, failed.size(), group->size());
      }
    }
  }
  return 0;
}
