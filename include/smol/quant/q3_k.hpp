// Q3_K, the block type of Q3_K_S / Q3_K_M / Q3_K_L files (and of some tensors of Q2_K
// files): 3-bit symmetric quants with sixteen 6-bit signed scales. Everything the quant
// layer knows about it is here (the layout, the reference dequantizer and quantizer);
// its dot kernels are in simd/kernels_q3_k.hpp, and quant/weight_types.hpp lists it.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/k_quant_scales.hpp"

namespace smol {

// 256 values in 16 sub-blocks of 16; value i = d * (scale[i / 16] - 32) * q, q in -4..3.
// q = low2 - 4 * (1 - high): the two low bits sit in `qs` as Q2_K's do (value i in byte
// 32 * (i / 128) + i % 32, at bit 2 * ((i % 128) / 32)), the third bit in `hmask` (value
// i at bit i / 32 of byte i % 32), set meaning "no -4". `scales` packs the sixteen 6-bit
// scale codes (see unpack_q3k_scales).
struct BlockQ3K {
  std::uint8_t hmask[QK_K / 8];
  std::uint8_t qs[QK_K / 4];
  std::uint8_t scales[12];
  f16_bits d;
};
static_assert(sizeof(BlockQ3K) == 110 && offsetof(BlockQ3K, qs) == 32 &&
              offsetof(BlockQ3K, scales) == 96 && offsetof(BlockQ3K, d) == 108);
static_assert(alignof(BlockQ3K) == 2, "packed rows of Q3_K blocks must stay contiguous");

template <>
struct BlockTraits<BlockQ3K> {
  static constexpr GgmlType type = GgmlType::Q3_K;
  static constexpr std::size_t values = QK_K;
  using Activation = BlockQ8K;
};
static_assert(block_matches_ggml_table<BlockQ3K>());

// The sixteen scales, -32..31: scale j's low 4 bits are the low nibble of byte j (j < 8)
// or the high nibble of byte j - 8, its high 2 bits are bits 2 * (j / 4) of byte
// 8 + j % 4; the stored code is the scale plus 32.
inline void unpack_q3k_scales(const std::uint8_t packed[12], std::int8_t scales[16]) noexcept {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = static_cast<std::int8_t>((low | (high << 4)) - 32);
  }
}

// The inverse: codes 0..63 (scale + 32) into 12 bytes.
inline void pack_q3k_scales(const std::uint8_t codes[16], std::uint8_t packed[12]) noexcept {
  std::memset(packed, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int code = codes[j];
    if (j < 8) {
      packed[j] = static_cast<std::uint8_t>(code & 0xF);
    } else {
      packed[j - 8] = static_cast<std::uint8_t>(packed[j - 8] | ((code & 0xF) << 4));
    }
    packed[8 + j % 4] =
        static_cast<std::uint8_t>(packed[8 + j % 4] | ((code >> 4) << (2 * (j / 4))));
  }
}

// The quant of value i (0..255), -4..3.
inline int q3k_quant(const BlockQ3K& block, std::size_t i) noexcept {
  const int low2 = (block.qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
  const int high = (block.hmask[i % 32] >> (i / 32)) & 1;
  return low2 - (high ? 0 : 4);
}

// Bit-exact with ggml's dequantize_row_q3_K: (d * scale) * q.
inline void dequantize_block(const BlockQ3K& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  std::int8_t scales[16];
  unpack_q3k_scales(block.scales, scales);
  for (std::size_t i = 0; i < QK_K; ++i) {
    out[i] = d * static_cast<float>(scales[i / 16]) * static_cast<float>(q3k_quant(block, i));
  }
}

namespace detail {

// Symmetric levels L[i] in -nmax..nmax-1 and a scale s with x[i] ~ s * L[i], weighting
// each value by x^2: starts from the grid anchored on the largest-magnitude value, then
// up to five passes move single levels to where the weighted fit (sum w x l)^2 / (sum w
// l^2) improves, and returns the least-squares scale of the final levels. Stores the
// levels plus nmax (ggml's make_q3_quants with do_rmse).
inline float search_q3_levels(int n, int nmax, const float* x, std::int8_t* levels) noexcept {
  const float max = largest_magnitude(n, x);
  if (max == 0.0f) {  // all (nearly) zero
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.0f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  float sum_lx = 0;
  float sum_l2 = 0;
  int l_of[QK_K];
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    l_of[i] = l;
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * static_cast<float>(l);
    sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(l_of[i]);
      float slx = sum_lx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = sum_l2 - w * li * li;
        const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != l_of[i]) {
          const float nl = static_cast<float>(new_l);
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (sl2 > 0 && slx * slx * sum_l2 > sum_lx * sum_lx * sl2) {
            l_of[i] = new_l;
            sum_lx = slx;
            sum_l2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) levels[i] = static_cast<std::int8_t>(l_of[i] + nmax);
  return sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
}

}  // namespace detail

// ggml's quantize_row_q3_K_ref, which llama-quantize runs for Q3_K without an importance
// matrix: each sub-block's scale from search_q3_levels, the scales as 6-bit codes under
// d = largest-magnitude scale / -32, then every value re-rounded against the stored
// scale (a sub-block whose stored scale is zero keeps its searched levels).
inline void quantize_block(const float* x, BlockQ3K& out) noexcept {
  std::int8_t levels[QK_K];
  float scales[16];
  float max_scale = 0;
  float amax = 0;
  for (std::size_t j = 0; j < 16; ++j) {
    scales[j] = detail::search_q3_levels(16, 4, x + 16 * j, levels + 16 * j);
    const float a = std::fabs(scales[j]);
    if (a > amax) {
      amax = a;
      max_scale = scales[j];
    }
  }
  std::uint8_t codes[16] = {};
  if (max_scale != 0) {
    const float iscale = -32.0f / max_scale;
    for (std::size_t j = 0; j < 16; ++j) {
      // ggml keeps the rounded scale in an int8_t before clamping; |iscale * s| <= 32.
      const auto l = static_cast<std::int8_t>(detail::nearest_int(iscale * scales[j]));
      codes[j] = static_cast<std::uint8_t>(detail::clamp_int(l, -32, 31) + 32);
    }
    out.d = f32_to_f16(1 / iscale);
  } else {
    out.d = f32_to_f16(0.0f);
  }
  pack_q3k_scales(codes, out.scales);

  const float d_all = f16_to_f32(out.d);
  for (std::size_t j = 0; j < 16; ++j) {
    const float d = d_all * static_cast<float>(static_cast<int>(codes[j]) - 32);
    if (d == 0) continue;
    for (std::size_t l = 0; l < 16; ++l) {
      const int q = detail::clamp_int(detail::nearest_int(x[16 * j + l] / d), -4, 3);
      levels[16 * j + l] = static_cast<std::int8_t>(q + 4);
    }
  }

  std::memset(out.hmask, 0, sizeof(out.hmask));
  std::memset(out.qs, 0, sizeof(out.qs));
  for (std::size_t i = 0; i < QK_K; ++i) {
    int level = levels[i];
    if (level > 3) {
      out.hmask[i % 32] = static_cast<std::uint8_t>(out.hmask[i % 32] | (1u << (i / 32)));
      level -= 4;
    }
    std::uint8_t& packed = out.qs[32 * (i / 128) + i % 32];
    packed = static_cast<std::uint8_t>(packed | (level << (2 * ((i % 128) / 32))));
  }
}

}  // namespace smol
