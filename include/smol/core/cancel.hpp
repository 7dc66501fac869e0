// Cancellation: how a long call (a prefill of thousands of tokens, a reply, a
// download) learns that whoever started it no longer wants the result.
//
// The caller owns an atomic flag and sets it from anywhere: a signal handler (Ctrl-C),
// another thread (a server whose client hung up). The long call polls it at points
// where stopping leaves everything consistent (between layers, chunks or tokens) and
// then throws Cancelled, or returns early where its result type says so. Polling a
// relaxed atomic costs nothing next to a layer's matrix products, so the points can
// be close together: the time from the flag to the return is bounded by one of them.
#pragma once

#include <atomic>
#include <functional>
#include <utility>

#include "smol/core/error.hpp"

namespace smol {

// Thrown by a call that stopped because its CancelCheck said so. Whatever state the
// call documents as consistent after a cancel (e.g. the KV cache) is consistent.
class Cancelled : public Error {
 public:
  Cancelled() : Error("cancelled") {}
};

// What a long call polls. Built from a flag (implicitly, so `&flag` can be passed
// where a CancelCheck is expected) or from any predicate (tests use one to cancel at
// an exact point). A default-constructed check never fires.
class CancelCheck {
 public:
  CancelCheck() = default;
  CancelCheck(const std::atomic<bool>* flag) noexcept : flag_(flag) {}  // NOLINT: implicit
  explicit CancelCheck(std::function<bool()> predicate) : predicate_(std::move(predicate)) {}

  bool requested() const {
    if (flag_ != nullptr && flag_->load(std::memory_order_relaxed)) return true;
    return predicate_ && predicate_();
  }
  void throw_if_requested() const {
    if (requested()) throw Cancelled();
  }

 private:
  const std::atomic<bool>* flag_ = nullptr;
  std::function<bool()> predicate_;
};

}  // namespace smol
