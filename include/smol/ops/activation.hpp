// The gates of feed-forward blocks: SwiGLU, silu(gate) * up (the Llama block), through
// the context's kernel table (vectorised exp; the scalar set holds the reference), and
// GeGLU, gelu(gate) * up with GELU's tanh approximation (Gemma), and GPT-OSS's clamped
// SwiGLU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "smol/core/half.hpp"
#include "smol/ops/context.hpp"

namespace smol {

// The feed-forward's gate: SiLU (SwiGLU, the Llama block), GELU with the tanh
// approximation (GeGLU, Gemma) or the clamped SwiGLU (GPT-OSS); an architecture's
// BlockRule names one.
enum class FfnActivation {
  silu,        // SwiGLU: silu(gate) * up
  gelu_tanh,   // GEGLU with GELU's tanh form, as ggml computes it (Gemma)
  swiglu_oai,  // GPT-OSS's clamped SwiGLU (swiglu_oai below)
};

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
// The table is ggml's way too: one value per f16 input (65,536 floats, made once), so a
// GELU is a conversion and a load rather than a tanh (BERT's feed-forward takes a GELU of
// every one of its 3,072 values per token: as tanh, 45 % of a pass).
inline float gelu_tanh_by_rounding(float x) noexcept {
  return f16_to_f32(f32_to_f16(gelu_tanh(f16_to_f32(f32_to_f16(x)))));
}

inline const float* gelu_f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> values(65536);
    for (std::uint32_t h = 0; h < values.size(); ++h) {
      values[h] = f16_to_f32(f32_to_f16(gelu_tanh(f16_to_f32(static_cast<f16_bits>(h)))));
    }
    return values;
  }();
  return table.data();
}

inline float gelu_tanh_like_ggml(float x) noexcept {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  static const float* const table = gelu_f16_table();
  return table[f32_to_f16(x)];
}

// out[i] = gelu(gate[i]) * up[i] (as ggml computes GELU); `out` may alias either input.
inline void geglu(const float* gate, const float* up, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = gelu_tanh_like_ggml(gate[i]) * up[i];
}

// GPT-OSS's gate (ggml_swiglu_oai with the alpha and limit llama.cpp fixes for it): the
// gate clamped from above at 7, x * sigmoid(1.702 x), times the up projection clamped
// to [-7, 7] plus one. Its own loop rather than a kernel-table entry: an expert's gate
// is a few thousand values per token, next to the matrices' millions of products.
inline float swiglu_oai(float gate, float up) noexcept {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  const float x = std::min(gate, kLimit);
  const float y = std::clamp(up, -kLimit, kLimit);
  return x / (1.0f + std::exp(kAlpha * -x)) * (y + 1.0f);
}

// The feed-forward's gate of the config's activation.
inline void gated_activation(const Context& ctx, FfnActivation activation, const float* gate,
                             const float* up, float* out, std::size_t n) noexcept {
  switch (activation) {
    case FfnActivation::gelu_tanh:
      geglu(gate, up, out, n);
      return;
    case FfnActivation::swiglu_oai:
      for (std::size_t i = 0; i < n; ++i) out[i] = swiglu_oai(gate[i], up[i]);
      return;
    case FfnActivation::silu:
      break;
  }
  swiglu(ctx, gate, up, out, n);
}

}  // namespace smol
