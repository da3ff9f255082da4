// Copyright 2026 the jaccl authors.
#include "common/overrun_watch.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "common/log.h"

namespace jaccl::detail {

namespace {

struct Entry {
  std::string what;
  Millis period;
  Clock::time_point start;
  Clock::time_point next;
};

// Never destroyed: the watcher thread is detached and may outlive statics.
struct Watcher {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, Entry> entries;
  uint64_t next_id = 1;
  bool running = false;

  // Runs while some call is watched, then exits, so a process that is not
  // inside a watched call has no watcher thread (nothing to lose at fork).
  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!entries.empty()) {
      auto soonest = entries.begin();
      for (auto it = entries.begin(); it != entries.end(); ++it) {
        if (it->second.next < soonest->second.next)
          soonest = it;
      }
      Clock::time_point at = soonest->second.next;
      if (Clock::now() < at) {
        cv.wait_until(lock, at);
        continue;  // an entry may have come or gone
      }
      Entry& e = soonest->second;
      e.next += e.period;
      auto elapsed = std::chrono::duration_cast<Millis>(Clock::now() - e.start);
      JACCL_LOG(Warn, e.what << " (" << format_duration(elapsed) << " so far)");
    }
    running = false;
  }
};

Watcher& watcher() {
  static Watcher* w = new Watcher;
  return *w;
}

}  // namespace

OverrunWatch::OverrunWatch(std::string what, Millis period) {
  if (period.count() <= 0) {
    return;
  }
  Watcher& w = watcher();
  std::lock_guard<std::mutex> lock(w.mu);
  id_ = w.next_id++;
  auto now = Clock::now();
  w.entries.emplace(id_, Entry{std::move(what), period, now, now + period});
  if (!w.running) {
    w.running = true;
    std::thread([&w] { w.loop(); }).detach();
  } else {
    w.cv.notify_all();
  }
}

OverrunWatch::~OverrunWatch() {
  if (id_ == 0) {
    return;
  }
  Watcher& w = watcher();
  std::lock_guard<std::mutex> lock(w.mu);
  w.entries.erase(id_);
  w.cv.notify_all();
}

}  // namespace jaccl::detail
