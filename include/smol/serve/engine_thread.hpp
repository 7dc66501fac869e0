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
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

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
    running_.store(0, std::memory_order_relaxed);
    waiting_.store(0, std::memory_order_relaxed);
  }

  Scheduler* scheduler_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::size_t work_ = 0;  // submits and cancels so far: a change means work to look at
  bool stopping_ = false;
  std::atomic<std::size_t> running_{0}, waiting_{0}, failures_{0};
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace smol::serve
