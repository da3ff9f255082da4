// Copyright 2026 the jaccl authors.
#include "transport/ofi/shm_lock_rescue.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <sstream>

#include "common/log.h"
#include "common/read_file.h"
#include "transport/ofi/ofi_lib.h"

namespace jaccl::detail::ofi {
namespace {

// The start of libfabric's struct smr_region for region versions 4 and 5
// (include/ofi_shm.h of libfabric 1.17, 1.18 and 1.19: the fields up to the
// lock did not change). Version 6 put fields before the lock.
struct RegionHead {
  uint8_t version;
  uint8_t resv;
  uint16_t flags;
  int pid;
  uint8_t cma_cap_peer;
  uint8_t cma_cap_self;
  uint32_t max_sar_buf_per_peer;
  void* base_addr;
  pthread_spinlock_t lock;
};

// The pid a region's name starts with ("<pid>:..."), or -1.
long pid_of(const std::string& name) {
  long pid = 0;
  size_t i = 0;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) {
    pid = pid * 10 + (name[i] - '0');
  }
  return i > 0 && i < name.size() && name[i] == ':' ? pid : -1;
}

// Whether process pid maps the shm region `name` (/proc/<pid>/maps): proof
// that the pid the region's name carries is that process in this pid
// namespace, not another one's.
bool maps_region(long pid, const std::string& name) {
  std::istringstream maps(
      read_file_or_empty("/proc/" + std::to_string(pid) + "/maps"));
  const std::string path = "/dev/shm/" + name;
  for (std::string line; std::getline(maps, line);) {
    if (line.size() >= path.size() &&
        line.compare(line.size() - path.size(), path.size(), path) == 0) {
      return true;
    }
  }
  return false;
}

// State letter and start time of /proc/<pid>/stat; false if unreadable
// (*gone: it does not exist).
bool read_stat(long pid, char* state, unsigned long long* start, bool* gone) {
  std::string text;
  int err = 0;
  *gone = false;
  if (!read_file("/proc/" + std::to_string(pid) + "/stat", &text, &err)) {
    *gone = err == ENOENT || err == ESRCH;  // ESRCH: it exited mid-read
    return false;
  }
  // The name (field 2) may hold spaces and parentheses: fields resume
  // after the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) {
    return false;
  }
  std::istringstream rest(text.substr(close + 1));
  std::string field;
  rest >> *state;
  // Fields 4 .. 21, then 22: starttime.
  for (int i = 4; i <= 21 && rest >> field; ++i) {
  }
  return static_cast<bool>(rest >> *start);
}

// Whether a lock is held: taken for an instant when it is free (glibc's
// representation differs between architectures, so only its calls are
// used). A dead holder's lock is released with pthread_spin_unlock from a
// thread that does not hold it, which is the point (scripts/tsan.supp).
bool lock_held(pthread_spinlock_t* lock) {
  if (pthread_spin_trylock(lock) != 0) {
    return true;
  }
  pthread_spin_unlock(lock);
  return false;
}
void release_lock(pthread_spinlock_t* lock) {
  pthread_spin_unlock(lock);
}

}  // namespace

bool shm_lock_rescue_built() {
#if JACCL_OFI_SHM_LOCK_RESCUE
  return true;
#else
  return false;
#endif
}

bool shm_lock_rescue_knows(uint32_t v) {
  // FI_VERSION(major, minor) = major << 16 | minor.
  return (v >> 16) == 1 && (v & 0xffff) >= 17 && (v & 0xffff) <= 19;
}

bool shm_lock_rescue_enabled() {
#if JACCL_HAVE_OFI
  const Lib* l = try_lib(nullptr);
  return shm_lock_rescue_built() && l != nullptr && l->version != nullptr &&
         shm_lock_rescue_knows(l->version());
#else
  return false;
#endif
}

unsigned long long process_start(long pid) {
  char state = 0;
  unsigned long long start = 0;
  bool gone = false;
  return read_stat(pid, &state, &start, &gone) ? start : 0;
}

HolderState holder_state(long pid, unsigned long long start) {
  if (start == 0) {
    return HolderState::Unknown;
  }
  char state = 0;
  unsigned long long now = 0;
  bool gone = false;
  if (!read_stat(pid, &state, &now, &gone)) {
    return gone ? HolderState::Gone : HolderState::Unknown;
  }
  if (now != start || state == 'Z' || state == 'X' || state == 'x') {
    return HolderState::Gone;
  }
  if (state == 'T' || state == 't') {
    return HolderState::Stopped;
  }
  return HolderState::Running;
}

pthread_spinlock_t* shm_region_lock(void* header, long pid) {
  auto* head = static_cast<RegionHead*>(header);
  if (head->version != 4 && head->version != 5) {
    return nullptr;
  }
  if (static_cast<long>(head->pid) != pid) {
    return nullptr;
  }
  return &head->lock;
}

