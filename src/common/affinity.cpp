// Copyright 2026 the jaccl authors.
#include "common/affinity.h"

#include <sched.h>

#include <algorithm>
#include <bit>
#include <thread>

namespace jaccl::detail {

std::vector<int> allowed_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0)
    return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set))
      out.push_back(c);
  }
  return out;
}

int allowed_cpu_count() {
  const size_t n = allowed_cpus().size();
  if (n != 0)
    return static_cast<int>(n);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

bool set_allowed_cpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE)
      CPU_SET(c, &set);
  }
  return ::sched_setaffinity(0, sizeof(set), &set) == 0;
}

CpuMask cpu_mask() {
  CpuMask m{};
  std::vector<int> cpus = allowed_cpus();
  if (cpus.empty()) {
    for (int c = 0; c < allowed_cpu_count(); ++c)
      cpus.push_back(c);
  }
  for (int c : cpus) {
    if (c < CpuMask::kBits)
      m.bits[c / 64] |= uint64_t{1} << (c % 64);
    else
      ++m.beyond;
  }
  return m;
}

void CpuUnion::add(const CpuMask& m) {
  for (int w = 0; w < CpuMask::kWords; ++w)
    all_[w] |= m.bits[w];
  beyond_ = std::max(beyond_, m.beyond);
}

int CpuUnion::count() const {
  int n = static_cast<int>(beyond_);
  for (uint64_t w : all_)
    n += std::popcount(w);
  return std::max(1, n);
}

namespace {

// Narrows the calling thread's mask to `to` (the kernel migrates it before
// the call returns) and sets `mask` back; true if the thread ran on a CPU
// of `to` in between (once the mask is back the scheduler may move it
// anywhere, so no later look could tell).
bool move_within(const std::vector<int>& mask, const std::vector<int>& to) {
  const bool moved = set_allowed_cpus(to) &&
                     std::binary_search(to.begin(), to.end(), ::sched_getcpu());
  // Always restore what the thread had, even if the first call failed
  // half-way: the caller's mask is not ours to change.
  set_allowed_cpus(mask);
  return moved;
}

// share_cpu's rule over a mask already read.
int share_of(const std::vector<int>& cpus, int index, int count) {
  if (cpus.size() < 2 || index < 0 || index >= count)
    return -1;
  return cpus[static_cast<size_t>(index) * cpus.size() /
              static_cast<size_t>(count)];
}

}  // namespace

bool move_off_this_cpu() {
  const std::vector<int> mask = allowed_cpus();
  const int cpu = ::sched_getcpu();
  if (mask.size() < 2 || !std::binary_search(mask.begin(), mask.end(), cpu))
    return false;
  std::vector<int> others = mask;
  others.erase(std::find(others.begin(), others.end(), cpu));
  return move_within(mask, others);
}

bool move_to_cpu(int cpu) {
  const std::vector<int> mask = allowed_cpus();
  if (mask.size() < 2 || !std::binary_search(mask.begin(), mask.end(), cpu))
    return false;
  return move_within(mask, {cpu});
}

int share_cpu(int index, int count) {
  return share_of(allowed_cpus(), index, count);
}

std::vector<int> share_cpus(int count) {
  const std::vector<int> cpus = allowed_cpus();
  std::vector<int> homes;
  if (cpus.size() < 2)
    return homes;
  for (int i = 0; i < count; ++i)
    homes.push_back(share_of(cpus, i, count));
  return homes;
}

}  // namespace jaccl::detail
