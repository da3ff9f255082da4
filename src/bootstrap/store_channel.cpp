// Copyright 2026 the jaccl authors.
#include "bootstrap/store_channel.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "common/random.h"

namespace jaccl::detail {

namespace {

constexpr char kMagic[8] = {'J', 'A', 'C', 'C', 'L', 'S', 'C', '1'};

struct RecordHeader {
  char magic[8];
  uint64_t epoch;
  uint64_t call;
  int32_t rank;
  int32_t size;
  uint64_t n_bytes;
};
static_assert(sizeof(RecordHeader) == 40);

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(v));
  return buf;
}

// Polling backoff: 1 ms doubling to 100 ms, never past the deadline.
void backoff(int* delay_ms, const Deadline& dl) {
  std::this_thread::sleep_for(
      std::min(Millis(*delay_ms), std::max(dl.remaining(), Millis(1))));
  *delay_ms = std::min(*delay_ms * 2, 100);
}

class StoreAllGather {
 public:
  StoreAllGather(std::shared_ptr<RendezvousStore> store, int rank, int size,
                 Millis timeout, std::string name)
      : store_(std::move(store)),
        rank_(rank),
        size_(size),
        timeout_(timeout),
        name_(std::move(name)),
        nonces_(static_cast<size_t>(size)) {}

  ~StoreAllGather() { cleanup(); }

  void call(const char* src, char* dst, size_t n) {
    try {
      call_impl(src, dst, n);
    } catch (...) {
      failed_ = true;
      throw;
    }
  }

 private:
  ErrorContext ctx() const {
    return {.rank = rank_, .address = store_->address()};
  }
  std::string data_key(uint64_t k, int r) const {
    return epoch_hex_ + "/" + std::to_string(k) + "/" + std::to_string(r);
  }
  std::string epoch_record() const {
    std::string s = epoch_hex_;
    for (int r = 1; r < size_; ++r) {
      s += " " + (nonces_[r].empty() ? std::string("-") : nonces_[r]);
    }
    return s;
  }
  [[noreturn]] void timeout(const std::vector<int>& missing,
                            const Detail& detail) const {
    raise(ErrorKind::Timeout,
          name_ + " call #" + std::to_string(seq_) + " timed out after " +
              format_duration(timeout_) + " waiting for " + ranks_ref(missing) +
              detail + " in " + store_->where(),
          ctx());
  }

  // Rank r != 0: publish a nonce, wait for an epoch record that lists it.
  void join(const Deadline& dl) {
    const std::string mine = hex16(random_u64());
    store_->put("hello/" + std::to_string(rank_), mine);
    int delay_ms = 1;
    while (true) {
      auto v = store_->get({"epoch"});
      if (v[0]) {
        std::istringstream in(*v[0]);
        std::string epoch, nonce;
        std::vector<std::string> listed;
        in >> epoch;
        while (in >> nonce) {
          listed.push_back(nonce);
        }
        if (listed.size() + 1 == static_cast<size_t>(size_) &&
            listed[rank_ - 1] == mine) {
          epoch_hex_ = epoch;
          epoch_ = std::stoull(epoch, nullptr, 16);
          store_->remove({"hello/" + std::to_string(rank_)});
          return;
        }
        if (listed.size() + 1 != static_cast<size_t>(size_) &&
            listed.size() >= static_cast<size_t>(rank_) &&
            listed[rank_ - 1] == mine) {
          raise(ErrorKind::Config,
                name_ + ": rank 0 runs with group size " +
                    std::to_string(listed.size() + 1) +
                    " but this rank has size " + std::to_string(size_) + " (" +
                    store_->where() + ")",
                ctx());
        }
      }
      if (dl.expired()) {
        timeout({0}, " (" + rank_ref(0) +
                         " has not published this run's epoch; is it running "
                         "with the same job id and side channel?)");
      }
      backoff(&delay_ms, dl);
    }
  }

