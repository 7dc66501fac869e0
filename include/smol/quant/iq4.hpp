// IQ4_NL and IQ4_XS, ggml's 4-bit non-linear block types: each 4-bit index picks one of
// 16 fixed levels (kIq4nlValues, denser near zero than a uniform grid), times a scale.
// IQ4_NL has one f16 scale per 32 values; IQ4_XS has a super-block of 256 values with an
// f16 scale and a 6-bit signed scale per 32 values. Everything the quant layer knows about
// them is here (the layouts, the reference dequantizers and quantizers); their dot
// kernels are in simd/kernels_iq4.hpp, and quant/weight_types.hpp lists them.
//
// As in ggml, IQ4_NL rows are dotted with Q8_0 activations, IQ4_XS rows with Q8_K ones.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/k_quant_scales.hpp"

namespace smol {

// ggml's kvalues_iq4nl: the level of each 4-bit index, sorted.
inline constexpr std::int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

// IQ4_NL: value j = d * kIq4nlValues[index j]. As in Q4_0, the low nibble of qs[j] is
// value j's index and its high nibble value j + 16's.
struct BlockIQ4NL {
  f16_bits d;
  std::uint8_t qs[16];
};

// IQ4_XS: 8 sub-blocks of 32 values; value l of sub-block j = d * (s_j - 32) *
// kIq4nlValues[index], s_j a 6-bit scale whose low 4 bits are nibble j % 2 of
// scales_l[j / 2] and whose high 2 bits are bits 2j, 2j + 1 of scales_h. Sub-block j's
// indices are packed in qs[16 j .. 16 j + 15] as IQ4_NL's.
struct BlockIQ4XS {
  f16_bits d;
  std::uint16_t scales_h;
  std::uint8_t scales_l[QK_K / 64];
  std::uint8_t qs[QK_K / 2];
};

static_assert(sizeof(BlockIQ4NL) == 18 && offsetof(BlockIQ4NL, qs) == 2);
static_assert(sizeof(BlockIQ4XS) == 136 && offsetof(BlockIQ4XS, scales_h) == 2 &&
              offsetof(BlockIQ4XS, scales_l) == 4 && offsetof(BlockIQ4XS, qs) == 8);

template <>
struct BlockTraits<BlockIQ4NL> {
  static constexpr GgmlType type = GgmlType::IQ4_NL;
  static constexpr std::size_t values = 32;
  using Activation = BlockQ8_0;
};
template <>
struct BlockTraits<BlockIQ4XS> {
  static constexpr GgmlType type = GgmlType::IQ4_XS;
  static constexpr std::size_t values = QK_K;
  using Activation = BlockQ8K;
};
static_assert(block_matches_ggml_table<BlockIQ4NL>() && block_matches_ggml_table<BlockIQ4XS>());

// The 4-bit index of value j (0..31) of 16 packed bytes.
inline int iq4_index(const std::uint8_t* qs, std::size_t j) noexcept {
  return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
}

// The signed scale s_j - 32 (-32..31) of IQ4_XS sub-block j (0..7).
inline int iq4xs_scale(const BlockIQ4XS& block, std::size_t j) noexcept {
  const int low = (block.scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
  const int high = (block.scales_h >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

// Bit-exact with ggml's dequantize_row_iq4_nl: d * level.
inline void dequantize_block(const BlockIQ4NL& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  for (std::size_t j = 0; j < 32; ++j) {
    out[j] = d * static_cast<float>(kIq4nlValues[iq4_index(block.qs, j)]);
  }
}

// Bit-exact with ggml's dequantize_row_iq4_xs: (d * (s - 32)) * level.
inline void dequantize_block(const BlockIQ4XS& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  for (std::size_t j = 0; j < 8; ++j) {
    const float dl = d * static_cast<float>(iq4xs_scale(block, j));
    const std::uint8_t* qs = block.qs + 16 * j;
    for (std::size_t l = 0; l < 32; ++l) {
      *out++ = dl * static_cast<float>(kIq4nlValues[iq4_index(qs, l)]);
    }
  }
}

namespace detail {

// The index of the level nearest to x (ggml's best_index_int8 on kIq4nlValues): x takes
// level i once 2x reaches the sum of levels i - 1 and i, which both sides hold exactly.
inline int iq4_nearest_index(float x) noexcept {
  const float x2 = x + x;
  int index = 0;
  for (int step = 8; step > 0; step /= 2) {
    const int j = index + step;
    if (x2 >= static_cast<float>(kIq4nlValues[j - 1] + kIq4nlValues[j])) index = j;
  }
  return index;
}

// ggml's scale search for one sub-block of 32 values (quantize_row_iq4_nl_impl as
// llama-quantize runs it, without an importance matrix: weights x^2, 7 tries each
// side). Starts from d = max / 127 for the largest-magnitude value max, then tries the
// grids that put max at levels -127 + k, k = -7..7; for each rounding the weighted
// least-squares scale sum(w q x) / sum(w q^2) is kept where it explains more.
inline float iq4_search_scale(const float* x) noexcept {
  constexpr int kTries = 7;
  float weight[32];
  float amax = 0, max = 0;
  for (std::size_t j = 0; j < 32; ++j) {
    weight[j] = x[j] * x[j];
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < 1e-15f) return 0.0f;
  const auto fit = [&](float id, float& sumqx, float& sumq2) {
    sumqx = sumq2 = 0;
    for (std::size_t j = 0; j < 32; ++j) {
      const float q = kIq4nlValues[iq4_nearest_index(id * x[j])];
      const float w = weight[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
  };
  float d = -max / kIq4nlValues[0];
  float sumqx, sumq2;
  fit(1 / d, sumqx, sumq2);
  d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int k = -kTries; k <= kTries; ++k) {
    fit(static_cast<float>(k + kIq4nlValues[0]) / max, sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// 32 indices into IQ4_NL's nibble order.
inline void pack_iq4_indices(const float* x, float inverse_scale, std::uint8_t qs[16]) noexcept {
  int index[32];
  for (std::size_t j = 0; j < 32; ++j) index[j] = iq4_nearest_index(inverse_scale * x[j]);
  for (std::size_t j = 0; j < 16; ++j) {
    qs[j] = static_cast<std::uint8_t>(index[j] | (index[j + 16] << 4));
  }
}

}  // namespace detail

// llama-quantize's IQ4_NL (ggml's quantize_iq4_nl without an importance matrix): the
// searched scale, stored as f16; the indices rounded against the unrounded scale.
inline void quantize_block(const float* x, BlockIQ4NL& out) noexcept {
  const float d = detail::iq4_search_scale(x);
  out.d = f32_to_f16(d);
  detail::pack_iq4_indices(x, d != 0 ? 1 / d : 0.0f, out.qs);
}

// llama-quantize's IQ4_XS (ggml's quantize_iq4_xs without an importance matrix): each
// sub-block's scale searched as IQ4_NL's, then d = -m / 32 for the scale m of largest
// magnitude, the sub-block scales rounded to d * (-32..31), and every index re-rounded
// against d * s (d unrounded).
inline void quantize_block(const float* x, BlockIQ4XS& out) noexcept {
  float scales[8];
  float max_scale = 0, amax_scale = 0;
  for (std::size_t j = 0; j < 8; ++j) {
    scales[j] = detail::iq4_search_scale(x + 32 * j);
    if (std::fabs(scales[j]) > amax_scale) {
      amax_scale = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  const float d = -max_scale / 32;
  out.d = f32_to_f16(d);
  out.scales_h = 0;
  const float id = d != 0 ? 1 / d : 0.0f;
  for (std::size_t j = 0; j < 8; ++j) {
    const int l = detail::clamp_int(detail::nearest_int(id * scales[j]), -32, 31);
    const float dl = d * static_cast<float>(l);
    detail::pack_iq4_indices(x + 32 * j, dl != 0 ? 1 / dl : 0.0f, out.qs + 16 * j);
    const int stored = l + 32;
    if (j % 2 == 0) {
      out.scales_l[j / 2] = static_cast<std::uint8_t>(stored & 0xF);
    } else {
      out.scales_l[j / 2] = static_cast<std::uint8_t>(out.scales_l[j / 2] | ((stored & 0xF) << 4));
    }
    out.scales_h = static_cast<std::uint16_t>(out.scales_h | ((stored >> 4) << (2 * j)));
  }
}

}  // namespace smol
