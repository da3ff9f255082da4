// Copyright 2026 the jaccl authors.
// The C++ API in one program (docs/cpp-api.md shows it piece by piece):
// configuration, collectives, all-to-all, split and errors. Run it on 4 ranks:
//
//   build/tools/jaccl-run -n 4 -- build/examples/api_tour
#include <jaccl/jaccl.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace {

// A Config from the environment with a few settings changed. Setters never
// throw: problems are recorded and named by invalid_reason().
jaccl::Config config_from_launcher() {
  // [config]
  // The environment's values (JACCL_RANK, JACCL_SIZE, JACCL_COORDINATOR,
  // JACCL_TOKEN ... as jaccl-run sets them), then ours on top.
  auto cfg = jaccl::Config::from_env()
                 .set_timeout(std::chrono::seconds(30))
                 .set_op_timeout(std::chrono::minutes(5))
                 .set_heartbeat_timeout(std::chrono::seconds(5));
  if (!cfg.is_valid()) {
    std::fprintf(stderr, "bad config: %s\n", cfg.invalid_reason().c_str());
    std::exit(2);
  }
  // [config]
  return cfg;
}

}  // namespace

int main() {
  auto cfg = config_from_launcher();
  try {
    auto group = jaccl::init(cfg, /*strict=*/true);
    int rank = group->rank(), size = group->size();
    if (rank == 0) {
      // [invalid]
      auto bad = jaccl::Config().set_rank("two").set_size(4).set_coordinator(
          "10.0.0.1:5000");
      std::printf("invalid: %s\n", bad.invalid_reason().c_str());
      // [invalid]
    }

    // [collectives]
    std::vector<float> x(1024, float(rank)), sum(1024);
    group->all_sum(x.data(), sum.data(), x.size() * sizeof(float),
                   jaccl::Float32);
    std::vector<int> mine{rank}, everyone(size);
    group->all_gather(mine.data(), everyone.data(), sizeof(int));
    int root_value = rank == 0 ? 42 : -1;
    group->broadcast(&root_value, sizeof(int), /*root=*/0);
    if (rank == 0) {
      group->send(&root_value, sizeof(int), /*dst=*/1);
    } else if (rank == 1) {
      group->recv(&root_value, sizeof(int), /*src=*/0);
    }
    group->barrier();
    // [collectives]

    // [all_to_all]
    // Block j of the input goes to rank j; block i of the output came from
    // rank i.
    std::vector<int> in(size), out(size);
    for (int j = 0; j < size; ++j)
      in[j] = 100 * rank + j;
    group->all_to_all(in.data(), out.data(), sizeof(int));
    // Variable sizes (MoE token routing): rank r sends j + 1 ints to rank j,
    // so it receives r + 1 ints from every rank. Counts are in bytes.
    std::vector<size_t> send_counts(size), recv_counts(size, (rank + 1) * 4);
    for (int j = 0; j < size; ++j)
      send_counts[j] = (j + 1) * 4;
    std::vector<int> vin(
        std::accumulate(send_counts.begin(), send_counts.end(), size_t{0}) / 4,
        rank);
    std::vector<int> vout(size * (rank + 1));
    group->all_to_allv(vin.data(), send_counts, vout.data(), recv_counts);
    // [all_to_all]

    // [split]
    auto row = group->split(rank / 2);  // {0,1} and {2,3}
    auto col = group->split(rank % 2);  // {0,2} and {1,3}
    auto some = group->split(rank == 3 ? -1 : 0, /*key=*/-1);  // nullptr on 3
    // [split]
    float row_sum = 0, one = 1;
    row->all_sum(&one, &row_sum, sizeof(float), jaccl::Float32);

    // [errors]
    try {
      group->all_sum(x.data(), sum.data(), 3, jaccl::Float32);  // not 4n bytes
    } catch (const jaccl::UsageError& e) {
      // Thrown before any byte moves: the group keeps working.
      if (rank == 0)
        std::printf("usage error: %s\n", e.what());
    }
    // [errors]

    bool ok = sum[0] == size * (size - 1) / 2.0f &&
              everyone[size - 1] == size - 1 && root_value == 42 &&
              out[0] == rank && vout.back() == size - 1 && row_sum == 2 &&
              col->size() == 2 && (some == nullptr) == (rank == 3);
    std::printf("rank %d/%d: api tour over %s, row %s: %s\n", rank, size,
                group->backend_name(), row->backend_name(),
                ok ? "OK" : "WRONG");
    return ok ? 0 : 1;
  } catch (const jaccl::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
