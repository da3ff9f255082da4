// Copyright 2026 the jaccl authors.
#include "store_all_gather.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/store_channel.h"

namespace jaccl_torch {
namespace {

using jaccl::detail::RendezvousStore;

// c10d::Store as the rendezvous's key-value namespace.
class C10dStore final : public RendezvousStore {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store)
      : store_(std::move(store)) {}

  const std::string& where() const override { return where_; }
  const std::string& address() const override { return address_; }

  void put(const std::string& key, std::string_view value) override {
    store_->set(kPrefix + key,
                std::vector<uint8_t>(value.begin(), value.end()));
  }

  std::vector<std::optional<std::string>> get(
      const std::vector<std::string>& keys) override {
    std::vector<std::optional<std::string>> out;
    out.reserve(keys.size());
    for (const auto& k : keys)
      out.push_back(probe(kPrefix + k));
    return out;
  }

  void remove(const std::vector<std::string>& keys) noexcept override {
    for (const auto& k : keys) {
      try {
        store_->deleteKey(kPrefix + k);
      } catch (const std::exception&) {
        // Best effort (a store without deleteKey keeps a few small keys).
      }
    }
  }

  // c10d stores cannot list their keys: no clean-up of earlier runs'
  // records (the protocol's epochs keep them from being read as current).
  std::vector<std::string> list() override { return {}; }

 private:
  static inline const std::string kPrefix = "jaccl/";

  // The value of key, nullopt if absent, without blocking: Store::get waits
  // for a missing key (up to the store's timeout), and a key seen by check()
  // may be deleted before the get. compareSet(key, S, S) returns S when the
  // key is absent (TCPStore, FileStore, HashStore, PrefixStore) and the value
  // otherwise, changing nothing, since no record of the protocol equals S.
  // Stores without compareSet fall back to check() + get().
  std::optional<std::string> probe(const std::string& key) {
    if (compare_set_) {
      try {
        const std::vector<uint8_t> v =
            store_->compareSet(key, absent_, absent_);
        if (v == absent_)
          return std::nullopt;
        return std::string(v.begin(), v.end());
      } catch (const c10::Error&) {
        compare_set_ = false;  // not implemented by this store
      }
    }
    if (!store_->check({key}))
      return std::nullopt;
    const std::vector<uint8_t> v = store_->get(key);
    return std::string(v.begin(), v.end());
  }

  c10::intrusive_ptr<c10d::Store> store_;
  const std::string where_ = "torch's store (keys " + kPrefix + "...)";
  const std::string address_ = "torch's c10d store";
  const std::vector<uint8_t> absent_{'\x01', 'j', 'a', 'c',
                                     'c',    'l', '?', '\x01'};
  bool compare_set_ = true;
};

}  // namespace

jaccl::AllGatherFactory store_all_gather_factory(
    c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout) {
  return [store, timeout](int rank, int size) -> jaccl::AllGatherFn {
    const auto bound = std::max(std::chrono::milliseconds(1), timeout * 4 / 5);
    return jaccl::detail::make_store_all_gather(
        std::make_shared<C10dStore>(store), rank, size, bound,
        "torch's store side channel");
  };
}

}  // namespace jaccl_torch
