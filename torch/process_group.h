// Copyright 2026 the jaccl authors.
// ProcessGroupJaccl: torch.distributed's collectives on a jaccl group whose
// side channel is the c10d store torch hands the backend.
//
// Each process group owns one jaccl group and one worker thread; ops run in
// the order they were issued. An op of at most inline_bytes() bytes issued
// while nothing is queued or running runs on the calling thread and returns
// a completed Work (a thread hand-off costs more than such an op), as does
// a larger one whose caller waited for the large ops before it at once
// (WaitPattern: a synchronous call); any other op is queued for the worker
// and returns at once. wait() blocks, and
// getFuture() completes when the op ends (DDP chains its gradient division
// on that future). Checks that need no peer (dtype, device, shapes, reduce
// op) throw in the caller; a jaccl failure (peer lost, timeout, protocol)
// completes the Work with an error of its kind whose text is jaccl's, and
// the jaccl group then fails every later op at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "compat.h"
#include "jaccl/jaccl.h"

namespace jaccl_torch {

// How a group's caller waits for its ops above inline_bytes(): whether the
// latest one was waited for at once (wait() within kAtOnce of the submit's
// return, as a synchronous dist.all_reduce does), shared by the group and
// that op's Work.
struct WaitPattern {
  static constexpr std::chrono::microseconds kAtOnce{100};
  std::atomic<uint64_t> latest{0};      // the latest such op's number
  std::atomic<int64_t> returned_ns{0};  // when its submit returned
  std::atomic<bool> waited_at_once{false};
  int streak = 0;  // such ops in a row waited for at once (group's mu_)
};

// The Work of one op, completed by whichever thread ran it (with an error,
// or with the op's output tensors as the future's value). The future is
// made only when asked for: most callers only wait().
class JacclWork : public c10d::Work {
 public:
  JacclWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  // kNoTimeout (0): torch 1.13 declares it outside c10d.
  bool wait(std::chrono::milliseconds timeout =
                std::chrono::milliseconds(0)) override;
  void complete(std::exception_ptr error);
  // This Work is large op number `seq` of the group whose pattern it is.
  void watch(std::shared_ptr<WaitPattern> pattern, uint64_t seq);

 private:
  void settle(c10::ivalue::Future& future);

  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;  // guarded by mutex_
  std::shared_ptr<WaitPattern> pattern_;            // null: a small op
  uint64_t seq_ = 0;
};

class ProcessGroupJaccl : public BackendBase {
 public:
  // Bootstraps the jaccl group over `store` (blocking, bounded by timeout).
  // The config is Config::from_env() (so JACCL_TRANSPORT, JACCL_IFNAME,
  // JACCL_WIRES, JACCL_TOKEN, JACCL_HEARTBEAT_TIMEOUT ... apply when set; none
  // is needed) with torch's rank, size, store and timeout, which bounds both
  // the bootstrap and each op.
  ProcessGroupJaccl(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                    int size, std::chrono::milliseconds timeout);
  // Over a jaccl group made otherwise (shrink()); no store.
  explicit ProcessGroupJaccl(std::shared_ptr<jaccl::Group> group);
  ~ProcessGroupJaccl() override;

  const std::string getBackendName() const override { return "jaccl"; }
  // The jaccl group's data plane ("shm", "tcp mesh+ring" ...).
  std::string data_plane() const { return group_->backend_name(); }

  // ---- elastic groups (docs/failures.md) ----------------------------------
  // abort, revoke and failed_ranks act on the jaccl group at once, from any
  // thread (an op in flight ends with AbortedError / RevokedError);
  // agree_failed and shrink run in op order, after what is queued (which
  // fails fast on a failed group), and block the caller.
  void abort() { group_->abort(); }
  void revoke() { group_->revoke(); }
  std::vector<int> failed_ranks() { return group_->failed_ranks(); }
  std::vector<int> agree_failed();
  // A new process group of the live ranks not in exclude, numbered in this
  // group's order; nullptr on a rank in exclude.
  c10::intrusive_ptr<ProcessGroupJaccl> shrink(const std::vector<int>& exclude);

  // Runs what is queued, then stops and joins the worker; later ops are
  // refused. Idempotent. The caller must not hold the GIL: the worker may
  // need it to drop the last reference to a Python tensor.
  void shutdown();
  // shutdown() of every live group: the module's atexit hook, so that no
  // worker still drops tensors (taking the GIL) while the interpreter
  // finalizes, which ended ranks with "terminate called without an active
  // exception" after their last op.
  static void shutdown_all();

  // Ops of at most this many bytes run on the calling thread when nothing
  // is queued or running (0: every op goes through the worker). Process
  // wide; jaccl_torch.set_inline_bytes() in Python. A larger op runs there
  // too once kEagerStreak of them in a row were waited for at once
  // (WaitPattern): its caller would block for it anyway.
  static size_t inline_bytes() { return inline_bytes_.load(); }
  static void set_inline_bytes(size_t n) { inline_bytes_.store(n); }
  static constexpr size_t kDefaultInlineBytes = size_t{64} << 10;
  static constexpr int kEagerStreak = 2;

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts =
          c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts =
          c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input,
      std::vector<int64_t>& output_split_sizes,
      std::vector<int64_t>& input_split_sizes,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

 private:
  struct Task {
    c10::intrusive_ptr<JacclWork> work;
    const char* name;
    std::function<void()> run;
  };

  // Runs `run` inline (see inline_bytes()) or queues it for the worker;
  // `bytes` is what the op moves, the Work's result is `outputs`.
  template <class F>
  c10::intrusive_ptr<c10d::Work> submit(c10d::OpType type, const char* name,
                                        std::vector<at::Tensor> outputs,
                                        size_t bytes, F&& run);
  // Runs fn as an op (in order with the others) and waits for it; throws
  // its error.
  void run_blocking(const char* name, std::function<void()> fn);
  void start();  // the worker, the registry (both constructors)
  void worker_loop();
  // All-reduce of a contiguous CPU tensor in place (the op's thread).
  void allreduce_dense(at::Tensor& t, const c10d::ReduceOp& op);
  // Reduce-scatter of flat ([size, n], contiguous) into out.
  void reduce_scatter_flat(at::Tensor flat, const at::Tensor& out,
                           const c10d::ReduceOp& op);

  std::shared_ptr<jaccl::Group> group_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool busy_ = false;  // an op is running (worker or inline); guarded by mu_
  bool stop_ = false;
  std::shared_ptr<WaitPattern> waits_ = std::make_shared<WaitPattern>();
  std::thread worker_;
  static inline std::atomic<size_t> inline_bytes_{kDefaultInlineBytes};
};

}  // namespace jaccl_torch
