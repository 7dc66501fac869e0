// Why a reply ended, and the matcher for user-given stop strings.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace smol {

enum class StopReason {
  end_of_generation,  // eos, <|im_end|>, <|eot_id|>, ...: the model finished its turn
  stop_string,        // the text reached one of the caller's stop strings
  max_tokens,         // the caller's token budget is spent
  context_full,       // no position left in the session's context
  cancelled,          // the caller's cancel flag was set (Ctrl-C)
  grammar_dead_end,   // the grammar is not complete, yet no token of the vocabulary continues it
  grammar_budget,     // following the grammar further needs more than its budgets
};

inline std::string_view to_string(StopReason reason) {
  switch (reason) {
    case StopReason::end_of_generation:
      return "end of generation";
    case StopReason::stop_string:
      return "stop string";
    case StopReason::max_tokens:
      return "max tokens";
    case StopReason::context_full:
      return "context full";
    case StopReason::cancelled:
      return "cancelled";
    case StopReason::grammar_dead_end:
      return "grammar dead end (no token continues it)";
    case StopReason::grammar_budget:
      return "grammar budget spent";
  }
  return "unknown";
}

// Watches streamed text for stop strings. Text that could still grow into a stop
// string is held back, so a caller never prints the first half of "User:" before
// knowing whether the rest follows.
class StopStringMatcher {
 public:
  StopStringMatcher() = default;
  explicit StopStringMatcher(std::vector<std::string> stop_strings)
      : stop_strings_(std::move(stop_strings)) {
    std::erase_if(stop_strings_, [](const std::string& s) { return s.empty(); });
  }

  struct Result {
    std::string released;  // safe to show: cannot be part of a stop string
    bool matched = false;  // a stop string was found; `released` is the text before it
    std::string stop;      // which one (the earliest in the text; on a tie, the first given)
  };

  Result push(std::string_view text) {
    held_.append(text);
    Result result;
    std::size_t first_match = std::string::npos;
    for (const std::string& stop : stop_strings_) {
      const std::size_t at = held_.find(stop);
      if (at < first_match) {
        first_match = at;
        result.stop = stop;
      }
    }
    if (first_match != std::string::npos) {
      result.released = held_.substr(0, first_match);
      result.matched = true;
      held_.clear();
      return result;
    }
    const std::size_t keep = longest_suffix_that_starts_a_stop();
    result.released = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return result;
  }

  // Releases what is held back: the stream ended without completing a stop string.
  std::string flush() { return std::exchange(held_, std::string()); }

 private:
  std::size_t longest_suffix_that_starts_a_stop() const {
    std::size_t longest = 0;
    for (const std::string& stop : stop_strings_) {
      for (std::size_t length = std::min(stop.size() - 1, held_.size()); length > longest;
           --length) {
        if (std::string_view(held_).substr(held_.size() - length) ==
            std::string_view(stop).substr(0, length)) {
          longest = length;
          break;
        }
      }
    }
    return longest;
  }

  std::vector<std::string> stop_strings_;
  std::string held_;
};

}  // namespace smol
