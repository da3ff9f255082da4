// Copyright 2026 the jaccl authors.
#include "collectives/hier_group.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "common/error.h"
#include "common/reduce.h"
#include "transport/shm_copy.h"

namespace jaccl::detail {

HostMap HostMap::from_host_ids(const std::vector<int>& host_id) {
  HostMap m;
  const size_t n = host_id.size();
  m.host_of.assign(n, -1);
  m.index_of.assign(n, -1);
  std::map<int, int> seen;  // host id -> host index, by first rank
  for (size_t r = 0; r < n; ++r) {
    auto [it, fresh] =
        seen.emplace(host_id[r], static_cast<int>(m.hosts.size()));
    if (fresh)
      m.hosts.emplace_back();
    auto& members = m.hosts[static_cast<size_t>(it->second)];
    m.host_of[r] = it->second;
    m.index_of[r] = static_cast<int>(members.size());
    members.push_back(static_cast<int>(r));
  }
  return m;
}

std::vector<int> HostMap::leaders() const {
  std::vector<int> out;
  for (const auto& h : hosts)
    out.push_back(h.front());
  return out;
}

namespace {

// Every host has the same number of ranks and they are consecutive (host h
// holds ranks h*L .. h*L+L-1): the leaders' all_gather and sum_scatter then
// line up with the job's rank order.
bool blocked(const HostMap& m) {
  const size_t per = m.hosts.front().size();
  for (size_t h = 0; h < m.hosts.size(); ++h) {
    if (m.hosts[h].size() != per || m.hosts[h].front() != int(h * per))
      return false;
  }
  return true;
}

}  // namespace

HierGroup::HierGroup(int rank, HostMap map, std::shared_ptr<Group> local,
                     std::shared_ptr<Group> leaders, std::shared_ptr<Group> p2p,
                     std::shared_ptr<FailureState> state, std::string name)
    : rank_(rank),
      map_(std::move(map)),
      host_(map_.host_of[static_cast<size_t>(rank)]),
      index_(map_.index_of[static_cast<size_t>(rank)]),
      leader_(index_ == 0),
      local_(std::move(local)),
      leaders_(std::move(leaders)),
      p2p_(std::move(p2p)),
      name_(std::move(name)),
      ops_(rank_, map_.size(), rank_, std::move(state), Millis(0)) {}

void HierGroup::reduce_on(Group& g, ReduceOp op, const void* in, void* out,
                          size_t n, int dtype) {
  g.all_reduce(in, out, n, dtype, op);
}

void HierGroup::all_reduce(ReduceOp op, OpKind kind, const void* in, void* out,
                           size_t n, int dtype) {
  ops_.run(call::all_reduce(kind, in, out, n, dtype), [&](const Deadline&) {
    if (local_)
      reduce_on(*local_, op, in, out, n, dtype);
    else
      copy_bytes(out, in, n);
    if (leaders_)
      reduce_on(*leaders_, op, out, out, n, dtype);
    if (local_)
      local_->broadcast(out, n, 0);
  });
}

void HierGroup::all_sum(const void* in, void* out, size_t n, int dtype) {
  all_reduce(ReduceOp::Sum, OpKind::AllSum, in, out, n, dtype);
}
void HierGroup::all_max(const void* in, void* out, size_t n, int dtype) {
  all_reduce(ReduceOp::Max, OpKind::AllMax, in, out, n, dtype);
}
void HierGroup::all_min(const void* in, void* out, size_t n, int dtype) {
  all_reduce(ReduceOp::Min, OpKind::AllMin, in, out, n, dtype);
}

void HierGroup::all_reduce(const void* in, void* out, size_t n, int dtype,
                           ReduceOp op) {
  all_reduce(op, all_reduce_kind(op), in, out, n, dtype);
}

void HierGroup::all_gather(const void* in, void* out, size_t n) {
  ops_.run(call::all_gather(in, out, n),
           [&](const Deadline&) { gather_body(in, out, n); });
}

void HierGroup::gather_body(const void* in, void* out, size_t n) {
  const size_t total = n * static_cast<size_t>(size());
  char* dst = static_cast<char*>(out);
  // Each host's block (its ranks' inputs in rank order), padded to the
  // largest host so the leaders can all_gather equal blocks.
  size_t widest = 0;
  for (const auto& h : map_.hosts)
    widest = std::max(widest, h.size());
  const size_t block = widest * n;
  if (tmp_.size() < block)
    tmp_.resize(block);
  if (local_)
    local_->all_gather(in, tmp_.data(), n);
  else
    copy_bytes(tmp_.data(), in, n);
  if (leaders_) {
    if (blocked(map_)) {
      leaders_->all_gather(tmp_.data(), out, block);
    } else {
      const size_t all = block * map_.hosts.size();
      if (tmp2_.size() < all)
        tmp2_.resize(all);
      leaders_->all_gather(tmp_.data(), tmp2_.data(), block);
      for (size_t h = 0; h < map_.hosts.size(); ++h) {
        for (size_t j = 0; j < map_.hosts[h].size(); ++j) {
          copy_bytes(dst + static_cast<size_t>(map_.hosts[h][j]) * n,
                     tmp2_.data() + h * block + j * n, n);
        }
      }
    }
  }
  if (local_)
    local_->broadcast(out, total, 0);
}

void HierGroup::sum_scatter(const void* in, void* out, size_t n, int dtype) {
  ops_.run(call::sum_scatter(in, out, n, dtype),
           [&](const Deadline&) { scatter_body(in, out, n, dtype); });
}

void HierGroup::scatter_body(const void* in, void* out, size_t n, int dtype) {
  const size_t total = n * static_cast<size_t>(size());
  // The host's sum of every rank's slice, then the leaders' sum of those;
  // the leader hands each local rank its slice.
  if (tmp_.size() < total)
    tmp_.resize(total);
  if (local_)
    local_->all_sum(in, tmp_.data(), total, dtype);
  else
    copy_bytes(tmp_.data(), in, total);
  if (!leader_) {
    local_->recv(out, n, 0);
    return;
  }
  const auto& mine = map_.hosts[static_cast<size_t>(host_)];
  const char* sums = tmp_.data();  // slice of job rank r at r * n
  size_t first = 0;                // job rank of sums' first slice
  if (blocked(map_)) {
    // Leader h gets the slices of ranks h*L .. h*L+L-1, reduced.
    const size_t part = mine.size() * n;
    if (tmp2_.size() < part)
      tmp2_.resize(part);
    leaders_->sum_scatter(tmp_.data(), tmp2_.data(), part, dtype);
    sums = tmp2_.data();
    first = static_cast<size_t>(mine.front());
  } else {
    leaders_->all_sum(tmp_.data(), tmp_.data(), total, dtype);
  }
  copy_bytes(out, sums + (static_cast<size_t>(rank_) - first) * n, n);
  for (size_t j = 1; j < mine.size(); ++j) {
    local_->send(sums + (static_cast<size_t>(mine[j]) - first) * n, n,
                 static_cast<int>(j));
  }
}

void HierGroup::barrier() {
  ops_.run(call::barrier(), [&](const Deadline&) {
    if (local_)
      local_->barrier();
    if (leaders_)
      leaders_->barrier();
    if (local_)
      local_->barrier();
  });
}

void HierGroup::broadcast(void* buf, size_t n, int root) {
  ops_.run(call::broadcast(buf, n, root), [&](const Deadline&) {
    const int root_host = map_.host_of[static_cast<size_t>(root)];
    if (local_ && host_ == root_host)
      local_->broadcast(buf, n, map_.index_of[static_cast<size_t>(root)]);
    if (leaders_)
      leaders_->broadcast(buf, n, root_host);
    if (local_ && host_ != root_host)
      local_->broadcast(buf, n, 0);
  });
}

void HierGroup::send(const void* in, size_t n, int dst) {
  ops_.run(call::send(in, n, dst), [&](const Deadline&) {
    const int h = map_.host_of[static_cast<size_t>(dst)];
    const int j = map_.index_of[static_cast<size_t>(dst)];
    if (h == host_)
      local_->send(in, n, j);
    else if (leader_ && j == 0)
      leaders_->send(in, n, h);  // leaders' wires belong to their group
    else
      p2p_->send(in, n, dst);
  });
}

void HierGroup::recv(void* out, size_t n, int src) {
  ops_.run(call::recv(out, n, src), [&](const Deadline&) {
    const int h = map_.host_of[static_cast<size_t>(src)];
    const int j = map_.index_of[static_cast<size_t>(src)];
    if (h == host_)
      local_->recv(out, n, j);
    else if (leader_ && j == 0)
      leaders_->recv(out, n, h);
    else
      p2p_->recv(out, n, src);
  });
}

}  // namespace jaccl::detail
