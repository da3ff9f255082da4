// Copyright 2026 the jaccl authors.
#include "process_group.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <set>
#include <utility>

#include "algorithms.h"
#include "op_checks.h"
#include "store_all_gather.h"

namespace jaccl_torch {

using c10d::ReduceOp;

// ---- Work ---------------------------------------------------------------

JacclWork::JacclWork(int rank, c10d::OpType type,
                     std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), outputs_(std::move(outputs)) {}

void JacclWork::settle(c10::ivalue::Future& future) {
  if (exception_) {
    future.setError(exception_);
  } else {
    future.markCompleted(c10::IValue(outputs_));
  }
}

c10::intrusive_ptr<c10::ivalue::Future> JacclWork::getFuture() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (future_)
    return future_;
  future_ =
      c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
  auto future = future_;
  if (completed_) {
    lock.unlock();  // settle() runs the future's callbacks
    settle(*future);
  }
  return future;
}

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void JacclWork::watch(std::shared_ptr<WaitPattern> pattern, uint64_t seq) {
  pattern_ = std::move(pattern);
  seq_ = seq;
}

bool JacclWork::wait(std::chrono::milliseconds timeout) {
  if (pattern_ && pattern_->latest.load() == seq_ &&
      steady_ns() - pattern_->returned_ns.load() <=
          std::chrono::nanoseconds(WaitPattern::kAtOnce).count()) {
    pattern_->waited_at_once.store(true);
  }
  return c10d::Work::wait(timeout);
}

void JacclWork::complete(std::exception_ptr error) {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    // As Work::finish, and in the same step the future to settle: one made
    // later is settled by getFuture().
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = true;
    exception_ = error;
    future = future_;
  }
  cv_.notify_all();
  if (future)
    settle(*future);
}

// ---- the process group ----------------------------------------------------

namespace {

// Every live process group, for shutdown_all().
std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
std::set<ProcessGroupJaccl*>& registry() {
  static std::set<ProcessGroupJaccl*> live;
  return live;
}

}  // namespace

ProcessGroupJaccl::ProcessGroupJaccl(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout)
    : BackendBase(rank, size) {
  jaccl::Config cfg = jaccl::Config::from_env();
  if (cfg.get_join() >= 0) {
    // torch's rendezvous says who is in the job and no torch rank calls
    // grow: ranks that all had it used to build a "generation 1" group
    // unasked; a lone one would look for a grow nobody makes.
    jaccl::ErrorInfo info;
    info.rank = rank;
    info.detail = "JACCL_JOIN=" + std::to_string(cfg.get_join()) +
                  " is set, but a torch.distributed process group takes its "
                  "members from torch's rendezvous (this process: rank " +
                  std::to_string(rank) + " of " + std::to_string(size) +
                  "), not from a jaccl grow: unset JACCL_JOIN (it is for "
                  "programs that call jaccl::init or jaccl.init themselves)";
    throw jaccl::ConfigError(std::move(info));
  }
  cfg.set_rank(rank)
      .set_size(size)
      .set_timeout(timeout)
      .set_op_timeout(timeout)
      .set_all_gather_factory(store_all_gather_factory(store, timeout));
  group_ = jaccl::init(cfg, /*strict=*/true);
  start();
}

ProcessGroupJaccl::ProcessGroupJaccl(std::shared_ptr<jaccl::Group> group)
    : BackendBase(group->rank(), group->size()), group_(std::move(group)) {
  start();
}

void ProcessGroupJaccl::start() {
  init();
  worker_ = std::thread([this] { worker_loop(); });
  std::lock_guard<std::mutex> lock(registry_mu());
  registry().insert(this);
}

ProcessGroupJaccl::~ProcessGroupJaccl() {
  {
    std::lock_guard<std::mutex> lock(registry_mu());
    registry().erase(this);
  }
  shutdown();
}

void ProcessGroupJaccl::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // Ops still queued run first: each is bounded by the op timeout, and after
  // a failure the jaccl group fails them at once.
  if (worker_.joinable())
    worker_.join();
}

void ProcessGroupJaccl::shutdown_all() {
  // Holding the registry lock keeps a group being destroyed elsewhere
  // intact until this is done with it (its destructor waits to unregister).
  std::lock_guard<std::mutex> lock(registry_mu());
  for (ProcessGroupJaccl* pg : registry())
    pg->shutdown();
}

