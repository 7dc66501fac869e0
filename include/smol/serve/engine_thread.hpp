// EngineThread: the one thread that drives a Scheduler, asleep while there is no work.
//
// Connections submit and cancel from their own threads; the engine thread steps the
// scheduler while it has requests and sleeps on a condition variable when it has none,
// so an idle server uses no CPU. It also publishes the scheduler's occupancy (slots
// busy, requests waiting), which only the engine thread may read, for /metrics.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "smol/generate/scheduler.hpp"

namespace smol::serve {

class EngineThread {
 public:
  explicit EngineThread(Scheduler& scheduler)
      : scheduler_(&scheduler), thread_([this] { run(); }) {}

  EngineThread(const EngineThread&) = delete;
  EngineThread& operator=(const EngineThread&) = delete;

  // Cancels what is left and joins.
  ~EngineThread() { stop(); }

  // Queues a request and wakes the engine; nothing once stop() has begun (the request
  // would never run). Throws what Scheduler::submit throws.
  std::optional<RequestId> submit(GenerationRequest request) {
    RequestId id = 0;
    {
      // Under the lock, so that stop() cannot slip between the check and the queueing:
      // a request queued before it is ended by the engine's last cancel_all().
      std::lock_guard lock(mutex_);
      if (stopping_) return std::nullopt;
      id = scheduler_->submit(std::move(request));
      ++work_;
    }
    wake_.notify_one();
    return id;
  }

  void cancel(RequestId id) {
    scheduler_->cancel(id);
    wake();
  }

  // Every request still waiting or running ends as cancelled; then the thread exits.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

  // Runs `task(scheduler)` on the engine thread, between steps, and returns what it
  // returns (or throws what it throws): what only the engine thread may touch (the
  // cached sequences behind /slots). Throws smol::Error once stop() has begun.
  template <class Task>
  auto call(Task task) -> decltype(task(std::declval<Scheduler&>())) {
    using Result = decltype(task(std::declval<Scheduler&>()));
    std::packaged_task<Result(Scheduler&)> packaged(std::move(task));
    std::future<Result> result = packaged.get_future();
    {
      std::lock_guard lock(mutex_);
      if (stopping_) fail("the engine is stopping");
      tasks_.emplace_back([shared = std::make_shared<decltype(packaged)>(std::move(packaged))](
                              Scheduler& s) { (*shared)(s); });
      ++work_;
    }
    wake_.notify_one();
    return result.get();
  }

  std::size_t slots_busy() const { return running_.load(std::memory_order_relaxed); }
  std::size_t queue_depth() const { return waiting_.load(std::memory_order_relaxed); }
  std::size_t failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  void wake() {
    {
      std::lock_guard lock(mutex_);
      ++work_;
    }
    wake_.notify_one();
  }

  void run() {
    std::size_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        if (stopping_) break;
        seen = work_;
      }
      std::vector<std::function<void(Scheduler&)>> tasks;
      {
        std::lock_guard lock(mutex_);
        tasks.swap(tasks_);
      }
      for (auto& task : tasks) task(*scheduler_);  // a packaged task keeps its exception
      bool worked = false;
      try {
        worked = scheduler_->step();
      } catch (const std::exception& error) {
        // A failed step leaves no request half-served: each ends as cancelled, the
        // clients get their end, and the engine serves the next ones.
        std::fprintf(stderr, "smol: a batch failed: %s; its requests end\n", error.what());
        failures_.fetch_add(1, std::memory_order_relaxed);
        scheduler_->cancel_all();
      }
      running_.store(scheduler_->running(), std::memory_order_relaxed);
      waiting_.store(scheduler_->waiting(), std::memory_order_relaxed);
      if (worked) continue;
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || work_ != seen; });
    }
    scheduler_->cancel_all();
    {
      std::lock_guard lock(mutex_);
      for (auto& task : tasks_) task(*scheduler_);  // none is left waiting
      tasks_.clear();
    }
    running_.store(0, std::memory_order_relaxed);
    waiting_.store(0, std::memory_order_relaxed);
  }

  Scheduler* scheduler_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::size_t work_ = 0;  // submits and cancels so far: a change means work to look at
  std::vector<std::function<void(Scheduler&)>> tasks_;  // call()'s, run between steps
  bool stopping_ = false;
  std::atomic<std::size_t> running_{0}, waiting_{0}, failures_{0};
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace smol::serve
