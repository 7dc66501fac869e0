// Q4_1, Q5_0 and Q5_1: ggml's first-generation 32-value block types beside Q4_0 and
// Q8_0 (which stay in quant/blocks.hpp: they are also the KV cache's and the
// activations' blocks). Q4_1 adds a min to Q4_0, Q5_0 a fifth bit, Q5_1 both. Everything
// the quant layer knows about them is here (the layouts, the reference dequantizers and
// quantizers); their dot kernels are in simd/kernels_legacy.hpp, and
// quant/weight_types.hpp lists them.
//
// As in ggml, Q5_0 rows are dotted with Q8_0 activations, Q4_1 and Q5_1 rows with Q8_1
// ones (below): Q8_0's quants and scale plus s = d * sum(q), which carries the min term,
// so the kernels need not sum the activations per block.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"

namespace smol {

// Q4_1: value = d * q + m, q in 0..15. As in Q4_0, the low nibble of qs[j] is value j
// and its high nibble value j + 16.
struct BlockQ4_1 {
  f16_bits d;
  f16_bits m;
  std::uint8_t qs[16];
};

// Q5_0: value = d * (q - 16), q in 0..31. The low 4 bits are packed as Q4_0's; bit j of
// qh (read as a little-endian 32-bit word) is the fifth bit of value j.
struct BlockQ5_0 {
  f16_bits d;
  std::uint8_t qh[4];
  std::uint8_t qs[16];
};

// Q5_1: value = d * q + m, q in 0..31, packed as Q5_0.
struct BlockQ5_1 {
  f16_bits d;
  f16_bits m;
  std::uint8_t qh[4];
  std::uint8_t qs[16];
};

// Q8_1: the activation blocks of Q4_1 and Q5_1 rows, never stored in files. Quants and d
// as Q8_0's; s = d * sum(qs), rounded to f16 as ggml stores it (with the unrounded d).
struct BlockQ8_1 {
  f16_bits d;
  f16_bits s;
  std::int8_t qs[32];
};

static_assert(sizeof(BlockQ8_1) == 36 && offsetof(BlockQ8_1, qs) == 4);
static_assert(sizeof(BlockQ4_1) == 20 && offsetof(BlockQ4_1, qs) == 4);
static_assert(sizeof(BlockQ5_0) == 22 && offsetof(BlockQ5_0, qh) == 2 &&
              offsetof(BlockQ5_0, qs) == 6);
static_assert(sizeof(BlockQ5_1) == 24 && offsetof(BlockQ5_1, qh) == 4 &&
              offsetof(BlockQ5_1, qs) == 8);

template <>
struct BlockTraits<BlockQ8_1> {
  static constexpr GgmlType type = GgmlType::Q8_1;
  static constexpr std::size_t values = 32;
  using Activation = BlockQ8_1;
};
template <>
struct BlockTraits<BlockQ4_1> {
  static constexpr GgmlType type = GgmlType::Q4_1;
  static constexpr std::size_t values = 32;
  using Activation = BlockQ8_1;
};
template <>
struct BlockTraits<BlockQ5_0> {
  static constexpr GgmlType type = GgmlType::Q5_0;
  static constexpr std::size_t values = 32;
  using Activation = BlockQ8_0;
};
template <>
struct BlockTraits<BlockQ5_1> {
  static constexpr GgmlType type = GgmlType::Q5_1;
  static constexpr std::size_t values = 32;
  using Activation = BlockQ8_1;
};
static_assert(block_matches_ggml_table<BlockQ4_1>() && block_matches_ggml_table<BlockQ5_0>() &&
              block_matches_ggml_table<BlockQ5_1>() && block_matches_ggml_table<BlockQ8_1>());

// The 4-bit quant of value j (0..31) of a Q4_1 block, or the low 4 bits of a Q5 block's.
template <class Block>
inline int legacy_low4(const Block& block, std::size_t j) noexcept {
  return j < 16 ? (block.qs[j] & 0xF) : (block.qs[j - 16] >> 4);
}

// The 5-bit quant of value j (0..31) of a Q5_0 or Q5_1 block, 0..31.
template <class Block>
inline int legacy_q5_quant(const Block& block, std::size_t j) noexcept {
  std::uint32_t qh;
  std::memcpy(&qh, block.qh, sizeof(qh));
  return legacy_low4(block, j) | static_cast<int>(((qh >> j) & 1) << 4);
}

// Bit-exact with ggml's dequantize_row_q4_1 / _q5_0 / _q5_1: q * d (+ m), in that order.
inline void dequantize_block(const BlockQ4_1& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  const float m = f16_to_f32(block.m);
  for (std::size_t j = 0; j < 32; ++j) out[j] = static_cast<float>(legacy_low4(block, j)) * d + m;
}

inline void dequantize_block(const BlockQ5_0& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  for (std::size_t j = 0; j < 32; ++j) {
    out[j] = static_cast<float>(legacy_q5_quant(block, j) - 16) * d;
  }
}

inline void dequantize_block(const BlockQ5_1& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  const float m = f16_to_f32(block.m);
  for (std::size_t j = 0; j < 32; ++j) {
    out[j] = static_cast<float>(legacy_q5_quant(block, j)) * d + m;
  }
}

namespace detail {

// Packs 32 levels (0..15, or 0..31 with `qh`) into the nibbles of qs and the bits of qh.
inline void pack_legacy_levels(const int levels[32], std::uint8_t qs[16],
                               std::uint8_t* qh) noexcept {
  std::uint32_t fifth_bits = 0;
  for (std::size_t j = 0; j < 16; ++j) {
    qs[j] = static_cast<std::uint8_t>((levels[j] & 0xF) | ((levels[j + 16] & 0xF) << 4));
  }
  for (std::size_t j = 0; j < 32; ++j) {
    fifth_bits |= static_cast<std::uint32_t>((levels[j] >> 4) & 1) << j;
  }
  if (qh != nullptr) std::memcpy(qh, &fifth_bits, sizeof(fifth_bits));
}

// The affine grid of Q4_1 and Q5_1 (ggml's quantize_row_q4_1_ref / _q5_1_ref): m is the
// block's minimum, d spreads [min, max] over `top` steps, q = trunc((x - min) / d + 0.5).
// ggml caps Q4_1's level at 15 and leaves Q5_1's uncapped (its value cannot pass 31);
// both are capped here, which changes nothing for finite inputs.
template <class Block>
void quantize_affine(const float* x, int top, Block& out, std::uint8_t* qh) noexcept {
  float min = x[0], max = x[0];
  for (std::size_t j = 1; j < 32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / static_cast<float>(top);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  out.d = f32_to_f16(d);
  out.m = f32_to_f16(min);
  int levels[32];
  for (std::size_t j = 0; j < 32; ++j) {
    const int q = static_cast<int>((x[j] - min) * id + 0.5f);
    levels[j] = q < top ? q : top;
  }
  pack_legacy_levels(levels, out.qs, qh);
}

}  // namespace detail

inline void quantize_block(const float* x, BlockQ4_1& out) noexcept {
  detail::quantize_affine(x, 15, out, nullptr);
}

inline void quantize_block(const float* x, BlockQ5_1& out) noexcept {
  detail::quantize_affine(x, 31, out, out.qh);
}

// ggml's quantize_row_q5_0_ref: Q4_0's symmetric grid with 32 levels, d = -max/16 for the
// largest-magnitude value max, q = trunc(x/d + 16.5) capped at 31.
inline void quantize_block(const float* x, BlockQ5_0& out) noexcept {
  float amax = 0, max = 0;
  for (std::size_t j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -16;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  out.d = f32_to_f16(d);
  int levels[32];
  for (std::size_t j = 0; j < 32; ++j) {
    const int q = static_cast<int>(x[j] * id + 16.5f);
    levels[j] = q < 31 ? q : 31;
  }
  detail::pack_legacy_levels(levels, out.qs, out.qh);
}

// ggml's quantize_row_q8_1_ref: Q8_0's rounding (d = max|x| / 127, q = round-half-away(x
// / d)), plus s = f16(d * sum q) with d before its rounding to f16.
inline void quantize_row_q8_1(const float* x, BlockQ8_1* out, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (std::size_t j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    int sum = 0;
    for (std::size_t j = 0; j < 32; ++j) {
      out[b].qs[j] = static_cast<std::int8_t>(std::round(x[j] * id));
      sum += out[b].qs[j];
    }
    out[b].s = f32_to_f16(static_cast<float>(sum) * d);
  }
}

// Whether a block type's values carry a min (value = d * q + m) rather than an offset:
// those are dotted with Q8_1 blocks, whose s carries the min term.
template <class Block>
inline constexpr bool kHasMin = !std::is_same_v<Block, BlockQ5_0>;

template <class Block>
using LegacyActivation = typename BlockTraits<Block>::Activation;

}  // namespace smol
