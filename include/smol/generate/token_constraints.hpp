// What a request may not write, applied to the logits before sampling: the
// end-of-generation tokens under ignore_eos, and every token its grammar refuses at this
// point (grammar/). A grammar that leaves nothing to write ends the reply with a reason
// of its own, never silently as if the model had finished. Shared by ReplyGenerator (one chat
// reply) and the Scheduler (each batched request has its own GrammarMatcher; the TokenMaskTable
// behind it is shared).
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/generate/reply_stream.hpp"
#include "smol/generate/stop.hpp"
#include "smol/grammar/grammar_limits.hpp"
#include "smol/grammar/grammar_matcher.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

// Where a lazy grammar starts (llama.cpp's grammar triggers): the reply is free until it
// writes `text` (outside a reasoning block), and from that text's first byte on it
// follows the grammar. Tools with tool_choice "auto" use it: the model may answer in
// prose, and once it starts a call the call is well-formed.
struct GrammarTrigger {
  std::string text;
  bool at_start = false;  // only where the reply begins with it (after whitespace)
};

// What the sampler may draw from, or why nothing may be drawn.
struct ConstrainedRow {
  std::span<const float> logits;   // the row to sample from (when `stop` is unset)
  std::optional<StopReason> stop;  // set: no token may come, and the reply ends so
};

class TokenConstraints {
 public:
  // With `trigger`, the grammar is lazy; `think` and `thinking` (whether the reply
  // starts inside a reasoning block) say where the reasoning is, which never triggers.
  TokenConstraints(bool ignore_eos, std::shared_ptr<TokenMaskTable> grammar,
                   std::optional<GrammarTrigger> trigger = std::nullopt, ThinkMarkers think = {},
                   bool thinking = false)
      : ignore_eos_(ignore_eos), trigger_(std::move(trigger)), think_(think), thinking_(thinking) {
    if (grammar) grammar_ = std::make_unique<GrammarMatcher>(std::move(grammar));
    if (!grammar_) trigger_.reset();
  }

  bool active() const { return ignore_eos_ || (grammar_ != nullptr && !trigger_); }

  // The row the sampler should see: `logits` itself when nothing is constrained, else a
  // copy in `scratch_` with the refused tokens at -inf. When no token is allowed at all,
  // a stop reason instead: end_of_generation when the grammar is complete and ignore_eos
  // forbids ending; grammar_dead_end when the grammar is not complete but no token of
  // the vocabulary continues it; grammar_budget when the next mask needs more than the
  // grammar's budgets (grammar_limits.hpp).
  ConstrainedRow mask(std::span<const float> logits, const Tokenizer& tokenizer) {
    if (!active()) return {logits, std::nullopt};
    scratch_.assign(logits.begin(), logits.end());
    if (grammar_ && !trigger_) {  // a lazy grammar that waits constrains nothing yet
      std::shared_ptr<const TokenSet> allowed;
      try {
        allowed = grammar_->allowed_tokens();
      } catch (const GrammarLimitError&) {
        return {{}, StopReason::grammar_budget};
      }
      std::size_t endings = 0;
      if (ignore_eos_) {
        for (const TokenId id : tokenizer.end_of_generation_ids()) endings += allowed->contains(id);
      }
      if (allowed->size() == endings) {
        return {{},
                grammar_->can_end() ? StopReason::end_of_generation : StopReason::grammar_dead_end};
      }
      allowed->apply(scratch_);
    }
    if (ignore_eos_) {
      for (const TokenId id : tokenizer.end_of_generation_ids()) {
        if (static_cast<std::size_t>(id) < scratch_.size()) {
          scratch_[static_cast<std::size_t>(id)] = -std::numeric_limits<float>::infinity();
        }
      }
    }
    return {std::span<const float>(scratch_), std::nullopt};
  }

  // Moves the grammar past the sampled token. A stop reason when it cannot:
  // end_of_generation when the grammar refuses the token (only possible when every
  // allowed logit was -inf or NaN and the sampler fell back), grammar_budget when the
  // state after it needs more than the grammar's budgets.
  std::optional<StopReason> accept(TokenId token) {
    if (!grammar_) return std::nullopt;
    if (trigger_) return watch(token);
    try {
      if (grammar_->accept(token)) return std::nullopt;
    } catch (const GrammarLimitError&) {
      return StopReason::grammar_budget;
    }
    return StopReason::end_of_generation;
  }

  const GrammarMatcher* grammar() const { return grammar_.get(); }

 private:
  // A lazy grammar's wait: the reply's text (outside reasoning) searched for the trigger,
  // keeping only what may be its start; found, the grammar takes the text from it on.
  std::optional<StopReason> watch(TokenId token) {
    if (think_.open && token == *think_.open) thinking_ = true;
    if (think_.close && token == *think_.close) thinking_ = false;
    if (thinking_) return std::nullopt;
    const std::string& text = trigger_->text;
    seen_ += grammar_->table().vocabulary().piece(token);
    std::size_t found = std::string::npos;
    if (trigger_->at_start) {
      const std::size_t begin = seen_.find_first_not_of(" \t\r\n");
      const std::string_view rest =
          begin == std::string::npos ? std::string_view() : std::string_view(seen_).substr(begin);
      if (rest.starts_with(text)) {
        found = begin;
      } else if (!text.starts_with(rest)) {
        grammar_.reset();  // the reply began otherwise: it stays free
        trigger_.reset();
        return std::nullopt;
      }
    } else {
      found = seen_.find(text);
      if (found == std::string::npos) {
        seen_.erase(0, seen_.size() - std::min(seen_.size(), text.size() - 1));
      }
    }
    if (found == std::string::npos) return std::nullopt;
    trigger_.reset();
    const std::string from_trigger = seen_.substr(found);
    seen_.clear();
    try {
      if (!grammar_->accept_bytes(from_trigger)) return StopReason::grammar_dead_end;
    } catch (const GrammarLimitError&) {
      return StopReason::grammar_budget;
    }
    return std::nullopt;
  }

  bool ignore_eos_;
  std::optional<GrammarTrigger> trigger_;  // set while a lazy grammar waits for it
  ThinkMarkers think_;
  bool thinking_;
  std::string seen_;  // the reply's text since the trigger could have begun
  // A pointer rather than std::optional: GCC 12 warns falsely (-Wmaybe-uninitialized)
  // about an optional matcher inlined into ReplyGenerator::run.
  std::unique_ptr<GrammarMatcher> grammar_;
  std::vector<float> scratch_;
};

}  // namespace smol
