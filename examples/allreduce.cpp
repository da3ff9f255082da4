// Copyright 2026 the jaccl authors.
// All-reduces a vector with jaccl and checks the result on every rank.
//
//   jaccl-run -n 4 -- ./allreduce [elements]
#include <jaccl/jaccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (1u << 20);
  try {
    auto group = jaccl::init(/*strict=*/true);
    int rank = group->rank(), size = group->size();

    // Rank r contributes x[i] = r + i % 7; the sum is size*(size-1)/2 +
    // size * (i % 7).
    std::vector<float> x(n), y(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(rank + i % 7);
    }
    group->all_sum(x.data(), y.data(), n * sizeof(float), jaccl::Float32);

    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      float want = size * (size - 1) / 2.0f + size * static_cast<float>(i % 7);
      if (std::fabs(y[i] - want) > 1e-3f) {
        ++wrong;
      }
    }
    group->barrier();
    if (wrong != 0) {
      std::printf("rank %d/%d: all_sum of %zu floats: %zu WRONG elements\n",
                  rank, size, n, wrong);
      return 1;
    }
    std::printf("rank %d/%d: all_sum of %zu floats over %s: OK\n", rank, size,
                n, group->backend_name());
    return 0;
  } catch (const jaccl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
