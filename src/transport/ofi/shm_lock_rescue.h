// Copyright 2026 the jaccl authors.
// Releasing the libfabric shm region locks a killed process left held.
//
// libfabric's shm provider (1.17 to at least 2.0) guards each endpoint's
// region (its command queue) with a process-shared spin lock inside the
// region. A sender takes the receiver's lock to queue a message; the owner
// takes its own to read its queue. A process SIGKILLed in between never
// releases it, and every later sender to that region (or its owner, in
// fi_cq_read) spins in pthread_spin_lock forever: no error, no return,
// nothing jaccl's failure state can wake. Seen as a survivor of a killed
// rank hanging inside fi_tsend.
//
// Once the group has failed, a rescue watches the locks of the regions one
// endpoint talks through (its own and its peers') and releases any held
// without a break for kStuckAfter: a live holder keeps one for microseconds.
// The stuck thread then returns from libfabric and meets the failure. The
// queue stays consistent: a sender publishes a command last, so one killed
// inside the lock leaves nothing half written that a reader would see.
//
// It knows the region header of shm region versions 4 and 5 (libfabric
// 1.17 to 1.19); for any other version it leaves the region alone. No
// libfabric header here.
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/deadline.h"

namespace jaccl::detail::ofi {

// A lock held this long without a break belongs to a dead (or stopped)
// process.
inline constexpr Millis kStuckAfter{1000};
// How long after the failure the rescue keeps watching: a stuck lock exists
// from the death that caused the failure, so it is seen well within this.
inline constexpr Millis kRescueWatch{60000};

// The spin lock inside a mapped shm region header whose owner is `pid`, or
// nullptr when the header's version is not one whose layout is known here
// or it names another process.
pthread_spinlock_t* shm_region_lock(void* header, long pid);

class ShmLockRescue {
 public:
  // regions: the names of the shm regions (as /dev/shm lists them) one
  // endpoint talks through. Maps the header of each it can open and knows;
  // skips the others (logged at Debug).
  ShmLockRescue(int rank, const std::vector<std::string>& regions);
  // Stops watching and unmaps. Never waits for a lock.
  ~ShmLockRescue();
  ShmLockRescue(const ShmLockRescue&) = delete;
  ShmLockRescue& operator=(const ShmLockRescue&) = delete;

  // The group failed: start watching (a thread, for kRescueWatch). Returns
  // at once; any thread; later calls do nothing.
  void arm();
  // How many regions it watches, and how many locks it has released.
  size_t watched() const { return regions_.size(); }
  int released() const { return released_.load(); }

 private:
  struct Region {
    std::string name;
    void* map = nullptr;
    pthread_spinlock_t* lock = nullptr;
  };
  void run();

  int rank_;
  std::vector<Region> regions_;
  std::atomic<int> released_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace jaccl::detail::ofi
