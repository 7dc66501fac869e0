// Which experts a token goes through in a mixture of experts, and with what weights:
// the router's scores through a softmax, the k most probable experts, their
// probabilities renormalised over the chosen ones where the family says so.
//
// As llama.cpp's build_moe_ffn with a softmax gate (ggml_soft_max, ggml_top_k,
// ggml_get_rows, then ggml_sum_rows and ggml_div for norm_w): the softmax is ggml's
// (ops/softmax.hpp), the choice in descending probability, ties to the lower expert.
#pragma once

#include <algorithm>
#include <cstddef>

#include "smol/ops/softmax.hpp"

namespace smol {

// `scores`: one token's n_expert router outputs, turned into probabilities in place.
// `chosen[0..k)`: the experts in descending probability, `weights[0..k)` theirs
// (renormalised to sum to one with `normalize_chosen`). 1 <= k <= n_expert.
inline void choose_experts(float* scores, std::size_t n_expert, std::size_t k,
                           bool normalize_chosen, std::size_t* chosen, float* weights) {
  softmax(scores, n_expert);
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
  if (!normalize_chosen) return;
  double sum = 0;
  for (std::size_t i = 0; i < k; ++i) sum += weights[i];
  const float total = static_cast<float>(sum);
  for (std::size_t i = 0; i < k; ++i) weights[i] /= total;
}

}  // namespace smol
