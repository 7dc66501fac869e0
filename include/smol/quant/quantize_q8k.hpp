// f32 -> Q8_K, the activation quantizer in front of every Q4_K / Q6_K dot product.
//
// Must round exactly as ggml does, or the quantized path drifts from llama.cpp's:
// the scale comes from the largest-magnitude value m (the first one on a tie) as
// iscale = -127 / m in float, each q = round-half-even(x * iscale) capped at 127,
// and d = 1 / iscale. Writing q = round(x / d) instead is NOT the same.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/quant/blocks.hpp"

namespace smol {

inline void quantize_block_q8k(const float* x, BlockQ8K& out) noexcept {
  float max = 0.0f;
  float amax = 0.0f;
  for (std::size_t j = 0; j < QK_K; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax == 0.0f) {
    out.d = 0.0f;
    std::memset(out.qs, 0, sizeof(out.qs));
    std::memset(out.bsums, 0, sizeof(out.bsums));
    return;
  }
  const float iscale = -127.0f / max;
  for (std::size_t j = 0; j < QK_K; ++j) {
    // nearbyint rounds half to even in the default rounding mode, as ggml's
    // nearest_int (the 1.5*2^23 trick) does.
    const int v = static_cast<int>(std::nearbyint(iscale * x[j]));
    out.qs[j] = static_cast<std::int8_t>(v < 127 ? v : 127);
  }
  for (std::size_t g = 0; g < QK_K / 16; ++g) {
    int sum = 0;
    for (std::size_t k = 0; k < 16; ++k) sum += out.qs[g * 16 + k];
    out.bsums[g] = static_cast<std::int16_t>(sum);
  }
  out.d = 1.0f / iscale;
}

// `n` must be a multiple of QK_K.
inline void quantize_row_q8k(const float* x, BlockQ8K* out, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n / QK_K; ++b) quantize_block_q8k(x + b * QK_K, out[b]);
}

}  // namespace smol