  void call_impl(const char* src, char* dst, size_t n) {
    const auto dl = Deadline::after(timeout_);
    if (seq_ == 0) {
      if (rank_ == 0) {
        epoch_ = random_u64();
        epoch_hex_ = hex16(epoch_);
        published_ = epoch_record();
        store_->put("epoch", published_);
      } else {
        join(dl);
      }
    }
    RecordHeader h{};
    std::memcpy(h.magic, kMagic, sizeof(kMagic));
    h.epoch = epoch_;
    h.call = seq_;
    h.rank = rank_;
    h.size = size_;
    h.n_bytes = n;
    std::string record(sizeof(h) + n, '\0');
    std::memcpy(record.data(), &h, sizeof(h));
    if (n > 0) {
      std::memcpy(record.data() + sizeof(h), src, n);
    }
    store_->put(data_key(seq_, rank_), record);
    wrote_ = seq_ + 1;
    if (n > 0) {
      std::memcpy(dst + static_cast<size_t>(rank_) * n, src, n);
    }

    std::vector<char> have(static_cast<size_t>(size_), 0);
    have[rank_] = 1;
    int delay_ms = 1;
    const bool admitting = rank_ == 0 && seq_ == 0;
    while (true) {
      std::vector<int> missing;
      std::vector<std::string> keys;
      for (int r = 0; r < size_; ++r) {
        if (!have[r]) {
          missing.push_back(r);
          keys.push_back(data_key(seq_, r));
        }
      }
      if (missing.empty()) {
        break;
      }
      const size_t n_data = keys.size();
      if (admitting) {
        for (int r : missing) {
          keys.push_back("hello/" + std::to_string(r));
        }
        keys.push_back("epoch");
      }
      auto values = store_->get(keys);
      bool progress = false;
      for (size_t i = 0; i < n_data; ++i) {
        if (values[i] && accept(*values[i], missing[i], n, dst)) {
          have[missing[i]] = 1;
          progress = true;
        }
      }
      if (admitting) {
        bool changed = false;
        for (size_t i = 0; i < missing.size(); ++i) {
          const auto& v = values[n_data + i];
          if (v && !have[missing[i]] && *v != nonces_[missing[i]]) {
            nonces_[missing[i]] = *v;
            changed = true;
          }
        }
        // Rewrite when a hello changed, or when our record was replaced or
        // removed (clean-up of an earlier run with the same id).
        if (changed || !values.back() || *values.back() != published_) {
          published_ = epoch_record();
          store_->put("epoch", published_);
          progress = true;
        }
      }
      std::vector<int> still;
      for (int r : missing) {
        if (!have[r])
          still.push_back(r);
      }
      if (still.empty()) {
        break;
      }
      if (dl.expired()) {
        timeout(still, "");
      }
      if (!progress) {
        backoff(&delay_ms, dl);
      }
    }
    // Everyone wrote call k, so everyone has read all of call k-1.
    if (seq_ > 0) {
      store_->remove({data_key(seq_ - 1, rank_)});
    }
    if (admitting) {
      collect_garbage();
    }
    ++seq_;
  }

