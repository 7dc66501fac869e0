// Log-probabilities of sampled tokens, as OpenAI's `logprobs` reports them: the
// log-softmax of the model's raw logits row (before penalties, temperature, top-k/p,
// min-p and any grammar mask), the chosen token's and the `top` most likely ones'.
//
// OpenAI reports the model's own distribution, whatever the sampling settings. llama-server
// reports the same by default for its OpenAI-compatible endpoints ("post_sampling_probs":
// false) and, with `post_sampling_probs: true`, the probabilities after its samplers:
// smol too (post_sampling_logprobs, from the distribution the sampler draws from). A
// grammar-constrained request (structured output,
// tool calls) also gets the raw distribution: a refused token still shows its chance.
//
// Computed only for requests that ask (GenerationRequest::logprobs): a pass over the row
// for the log-sum-exp and a partial sort for the top ones; nothing otherwise.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "smol/generate/sampler.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

// One token and its log-probability, with the token's exact bytes (a token may hold part
// of a UTF-8 character: the bytes are exact, a client decodes them as it sees fit).
struct TokenChoiceLogprob {
  TokenId token = 0;
  float logprob = 0.0f;
  std::string bytes;
};

// A sampled token's log-probability and the most likely tokens at its position, most
// likely first (ties: lower id first), at most the number asked for.
struct TokenLogprob {
  TokenChoiceLogprob chosen;
  std::vector<TokenChoiceLogprob> top;
  // From the distribution after the sampler's steps (post_sampling_logprobs), which
  // llama-server reports as probabilities ("prob", "top_probs").
  bool post_sampling = false;
};

// The most top-logprobs a request may ask for (OpenAI's limit for chat; its legacy
// endpoint allows 5, llama-server more).
inline constexpr std::size_t kMaxTopLogprobs = 20;

namespace detail {

// log(sum(exp(x))) over the finite entries of `logits`; NaN counts as -inf.
inline double log_sum_exp(std::span<const float> logits) {
  double max = -std::numeric_limits<double>::infinity();
  for (const float x : logits) {
    if (!std::isnan(x)) max = std::max<double>(max, x);
  }
  if (!std::isfinite(max)) return max;
  double sum = 0.0;
  for (const float x : logits) {
    if (!std::isnan(x)) sum += std::exp(static_cast<double>(x) - max);
  }
  return max + std::log(sum);
}

inline float logprob_of(std::span<const float> logits, std::size_t id, double lse) {
  const float x = logits[id];
  if (std::isnan(x) || !std::isfinite(lse)) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(static_cast<double>(x) - lse);
}

}  // namespace detail

// The log-probabilities of `chosen` and of the `top` most likely tokens under the
// softmax of `logits` (a model's row, restricted to the tokenizer's ids).
inline TokenLogprob token_logprobs(std::span<const float> logits, TokenId chosen, std::size_t top,
                                   const Tokenizer& tokenizer) {
  const std::size_t n = std::min(logits.size(), tokenizer.size());
  logits = logits.first(n);
  const double lse = detail::log_sum_exp(logits);
  const auto entry = [&](std::size_t id) {
    return TokenChoiceLogprob{
        static_cast<TokenId>(id), detail::logprob_of(logits, id, lse),
        tokenizer.token_to_piece(static_cast<TokenId>(id), {.render_special = true})};
  };
  TokenLogprob result;
  result.chosen = entry(static_cast<std::size_t>(chosen));
  top = std::min(top, n);
  if (top == 0) return result;
  std::vector<std::size_t> ids(n);
  std::iota(ids.begin(), ids.end(), std::size_t{0});
  const auto key = [&](std::size_t id) {
    const float x = logits[id];
    return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x;
  };
  std::partial_sort(
      ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(top), ids.end(),
      [&](std::size_t a, std::size_t b) { return key(a) != key(b) ? key(a) > key(b) : a < b; });
  result.top.reserve(top);
  for (std::size_t i = 0; i < top; ++i) result.top.push_back(entry(ids[i]));
  return result;
}

// The same from the distribution a sampler draws from (Sampler::distribution: after the
// penalties, a grammar's mask, top-k, top-p, min-p and the temperature; greedy: the one
// token, probability 1): `chosen`'s and the `top` most likely of the tokens it keeps, as
// log-probabilities (fewer than `top` when it keeps fewer tokens).
inline TokenLogprob post_sampling_logprobs(std::span<const Sampler::TokenChance> chances,
                                           TokenId chosen, std::size_t top,
                                           const Tokenizer& tokenizer) {
  const auto entry = [&](TokenId id, double probability) {
    return TokenChoiceLogprob{id,
                              probability > 0.0 ? static_cast<float>(std::log(probability))
                                                : -std::numeric_limits<float>::infinity(),
                              tokenizer.token_to_piece(id, {.render_special = true})};
  };
  TokenLogprob result;
  result.post_sampling = true;
  double chosen_probability = 0.0;
  for (const Sampler::TokenChance& c : chances) {
    if (c.id == chosen) chosen_probability = c.probability;
  }
  result.chosen = entry(chosen, chosen_probability);
  std::vector<Sampler::TokenChance> sorted(chances.begin(), chances.end());
  top = std::min(top, sorted.size());
  std::partial_sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(top), sorted.end(),
                    [](const auto& a, const auto& b) {
                      return a.probability != b.probability ? a.probability > b.probability
                                                            : a.id < b.id;
                    });
  for (std::size_t i = 0; i < top; ++i)
    result.top.push_back(entry(sorted[i].id, sorted[i].probability));
  return result;
}

}  // namespace smol
