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
// endpoint talks through (its own and its peers') and releases one only
// when it is held without a break for kStuckAfter (a live holder keeps it
// for microseconds), at least one process that could hold it (the regions'
// owners) has died since set-up, and none of them is stopped or traced: a
// stopped process is alive and may be the holder, so its lock is never
// taken. The stuck thread then returns from libfabric and meets the
// failure. The queue stays consistent: a sender publishes a command last,
// so one killed inside the lock leaves nothing half written.
//
// Off unless built with JACCL_OFI_SHM_LOCK_RESCUE (CMake option, default
// ON) and the loaded libfabric is one whose region layout was checked
// (1.17 to 1.19, region versions 4 and 5); each region's own version is
// checked again when it is mapped. No libfabric header here.
//
// Upstream: the lock is a plain process-shared spin lock by design (see
// ofiwg/libfabric#7274 and PR #7275, which tried a shared mutex); none of
// them is robust, and no upstream issue tracks a holder killed inside it.
// A robust mutex (EOWNERDEAD) in the region would make this file
// unnecessary.
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/deadline.h"

namespace jaccl::detail::ofi {

// A lock held this long without a break, while a possible holder is dead
// and none is stopped, belongs to the dead one.
inline constexpr Millis kStuckAfter{1000};
// How long after the failure the rescue keeps watching: a stuck lock exists
// from the death that caused the failure, so it is seen well within this.
inline constexpr Millis kRescueWatch{60000};

// The spin lock inside a mapped shm region header whose owner is `pid`, or
// nullptr when the header's version is not one whose layout is known here
// or it names another process.
pthread_spinlock_t* shm_region_lock(void* header, long pid);

// Whether this build has the rescue (JACCL_OFI_SHM_LOCK_RESCUE).
bool shm_lock_rescue_built();
// Whether a libfabric of this version (FI_VERSION(major, minor), as
// fi_version() returns it) has the region layout the rescue knows.
bool shm_lock_rescue_knows(uint32_t fi_version);
// Built, and the loaded libfabric's layout is known: rescues are made.
bool shm_lock_rescue_enabled();

// How a process that may hold a region lock is doing, from
// /proc/<pid>/stat: gone (exited, a zombie, or its pid reused since
// `start`), stopped (stopped or traced: alive, may hold the lock), running
// (any other state), or unknown (not visible here).
enum class HolderState { Gone, Stopped, Running, Unknown };
// The start time (field 22 of /proc/<pid>/stat) of pid, or 0.
unsigned long long process_start(long pid);
HolderState holder_state(long pid, unsigned long long start);

class ShmLockRescue {
 public:
  // regions: the names of the shm regions (as /dev/shm lists them) one
  // endpoint talks through. Maps the header of each it can open and knows;
  // skips the others (logged at Debug). The owners named by the regions
  // (other than this process) are the possible holders.
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
    long owner = -1;                     // the pid its name carries
    unsigned long long owner_start = 0;  // 0: this process, or not visible
  };
  struct Holder {
    long pid;
    unsigned long long start;  // 0: not visible at set-up
  };
  void run();
  // Whether a lock held since the window began may be taken now: some
  // holder is gone and none is stopped or invisible. *stopped: one is.
  bool holder_dead(bool* stopped, long* dead) const;

  int rank_;
  std::vector<Region> regions_;
  std::vector<Holder> holders_;
  std::atomic<int> released_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace jaccl::detail::ofi
