// Q2_K, the block type of Q2_K files: 2-bit quants with a 4-bit scale and a 4-bit min per
// sub-block of 16. Everything the quant layer knows about it is here (the layout, the
// reference dequantizer and quantizer); its dot kernels are in simd/kernels_q2_k.hpp,
// and quant/weight_types.hpp lists it.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/k_quant_scales.hpp"

namespace smol {

// 256 values in 16 sub-blocks of 16; value i = d * sc[j] * q - dmin * m[j] with j = i / 16,
// q in 0..3, where scales[j] holds sc[j] in its low nibble and m[j] in its high one. Value
// i's q sits in byte 32 * (i / 128) + i % 32 of `qs`, at bit 2 * ((i % 128) / 32) (Q3_K
// stores its two low bits the same way).
struct BlockQ2K {
  std::uint8_t scales[QK_K / 16];
  std::uint8_t qs[QK_K / 4];
  f16_bits d;
  f16_bits dmin;
};
static_assert(sizeof(BlockQ2K) == 84 && offsetof(BlockQ2K, qs) == 16 &&
              offsetof(BlockQ2K, d) == 80 && offsetof(BlockQ2K, dmin) == 82);

template <>
struct BlockTraits<BlockQ2K> {
  static constexpr GgmlType type = GgmlType::Q2_K;
  static constexpr std::size_t values = QK_K;
  using Activation = BlockQ8K;
};
static_assert(block_matches_ggml_table<BlockQ2K>());

// The quant of value i (0..255), 0..3.
inline int q2k_quant(const BlockQ2K& block, std::size_t i) noexcept {
  return (block.qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
}

// Bit-exact with ggml's dequantize_row_q2_K: (d * sc) * q - dmin * m.
inline void dequantize_block(const BlockQ2K& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  const float dmin = f16_to_f32(block.dmin);
  for (std::size_t j = 0; j < 16; ++j) {
    const float sub_scale = d * static_cast<float>(block.scales[j] & 0xF);
    const float sub_min = dmin * static_cast<float>(block.scales[j] >> 4);
    for (std::size_t l = 0; l < 16; ++l) {
      out[16 * j + l] = sub_scale * static_cast<float>(q2k_quant(block, 16 * j + l)) - sub_min;
    }
  }
}

// ggml's quantize_row_q2_K_ref, which llama-quantize runs for Q2_K without an importance
// matrix: each sub-block's scale and min by the shared search over 4 levels (weights
// |x|, grids compared by absolute error), both stored as 4-bit codes under d = largest
// scale / 15 and dmin = largest min / 15, then every value re-rounded against them.
inline void quantize_block(const float* x, BlockQ2K& out) noexcept {
  std::uint8_t levels[QK_K];
  float scales[16];
  float mins[16];
  float max_scale = 0;
  float max_min = 0;
  for (std::size_t j = 0; j < 16; ++j) {
    float weights[16];
    for (std::size_t l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = detail::search_scale_and_min(16, 3, x + 16 * j, weights, levels + 16 * j, mins[j],
                                             -0.5f, 0.1f, 15, /*absolute_error=*/true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  // As ggml: the codes are not clamped (the largest rounds to 15) and are truncated
  // to the byte they share.
  if (max_scale > 0) {
    const float iscale = 15.0f / max_scale;
    for (std::size_t j = 0; j < 16; ++j) {
      out.scales[j] = static_cast<std::uint8_t>(detail::nearest_int(iscale * scales[j]));
    }
    out.d = f32_to_f16(max_scale / 15.0f);
  } else {
    for (std::size_t j = 0; j < 16; ++j) out.scales[j] = 0;
    out.d = f32_to_f16(0.0f);
  }
  if (max_min > 0) {
    const float iscale = 15.0f / max_min;
    for (std::size_t j = 0; j < 16; ++j) {
      const int code = detail::nearest_int(iscale * mins[j]);
      out.scales[j] = static_cast<std::uint8_t>(out.scales[j] | (code << 4));
    }
    out.dmin = f32_to_f16(max_min / 15.0f);
  } else {
    out.dmin = f32_to_f16(0.0f);
  }
  const float d_all = f16_to_f32(out.d);
  const float dmin_all = f16_to_f32(out.dmin);
  for (std::size_t j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(out.scales[j] & 0xF);
    if (d == 0) continue;
    const float m = dmin_all * static_cast<float>(out.scales[j] >> 4);
    for (std::size_t l = 0; l < 16; ++l) {
      const int q = detail::nearest_int((x[16 * j + l] + m) / d);
      levels[16 * j + l] = static_cast<std::uint8_t>(detail::clamp_int(q, 0, 3));
    }
  }
  for (std::size_t i = 0; i < QK_K; ++i) {
    std::uint8_t& packed = out.qs[32 * (i / 128) + i % 32];
    const int shift = static_cast<int>(2 * ((i % 128) / 32));
    packed = static_cast<std::uint8_t>(shift == 0 ? levels[i] : (packed | (levels[i] << shift)));
  }
}

}  // namespace smol