namespace {

// Runs an op on this thread; returns its outcome for the op's Work.
template <class F>
std::exception_ptr run_op(const char* name, F& run) {
  std::exception_ptr error;
  try {
    run();
  } catch (const jaccl::Error& e) {
    // Of the same kind and fields, so that Python sees
    // jaccl_torch.<Kind>Error (module.cpp) with e's rank and peers.
    error = jaccl::with_context(
        e, std::string("jaccl_torch: ") + name + " failed: ");
  } catch (const std::exception& e) {
    // jaccl's message ("[jaccl] rank 1: rank 3 died ...") with the op.
    error = std::make_exception_ptr(std::runtime_error(
        std::string("jaccl_torch: ") + name + " failed: " + what_of(e)));
  } catch (...) {
    error = std::current_exception();
  }
  return error;
}

}  // namespace

template <class F>
c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::submit(
    c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
    size_t bytes, F&& run) {
  auto work = c10::make_intrusive<JacclWork>(rank_, type, std::move(outputs));
  const size_t limit = inline_bytes();
  const bool small = bytes <= limit;
  WaitPattern& waits = *waits_;
  // Stamped when the call returns: wait() measures from there.
  struct Returned {
    WaitPattern* p;
    ~Returned() {
      if (p)
        p->returned_ns.store(steady_ns());
    }
  } returned{small ? nullptr : &waits};
  {
    std::unique_lock<std::mutex> lock(mu_);
    TORCH_CHECK(!stop_, "jaccl_torch: ", name,
                ": the process group is shut down (destroyed, or the "
                "interpreter is exiting)");
    bool eager = false;
    if (!small) {
      // The previous large op was waited for at once, or not (async_op,
      // DDP's buckets, a wait after other work): the streak goes on or
      // ends.
      waits.streak = waits.latest.load() != 0 && waits.waited_at_once.load()
                         ? waits.streak + 1
                         : 0;
      eager = limit != 0 && waits.streak >= kEagerStreak;  // 0: no op inline
      waits.waited_at_once.store(false);
      work->watch(waits_, waits.latest.fetch_add(1) + 1);
    }
    if ((!small && !eager) || busy_ || !queue_.empty()) {
      queue_.push_back(Task{work, name, std::forward<F>(run)});
      lock.unlock();
      cv_.notify_one();
      return work;
    }
    busy_ = true;  // ops issued meanwhile queue up behind this one
  }
  std::exception_ptr error;
  {
    // Ops copy into and out of user tensors: data movement, not something
    // autograd should record.
    at::NoGradGuard no_grad;
    error = run_op(name, run);
  }
  bool queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    queued = !queue_.empty();
  }
  if (queued)
    cv_.notify_one();
  work->complete(error);
  return work;
}

void ProcessGroupJaccl::worker_loop() {
  at::NoGradGuard no_grad;
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // An inline op (busy_) runs before anything queued after it.
      cv_.wait(lock, [&] {
        return (!busy_ && !queue_.empty()) || (stop_ && queue_.empty());
      });
      if (queue_.empty())
        return;
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    auto error = run_op(task.name, task.run);
    auto work = std::move(task.work);
    task = Task{};  // the op's tensors are dropped before the next op starts
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
    }
    // Completed once the group is idle again: a caller woken by wait()
    // finds it idle, and its next small op runs inline.
    work->complete(error);
  }
}

void ProcessGroupJaccl::run_blocking(const char* name,
                                     std::function<void()> fn) {
  auto work = submit(c10d::OpType::UNKNOWN, name, {}, 0, std::move(fn));
  work->wait();  // rethrows the op's error (its jaccl kind, module.cpp)
}

std::vector<int> ProcessGroupJaccl::agree_failed() {
  std::vector<int> failed;
  run_blocking("agree_failed", [&] { failed = group_->agree_failed(); });
  return failed;
}

c10::intrusive_ptr<ProcessGroupJaccl> ProcessGroupJaccl::shrink(
    const std::vector<int>& exclude) {
  std::shared_ptr<jaccl::Group> child;
  run_blocking("shrink", [&] { child = group_->shrink(exclude); });
  if (!child)
    return {};
  return c10::make_intrusive<ProcessGroupJaccl>(std::move(child));
}

