// Code written for MLX's standalone JACCL headers, built against the
// installed jaccl package: a one-rank group over a user all-gather.
#include <jaccl/jaccl.h>
#include <jaccl/types.h>

#include <cstdio>
#include <cstring>

int main() {
  auto cfg = jaccl::Config().set_rank(0).set_size(1).set_all_gather(
      [](const char* src, char* dst, size_t n) { std::memcpy(dst, src, n); });
  auto group = jaccl::init(cfg, true);
  jaccl::float16_t x[2] = {1.5f, 2.5f}, y[2];
  group->all_sum(x, y, sizeof(x), jaccl::Float16);
  if (static_cast<float>(y[1]) != 2.5f || group->size() != 1) {
    std::printf("wrong result\n");
    return 1;
  }
  std::printf("consumer OK\n");
  return 0;
}
