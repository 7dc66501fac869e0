// What a request may not write, applied to the logits before sampling: the
// end-of-generation tokens under ignore_eos, and every token its grammar refuses at this
// point (grammar/). Shared by ReplyGenerator (one chat reply) and the Scheduler (each
// batched request has its own GrammarMatcher; the TokenMaskTable behind it is shared).
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "smol/grammar/grammar_matcher.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

class TokenConstraints {
 public:
  TokenConstraints(bool ignore_eos, std::shared_ptr<TokenMaskTable> grammar)
      : ignore_eos_(ignore_eos) {
    if (grammar) grammar_ = std::make_unique<GrammarMatcher>(std::move(grammar));
  }

  bool active() const { return ignore_eos_ || grammar_ != nullptr; }

  // The row the sampler should see: `logits` itself when nothing is constrained, else a
  // copy in `scratch_` with the refused tokens at -inf. Nullopt when no token is allowed
  // at all (the grammar is complete and ignore_eos forbids ending): the reply must end.
  std::optional<std::span<const float>> mask(std::span<const float> logits,
                                             const Tokenizer& tokenizer) {
    if (!active()) return logits;
    scratch_.assign(logits.begin(), logits.end());
    if (grammar_) {
      const std::shared_ptr<const TokenSet> allowed = grammar_->allowed_tokens();
      std::size_t endings = 0;
      if (ignore_eos_) {
        for (const TokenId id : tokenizer.end_of_generation_ids()) endings += allowed->contains(id);
      }
      if (allowed->size() == endings) return std::nullopt;
      allowed->apply(scratch_);
    }
    if (ignore_eos_) {
      for (const TokenId id : tokenizer.end_of_generation_ids()) {
        if (static_cast<std::size_t>(id) < scratch_.size()) {
          scratch_[static_cast<std::size_t>(id)] = -std::numeric_limits<float>::infinity();
        }
      }
    }
    return std::span<const float>(scratch_);
  }

  // Moves the grammar past the sampled token; false when the grammar refuses it (only
  // possible when every allowed logit was -inf or NaN and the sampler fell back): the
  // reply must end there.
  bool accept(TokenId token) { return !grammar_ || grammar_->accept(token); }

  const GrammarMatcher* grammar() const { return grammar_.get(); }

 private:
  bool ignore_eos_;
  // A pointer rather than std::optional: GCC 12 warns falsely (-Wmaybe-uninitialized)
  // about an optional matcher inlined into ReplyGenerator::run.
  std::unique_ptr<GrammarMatcher> grammar_;
  std::vector<float> scratch_;
};

}  // namespace smol
