// RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight, the normalisation of every
// Llama-family block.
#pragma once

#include <cmath>
#include <cstddef>

namespace smol {

// `out` may alias `x`. The sum of squares runs in double, as ggml's does: with
// hidden sizes in the thousands a float sum would lose the last bits that the
// F32 goldens still see.
inline void rmsnorm(const float* x, const float* weight, float* out, std::size_t n,
                    float eps) noexcept {
  double sum_of_squares = 0.0;
  for (std::size_t i = 0; i < n; ++i) sum_of_squares += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum_of_squares / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (std::size_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

// The same for `rows` consecutive vectors of length `n`.
inline void rmsnorm_rows(const float* x, const float* weight, float* out, std::size_t rows,
                         std::size_t n, float eps) noexcept {
  for (std::size_t r = 0; r < rows; ++r) rmsnorm(x + r * n, weight, out + r * n, n, eps);
}

}  // namespace smol
