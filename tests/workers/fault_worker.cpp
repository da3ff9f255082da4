// Copyright 2026 the jaccl authors.
// One rank of a fault test.
//
//   fault_worker loop      all_sum in a loop until an error (or 60 s); prints
//                          "READY", then "LOOPING" after a few iterations
//   fault_worker once      FAULT_ITERS (default 3) checked all_sums and a
//                          barrier; prints "OK rank=R backend=B"
//   fault_worker mismatch  rank FAULT_ODD (default 1) calls all_gather while
//                          the others call all_sum
//
// On a jaccl error every mode prints "ERROR <kind> <class> | <what>", then
// tries another all_sum and a barrier ("AGAIN <kind> | <what>" each, or
// "AGAIN none"), destroys the group, prints "DESTROYED" and exits 3. Exit 4:
// no error where one was expected (loop, mismatch); 1: a wrong result.
//
// Environment: JACCL_*; FAULT_BYTES (all_sum size, default 256 KiB);
// FAULT_SALT (mixed into the data so concurrent jobs differ); TEST_SIDE_DIR:
// bootstrap through a shared-directory all-gather factory instead of the TCP
// coordinator; then TEST_HOLD_FILE: once this process has a listening socket,
// each side-channel call waits for that file ("HELD" is printed first).
// TEST_RELEASE_FILE: after init print "HOLDING" and wait for that file.
// Always printed after init: "SETUP_MAX_LISTEN n" (most listening sockets
// seen at any side-channel call, factory mode only) and "LISTEN_NOW n".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "jaccl/jaccl.h"
#include "support/dir_allgather.h"
#include "support/listen_sockets.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

int g_max_listen = -1;

void wait_for_file(const char* path) {
  auto until = std::chrono::steady_clock::now() + 60s;
  while (!fs::exists(path) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
}

// Before each side-channel call: track the most listening sockets seen and,
// with TEST_HOLD_FILE, hold once this process listens.
void before_side_call() {
  const int listening = jaccl::test::listen_sockets_of();
  g_max_listen = std::max(g_max_listen, listening);
  const char* hold = std::getenv("TEST_HOLD_FILE");
  if (hold != nullptr && listening > 0 && !fs::exists(hold)) {
    std::cout << "HELD" << std::endl;
    wait_for_file(hold);
  }
}

size_t env_size(const char* name, size_t dflt) {
  const char* v = std::getenv(name);
  return v ? static_cast<size_t>(std::strtoull(v, nullptr, 10)) : dflt;
}

const char* class_of(const jaccl::Error& e) {
  if (dynamic_cast<const jaccl::PeerLostError*>(&e))
    return "PeerLostError";
  if (dynamic_cast<const jaccl::TimeoutError*>(&e))
    return "TimeoutError";
  if (dynamic_cast<const jaccl::ProtocolError*>(&e))
    return "ProtocolError";
  if (dynamic_cast<const jaccl::ConfigError*>(&e))
    return "ConfigError";
  if (dynamic_cast<const jaccl::IoError*>(&e))
    return "IoError";
  if (dynamic_cast<const jaccl::UsageError*>(&e))
    return "UsageError";
  return "Error";
}

// One all_sum of float32 whose exact result is known; false if wrong.
bool checked_sum(jaccl::Group& g, size_t bytes, int salt) {
  const size_t count = bytes / 4;
  std::vector<float> in(count), out(count);
  for (size_t i = 0; i < count; ++i) {
    in[i] = static_cast<float>(g.rank() + salt + static_cast<int>(i % 7));
  }
  g.all_sum(in.data(), out.data(), count * 4, jaccl::Float32);
  const int n = g.size();
  for (size_t i = 0; i < count; ++i) {
    float want = static_cast<float>(n * (n - 1) / 2 +
                                    n * (salt + static_cast<int>(i % 7)));
    if (out[i] != want) {
      std::cout << "WRONG at " << i << ": got " << out[i] << ", want " << want
                << std::endl;
      return false;
    }
  }
  return true;
}

// After the first error: the group must refuse more work, with that error.
int after_error(std::shared_ptr<jaccl::Group>& group, const jaccl::Error& e) {
  std::cout << "ERROR " << jaccl::to_string(e.kind()) << " " << class_of(e)
            << " | " << e.what() << std::endl;
  auto again = [&](const char* what, auto&& fn) {
    try {
      fn();
      std::cout << "AGAIN none (" << what << " succeeded)" << std::endl;
    } catch (const jaccl::Error& e2) {
      std::cout << "AGAIN " << jaccl::to_string(e2.kind()) << " | " << e2.what()
                << std::endl;
    }
  };
  std::vector<float> buf(16);
  again("all_sum",
        [&] { group->all_sum(buf.data(), buf.data(), 64, jaccl::Float32); });
  again("barrier", [&] { group->barrier(); });
  group.reset();
  std::cout << "DESTROYED" << std::endl;
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "once";
  std::shared_ptr<jaccl::Group> group;
  try {
    jaccl::Config cfg = jaccl::Config::from_env();
    if (const char* side = std::getenv("TEST_SIDE_DIR")) {
      std::string dir = side;
      cfg.set_all_gather_factory([dir](int rank, int size) {
        return jaccl::test::dir_all_gather(dir, rank, size, 60s,
                                           before_side_call);
      });
    }
    group = jaccl::init(cfg, true);
  } catch (const jaccl::Error& e) {
    std::cout << "ERROR " << jaccl::to_string(e.kind()) << " " << class_of(e)
              << " | " << e.what() << std::endl;
    return 3;
  }
  std::cout << "SETUP_MAX_LISTEN " << g_max_listen << std::endl;
  std::cout << "LISTEN_NOW " << jaccl::test::listen_sockets_of() << std::endl;
  std::cout << "READY rank=" << group->rank()
            << " backend=" << group->backend_name() << std::endl;
  if (const char* release = std::getenv("TEST_RELEASE_FILE")) {
    std::cout << "HOLDING" << std::endl;
    wait_for_file(release);
  }
  const size_t bytes = env_size("FAULT_BYTES", 256 << 10) / 4 * 4;
  const int salt = static_cast<int>(env_size("FAULT_SALT", 0));
  try {
    if (mode == "loop") {
      auto until = std::chrono::steady_clock::now() + 60s;
      for (long it = 0; std::chrono::steady_clock::now() < until; ++it) {
        if (!checked_sum(*group, it % 2 ? bytes : 64, salt))
          return 1;
        if (it == 20)
          std::cout << "LOOPING" << std::endl;
      }
      std::cout << "NO_ERROR" << std::endl;
      return 4;
    }
    if (mode == "mismatch") {
      const int odd = static_cast<int>(env_size("FAULT_ODD", 1));
      checked_sum(*group, 64, salt);  // everyone is connected and in step
      std::vector<char> in(bytes), out(bytes * group->size());
      if (group->rank() == odd) {
        group->all_gather(in.data(), out.data(), bytes);
      } else {
        group->all_sum(in.data(), in.data(), bytes, jaccl::Float32);
      }
      std::cout << "NO_ERROR" << std::endl;
      return 4;
    }
    const size_t iters = env_size("FAULT_ITERS", 3);
    for (size_t it = 0; it < iters; ++it) {
      if (!checked_sum(*group, it % 2 ? bytes : 64, salt + int(it)))
        return 1;
    }
    group->barrier();
    std::cout << "OK rank=" << group->rank()
              << " backend=" << group->backend_name() << std::endl;
    group.reset();
    return 0;
  } catch (const jaccl::Error& e) {
    return after_error(group, e);
  }
}
