// Whether the model keeps a drafted token: the acceptance rule of speculative decoding.
//
// The model has evaluated [t, d1, ..., dk] in one pass; row i of its logits gives p_i, the
// distribution the sampler would draw the token after d_i from (t for i = 0). Going along
// the rows, d_{i+1} is checked against p_i; the first rejected position gets a token of
// its own, and the rest of the draft is discarded.
//
// Greedy (temperature 0): p_i is all on one token, the sampler's own choice; the draft
// token is kept exactly when it is that choice, so the reply is plain decoding's, token
// for token, provided the rows are the same bits as one-token steps would give (the
// caller's engine must be batch-invariant, see TransformerOptions::one_token).
//
// Sampling: the drafters here are deterministic, a draft d is a function of the history,
// so their "distribution" q is all on d. Speculative sampling (Leviathan et al. 2023, Chen
// et al. 2023) accepts d with probability min(1, p(d) / q(d)) = p(d), and on rejection
// draws from the residual max(0, p - q) renormalised, which is p with d taken out:
// r(x) = p(x) / (1 - p(d)) for x != d, r(d) = 0. The token that comes out has
// probability
//   P(d) = p(d)                                  (accepted; a rejection never yields d)
//   P(x) = (1 - p(d)) * p(x) / (1 - p(d)) = p(x) (rejected, then x drawn), x != d,
// exactly p: each position is distributed as plain sampling would have it, given the
// same history, so the whole reply is too. Only which random numbers are drawn differs,
// so a seed gives other (equally likely) text with speculation than without.
#pragma once

#include <span>

#include "smol/generate/sampler.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

struct DraftVerdict {
  TokenId token;  // the token the position gets: the draft's when accepted
  bool accepted;
};

// Chooses the token that follows at a position for which `draft` was proposed, from the
// row of logits the model gives there (after any masking). Call sampler.accept() with the
// result's token, as after Sampler::sample.
inline DraftVerdict verify_draft_token(Sampler& sampler, std::span<const float> logits,
                                       TokenId draft) {
  if (sampler.settings().temperature <= 0.0f) {
    // The very choice plain decoding makes: same code, same tie rule.
    const TokenId token = sampler.sample(logits);
    return {token, token == draft};
  }
  const std::span<const Sampler::TokenChance> chances = sampler.distribution(logits);
  double p_draft = 0.0;
  for (const Sampler::TokenChance& c : chances) {
    if (c.id == draft) p_draft = c.probability;
  }
  if (p_draft > 0.0 && sampler.uniform() < p_draft) return {draft, true};
  return {sampler.draw_excluding(chances, draft), false};
}

}  // namespace smol
