// The gates of feed-forward blocks: SwiGLU, silu(gate) * up (the Llama block), through
// the context's kernel table (vectorised exp; the scalar set holds the reference), and
// GeGLU, gelu(gate) * up with GELU's tanh approximation (Gemma).
#pragma once

#include <cmath>
#include <cstddef>

#include "smol/core/half.hpp"
#include "smol/ops/context.hpp"

namespace smol {

// The feed-forward's gate: SiLU (SwiGLU, the Llama block) or GELU with the tanh
// approximation (GeGLU, Gemma); an architecture's BlockRule names one.
enum class FfnActivation { silu, gelu_tanh };

// out[i] = silu(gate[i]) * up[i]; `out` may alias either input.
inline void swiglu(const Context& ctx, const float* gate, const float* up, float* out,
                   std::size_t n) noexcept {
  ctx.kernels().swiglu(gate, up, out, n);
}

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
inline float gelu_tanh(float x) noexcept {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
}

// GELU as ggml's CPU backend computes it, which llama.cpp's outputs carry: the input
// rounded to f16 and the result looked up in a table of f16 values (so rounded to f16
// too), except beyond +-10, where GELU is x or 0. Matching it keeps smol within the
// F32 goldens' 1e-3 of llama.cpp; the exact function differs by up to ~1e-3 relative.
inline float gelu_tanh_like_ggml(float x) noexcept {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return f16_to_f32(f32_to_f16(gelu_tanh(f16_to_f32(f32_to_f16(x)))));
}

// out[i] = gelu(gate[i]) * up[i] (as ggml computes GELU); `out` may alias either input.
inline void geglu(const float* gate, const float* up, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = gelu_tanh_like_ggml(gate[i]) * up[i];
}

// The feed-forward's gate of the config's activation.
inline void gated_activation(const Context& ctx, FfnActivation activation, const float* gate,
                             const float* up, float* out, std::size_t n) noexcept {
  if (activation == FfnActivation::gelu_tanh) {
    geglu(gate, up, out, n);
  } else {
    swiglu(ctx, gate, up, out, n);
  }
}

}  // namespace smol