ShmLockRescue::ShmLockRescue(int rank, const std::vector<std::string>& regions)
    : rank_(rank) {
  for (const std::string& name : regions) {
    const int fd = ::shm_open(("/" + name).c_str(), O_RDWR, 0);
    if (fd < 0) {
      JACCL_LOG(Debug, "rank "
                           << rank_ << ": cannot open shm region " << name
                           << " to watch its lock: " << std::strerror(errno));
      continue;
    }
    // A file shorter than the header would fault on access (SIGBUS).
    struct stat st {};
    if (::fstat(fd, &st) != 0 ||
        st.st_size < static_cast<off_t>(sizeof(RegionHead))) {
      ::close(fd);
      JACCL_LOG(Debug, "rank " << rank_ << ": shm region " << name
                               << " is shorter than its header");
      continue;
    }
    void* map = ::mmap(nullptr, sizeof(RegionHead), PROT_READ | PROT_WRITE,
                       MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) {
      JACCL_LOG(Debug, "rank " << rank_ << ": cannot map shm region " << name
                               << ": " << std::strerror(errno));
      continue;
    }
    pthread_spinlock_t* lock = shm_region_lock(map, pid_of(name));
    if (lock == nullptr) {
      JACCL_LOG(Debug, "rank " << rank_ << ": shm region " << name
                               << " has a layout jaccl does not know (version "
                               << int(static_cast<RegionHead*>(map)->version)
                               << "): its lock is not watched");
      ::munmap(map, sizeof(RegionHead));
      continue;
    }
    const long pid = pid_of(name);
    regions_.push_back(Region{name, map, lock, pid, 0});
    const bool known =
        std::any_of(holders_.begin(), holders_.end(),
                    [&](const Holder& h) { return h.pid == pid; });
    if (pid != static_cast<long>(::getpid()) && !known) {
      // Visible only when the pid is the region's owner here; else its
      // state cannot be told and the rescue never releases.
      const unsigned long long start =
          maps_region(pid, name) ? process_start(pid) : 0;
      if (start == 0) {
        JACCL_LOG(Debug, "rank " << rank_ << ": the owner of shm region "
                                 << name
                                 << " is not visible in this pid namespace: "
                                    "its locks are never released");
      }
      holders_.push_back(Holder{pid, start});
    }
    for (const Holder& h : holders_) {
      if (h.pid == pid) {
        regions_.back().owner_start = h.start;
      }
    }
  }
}

bool ShmLockRescue::holder_dead(bool* stopped, long* dead) const {
  bool gone = false, veto = false;
  for (const Holder& h : holders_) {
    switch (holder_state(h.pid, h.start)) {
      case HolderState::Gone:
        gone = true;
        *dead = h.pid;
        break;
      case HolderState::Stopped:
        *stopped = true;
        veto = true;
        break;
      case HolderState::Unknown:
        veto = true;
        break;
      case HolderState::Running:
        break;
    }
  }
  return gone && !veto;
}

ShmLockRescue::~ShmLockRescue() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  for (const Region& r : regions_) {
    ::munmap(r.map, sizeof(RegionHead));
  }
}

void ShmLockRescue::arm() {
  std::lock_guard<std::mutex> g(mu_);
  if (armed_ || stop_ || regions_.empty()) {
    return;
  }
  armed_ = true;
  thread_ = std::thread([this] { run(); });
}

void ShmLockRescue::run() {
  // A lock that live processes pass around is seen free at some sample
  // long before kStuckAfter; one held by nobody alive never is. A stopped
  // possible holder restarts the window: it may hold the lock.
  //
  // At most one lock is released per window, the least risky first: a dead
  // owner's region (nobody reads its queue), then a peer's, then this
  // process's own (one of its threads may hold it while it waits for a
  // stuck peer lock). Every other lock gets a new window, so a live holder
  // waiting behind the released lock finishes and frees its own.
  constexpr Millis kSample{2};
  const auto until = Clock::now() + kRescueWatch;
  std::vector<std::optional<Clock::time_point>> held_since(regions_.size());
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_ && Clock::now() < until) {
    lk.unlock();
    const auto now = Clock::now();
    bool stopped = false;
    long dead = -1;
    bool take = false;
    bool looked = false;
    int pick = -1, pick_rank = 3;
    for (size_t i = 0; i < regions_.size(); ++i) {
      if (!lock_held(regions_[i].lock)) {
        held_since[i].reset();
        continue;
      }
      if (!looked) {  // the holders' states, once per sample
        take = holder_dead(&stopped, &dead);
        looked = true;
      }
      if (stopped || !held_since[i]) {
        held_since[i] = now;
        continue;
      }
      if (!take || now - *held_since[i] < kStuckAfter) {
        continue;
      }
      const Region& r = regions_[i];
      const int risk =
          r.owner == ::getpid()
              ? 2
              : (holder_state(r.owner, r.owner_start) == HolderState::Gone ? 0
                                                                           : 1);
      if (risk < pick_rank) {
        pick = static_cast<int>(i);
        pick_rank = risk;
      }
    }
    if (pick >= 0) {
      const Region& r = regions_[static_cast<size_t>(pick)];
      release_lock(r.lock);
      released_.fetch_add(1);
      for (auto& h : held_since) {
        if (h) {
          h = now;
        }
      }
      held_since[static_cast<size_t>(pick)].reset();
      JACCL_LOG(Warn, "rank " << rank_
                              << ": released the lock of libfabric shm region "
                              << r.name << ", held for " << kStuckAfter.count()
                              << " ms after the group failed while process "
                              << dead
                              << " is dead and no other possible holder is "
                                 "stopped (the provider cannot recover a lock "
                                 "a killed process held)");
    }
    lk.lock();
    cv_.wait_for(lk, kSample, [this] { return stop_; });
  }
}

}  // namespace jaccl::detail::ofi
