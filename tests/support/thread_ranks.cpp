// Copyright 2026 the jaccl authors.
#include "support/thread_ranks.h"

#include <chrono>
#include <exception>
#include <memory>
#include <thread>

#include "bootstrap/in_process.h"

namespace jaccl::test {

std::vector<std::string> run_thread_ranks(
    int n, const std::function<Config(int)>& config,
    const std::function<void(int, Group&)>& body) {
  auto hub = detail::InProcessHub::create(n, std::chrono::milliseconds(60000));
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::shared_ptr<Group>> groups(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const auto ur = static_cast<size_t>(r);
      try {
        Config cfg = config(r);
        cfg.set_rank(r).set_size(n).set_all_gather_factory(hub->factory());
        groups[ur] = init(cfg, true);
        body(r, *groups[ur]);
      } catch (const Error& e) {
        errors[ur] = std::string(to_string(e.kind())) + ": " + e.what();
      } catch (const std::exception& e) {
        errors[ur] = e.what();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  groups.clear();
  return errors;
}

}  // namespace jaccl::test
