// Copyright 2026 the jaccl authors.
#include "group/group_handle.h"

#include <utility>

#include "common/error.h"
#include "group/split.h"

namespace jaccl {

std::shared_ptr<Group> Group::split(int, int) {
  detail::raise(ErrorKind::Usage,
                std::string("split is not supported by this group (") +
                    backend_name() + ")",
                {.rank = rank()});
}

namespace detail {

GroupHandle::GroupHandle(std::shared_ptr<Group> inner, Config cfg,
                         std::vector<int> names, GroupControl control)
    : inner_(std::move(inner)),
      cfg_(std::move(cfg)),
      names_(std::move(names)),
      control_(std::move(control)) {}

int GroupHandle::job_rank(int member) const {
  return names_.empty() ? member : names_[static_cast<size_t>(member)];
}

template <class F>
void GroupHandle::naming_job_ranks(F&& f) {
  if (names_.empty()) {
    f();
    return;
  }
  try {
    f();
  } catch (const Error& e) {
    throw_renamed(e, names_);
  }
}

void GroupHandle::all_sum(const void* in, void* out, size_t n, int dtype) {
  naming_job_ranks([&] { inner_->all_sum(in, out, n, dtype); });
}
void GroupHandle::all_max(const void* in, void* out, size_t n, int dtype) {
  naming_job_ranks([&] { inner_->all_max(in, out, n, dtype); });
}
void GroupHandle::all_min(const void* in, void* out, size_t n, int dtype) {
  naming_job_ranks([&] { inner_->all_min(in, out, n, dtype); });
}
void GroupHandle::all_gather(const void* in, void* out, size_t n) {
  naming_job_ranks([&] { inner_->all_gather(in, out, n); });
}
void GroupHandle::sum_scatter(const void* in, void* out, size_t n, int dtype) {
  naming_job_ranks([&] { inner_->sum_scatter(in, out, n, dtype); });
}
void GroupHandle::send(const void* in, size_t n, int dst) {
  naming_job_ranks([&] { inner_->send(in, n, dst); });
}
void GroupHandle::recv(void* out, size_t n, int src) {
  naming_job_ranks([&] { inner_->recv(out, n, src); });
}
void GroupHandle::barrier() {
  naming_job_ranks([&] { inner_->barrier(); });
}
void GroupHandle::broadcast(void* buf, size_t n, int root) {
  naming_job_ranks([&] { inner_->broadcast(buf, n, root); });
}

void GroupHandle::all_to_all(const void* in, void* out, size_t n) {
  naming_job_ranks([&] { inner_->all_to_all(in, out, n); });
}
void GroupHandle::all_to_allv(const void* in, std::span<const size_t> send,
                              void* out, std::span<const size_t> recv) {
  naming_job_ranks([&] { inner_->all_to_allv(in, send, out, recv); });
}
void GroupHandle::all_reduce(const void* in, void* out, size_t n, int dtype,
                             ReduceOp op) {
  naming_job_ranks([&] { inner_->all_reduce(in, out, n, dtype, op); });
}
void GroupHandle::reduce(const void* in, void* out, size_t n, int dtype,
                         ReduceOp op, int root) {
  naming_job_ranks([&] { inner_->reduce(in, out, n, dtype, op, root); });
}
void GroupHandle::gather(const void* in, void* out, size_t n, int root) {
  naming_job_ranks([&] { inner_->gather(in, out, n, root); });
}
void GroupHandle::scatter(const void* in, void* out, size_t n, int root) {
  naming_job_ranks([&] { inner_->scatter(in, out, n, root); });
}

std::shared_ptr<Group> GroupHandle::split(int color, int key) {
  // Not guarded: split_group's errors already name job ranks.
  return split_group(*this, color, key);
}

}  // namespace detail
}  // namespace jaccl
