// LayerNorm: y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias, the normalisation of
// BERT's blocks and embeddings (the encoders, model/architecture.hpp's EncoderRule).
#pragma once

#include <cmath>
#include <cstddef>

namespace smol {

// `out` may alias `x`. As ggml_norm computes it, then its mul and add: the mean and
// the variance summed in double, the centred values scaled in float.
inline void layernorm(const float* x, const float* weight, const float* bias, float* out,
                      std::size_t n, float eps) noexcept {
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  double sum_of_squares = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const float centred = x[i] - mean;
    out[i] = centred;
    sum_of_squares += static_cast<double>(centred * centred);
  }
  const float variance = static_cast<float>(sum_of_squares / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(variance + eps);
  for (std::size_t i = 0; i < n; ++i) out[i] = out[i] * scale * weight[i] + bias[i];
}

}  // namespace smol