void ProcessGroupJaccl::allreduce_dense(at::Tensor& t, const ReduceOp& op) {
  const int dt = find_dtype(t);
  void* p = t.data_ptr();
  const size_t n = nbytes(t);
  switch (op.op_) {
    case ReduceOp::SUM:
      group_->all_sum(p, p, n, dt);
      return;
    case ReduceOp::AVG:
      group_->all_sum(p, p, n, dt);
      t.div_(size_);
      return;
    case ReduceOp::MAX:
      group_->all_max(p, p, n, dt);
      return;
    case ReduceOp::MIN:
      group_->all_min(p, p, n, dt);
      return;
    case ReduceOp::PRODUCT:
      group_->all_reduce(p, p, n, dt, jaccl::ReduceOp::Prod);
      return;
    case ReduceOp::BAND:
      group_->all_reduce(p, p, n, dt, jaccl::ReduceOp::BitAnd);
      return;
    case ReduceOp::BOR:
      group_->all_reduce(p, p, n, dt, jaccl::ReduceOp::BitOr);
      return;
    case ReduceOp::BXOR:
      group_->all_reduce(p, p, n, dt, jaccl::ReduceOp::BitXor);
      return;
    default:
      TORCH_CHECK(false, "jaccl_torch: unsupported reduce op ",
                  static_cast<int>(op.op_));
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "all_reduce");
  check_reducible(t, opts.reduceOp, "all_reduce");
  return submit(c10d::OpType::ALLREDUCE, "all_reduce", {t}, nbytes(t),
                [this, t, op = opts.reduceOp] {
                  Dense d(t);
                  allreduce_dense(d.t, op);
                  d.write_back();
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::reduce(
    std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  check_reducible(t, opts.reduceOp, "reduce");
  check_root(opts.rootRank, size_, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  // An all-reduce; ranks other than the root reduce a copy, so their tensor
  // keeps its input.
  return submit(c10d::OpType::REDUCE, "reduce", {t}, nbytes(t),
                [this, t, root, op = opts.reduceOp] {
                  Dense d(t, /*copy=*/rank_ != root);
                  allreduce_dense(d.t, op);
                  if (rank_ == root)
                    d.write_back();
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  check_cpu(t, "broadcast");
  check_root(opts.rootRank, size_, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  return submit(c10d::OpType::BROADCAST, "broadcast", {t}, nbytes(t),
                [this, t, root] {
                  Dense d(t);
                  group_->broadcast(d.ptr(), d.bytes(), root);
                  if (rank_ != root)
                    d.write_back();
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::allgather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  const at::Tensor& in = single(inputs, "all_gather");
  check_cpu(in, "all_gather");
  TORCH_CHECK(outputs.size() == 1,
              "jaccl_torch: all_gather: one output list per process, got ",
              outputs.size());
  const std::vector<at::Tensor> outs = outputs[0];
  check_list(outs, in, size_, "all_gather", "the output list");
  return submit(c10d::OpType::ALLGATHER, "all_gather", outs, nbytes(in) * size_,
                [this, in, outs] {
                  Dense d(in);
                  // The list's tensors are separate buffers: gather into
                  // one, then copy each part out.
                  at::Tensor all = at::empty({size_, in.numel()}, in.options());
                  group_->all_gather(d.ptr(), all.data_ptr(), d.bytes());
                  for (int r = 0; r < size_; ++r) {
                    outs[r].copy_(all[r].view(outs[r].sizes()));
                  }
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  check_cpu(input, "all_gather_into_tensor");
  check_cpu(output, "all_gather_into_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "jaccl_torch: all_gather_into_tensor: output dtype ",
              output.scalar_type(), ", input ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size_,
              "jaccl_torch: all_gather_into_tensor: output has ",
              output.numel(), " elements, expected ", size_, " x ",
              input.numel());
  return submit(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor",
                {output}, nbytes(output), [this, in = input, out = output] {
                  Dense din(in, /*copy=*/in.is_alias_of(out));
                  Dense dout(out);
                  group_->all_gather(din.ptr(), dout.ptr(), din.bytes());
                  dout.write_back();
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::gather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  check_cpu(in, "gather");
  check_root(opts.rootRank, size_, "gather");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1,
                "jaccl_torch: gather: the root needs one output list, got ",
                outputs.size());
    outs = outputs[0];
    check_list(outs, in, size_, "gather", "the gather list");
  } else {
    TORCH_CHECK(outputs.empty(),
                "jaccl_torch: gather: only the root passes a gather list");
  }
  return submit(c10d::OpType::GATHER, "gather", outs, nbytes(in) * size_,
                [this, in, outs, root] {
                  Dense d(in);
                  if (rank_ != root) {
                    group_->gather(d.ptr(), nullptr, d.bytes(), root);
                    return;
                  }
                  at::Tensor all = at::empty({size_, in.numel()}, in.options());
                  group_->gather(d.ptr(), all.data_ptr(), d.bytes(), root);
                  for (int r = 0; r < size_; ++r) {
                    outs[r].copy_(all[r].view(outs[r].sizes()));
                  }
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  check_cpu(out, "scatter");
  check_root(opts.rootRank, size_, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1,
                "jaccl_torch: scatter: the root needs one scatter list, got ",
                inputs.size());
    ins = inputs[0];
    check_list(ins, out, size_, "scatter", "the scatter list");
  } else {
    TORCH_CHECK(inputs.empty(),
                "jaccl_torch: scatter: only the root passes a scatter list");
  }
  return submit(c10d::OpType::SCATTER, "scatter", {out}, nbytes(out) * size_,
                [this, out, ins, root] {
                  Dense d(out);
                  at::Tensor all;
                  if (rank_ == root) {
                    all = at::empty({size_, out.numel()}, out.options());
                    for (int r = 0; r < size_; ++r) {
                      all[r].copy_(ins[r].reshape({-1}));
                    }
                  }
                  group_->scatter(rank_ == root ? all.data_ptr() : nullptr,
                                  d.ptr(), d.bytes(), root);
                  d.write_back();
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::reduce_scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  check_reducible(out, opts.reduceOp, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1,
              "jaccl_torch: reduce_scatter: one input list per process, got ",
              inputs.size());
  const std::vector<at::Tensor> ins = inputs[0];
  check_list(ins, out, size_, "reduce_scatter", "the input list");
  return submit(
      c10d::OpType::REDUCE_SCATTER, "reduce_scatter", {out},
      nbytes(out) * size_, [this, out, ins, op = opts.reduceOp] {
        // jaccl reduces one buffer: the list is copied into it.
        at::Tensor flat = at::empty({size_, out.numel()}, out.options());
        for (int r = 0; r < size_; ++r) {
          flat[r].copy_(ins[r].reshape({-1}));
        }
        reduce_scatter_flat(flat, out, op);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input,
    const c10d::ReduceScatterOptions& opts) {
  check_reducible(output, opts.reduceOp, "reduce_scatter_tensor");
  check_cpu(input, "reduce_scatter_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "jaccl_torch: reduce_scatter_tensor: output dtype ",
              output.scalar_type(), ", input ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size_,
              "jaccl_torch: reduce_scatter_tensor: input has ", input.numel(),
              " elements, expected ", size_, " x ", output.numel());
  return submit(
      c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {output},
      nbytes(input), [this, in = input, out = output, op = opts.reduceOp] {
        // The fallback reductions work in place: they get a copy,
        // as does an input that shares memory with the output.
        const bool sum = op.op_ == ReduceOp::SUM || op.op_ == ReduceOp::AVG;
        Dense din(in, /*copy=*/!sum || in.is_alias_of(out));
        reduce_scatter_flat(din.t.view({size_, -1}), out, op);
      });
}

void ProcessGroupJaccl::reduce_scatter_flat(at::Tensor flat,
                                            const at::Tensor& out,
                                            const ReduceOp& op) {
  if (op.op_ == ReduceOp::SUM || op.op_ == ReduceOp::AVG) {
    Dense d(out);
    group_->sum_scatter(flat.data_ptr(), d.ptr(), d.bytes(), find_dtype(out));
    if (op.op_ == ReduceOp::AVG)
      d.t.div_(size_);
    d.write_back();
    return;
  }
  // jaccl's reduce-scatter sums only: all-reduce the whole, keep this part.
  allreduce_dense(flat, op);
  out.copy_(flat[rank_].view(out.sizes()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::alltoall_base(
    at::Tensor& output, at::Tensor& input,
    std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions&) {
  check_cpu(input, "all_to_all_single");
  check_cpu(output, "all_to_all_single");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "jaccl_torch: all_to_all_single: output dtype ",
              output.scalar_type(), ", input ", input.scalar_type());
  std::vector<size_t> send_n, send_off, recv_n, recv_off;
  splits(input, input_split_sizes, size_, "input", send_n, send_off);
  splits(output, output_split_sizes, size_, "output", recv_n, recv_off);
  return submit(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {output},
                std::max(nbytes(input), nbytes(output)),
                [this, in = input, out = output, send_n, recv_n] {
                  // Split sizes pack the blocks back to back along dim 0: one
                  // all_to_allv, whose counts check names a rank whose split
                  // sizes disagree with its peer's.
                  Dense din(in, /*copy=*/in.is_alias_of(out));
                  Dense dout(out);
                  group_->all_to_allv(din.ptr(), send_n, dout.ptr(), recv_n);
                  dout.write_back();
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions&) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ &&
                  static_cast<int>(outputs.size()) == size_,
              "jaccl_torch: all_to_all: ", inputs.size(), " inputs and ",
              outputs.size(), " outputs for a group of size ", size_);
  for (int r = 0; r < size_; ++r) {
    check_cpu(inputs[r], "all_to_all");
    check_cpu(outputs[r], "all_to_all");
    TORCH_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type() &&
                    outputs[r].scalar_type() == inputs[0].scalar_type(),
                "jaccl_torch: all_to_all: tensors of different dtypes");
  }
  return submit(c10d::OpType::ALLTOALL, "all_to_all", outputs,
                list_bytes(inputs), [this, ins = inputs, outs = outputs] {
                  std::vector<Dense> din, dout;
                  din.reserve(size_);
                  dout.reserve(size_);
                  std::vector<PeerBlock> blocks(size_);
                  for (int r = 0; r < size_; ++r) {
                    din.emplace_back(ins[r], ins[r].is_alias_of(outs[r]));
                    dout.emplace_back(outs[r]);
                    blocks[r] = {din[r].ptr(), din[r].bytes(), dout[r].ptr(),
                                 dout[r].bytes()};
                  }
                  all_to_all_blocks(*group_, blocks);
                  for (auto& d : dout)
                    d.write_back();
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::send(
    std::vector<at::Tensor>& tensors, int dst, int tag) {
  const at::Tensor& t = single(tensors, "send");
  check_cpu(t, "send");
  TORCH_CHECK(tag == 0, "jaccl_torch: send: tag ", tag,
              " is not supported: jaccl matches messages between two ranks "
              "by their order (use tag 0)");
  TORCH_CHECK(dst >= 0 && dst < size_ && dst != rank_,
              "jaccl_torch: send: ", "destination rank ", dst,
              " is not another rank of this group (", "size ", size_,
              ", this rank ", rank_, ")");
  return submit(c10d::OpType::SEND, "send", {t}, nbytes(t), [this, t, dst] {
    Dense d(t);
    group_->send(d.ptr(), d.bytes(), dst);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::recv(
    std::vector<at::Tensor>& tensors, int src, int tag) {
  const at::Tensor& t = single(tensors, "recv");
  check_cpu(t, "recv");
  TORCH_CHECK(tag == 0, "jaccl_torch: recv: tag ", tag,
              " is not supported: jaccl matches messages between two ranks "
              "by their order (use tag 0)");
  TORCH_CHECK(src >= 0 && src < size_ && src != rank_,
              "jaccl_torch: recv: ", "source rank ", src,
              " is not another rank of this group (", "size ", size_,
              ", this rank ", rank_, ")");
  return submit(c10d::OpType::RECV, "recv", {t}, nbytes(t), [this, t, src] {
    Dense d(t);
    group_->recv(d.ptr(), d.bytes(), src);
    d.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::recvAnysource(
    std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false,
              "jaccl_torch: recv without a source rank is not supported "
              "(jaccl receives from a named rank: pass src=)");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupJaccl::barrier(
    const c10d::BarrierOptions&) {
  return submit(c10d::OpType::BARRIER, "barrier", {}, 0,
                [this] { group_->barrier(); });
}

}  // namespace jaccl_torch
