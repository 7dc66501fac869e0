// The budgets of a grammar: what one grammar may cost to compile and to follow, so that
// no request's grammar can exhaust the memory, hold a thread for minutes or outlive the
// client that sent it.
//
// Why budgets and not a smarter algorithm alone: a 50-byte grammar can describe work
// without end. `(("a"{0,2000}){0,2000}){0,2000}` reads the text "aaa" in billions of ways
// (which group each "a" belongs to), and a recognizer that follows every way at once
// (this one, and llama.cpp's) holds a stack per way. Counted repetition is compiled
// without copying its element (gbnf.hpp), and each budget below is checked as the work
// happens, so the refusal comes after at most a budget's worth of work, never after the
// whole of it:
//  - elements: the compiled grammar's size, repetitions expanded (GBNF parsing);
//  - step work: the recognizer's work for one step of a TokenMaskTable, the frames it
//    visits to reach one new state plus the vocabulary trie nodes one mask walks; and
//    request work, one request's steps together;
//  - table bytes: one table's states, byte transitions and stack frames (its masks have a
//    cap of their own and are dropped and recomputed over it);
//  - compile time: parsing, the first state and the first mask, together.
// Each exceeded budget is a GrammarLimitError that names it and where it was exceeded.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "smol/core/cancel.hpp"
#include "smol/core/error.hpp"

namespace smol {

struct GrammarLimits {
  std::size_t max_elements = 1'000'000;
  std::size_t max_step_work = 4'000'000;
  // One request's steps together (GrammarMatcher): what a reply may cost in new states,
  // so that a grammar whose every step is just under the step budget cannot slow a
  // server's engine for a whole reply.
  std::size_t max_request_work = 40'000'000;
  std::size_t max_table_bytes = std::size_t{256} << 20;
  double compile_seconds = 10;
};

// A grammar that needs more than one of its budgets (a server answers 400).
class GrammarLimitError : public Error {
 public:
  enum class Budget { elements, step_work, request_work, table_bytes, compile_time };
  GrammarLimitError(Budget budget, const std::string& message) : Error(message), budget_(budget) {}
  Budget budget() const noexcept { return budget_; }

 private:
  Budget budget_;
};

// A number of bytes for a message: MiB when there are any, else bytes.
inline std::string shown_bytes(std::size_t bytes) {
  return bytes >= (std::size_t{1} << 20) ? cat(bytes >> 20, " MiB") : cat(bytes, " bytes");
}

// The work of one step, counted as it is done. A step charges every unit: a stack frame
// expanded, a trie node walked, sixteen stacks looked at (a look costs a sixteenth of an
// expansion, which hashes and may allocate). Past `limit` it throws, and every few
// thousand units it polls the memory, the cancel check and the deadline, so a
// compilation whose client has gone (or whose server is stopping) ends within
// milliseconds. The recognizer's units (not the trie walk's, which a vocabulary bounds)
// also count apart, toward a request's budget (GrammarMatcher).
class GrammarWork {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts a step of at most `limit` units.
  void start(std::size_t limit) {
    peak_ = std::max(peak_, used_);
    used_ = 0;
    recognizer_units_ = 0;
    limit_ = limit;
    next_poll_ = std::min(past_limit(), kPollEvery);
  }

  // While compiling: the caller's cancel check and the compilation's deadline.
  void watch(const CancelCheck* cancel, std::optional<Clock::time_point> deadline, double seconds) {
    cancel_ = cancel;
    deadline_ = deadline;
    seconds_ = seconds;
  }
  void unwatch() { watch(nullptr, std::nullopt, 0); }

  // What the work's owner holds in memory, checked at each poll against `limit` bytes
  // (a single step can grow a recognizer's stack frames by millions).
  void track_memory(std::function<std::size_t()> bytes_in_use, std::size_t limit) {
    bytes_in_use_ = std::move(bytes_in_use);
    byte_limit_ = limit;
  }

  // Returns true when the next poll is due: the caller then calls poll() with its place.
  // `walk`: a trie node's unit, which counts toward the step but not the request.
  bool charge(std::size_t units = 1, bool walk = false) {
    used_ += units;
    if (!walk) recognizer_units_ += units;
    return used_ >= next_poll_;
  }

  // Throws when the step is over its limit, cancelled or past the deadline; `where()`
  // describes the work under way, for the message (called only then).
  template <class Where>
  void poll(const Where& where) {
    if (used_ > limit_) {
      throw GrammarLimitError(
          GrammarLimitError::Budget::step_work,
          cat("grammar: too ambiguous to follow: one step needs more than ", limit_,
              " expansions, at ", where(),
              " (repetitions nested inside repetitions, as (\"a\"{0,100}){0,100}, multiply the "
              "ways to read the same text; write them so that each text has one reading)"));
    }
    if (bytes_in_use_ && bytes_in_use_() > byte_limit_) {
      throw GrammarLimitError(
          GrammarLimitError::Budget::table_bytes,
          cat("grammar: its tables need more than ", shown_bytes(byte_limit_), ", at ", where()));
    }
    if (cancel_ != nullptr) cancel_->throw_if_requested();
    if (deadline_ && Clock::now() > *deadline_) {
      throw GrammarLimitError(
          GrammarLimitError::Budget::compile_time,
          cat("grammar: compiling it takes more than ", seconds_, " seconds, at ", where()));
    }
    next_poll_ = std::min(past_limit(), used_ + kPollEvery);
  }

  std::size_t used() const noexcept { return used_; }
  // This step's recognizer units: the part a request's budget counts.
  std::size_t recognizer_units() const noexcept { return recognizer_units_; }
  // The most units a step has taken so far.
  std::size_t peak() const noexcept { return std::max(peak_, used_); }

 private:
  static constexpr std::size_t kPollEvery = 16384;

  // The first count over the limit (a limit of SIZE_MAX has none: it saturates).
  std::size_t past_limit() const {
    return limit_ == std::numeric_limits<std::size_t>::max() ? limit_ : limit_ + 1;
  }

  std::size_t used_ = 0;
  std::size_t recognizer_units_ = 0;
  std::size_t peak_ = 0;
  std::size_t limit_ = 0;
  std::size_t next_poll_ = 0;
  std::function<std::size_t()> bytes_in_use_;
  std::size_t byte_limit_ = 0;
  const CancelCheck* cancel_ = nullptr;
  std::optional<Clock::time_point> deadline_;
  double seconds_ = 0;
};

}  // namespace smol
