// Copyright 2026 the jaccl authors.
#include "bootstrap/pmix_channel.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/env.h"
#include "common/error.h"
#include "common/log.h"

#if JACCL_HAVE_PMIX
#include <pmix.h>
#endif

namespace jaccl::detail {

bool pmix_launcher_present() {
  return env_get(EnvVar::PmixNamespace) != nullptr;
}

#if JACCL_HAVE_PMIX

namespace {

constexpr const char* kUri = "pmix://";

std::string status_text(pmix_status_t st) {
  const char* s = PMIx_Error_string(st);
  return std::string(s ? s : "unknown PMIx status") + " (" +
         std::to_string(st) + ")";
}

std::string seconds_text(Millis d) {
  const auto ms = d.count();
  if (ms % 1000 == 0) {
    return std::to_string(ms / 1000) + " s";
  }
  return std::to_string(ms) + " ms";
}

// The process's PMIx identity, initialized once.
struct PmixProcess {
  std::once_flag once;
  pmix_proc_t me{};
  uint32_t size = 0;
};
PmixProcess g_pmix;

void finalize_pmix() {
  PMIx_Finalize(nullptr, 0);
}

void ensure_pmix() {
  std::call_once(g_pmix.once, [] {
    if (!pmix_launcher_present()) {
      raise(ErrorKind::Config,
            "pmix side channel: no PMIx server started this process "
            "(PMIX_NAMESPACE is unset): run it under `srun --mpi=pmix`, "
            "Open MPI's mpirun or PRRTE, or choose another side channel",
            {.address = kUri});
    }
    pmix_proc_t me;
    PMIX_PROC_CONSTRUCT(&me);
    pmix_status_t st = PMIx_Init(&me, nullptr, 0);
    if (st != PMIX_SUCCESS) {
      raise(ErrorKind::Io,
            "pmix side channel: PMIx_Init failed: " + status_text(st),
            {.address = kUri});
    }
    std::atexit(finalize_pmix);
    pmix_proc_t wild;
    PMIX_PROC_CONSTRUCT(&wild);
    PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t* val = nullptr;
    st = PMIx_Get(&wild, PMIX_JOB_SIZE, nullptr, 0, &val);
    if (st != PMIX_SUCCESS || val == nullptr) {
      raise(ErrorKind::Io,
            "pmix side channel: PMIx_Get(PMIX_JOB_SIZE) failed for namespace " +
                std::string(me.nspace) + ": " + status_text(st),
            {.rank = static_cast<int>(me.rank), .address = kUri});
    }
    uint32_t size = 0;
    if (val->type == PMIX_UINT32) {
      size = val->data.uint32;
    } else if (val->type == PMIX_INT) {
      size = static_cast<uint32_t>(val->data.integer);
    } else if (val->type == PMIX_UINT64) {
      size = static_cast<uint32_t>(val->data.uint64);
    }
    PMIX_VALUE_RELEASE(val);
    if (size == 0 || me.rank >= size) {
      raise(ErrorKind::Io,
            "pmix side channel: PMIx reports rank " + std::to_string(me.rank) +
                " of job size " + std::to_string(size) + " in namespace " +
                me.nspace,
            {.address = kUri});
    }
    g_pmix.me = me;
    g_pmix.size = size;
    JACCL_LOG(Debug, "pmix side channel: rank " << me.rank << " of " << size
                                                << " in namespace "
                                                << me.nspace);
  });
}

// One non-blocking PMIx operation: its callback may run after we gave up
// waiting (it then only touches this shared state).
struct Pending {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;
  std::vector<char> bytes;  // a get's value
  bool wrong_type = false;

