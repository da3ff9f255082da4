// Copyright 2026 the jaccl authors.
#include "bootstrap/file_channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/log.h"

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

uint64_t random_u64() {
  uint64_t v = 0;
  if (::RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof(v)) != 1) {
    std::random_device rd;
    v = (uint64_t(rd()) << 32) ^ rd();
  }
  return v;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(v));
  return buf;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) {
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > 16) {
    out += " and " + std::to_string(ranks.size() - 16) + " more";
  }
  return out;
}

// Polling backoff: 1 ms doubling to 100 ms, never past the deadline.
void backoff(int* delay_ms, const Deadline& dl) {
  std::this_thread::sleep_for(
      std::min(Millis(*delay_ms), std::max(dl.remaining(), Millis(1))));
  *delay_ms = std::min(*delay_ms * 2, 100);
}

// ---- the rendezvous protocol ---------------------------------------------

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
                            const std::string& detail) const {
    raise(ErrorKind::Timeout,
          name_ + " call #" + std::to_string(seq_) + " timed out after " +
              format_duration(timeout_) + " waiting for ranks " +
              rank_list(missing) + detail + " in " + store_->where(),
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
        timeout({0},
                " (rank 0 has not published this run's epoch; is it running "
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
                data_key(seq_, r) + " of rank " + std::to_string(r) + " in " +
                store_->where() +
                " is not this run's (another program writes there?)",
            ctx());
    }
    if (h.size != size_) {
      raise(ErrorKind::Config,
            name_ + ": rank " + std::to_string(r) + " runs with group size " +
                std::to_string(h.size) + " but this rank has size " +
                std::to_string(size_),
            ctx());
    }
    if (h.n_bytes != n) {
      raise(ErrorKind::Protocol,
            name_ + " call #" + std::to_string(seq_) + ": rank " +
                std::to_string(r) + " passed n_bytes=" +
                std::to_string(h.n_bytes) + " but this rank passed " +
                std::to_string(n) + " (every rank must pass the same size)",
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

// ---- the directory store ---------------------------------------------------

class FileStore final : public RendezvousStore {
 public:
  FileStore(std::string dir, int rank) : dir_(std::move(dir)), rank_(rank) {
    where_ = "directory " + dir_;
    ensure_dir();
  }

  const std::string& where() const override { return where_; }
  const std::string& address() const override { return dir_; }

  void put(const std::string& key, std::string_view value) override {
    const std::string final_path = path(key);
    const std::string tmp = dir_ + "/.tmp-" + file_name(key) + "-" +
                            std::to_string(::getpid()) + "-" +
                            hex16(random_u64());
    int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0 && errno == ENOENT && attempt == 0) {
        ensure_dir();  // removed by the clean-up of an earlier run
      }
    }
    if (fd < 0) {
      fail("cannot create " + tmp, errno);
    }
    size_t off = 0;
    while (off < value.size()) {
      ssize_t w = ::write(fd, value.data() + off, value.size() - off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0) {
        int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        fail("cannot write " + tmp, err);
      }
      off += static_cast<size_t>(w);
    }
    // close() is where NFS reports write-back errors.
    if (::close(fd) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      fail("cannot write " + tmp, err);
    }
    if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      fail("cannot rename " + tmp + " to " + final_path, err);
    }
  }

  std::vector<std::optional<std::string>> get(
      const std::vector<std::string>& keys) override {
    // List first: readdir makes an NFS client revalidate the directory, so
    // a file created by another host is seen although an earlier open()
    // of that name failed (negative-lookup cache).
    auto present = list_names();
    std::vector<std::optional<std::string>> out(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string name = file_name(keys[i]);
      if (!std::binary_search(present.begin(), present.end(), name)) {
        continue;
      }
      out[i] = read_file(dir_ + "/" + name);
    }
    return out;
  }

  void remove(const std::vector<std::string>& keys) noexcept override {
    for (const auto& k : keys) {
      ::unlink(path(k).c_str());
    }
  }

  std::vector<std::string> list() override {
    auto names = list_names();
    for (auto& n : names) {
      std::replace(n.begin(), n.end(), '.', '/');
    }
    return names;
  }

  void finish() noexcept override { ::rmdir(dir_.c_str()); }

 private:
  // "E/3/7" -> "E.3.7" (keys hold no dots).
  static std::string file_name(const std::string& key) {
    std::string s = key;
    std::replace(s.begin(), s.end(), '/', '.');
    return s;
  }
  std::string path(const std::string& key) const {
    return dir_ + "/" + file_name(key);
  }

  [[noreturn]] void fail(const std::string& what, int err) const {
    raise(ErrorKind::Io, "file side channel: " + what,
          {.rank = rank_, .address = dir_, .sys_errno = err});
  }

  void ensure_dir() {
    if (::mkdir(dir_.c_str(), 0777) != 0 && errno != EEXIST) {
      int err = errno;
      std::string parent = dir_.substr(0, dir_.find_last_of('/'));
      if (err == ENOENT) {
        raise(ErrorKind::Config,
              "file side channel: the shared directory " +
                  (parent.empty() ? std::string("/") : parent) +
                  " does not exist (create it on a filesystem every rank "
                  "mounts)",
              {.rank = rank_, .address = dir_});
      }
      fail("cannot create the job directory", err);
    }
  }

  std::vector<std::string> list_names() {
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) {
        return {};  // removed by a clean-up; put() recreates it
      }
      fail("cannot list the job directory", errno);
    }
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') {
        continue;  // ".", "..", temporaries
      }
      names.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  std::optional<std::string> read_file(const std::string& p) const {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) {
        return std::nullopt;  // removed between listing and open
      }
      fail("cannot open " + p, errno);
    }
    std::string out;
    char buf[65536];
    while (true) {
      ssize_t r = ::read(fd, buf, sizeof(buf));
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0) {
        int err = errno;
        ::close(fd);
        fail("cannot read " + p, err);
      }
      if (r == 0)
        break;
      out.append(buf, static_cast<size_t>(r));
    }
    ::close(fd);
    return out;
  }

  std::string dir_;
  std::string where_;
  int rank_;
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

std::shared_ptr<RendezvousStore> make_file_store(const std::string& dir,
                                                 const std::string& job,
                                                 int rank) {
  if (dir.empty() || dir[0] != '/') {
    raise(ErrorKind::Config,
          "file side channel: the shared directory must be an absolute path, "
          "got '" +
              dir + "'",
          {.rank = rank, .address = dir});
  }
  if (job.empty() || job[0] == '.' || job.find('/') != std::string::npos) {
    raise(ErrorKind::Config,
          "file side channel: invalid job id '" + job +
              "' (it names a subdirectory: no '/', no leading '.')",
          {.rank = rank, .address = dir});
  }
  std::string base = dir;
  while (base.size() > 1 && base.back() == '/') {
    base.pop_back();
  }
  return std::make_shared<FileStore>(
      (base == "/" ? std::string() : base) + "/" + job, rank);
}

AllGatherFn make_file_channel(const FileChannelOptions& o) {
  return make_store_all_gather(make_file_store(o.dir, o.job, o.rank), o.rank,
                               o.size, o.timeout, "file side channel");
}

}  // namespace jaccl::detail
