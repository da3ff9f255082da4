// Copyright 2026 the jaccl authors.
#include "support/thread_ranks.h"

#include <chrono>
#include <exception>
#include <memory>
#include <thread>

#include "bootstrap/in_process.h"

namespace jaccl::test {

namespace {

// f(r) on one thread per rank; each rank's error ("Kind: what").
std::vector<std::string> on_threads(int n, const std::function<void(int)>& f) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const auto ur = static_cast<size_t>(r);
      try {
        f(r);
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
  return errors;
}

}  // namespace

std::vector<std::string> run_thread_ranks(
    int n, const std::function<Config(int)>& config,
    const std::function<void(int, Group&)>& body) {
  auto hub = detail::InProcessHub::create(n, std::chrono::milliseconds(60000));
  std::vector<std::shared_ptr<Group>> groups(static_cast<size_t>(n));
  auto errors = on_threads(n, [&](int r) {
    const auto ur = static_cast<size_t>(r);
    Config cfg = config(r);
    cfg.set_rank(r).set_size(n).set_all_gather_factory(hub->factory());
    groups[ur] = init(cfg, true);
    body(r, *groups[ur]);
  });
  groups.clear();
  return errors;
}

std::vector<std::string> run_on_groups(
    const std::vector<std::shared_ptr<Group>>& groups,
    const std::function<void(int, Group&)>& body) {
  return on_threads(static_cast<int>(groups.size()),
                    [&](int r) { body(r, *groups[static_cast<size_t>(r)]); });
}

}  // namespace jaccl::test
