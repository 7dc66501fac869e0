// Choosing the next token from a row of logits.
//
// The steps run in llama.cpp's default order, each skipped when its setting is off:
//   0. logit bias: a fixed amount added to chosen tokens' logits (-infinity bans one;
//      a token a grammar masked stays masked);
//   1. penalties over the last `penalty_window` accepted tokens: repetition (a
//      positive logit is divided by repeat_penalty, a negative one multiplied),
//      then frequency (count * frequency_penalty) and presence (presence_penalty);
//   2. temperature <= 0: greedy, the highest logit (lowest id on a tie); done;
//   3. top-k: keep the k highest logits;
//   4. top-p: keep the most likely tokens until their probability reaches top_p;
//   5. min-p: drop tokens less likely than min_p times the most likely one;
//   6. temperature: divide the logits by it;
//   7. draw from the softmax of what is left.
// Steps 4 and 5 use probabilities at temperature 1, as llama.cpp does, so the
// temperature changes only how the survivors are weighed, not which survive.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

// Defaults are llama.cpp's (common_params_sampling).
struct SamplerSettings {
  float temperature = 0.8f;     // <= 0: greedy
  int top_k = 40;               // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int penalty_window = 64;            // how many recent accepted tokens the penalties see
  std::optional<std::uint64_t> seed;  // unset: a random seed; set: reproducible choices
  // (token, amount) added to the token's logit first (OpenAI's and llama.cpp's
  // logit_bias; ids past the logits' row are the caller's to refuse: check_logit_bias).
  std::vector<std::pair<TokenId, float>> logit_bias;

  static SamplerSettings greedy() {
    SamplerSettings settings;
    settings.temperature = 0.0f;
    return settings;
  }

  // The programs' and smol::Chat's defaults: SmolLM3's recommended temperature (0.6,
  // with top-p 0.95); the rest are llama.cpp's.
  static SamplerSettings smollm3() {
    SamplerSettings settings;
    settings.temperature = 0.6f;
    return settings;
  }
};

// Refuses a bias on a token the vocabulary does not have, naming it.
inline void check_logit_bias(const SamplerSettings& settings, std::size_t vocabulary_size) {
  for (const auto& [token, bias] : settings.logit_bias) {
    if (token < 0 || static_cast<std::size_t>(token) >= vocabulary_size) {
      fail("logit_bias: token ", token, " is not in this model's vocabulary (0 to ",
           vocabulary_size - 1, ")");
    }
    if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity()) {
      fail("logit_bias: token ", token, "'s bias must be a number or -infinity");
    }
  }
}