  // Validates rank r's record of this call; copies its bytes into dst.
  bool accept(const std::string& v, int r, size_t n, char* dst) const {
    RecordHeader h{};
    if (v.size() < sizeof(h)) {
      return false;  // not complete yet (cannot happen with rename/SET)
    }
    std::memcpy(&h, v.data(), sizeof(h));
    if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 ||
        h.epoch != epoch_ || h.call != seq_ || h.rank != r) {
      raise(ErrorKind::Protocol,
            name_ + " call #" + std::to_string(seq_) + ": the record " +
                data_key(seq_, r) + " of " + rank_ref(r) + " in " +
                store_->where() +
                " is not this run's (another program writes there?)",
            ctx());
    }
    if (h.size != size_) {
      raise(ErrorKind::Config,
            name_ + ": " + rank_ref(r) + " runs with group size " +
                std::to_string(h.size) + " but this rank has size " +
                std::to_string(size_),
            ctx());
    }
    if (h.n_bytes != n) {
      raise(ErrorKind::Protocol,
            name_ + " call #" + std::to_string(seq_) + ": " + rank_ref(r) +
                " passed n_bytes=" + std::to_string(h.n_bytes) +
                " but this rank passed " + std::to_string(n) +
                " (every rank must pass the same size)",
            ctx());
    }
    if (v.size() != sizeof(h) + n) {
      return false;
    }
    if (n > 0) {
      std::memcpy(dst + static_cast<size_t>(r) * n, v.data() + sizeof(h), n);
    }
    return true;
  }

  // Records of other epochs: leftovers of crashed or unfinished runs with
  // this job id. Only rank 0, only once this run's call 0 has completed (so
  // no run with this id can still be using them, job ids being unique among
  // running jobs).
  void collect_garbage() noexcept {
    try {
      std::vector<std::string> stale;
      for (const auto& key : store_->list()) {
        if (key == "epoch" || key.rfind(epoch_hex_ + "/", 0) == 0) {
          continue;
        }
        if (key.rfind("hello/", 0) == 0) {
          // Ranks of this run remove their own; higher ranks are leftovers
          // of a larger group.
          int r = std::atoi(key.c_str() + 6);
          if (r < size_) {
            continue;
          }
        }
        stale.push_back(key);
      }
      if (!stale.empty()) {
        JACCL_LOG(Info, "rank 0: removing " << stale.size()
                                            << " stale side-channel records "
                                               "of earlier runs in "
                                            << store_->where());
        store_->remove(stale);
      }
    } catch (const std::exception& e) {
      JACCL_LOG(Debug, "side-channel garbage collection failed: " << e.what());
    }
  }

  void cleanup() noexcept {
    try {
      if (failed_ || seq_ == 0) {
        // Our own records only: the group is failing anyway.
        std::vector<std::string> mine;
        for (uint64_t k = wrote_ >= 2 ? wrote_ - 2 : 0; k < wrote_; ++k) {
          mine.push_back(data_key(k, rank_));
        }
        if (rank_ != 0) {
          mine.push_back("hello/" + std::to_string(rank_));
        }
        if (!epoch_hex_.empty()) {
          store_->remove(mine);
        }
        if (rank_ == 0 && !published_.empty()) {
          auto v = store_->get({"epoch"});
          if (v[0] && *v[0] == published_)
            store_->remove({"epoch"});
        }
        return;
      }
      store_->put(epoch_hex_ + "/done/" + std::to_string(rank_), "");
      std::vector<std::string> done;
      for (int r = 0; r < size_; ++r) {
        done.push_back(epoch_hex_ + "/done/" + std::to_string(r));
      }
      auto v = store_->get(done);
      if (!std::all_of(v.begin(), v.end(), [](auto& x) { return bool(x); })) {
        return;  // someone is still reading; the last one cleans
      }
      std::vector<std::string> all = done;
      for (int r = 0; r < size_; ++r) {
        all.push_back(data_key(seq_ - 1, r));
        if (seq_ >= 2)
          all.push_back(data_key(seq_ - 2, r));
      }
      store_->remove(all);
      auto e = store_->get({"epoch"});
      if (e[0] && e[0]->rfind(epoch_hex_, 0) == 0) {
        store_->remove({"epoch"});
      }
      store_->finish();
    } catch (const std::exception& e) {
      JACCL_LOG(Debug, "side-channel clean-up failed: " << e.what());
    }
  }

  std::shared_ptr<RendezvousStore> store_;
  int rank_;
  int size_;
  Millis timeout_;
  std::string name_;
  std::vector<std::string> nonces_;  // rank 0: hello nonce of each rank
  std::string published_;            // rank 0: the epoch record we wrote
  uint64_t epoch_ = 0;
  std::string epoch_hex_;
  uint64_t seq_ = 0;    // calls completed
  uint64_t wrote_ = 0;  // calls whose record we wrote
  bool failed_ = false;
};

}  // namespace

AllGatherFn make_store_all_gather(std::shared_ptr<RendezvousStore> store,
                                  int rank, int size, Millis timeout,
                                  std::string channel_name) {
  if (size < 1 || rank < 0 || rank >= size) {
    raise(ErrorKind::Config,
          channel_name + ": rank " + std::to_string(rank) +
              " is out of range for group size " + std::to_string(size),
          {.rank = rank, .address = store->address()});
  }
  auto impl = std::make_shared<StoreAllGather>(std::move(store), rank, size,
                                               timeout, channel_name);
  return
      [impl](const char* src, char* dst, size_t n) { impl->call(src, dst, n); };
}

}  // namespace jaccl::detail
