// The SwiGLU gate of Llama-family feed-forward blocks: silu(gate) * up.
#pragma once

#include <cmath>
#include <cstddef>

namespace smol {

inline float silu(float x) noexcept {
  return x / (1.0f + std::exp(-x));
}

// out[i] = silu(gate[i]) * up[i]; `out` may alias either input.
inline void swiglu(const float* gate, const float* up, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

}  // namespace smol
