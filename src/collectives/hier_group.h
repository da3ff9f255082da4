// Copyright 2026 the jaccl authors.
// A group spanning several hosts, some with several ranks: shared memory
// inside each host, TCP between hosts. Reductions are hierarchical (reduce
// inside each host, all-reduce among the hosts' leaders, broadcast back), so
// each host puts one copy of the data on the network instead of one per
// rank. send/recv go straight to the peer: through shared memory on the
// same host, over the pair's own TCP wires otherwise.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collectives/op_runner.h"
#include "common/reduce.h"
#include "jaccl/group.h"
#include "transport/failure.h"

namespace jaccl::detail {

// Who is where: hosts[h] lists the job ranks on host h, ascending; hosts are
// ordered by their first rank, which is the host's leader.
struct HostMap {
  std::vector<std::vector<int>> hosts;
  std::vector<int> host_of;   // job rank -> host index
  std::vector<int> index_of;  // job rank -> index among its host's ranks

  static HostMap from_host_ids(const std::vector<int>& host_id);
  int size() const { return static_cast<int>(host_of.size()); }
  const std::vector<int>& members_of(int rank) const {
    return hosts[static_cast<size_t>(host_of[static_cast<size_t>(rank)])];
  }
  std::vector<int> leaders() const;
};

class HierGroup : public Group {
 public:
  // local: this host's shared-memory group (nullptr when alone on the
  // host); leaders: the hosts' leaders over TCP (only on a leader); p2p:
  // send/recv to ranks on other hosts (every rank).
  HierGroup(int rank, HostMap map, std::shared_ptr<Group> local,
            std::shared_ptr<Group> leaders, std::shared_ptr<Group> p2p,
            std::shared_ptr<FailureState> state, std::string name = "shm+tcp");

  int rank() override { return rank_; }
  int size() override { return map_.size(); }
  void all_sum(const void* in, void* out, size_t n, int dtype) override;
  void all_max(const void* in, void* out, size_t n, int dtype) override;
  void all_min(const void* in, void* out, size_t n, int dtype) override;
  void all_reduce(const void* in, void* out, size_t n, int dtype,
                  ReduceOp op) override;
  void all_gather(const void* in, void* out, size_t n) override;
  void sum_scatter(const void* in, void* out, size_t n, int dtype) override;
  void send(const void* in, size_t n, int dst) override;
  void recv(void* out, size_t n, int src) override;
  void barrier() override;
  void broadcast(void* buf, size_t n, int root) override;
  const char* backend_name() const override { return name_.c_str(); }
  // hier_all_to_all.cpp: same-host pairs through the host's shared-memory
  // group, leader pairs over the leaders' group, the other cross-host pairs
  // over the send/recv group, one phase after the other.
  void all_to_all(const void* in, void* out, size_t n) override;
  void all_to_allv(const void* in, std::span<const size_t> send_counts,
                   void* out, std::span<const size_t> recv_counts) override;

 private:
  // all_gather's body (all_to_allv gathers its counts with it).
  void gather_body(const void* in, void* out, size_t n);
  void scatter_body(const void* in, void* out, size_t n, int dtype);
  void a2a_fixed(const char* in, char* out, size_t n);
  void a2a_varying(const char* in, std::span<const size_t> send, char* out,
                   std::span<const size_t> recv);
  // The three phases of all_to_all(v): counts and offsets by job rank.
  void a2a_phases(bool fixed, uint64_t header_bytes, const char* in,
                  const size_t* send, const size_t* soff, char* out,
                  const size_t* recv, const size_t* roff);
  void all_reduce(ReduceOp op, OpKind kind, const void* in, void* out, size_t n,
                  int dtype);
  static void reduce_on(Group& g, ReduceOp op, const void* in, void* out,
                        size_t n, int dtype);

  int rank_;
  HostMap map_;
  int host_;   // this rank's host
  int index_;  // this rank's index on its host
  bool leader_;
  std::shared_ptr<Group> local_;
  std::shared_ptr<Group> leaders_;
  std::shared_ptr<Group> p2p_;
  std::string name_;
  // Every op's lock, checks and failure rule. No deadline of its own: each
  // step runs on a member group, under that group's op deadline.
  OpRunner ops_;
  std::vector<char> tmp_, tmp2_;
  std::vector<uint64_t> counts_;  // all_to_allv's counts matrix
  std::vector<size_t> a2a_scratch_;
};

}  // namespace jaccl::detail
