// What a request may not write, applied to the logits before sampling: the
// end-of-generation tokens under ignore_eos, and every token its grammar refuses at this
// point (grammar/). A grammar that leaves nothing to write ends the reply with a reason
// of its own, never silently as if the model had finished. Shared by ReplyGenerator (one chat
// reply) and the Scheduler (each batched request has its own GrammarMatcher; the TokenMaskTable
// behind it is shared).
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "smol/generate/stop.hpp"
#include "smol/grammar/grammar_limits.hpp"
#include "smol/grammar/grammar_matcher.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

// What the sampler may draw from, or why nothing may be drawn.
struct ConstrainedRow {
  std::span<const float> logits;   // the row to sample from (when `stop` is unset)
  std::optional<StopReason> stop;  // set: no token may come, and the reply ends so
};

class TokenConstraints {
 public:
  TokenConstraints(bool ignore_eos, std::shared_ptr<TokenMaskTable> grammar)
      : ignore_eos_(ignore_eos) {
    if (grammar) grammar_ = std::make_unique<GrammarMatcher>(std::move(grammar));
  }

  bool active() const { return ignore_eos_ || grammar_ != nullptr; }

  // The row the sampler should see: `logits` itself when nothing is constrained, else a
  // copy in `scratch_` with the refused tokens at -inf. When no token is allowed at all,
  // a stop reason instead: end_of_generation when the grammar is complete and ignore_eos
  // forbids ending; grammar_dead_end when the grammar is not complete but no token of
  // the vocabulary continues it; grammar_budget when the next mask needs more than the
  // grammar's budgets (grammar_limits.hpp).
  ConstrainedRow mask(std::span<const float> logits, const Tokenizer& tokenizer) {
    if (!active()) return {logits, std::nullopt};
    scratch_.assign(logits.begin(), logits.end());
    if (grammar_) {
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
    try {
      if (grammar_->accept(token)) return std::nullopt;
    } catch (const GrammarLimitError&) {
      return StopReason::grammar_budget;
    }
    return StopReason::end_of_generation;
  }

  const GrammarMatcher* grammar() const { return grammar_.get(); }

 private:
  bool ignore_eos_;
  // A pointer rather than std::optional: GCC 12 warns falsely (-Wmaybe-uninitialized)
  // about an optional matcher inlined into ReplyGenerator::run.
  std::unique_ptr<GrammarMatcher> grammar_;
  std::vector<float> scratch_;
};

}  // namespace smol
