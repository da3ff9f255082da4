// Copyright 2026 the jaccl authors.
#include "store_all_gather.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "jaccl/error.h"

namespace jaccl_torch {
namespace {

std::string seconds(std::chrono::milliseconds d) {
  const auto ms = d.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s"
                        : std::to_string(ms) + " ms";
}

struct StoreChannel {
  c10::intrusive_ptr<c10d::Store> store;
  std::chrono::milliseconds timeout;
  int rank = 0;
  int size = 0;
  std::string ns;  // "jaccl/<instance>/"
  uint64_t calls = 0;

  std::string key(uint64_t call, int r) const {
    return ns + std::to_string(call) + "/" + std::to_string(r);
  }

  std::string prefix() const { return "[jaccl] rank " + std::to_string(rank); }

  void all_gather(const char* src, char* dst, size_t n) {
    const uint64_t call = calls++;
    store->set(key(call, rank), std::vector<uint8_t>(src, src + n));
    // jaccl cannot interrupt a user all-gather (it runs on the caller's
    // thread), so this one carries its own deadline, a little under jaccl's
    // so that its error, which names the missing ranks, comes first. Polled
    // with check(), not Store::wait: an expired TCPStore wait leaves its
    // reply in the socket.
    const auto bound = std::max(std::chrono::milliseconds(1), timeout * 4 / 5);
    const auto deadline = std::chrono::steady_clock::now() + bound;
    auto pause = std::chrono::microseconds(200);
    std::vector<int> missing;
    for (int r = 0; r < size; ++r) {
      if (r != rank)
        missing.push_back(r);
    }
    while (!missing.empty()) {
      std::vector<int> still;
      for (int r : missing) {
        if (!store->check({key(call, r)}))
          still.push_back(r);
      }
      missing.swap(still);
      if (missing.empty())
        break;
      if (std::chrono::steady_clock::now() >= deadline) {
        std::string names;
        for (size_t i = 0; i < missing.size(); ++i) {
          names += (i ? ", " : "") + std::to_string(missing[i]);
        }
        throw jaccl::TimeoutError(
            prefix() + ": timed out after " + seconds(bound) +
            " waiting in torch's store for " +
            (missing.size() == 1 ? "rank " : "ranks ") + names +
            " (side-channel call " + std::to_string(call) + ", key '" + ns +
            std::to_string(call) + "/<rank>')");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
    for (int r = 0; r < size; ++r) {
      if (r == rank) {
        std::memcpy(dst + r * n, src, n);
        continue;
      }
      const std::vector<uint8_t> v = store->get(key(call, r));
      if (v.size() != n) {
        throw jaccl::ProtocolError(
            prefix() + ": rank " + std::to_string(r) + " put " +
            std::to_string(v.size()) +
            " bytes in torch's store for side-channel call " +
            std::to_string(call) + ", this rank " + std::to_string(n));
      }
      std::memcpy(dst + r * n, v.data(), n);
    }
    if (call > 0) {
      try {
        store->deleteKey(key(call - 1, rank));
      } catch (const std::exception&) {
        // Best effort: a store without deleteKey keeps a few small keys.
      }
    }
  }
};

}  // namespace

jaccl::AllGatherFactory store_all_gather_factory(
    c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout) {
  return [store, timeout](int rank, int size) -> jaccl::AllGatherFn {
    auto ch = std::make_shared<StoreChannel>();
    ch->store = store;
    ch->timeout = timeout;
    ch->rank = rank;
    ch->size = size;
    const int64_t joined = store->add("jaccl/instances", 1);
    ch->ns = "jaccl/" + std::to_string((joined - 1) / size) + "/";
    return [ch](const char* src, char* dst, size_t n) {
      ch->all_gather(src, dst, n);
    };
  };
}

}  // namespace jaccl_torch
