// ModelDrafter: a small model with the target's vocabulary guesses greedily (llama.cpp's
// -md / --model-draft). Each draft costs k one-token steps of the small model, worth it
// when the small model is several times faster than the target and agrees with it often.
//
// The drafter keeps its own record of the tokens its source holds and, like PromptCache,
// evaluates only what differs from the history it is given: the target's accepted tokens
// after a rejection, the whole prompt the first time. Its guesses past a rejection are
// simply forgotten (a source re-evaluating from a position forgets what came after).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/generate/drafter.hpp"
#include "smol/generate/logits_source.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

// Throws unless a draft model's vocabulary is the target's, token for token: a draft
// token is an id, and an id must mean the same text to both models.
inline void check_same_vocabulary(const Vocabulary& target, const Vocabulary& draft) {
  if (draft.size() != target.size()) {
    fail("the draft model's vocabulary has ", draft.size(), " tokens, the model's ", target.size(),
         "; speculative decoding needs the same vocabulary");
  }
  for (std::size_t id = 0; id < target.size(); ++id) {
    if (draft.tokens[id] != target.tokens[id]) {
      fail("the draft model's vocabulary differs from the model's at token ", id, " ('",
           draft.tokens[id], "' against '", target.tokens[id],
           "'); speculative decoding needs the same vocabulary");
    }
  }
}

class ModelDrafter final : public Drafter {
 public:
  // Borrows the draft model's source. `vocabulary_size`: the tokenizer's, which a model's
  // logits rows may exceed (padding rows are never guessed). `chunk` bounds a catch-up
  // pass, as prefill's chunks do.
  ModelDrafter(LogitsSource& source, std::size_t vocabulary_size, std::size_t chunk = 512)
      : source_(&source),
        vocabulary_size_(vocabulary_size),
        chunk_(std::max<std::size_t>(chunk, 1)) {}

  void draft(std::span<const TokenId> history, std::size_t max_tokens,
             std::vector<TokenId>& draft) override {
    if (history.empty() || max_tokens == 0) return;
    // Guesses past the draft model's context would need positions it does not have.
    const std::size_t room = source_->context_length();
    if (history.size() >= room) return;
    max_tokens = std::min(max_tokens, room - history.size());

    // Re-evaluate at least the last token: its logits give the first guess.
    const auto mismatch = std::mismatch(held_.begin(), held_.end(), history.begin(), history.end());
    const std::size_t reused =
        std::min(static_cast<std::size_t>(mismatch.first - held_.begin()), history.size() - 1);
    held_.resize(reused);
    std::span<const float> logits;
    for (std::size_t begin = reused; begin < history.size(); begin += chunk_) {
      const auto part = history.subspan(begin, std::min(chunk_, history.size() - begin));
      logits = source_->evaluate(part, begin);
      held_.insert(held_.end(), part.begin(), part.end());
    }
    for (std::size_t i = 0;; ++i) {
      const TokenId guess = greedy_token(logits.first(std::min(logits.size(), vocabulary_size_)));
      draft.push_back(guess);
      if (i + 1 == max_tokens) break;
      const TokenId next[] = {guess};
      logits = source_->evaluate(next, held_.size());
      held_.push_back(guess);
    }
  }

 private:
  LogitsSource* source_;
  std::size_t vocabulary_size_;
  std::size_t chunk_;
  std::vector<TokenId> held_;  // the tokens whose K/V the draft source holds, in order
};

}  // namespace smol
