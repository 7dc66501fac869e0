// Q5_K, the block type of Q5_K_S / Q5_K_M files: Q4_K plus a fifth bit per value.
// Everything the quant layer knows about it is here (the layout, the reference
// dequantizer and quantizer); its dot kernels are in simd/kernels_q5_k.hpp, and
// quant/weight_types.hpp lists it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/k_quant_scales.hpp"

namespace smol {

// 256 values in 8 sub-blocks of 32; value = d * scale[j] * q - dmin * min[j], q in 0..31.
// `scales` is packed as Q4_K's (unpack_q4k_scales). `qs` holds the low 4 bits as Q4_K
// does (chunk c's low nibbles are sub-block 2c, its high nibbles sub-block 2c+1); bit 2c
// of qh[l] is the fifth bit of value l of sub-block 2c, bit 2c+1 that of sub-block 2c+1.
struct BlockQ5K {
  f16_bits d;
  f16_bits dmin;
  std::uint8_t scales[12];
  std::uint8_t qh[QK_K / 8];
  std::uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ5K) == 176 && offsetof(BlockQ5K, qh) == 16 &&
              offsetof(BlockQ5K, qs) == 48);

template <>
struct BlockTraits<BlockQ5K> {
  static constexpr GgmlType type = GgmlType::Q5_K;
  static constexpr std::size_t values = QK_K;
  using Activation = BlockQ8K;
};
static_assert(block_matches_ggml_table<BlockQ5K>());

// The 5-bit quant of value l (0..31) of sub-block j (0..7).
inline int q5k_quant(const BlockQ5K& block, std::size_t j, std::size_t l) noexcept {
  const std::uint8_t packed = block.qs[32 * (j / 2) + l];
  const int low4 = j % 2 == 0 ? (packed & 0xF) : (packed >> 4);
  return low4 | (((block.qh[l] >> j) & 1) << 4);
}

// Bit-exact with ggml's dequantize_row_q5_K: (d * scale) * q - dmin * min.
inline void dequantize_block(const BlockQ5K& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  const float dmin = f16_to_f32(block.dmin);
  std::uint8_t scales[8];
  std::uint8_t mins[8];
  unpack_q4k_scales(block.scales, scales, mins);
  for (std::size_t j = 0; j < 8; ++j) {
    const float sub_scale = d * scales[j];
    const float sub_min = dmin * mins[j];
    for (std::size_t l = 0; l < 32; ++l) {
      *out++ = sub_scale * static_cast<float>(q5k_quant(block, j, l)) - sub_min;
    }
  }
}

// ggml's quantize_row_q5_K_ref: Q4_K's search with 32 levels, a narrower sweep of grids
// (rmin -0.5, 15 steps) and the fifth bits gathered into qh.
inline void quantize_block(const float* x, BlockQ5K& out) noexcept {
  std::uint8_t levels[QK_K];
  quantize_k_sub_blocks(x, 31, -0.5f, 15, levels, out.d, out.dmin, out.scales);
  for (std::size_t l = 0; l < 32; ++l) out.qh[l] = 0;
  for (std::size_t j = 0; j < 8; ++j) {
    for (std::size_t l = 0; l < 32; ++l) {
      const std::uint8_t level = levels[32 * j + l];
      std::uint8_t& packed = out.qs[32 * (j / 2) + l];
      if (j % 2 == 0) {
        packed = static_cast<std::uint8_t>(level & 0xF);
      } else {
        packed = static_cast<std::uint8_t>(packed | ((level & 0xF) << 4));
      }
      out.qh[l] = static_cast<std::uint8_t>(out.qh[l] | ((level >> 4) << j));
    }
  }
}

}  // namespace smol
