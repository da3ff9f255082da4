// Every rank all-sums four floats: jaccl-run -n 4 -- build/examples/hello
#include <jaccl/jaccl.h>

#include <cstdio>

int main() {
  auto group = jaccl::init(/*strict=*/true);  // rank, size, coordinator: env
  float x[4] = {1, 2, 3, float(group->rank())}, y[4];
  group->all_sum(x, y, sizeof(x), jaccl::Float32);
  std::printf("rank %d of %d: y = %g %g %g %g over %s\n", group->rank(),
              group->size(), y[0], y[1], y[2], y[3], group->backend_name());
}
