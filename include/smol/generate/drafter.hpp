// Drafter: guesses the tokens that come next, for speculative decoding.
//
// Decoding one token reads every weight once, so on a CPU a sequence's decode speed is
// capped by memory bandwidth. The model can check several guessed tokens in one pass over
// the weights (generate/speculative_decoder.hpp): a drafter supplies the guesses, cheaply,
// and the model keeps the longest prefix it agrees with. A drafter never changes what is
// generated, only how many forward passes it takes; a poor one only wastes work.
//
// Two kinds: NgramDrafter (the text so far repeats itself: prompt lookup) and
// ModelDrafter (a small model with the same vocabulary runs ahead greedily).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "smol/text/vocabulary.hpp"

namespace smol {

class Drafter {
 public:
  virtual ~Drafter() = default;

  // Appends to `draft` up to `max_tokens` guesses for the tokens that follow `history`
  // (every token of the sequence so far: the prompt, the reply, the token just sampled).
  // Deterministic: the same history gives the same guesses, which is what makes the
  // acceptance rule of draft_verification.hpp keep the output distribution unchanged.
  virtual void draft(std::span<const TokenId> history, std::size_t max_tokens,
                     std::vector<TokenId>& draft) = 0;
};

}  // namespace smol
