// Copyright 2026 the jaccl authors.
// The group a caller holds: the data plane's group (net, shm or
// hierarchical) plus what split() needs, the configuration it was built
// from and, for a child, the job ranks of its members. A child's errors
// are made with member numbers by the layers below; the handle maps their
// rank fields to job ranks on the way out, in one place, and the message is
// built again from the mapped fields.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "group/make_group.h"
#include "jaccl/jaccl.h"

namespace jaccl::detail {

class GroupHandle final : public Group {
 public:
  // names[i]: the job rank of member i (empty: the job itself). control:
  // the group's state and liveness monitor (group/elastic.cpp).
  GroupHandle(std::shared_ptr<Group> inner, Config cfg, std::vector<int> names,
              GroupControl control = {});

  int rank() override { return inner_->rank(); }
  int size() override { return inner_->size(); }
  void all_sum(const void* in, void* out, size_t n, int dtype) override;
  void all_max(const void* in, void* out, size_t n, int dtype) override;
  void all_min(const void* in, void* out, size_t n, int dtype) override;
  void all_gather(const void* in, void* out, size_t n) override;
  void sum_scatter(const void* in, void* out, size_t n, int dtype) override;
  void send(const void* in, size_t n, int dst) override;
  void recv(void* out, size_t n, int src) override;
  void barrier() override;
  void broadcast(void* buf, size_t n, int root) override;
  const char* backend_name() const override { return inner_->backend_name(); }
  std::shared_ptr<Group> split(int color, int key) override;
  void all_to_all(const void* in, void* out, size_t n) override;
  void all_to_allv(const void* in, std::span<const size_t> send_counts,
                   void* out, std::span<const size_t> recv_counts) override;
  void all_reduce(const void* in, void* out, size_t n, int dtype,
                  ReduceOp op) override;
  void reduce(const void* in, void* out, size_t n, int dtype, ReduceOp op,
              int root) override;
  void gather(const void* in, void* out, size_t n, int root) override;
  void scatter(const void* in, void* out, size_t n, int root) override;
  // Elastic groups (group/elastic.cpp).
  void abort() override;
  void revoke() override;
  std::vector<int> failed_ranks() override;
  std::vector<int> agree_failed() override;
  std::shared_ptr<Group> shrink(std::span<const int> exclude) override;
  std::shared_ptr<Group> grow(int new_size, AllGatherFactory factory) override;
  int generation() override { return generation_; }
  void set_generation(int g) { generation_ = g; }

  const Config& config() const { return cfg_; }
  // Job rank of member i.
  int job_rank(int member) const;
  const std::vector<int>& names() const { return names_; }
  const GroupControl& control() const { return control_; }

 private:
  // Runs f; a child rethrows a jaccl::Error with job ranks in its fields.
  template <class F>
  void naming_job_ranks(F&& f);

  std::shared_ptr<Group> inner_;
  Config cfg_;
  std::vector<int> names_;
  GroupControl control_;
  int generation_ = 0;
};

}  // namespace jaccl::detail