  void finish(pmix_status_t st) {
    {
      std::lock_guard<std::mutex> lock(mu);
      status = st;
      done = true;
    }
    cv.notify_all();
  }
  // False at the deadline.
  bool wait(const Deadline& dl) {
    std::unique_lock<std::mutex> lock(mu);
    if (dl.is_never()) {
      cv.wait(lock, [&] { return done; });
      return true;
    }
    return cv.wait_for(lock, dl.remaining(), [&] { return done; });
  }
};
using PendingRef = std::shared_ptr<Pending>;

void op_done(pmix_status_t st, void* cbdata) {
  auto* ref = static_cast<PendingRef*>(cbdata);
  (*ref)->finish(st);
  delete ref;
}

void value_done(pmix_status_t st, pmix_value_t* kv, void* cbdata) {
  auto* ref = static_cast<PendingRef*>(cbdata);
  Pending& p = **ref;
  if (st == PMIX_SUCCESS && kv != nullptr) {
    if (kv->type == PMIX_BYTE_OBJECT) {
      std::lock_guard<std::mutex> lock(p.mu);
      p.bytes.assign(kv->data.bo.bytes, kv->data.bo.bytes + kv->data.bo.size);
    } else {
      p.wrong_type = true;
    }
  }
  // The value belongs to PMIx (released after the callback returns).
  p.finish(st);
  delete ref;
}

std::atomic<uint64_t> g_channels{0};

class PmixAllGather {
 public:
  explicit PmixAllGather(Millis timeout)
      : channel_(g_channels.fetch_add(1)),
        rank_(static_cast<int>(g_pmix.me.rank)),
        size_(static_cast<int>(g_pmix.size)),
        timeout_(timeout) {
    PMIX_PROC_CONSTRUCT(&wild_);
    PMIX_LOAD_PROCID(&wild_, g_pmix.me.nspace, PMIX_RANK_WILDCARD);
    where_ = std::string(kUri) + " (PMIx namespace " + g_pmix.me.nspace + ")";
  }

  void call(const char* src, char* dst, size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) {
      raise(ErrorKind::Io,
            "pmix side channel: unusable after an earlier failure (" + broken_ +
                ")",
            {.rank = rank_, .address = where_});
    }
    const uint64_t call = calls_++;
    const Deadline dl = Deadline::after(timeout_);
    const std::string key =
        "jaccl." + std::to_string(channel_) + "." + std::to_string(call);
    if (n > 0) {
      put_and_commit(key, src, n);
    }
    fence(call, dl);
    if (n > 0) {
      get_all(key, call, dst, n, dl);
    }
  }

 private:
  [[noreturn]] void fail(ErrorKind kind, const Detail& what) {
    broken_ = what;
    raise(kind, "pmix side channel: " + what,
          {.rank = rank_, .address = where_});
  }

  void put_and_commit(const std::string& key, const char* src, size_t n) {
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = const_cast<char*>(src);  // PMIx_Put copies the value
    v.data.bo.size = n;
    pmix_status_t st = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v);
    if (st != PMIX_SUCCESS) {
      fail(ErrorKind::Io, "PMIx_Put of " + std::to_string(n) +
                              " bytes under '" + key +
                              "' failed: " + status_text(st));
    }
    st = PMIx_Commit();
    if (st != PMIX_SUCCESS) {
      fail(ErrorKind::Io, "PMIx_Commit failed: " + status_text(st));
    }
  }

  // The PMIX_TIMEOUT we hand the server (whole seconds, at least 1; 0 =
  // none): our own wait ends at the same deadline either way.
  int server_timeout_s() const {
    if (timeout_.count() <= 0) {
      return 0;
    }
    return static_cast<int>((timeout_.count() + 999) / 1000);
  }

