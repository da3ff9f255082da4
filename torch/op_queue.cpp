// Copyright 2026 the jaccl authors.
#include "op_queue.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <string>
#include <utility>

#include "jaccl/error.h"

namespace jaccl_torch {

// ---- Work ---------------------------------------------------------------

JacclWork::JacclWork(int rank, c10d::OpType type,
                     std::vector<at::Tensor> outputs,
                     std::weak_ptr<OpQueue> queue)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      queue_(std::move(queue)) {}

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

bool JacclWork::wait(std::chrono::milliseconds timeout) {
  if (auto queue = queue_.lock())
    queue->help(this);
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

// ---- the queue ------------------------------------------------------------

namespace {

std::string what_of(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) {
    return c->what_without_backtrace();
  }
  return e.what();
}

// Runs an op on this thread; returns its outcome for the op's Work.
std::exception_ptr run_op(const char* name, const std::function<void()>& run) {
  // Ops copy into and out of user tensors: data movement, not something
  // autograd should record.
  at::NoGradGuard no_grad;
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

OpQueue::OpQueue() : worker_([this] { worker_loop(); }) {}

OpQueue::~OpQueue() {
  shutdown();
}

bool OpQueue::submit(const c10::intrusive_ptr<JacclWork>& work,
                     const char* name, std::function<void()> run, bool small) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_)
      return false;
    if (!small || busy_ || !queue_.empty()) {
      queue_.push_back(Task{work, name, std::move(run)});
      lock.unlock();
      cv_.notify_one();
      return true;
    }
    busy_ = true;  // ops issued meanwhile queue up behind this one
  }
  finish(Task{work, name, std::move(run)});
  return true;
}

void OpQueue::help(const JacclWork* work) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Only while nothing runs: an op another thread has started is waited
    // for, and ops run one at a time, in order.
    auto it = std::find_if(queue_.begin(), queue_.end(),
                           [&](const Task& t) { return t.work.get() == work; });
    if (busy_ || it == queue_.end())
      return;
    Task task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    const bool last = task.work.get() == work;
    lock.unlock();
    finish(std::move(task));
    if (last)
      return;
    lock.lock();
  }
}

void OpQueue::finish(Task task) {
  auto error = run_op(task.name, task.run);
  auto work = std::move(task.work);
  task = Task{};  // the op's tensors are dropped before the next op starts
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    wake = !queue_.empty() || stop_;
  }
  if (wake)
    cv_.notify_all();  // the worker may be asleep behind this op
  work->complete(error);
}

void OpQueue::worker_loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        // An op running on another thread (busy_) runs before anything
        // queued after it, and ends before shutdown() returns: the ops
        // use the process group that shutdown() is the end of.
        return !busy_ && (!queue_.empty() || stop_);
      });
      if (queue_.empty())
        return;
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    finish(std::move(task));
  }
}

void OpQueue::shutdown() {
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

}  // namespace jaccl_torch