// The highest logit; the lowest id wins a tie (as in llama.cpp's greedy goldens).
inline TokenId greedy_token(std::span<const float> logits) {
  if (logits.empty()) fail("sampler: empty logits");
  std::size_t best = 0;
  for (std::size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<TokenId>(best);
}

class Sampler {
 public:
  explicit Sampler(SamplerSettings settings = {})
      : settings_(settings), random_(settings.seed ? *settings.seed : std::random_device{}()) {}

  // Chooses a token; call accept() with the token that is actually used.
  TokenId sample(std::span<const float> logits) {
    if (!keep_candidates(logits)) return argmax();
    return draw();
  }

  // A token and the probability that sample() would choose it.
  struct TokenChance {
    TokenId id;
    double probability;
  };

  // The distribution sample() draws from for these logits, the same steps applied (the
  // penalties see the same history): the surviving tokens, most likely first, with their
  // probabilities. Greedy: the highest logit with probability 1. Speculative sampling
  // (generate/draft_verification.hpp) weighs a drafted token against it. Valid until the
  // next call; draws nothing, so the random sequence is untouched.
  std::span<const TokenChance> distribution(std::span<const float> logits) {
    chances_.clear();
    if (!keep_candidates(logits)) {
      chances_.push_back({argmax(), 1.0});
      return chances_;
    }
    const std::vector<double> probs = probabilities();
    for (std::size_t i = 0; i < probs.size(); ++i) {
      if (probs[i] > 0.0) chances_.push_back({candidates_[i].id, probs[i]});
    }
    return chances_;
  }

  // A double in [0, 1) from the sampler's generator (its seed makes it reproducible).
  double uniform() {
    // The top 53 bits: std::uniform_real_distribution's algorithm is left to each
    // standard library, and a seed should pick the same tokens with every compiler.
    return static_cast<double>(random_() >> 11) * 0x1.0p-53;
  }

  // Draws from `chances` (a distribution() result) with `excluded` taken out and the rest
  // renormalised; `excluded` itself only when nothing else has a chance.
  TokenId draw_excluding(std::span<const TokenChance> chances, TokenId excluded) {
    double total = 0.0;
    for (const TokenChance& c : chances) total += c.id == excluded ? 0.0 : c.probability;
    if (total <= 0.0) return excluded;
    const double target = uniform() * total;
    double cumulative = 0.0;
    std::optional<TokenId> last;
    for (const TokenChance& c : chances) {
      if (c.id == excluded) continue;
      cumulative += c.probability;
      last = c.id;
      if (target < cumulative) return c.id;
    }
    return *last;  // rounding left the sum a hair below the total
  }

  // Records a token (generated or from the prompt) for the penalties.
  void accept(TokenId token) {
    if (settings_.penalty_window <= 0) return;
    history_.push_back(token);
    while (history_.size() > static_cast<std::size_t>(settings_.penalty_window)) {
      history_.pop_front();
    }
  }

  TokenId sample_and_accept(std::span<const float> logits) {
    const TokenId token = sample(logits);
    accept(token);
    return token;
  }

  void reset_history() { history_.clear(); }
  const SamplerSettings& settings() const { return settings_; }

 private:
  static constexpr float kInfinity = std::numeric_limits<float>::infinity();

  struct Candidate {
    TokenId id;
    float logit;
  };

  // Steps 1 and 3-6 of the list above into candidates_. False: greedy (the temperature
  // is 0), the penalised logits are left indexed by id for argmax().
  bool keep_candidates(std::span<const float> logits) {
    if (logits.empty()) fail("sampler: empty logits");
    candidates_.resize(logits.size());
    for (std::size_t i = 0; i < logits.size(); ++i) {
      // A NaN would break the sort's ordering; it can only mean "never this one".
      const float logit = std::isnan(logits[i]) ? -kInfinity : logits[i];
      candidates_[i] = {static_cast<TokenId>(i), logit};
    }
    for (const auto& [token, bias] : settings_.logit_bias) {
      if (token >= 0 && static_cast<std::size_t>(token) < candidates_.size()) {
        candidates_[static_cast<std::size_t>(token)].logit += bias;
      }
    }
    apply_penalties();
    if (settings_.temperature <= 0.0f) return false;

    const bool top_p = settings_.top_p<1.0f, min_p = settings_.min_p> 0.0f;
    if (settings_.top_k > 0 || top_p || min_p) {
      sort_by_logit(settings_.top_k > 0 ? static_cast<std::size_t>(settings_.top_k)
                                        : candidates_.size());
    }
    if (top_p) keep_top_p();
    if (min_p) keep_min_p();
    for (auto& candidate : candidates_) candidate.logit /= settings_.temperature;
    return true;
  }

  static bool before(const Candidate& a, const Candidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  }

  // Runs while candidates_ is still indexed by id.
  void apply_penalties() {
    const bool repeat = settings_.repeat_penalty != 1.0f;
    if (history_.empty() ||
        (!repeat && settings_.frequency_penalty == 0.0f && settings_.presence_penalty == 0.0f)) {
      return;
    }
    std::unordered_map<TokenId, int> counts;
    for (const TokenId token : history_) {
      if (token >= 0 && static_cast<std::size_t>(token) < candidates_.size()) ++counts[token];
    }
    for (const auto& [token, count] : counts) {
      float& logit = candidates_[static_cast<std::size_t>(token)].logit;
      if (repeat)
        logit = logit <= 0.0f ? logit * settings_.repeat_penalty : logit / settings_.repeat_penalty;
      logit -= static_cast<float>(count) * settings_.frequency_penalty + settings_.presence_penalty;
    }
  }

  TokenId argmax() const {
    return std::min_element(candidates_.begin(), candidates_.end(), before)->id;
  }

  // Sorts the best `keep` candidates to the front and drops the rest.
  void sort_by_logit(std::size_t keep) {
    keep = std::min(keep, candidates_.size());
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep),
                      candidates_.end(), before);
    candidates_.resize(keep);
  }

  // Softmax of the candidates' logits.
  std::vector<double> probabilities() const {
    std::vector<double> probs(candidates_.size(), 0.0);
    double max_logit = -kInfinity;
    for (const auto& candidate : candidates_)
      max_logit = std::max<double>(max_logit, candidate.logit);
    if (max_logit == -kInfinity) {  // nothing is possible: fall back to the first
      probs.front() = 1.0;
      return probs;
    }
    double sum = 0.0;
    for (std::size_t i = 0; i < probs.size(); ++i) {
      probs[i] = std::exp(static_cast<double>(candidates_[i].logit) - max_logit);
      sum += probs[i];
    }
    for (double& p : probs) p /= sum;
    return probs;
  }

  void keep_top_p() {
    const std::vector<double> probs = probabilities();
    double cumulative = 0.0;
    std::size_t keep = 0;
    while (keep < probs.size()) {
      cumulative += probs[keep++];
      if (cumulative >= settings_.top_p) break;
    }
    candidates_.resize(std::max<std::size_t>(keep, 1));
  }

  void keep_min_p() {
    // p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p)
    const float threshold = candidates_.front().logit + std::log(settings_.min_p);
    std::size_t keep = 1;
    while (keep < candidates_.size() && candidates_[keep].logit >= threshold) ++keep;
    candidates_.resize(keep);
  }

  TokenId draw() {
    const std::vector<double> probs = probabilities();
    const double target = uniform();
    double cumulative = 0.0;
    for (std::size_t i = 0; i < probs.size(); ++i) {
      cumulative += probs[i];
      if (target < cumulative) return candidates_[i].id;
    }
    return candidates_.back().id;  // rounding left the sum a hair below 1
  }

  SamplerSettings settings_;
  std::mt19937_64 random_;
  std::deque<TokenId> history_;
  std::vector<Candidate> candidates_;
  std::vector<TokenChance> chances_;  // distribution()'s result
};

}  // namespace smol
