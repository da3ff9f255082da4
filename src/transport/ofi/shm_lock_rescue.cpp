// Copyright 2026 the jaccl authors.
#include "transport/ofi/shm_lock_rescue.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

#include "common/log.h"

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

}  // namespace

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
    regions_.push_back(Region{name, map, lock});
  }
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
  // long before kStuckAfter; one held by nobody alive never is.
  constexpr Millis kSample{2};
  const auto until = Clock::now() + kRescueWatch;
  std::vector<std::optional<Clock::time_point>> held_since(regions_.size());
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_ && Clock::now() < until) {
    lk.unlock();
    const auto now = Clock::now();
    for (size_t i = 0; i < regions_.size(); ++i) {
      pthread_spinlock_t* lock = regions_[i].lock;
      if (pthread_spin_trylock(lock) == 0) {
        pthread_spin_unlock(lock);
        held_since[i].reset();
      } else if (!held_since[i]) {
        held_since[i] = now;
      } else if (now - *held_since[i] >= kStuckAfter) {
        pthread_spin_unlock(lock);
        held_since[i].reset();
        released_.fetch_add(1);
        JACCL_LOG(Warn, "rank " << rank_
                                << ": released the lock of libfabric shm "
                                   "region "
                                << regions_[i].name << ", held for "
                                << kStuckAfter.count()
                                << " ms after the group failed (by a killed "
                                   "process: the provider cannot recover it)");
      }
    }
    lk.lock();
    cv_.wait_for(lk, kSample, [this] { return stop_; });
  }
}

}  // namespace jaccl::detail::ofi
