// Numerically stable softmax: the maximum is subtracted before exponentiating, so
// scores of any magnitude give finite weights that sum to one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace smol {

// In place over x[0..n); returns nothing for n == 0. A row of -inf (fully masked)
// cannot happen in causal attention, where every token sees itself.
inline void softmax(float* x, std::size_t n) noexcept {
  if (n == 0) return;
  float max = -std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inverse = static_cast<float>(1.0 / sum);
  for (std::size_t i = 0; i < n; ++i) x[i] *= inverse;
}

}  // namespace smol
