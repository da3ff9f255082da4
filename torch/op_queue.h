// Copyright 2026 the jaccl authors.
// The order a process group's ops run in, and the threads that run them.
//
// Each queue has one worker thread; ops run one at a time in the order they
// were issued. An op of at most inline_bytes bytes issued while nothing is
// queued or running runs on the issuing thread (a thread hand-off costs more
// than such an op). Every other op is queued for the worker and its Work
// returned at once; but a wait() on an op that has not started yet runs it,
// and whatever is queued ahead of it, on the waiting thread: a synchronous
// torch call (issue, then wait) then costs no hand-off either (two wake-ups
// across threads, 12-25 us on the machines measured), while an op nobody
// waits for still makes progress on the worker.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

namespace jaccl_torch {

class OpQueue;

// The Work of one op, completed by whichever thread ran it (with an error,
// or with the op's output tensors as the future's value). The future is
// made only when asked for: most callers only wait().
class JacclWork : public c10d::Work {
 public:
  JacclWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
            std::weak_ptr<OpQueue> queue);
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  // Runs the op here first if it has not started (OpQueue::help); the
  // timeout bounds only the wait for an op another thread runs (an op this
  // thread runs is bounded by the op timeout).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void complete(std::exception_ptr error);

 private:
  void settle(c10::ivalue::Future& future);

  std::vector<at::Tensor> outputs_;
  std::weak_ptr<OpQueue> queue_;  // weak: a queued op holds its Work
  c10::intrusive_ptr<c10::ivalue::Future> future_;  // guarded by mutex_
};

class OpQueue {
 public:
  OpQueue();   // starts the worker
  ~OpQueue();  // shutdown()
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // Runs `run` inline (small, and the queue idle) or queues it; false when
  // the queue is shut down (nothing ran or was queued).
  bool submit(const c10::intrusive_ptr<JacclWork>& work, const char* name,
              std::function<void()> run, bool small);
  // Runs on this thread what is queued up to and including `work`, if
  // `work` is still queued and no op is running; else returns at once.
  void help(const JacclWork* work);
  // Runs what is queued, then stops and joins the worker; later submits are
  // refused. Idempotent.
  void shutdown();

 private:
  struct Task {
    c10::intrusive_ptr<JacclWork> work;
    const char* name = nullptr;
    std::function<void()> run;
  };

  // Runs a task taken off the queue (busy_ set) and completes its Work once
  // the queue is idle again, so a caller woken by wait() finds it idle and
  // its next small op runs inline.
  void finish(Task task);
  void worker_loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool busy_ = false;  // an op is running (any thread); guarded by mu_
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace jaccl_torch
