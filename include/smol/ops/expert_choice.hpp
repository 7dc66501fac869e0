// Which experts a token goes through in a mixture of experts, and with what weights.
//
// As llama.cpp's build_moe_ffn: with a softmax gate (Qwen3-MoE), ggml_soft_max over every
// expert's score, ggml_top_k, ggml_get_rows, then ggml_sum_rows and ggml_div for norm_w;
// with SOFTMAX_WEIGHT (GPT-OSS), ggml_top_k on the scores themselves and ggml_soft_max
// over the chosen ones. The softmax is ggml's (ops/softmax.hpp), the choice in
// descending score, ties to the lower expert.
#pragma once

#include <algorithm>
#include <cstddef>

#include "smol/ops/softmax.hpp"

namespace smol {

// How a mixture's router scores become the chosen experts' weights.
enum class ExpertWeighting {
  // A softmax over every expert's score; the most probable are chosen, weighted by
  // their probabilities (llama.cpp's SOFTMAX gate; Qwen3-MoE).
  softmax_all,
  // The highest scores are chosen, weighted by a softmax over theirs alone (llama.cpp's
  // SOFTMAX_WEIGHT gate; GPT-OSS).
  softmax_chosen,
};

// `scores`: one token's n_expert router outputs (with softmax_all turned into
// probabilities in place). `chosen[0..k)`: the experts in descending score,
// `weights[0..k)` theirs as `weighting` says (renormalised to sum to one with
// `normalize_chosen`). 1 <= k <= n_expert.
inline void choose_experts(float* scores, std::size_t n_expert, std::size_t k,
                           ExpertWeighting weighting, bool normalize_chosen, std::size_t* chosen,
                           float* weights) {
  if (weighting == ExpertWeighting::softmax_all) softmax(scores, n_expert);
  // A selection of the k largest, k passes: k is a handful of up to a few hundred.
  for (std::size_t i = 0; i < k; ++i) {
    std::size_t best = n_expert;
    for (std::size_t e = 0; e < n_expert; ++e) {
      if (std::find(chosen, chosen + i, e) != chosen + i) continue;
      if (best == n_expert || scores[e] > scores[best]) best = e;
    }
    chosen[i] = best;
    weights[i] = scores[best];
  }
  if (weighting == ExpertWeighting::softmax_chosen) softmax(weights, k);
  if (!normalize_chosen) return;
  double sum = 0;
  for (std::size_t i = 0; i < k; ++i) sum += weights[i];
  const float total = static_cast<float>(sum);
  for (std::size_t i = 0; i < k; ++i) weights[i] /= total;
}

}  // namespace smol