  void fence(uint64_t call, const Deadline& dl) {
    pmix_info_t info[2];
    bool collect = true;
    int secs = server_timeout_s();
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &secs, PMIX_INT);
    const size_t ninfo = secs > 0 ? 2 : 1;
    auto pending = std::make_shared<Pending>();
    auto* ref = new PendingRef(pending);
    pmix_status_t st = PMIx_Fence_nb(&wild_, 1, info, ninfo, op_done, ref);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (st == PMIX_OPERATION_SUCCEEDED) {
      delete ref;
      return;
    }
    if (st != PMIX_SUCCESS) {
      delete ref;
      fail(ErrorKind::Io, "PMIx_Fence_nb for call " + std::to_string(call) +
                              " failed: " + status_text(st));
    }
    if (!pending->wait(dl)) {
      fail(ErrorKind::Timeout,
           "timed out after " + seconds_text(timeout_) +
               " in the fence of call " + std::to_string(call) +
               ": not every one of the " + std::to_string(size_) +
               " ranks joined it (PMIx does not say which are missing)");
    }
    if (pending->status == PMIX_ERR_TIMEOUT) {
      fail(ErrorKind::Timeout,
           "timed out after " + seconds_text(timeout_) +
               " in the fence of call " + std::to_string(call) +
               ": the PMIx server gave up waiting for the " +
               std::to_string(size_) +
               " ranks (PMIx does not say which are missing): " +
               status_text(pending->status));
    }
    if (pending->status != PMIX_SUCCESS) {
      fail(ErrorKind::Io, "the fence of call " + std::to_string(call) +
                              " failed: " + status_text(pending->status));
    }
  }

  void get_all(const std::string& key, uint64_t call, char* dst, size_t n,
               const Deadline& dl) {
    int secs = server_timeout_s();
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &secs, PMIX_INT);
    std::vector<PendingRef> pending(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      pmix_proc_t proc;
      PMIX_PROC_CONSTRUCT(&proc);
      PMIX_LOAD_PROCID(&proc, wild_.nspace, static_cast<pmix_rank_t>(r));
      pending[r] = std::make_shared<Pending>();
      auto* ref = new PendingRef(pending[r]);
      pmix_status_t st = PMIx_Get_nb(&proc, key.c_str(), &info,
                                     secs > 0 ? 1 : 0, value_done, ref);
      if (st != PMIX_SUCCESS) {
        delete ref;
        PMIX_INFO_DESTRUCT(&info);
        fail(ErrorKind::Io, "PMIx_Get_nb of '" + key + "' from " + rank_ref(r) +
                                " failed: " + status_text(st));
      }
    }
    PMIX_INFO_DESTRUCT(&info);
    for (int r = 0; r < size_; ++r) {
      Pending& p = *pending[r];
      if (!p.wait(dl)) {
        fail(ErrorKind::Timeout, "timed out after " + seconds_text(timeout_) +
                                     " reading " + rank_ref(r) +
                                     "'s data of call " + std::to_string(call));
      }
      std::lock_guard<std::mutex> lock(p.mu);
      if (p.status != PMIX_SUCCESS) {
        fail(p.status == PMIX_ERR_TIMEOUT ? ErrorKind::Timeout : ErrorKind::Io,
             "PMIx_Get of '" + key + "' from " + rank_ref(r) +
                 " failed: " + status_text(p.status));
      }
      if (p.wrong_type || p.bytes.size() != n) {
        fail(ErrorKind::Protocol,
             rank_ref(r) + " put " +
                 (p.wrong_type ? std::string("a value that is not bytes")
                               : std::to_string(p.bytes.size()) + " bytes") +
                 " under '" + key + "', expected " + std::to_string(n));
      }
      std::memcpy(dst + static_cast<size_t>(r) * n, p.bytes.data(), n);
    }
  }

  const uint64_t channel_;
  const int rank_;
  const int size_;
  const Millis timeout_;
  pmix_proc_t wild_;
  std::string where_;
  std::mutex mu_;
  uint64_t calls_ = 0;
  Detail broken_;
};

}  // namespace

bool pmix_channel_built() {
  return true;
}

bool pmix_rank_size(int* rank, int* size) {
  if (!pmix_launcher_present()) {
    return false;
  }
  ensure_pmix();
  *rank = static_cast<int>(g_pmix.me.rank);
  *size = static_cast<int>(g_pmix.size);
  return true;
}

AllGatherFn make_pmix_channel(int rank, int size, Millis timeout) {
  ensure_pmix();
  const int prank = static_cast<int>(g_pmix.me.rank);
  const int psize = static_cast<int>(g_pmix.size);
  if ((rank >= 0 && rank != prank) || (size > 0 && size != psize)) {
    raise(ErrorKind::Config,
          "pmix side channel: jaccl was configured as rank " +
              std::to_string(rank) + " of " + std::to_string(size) +
              " but PMIx (namespace " + g_pmix.me.nspace + ") says rank " +
              std::to_string(prank) + " of " + std::to_string(psize) +
              " (leave JACCL_RANK / JACCL_SIZE unset under srun and mpirun)",
          {.rank = prank, .address = kUri});
  }
  auto impl = std::make_shared<PmixAllGather>(timeout);
  return
      [impl](const char* src, char* dst, size_t n) { impl->call(src, dst, n); };
}

#else  // !JACCL_HAVE_PMIX

bool pmix_channel_built() {
  return false;
}

bool pmix_rank_size(int* rank, int* size) {
  (void)rank;
  (void)size;
  return false;
}

AllGatherFn make_pmix_channel(int rank, int size, Millis timeout) {
  (void)size;
  (void)timeout;
  raise(ErrorKind::Config,
        "this build has no PMIx side channel: install libpmix-dev (or run "
        "scripts/setup.sh) and reconfigure",
        {.rank = rank, .address = "pmix://"});
}

#endif

}  // namespace jaccl::detail
