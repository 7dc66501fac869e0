// Quantized block layouts, bit-exact with ggml.
//
// A quantized row is an array of blocks; each block packs `kValues` weights with
// their scales. These structs are read straight out of the memory-mapped file,
// so their size, field order and padding are part of the file format.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"

namespace smol {

inline constexpr std::size_t QK_K = 256;  // values per k-quant super-block

// Q4_0: 32 values, one f16 scale; value = d * (q - 8), q in 0..15.
// Low nibbles hold values 0..15, high nibbles values 16..31.
struct BlockQ4_0 {
  f16_bits d;
  std::uint8_t qs[16];
};

// Q8_0: 32 values, one f16 scale; value = d * q.
struct BlockQ8_0 {
  f16_bits d;
  std::int8_t qs[32];
};

// Q4_K: 256 values in 8 sub-blocks of 32; value = d * scale[j] * q - dmin * min[j].
// `scales` packs eight 6-bit scales and eight 6-bit mins (see unpack_q4k_scales).
// `qs` holds 4 chunks of 64 values: chunk c's low nibbles are sub-block 2c,
// its high nibbles sub-block 2c+1.
struct BlockQ4K {
  f16_bits d;
  f16_bits dmin;
  std::uint8_t scales[12];
  std::uint8_t qs[QK_K / 2];
};

// Q6_K: 256 values in 16 groups of 16; value = d * scales[g] * (q - 32), q in 0..63.
// The 6-bit q is split into 4 low bits (`ql`) and 2 high bits (`qh`); see the
// reference dequantizer for the exact interleaving.
struct BlockQ6K {
  std::uint8_t ql[QK_K / 2];
  std::uint8_t qh[QK_K / 4];
  std::int8_t scales[QK_K / 16];
  f16_bits d;
};

// Q8_K: the activation format that Q4_K and Q6_K rows are dotted with. Never
// stored in files. `bsums[g]` is the sum of the 16 quants of group g: it lets the
// Q4_K min term and the Q6_K -32 offset be applied once per group, not per value.
struct BlockQ8K {
  float d;
  std::int8_t qs[QK_K];
  std::int16_t bsums[QK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4K) == 144 && offsetof(BlockQ4K, scales) == 4 &&
              offsetof(BlockQ4K, qs) == 16);
static_assert(sizeof(BlockQ6K) == 210 && offsetof(BlockQ6K, qh) == 128 &&
              offsetof(BlockQ6K, scales) == 192 && offsetof(BlockQ6K, d) == 208);
static_assert(sizeof(BlockQ8K) == 292 && offsetof(BlockQ8K, qs) == 4 &&
              offsetof(BlockQ8K, bsums) == 260);
static_assert(alignof(BlockQ6K) == 2, "packed rows of Q6_K blocks must stay contiguous");

// Compile-time facts about each row type: what a kernel template is parameterised by.
template <class Block>
struct BlockTraits;

template <>
struct BlockTraits<BlockQ4_0> {
  static constexpr GgmlType type = GgmlType::Q4_0;
  static constexpr std::size_t values = 32;
  using Activation = BlockQ8_0;
};
template <>
struct BlockTraits<BlockQ8_0> {
  static constexpr GgmlType type = GgmlType::Q8_0;
  static constexpr std::size_t values = 32;
  using Activation = BlockQ8_0;
};
template <>
struct BlockTraits<BlockQ4K> {
  static constexpr GgmlType type = GgmlType::Q4_K;
  static constexpr std::size_t values = QK_K;
  using Activation = BlockQ8K;
};
template <>
struct BlockTraits<BlockQ6K> {
  static constexpr GgmlType type = GgmlType::Q6_K;
  static constexpr std::size_t values = QK_K;
  using Activation = BlockQ8K;
};
template <>
struct BlockTraits<BlockQ8K> {
  static constexpr GgmlType type = GgmlType::Q8_K;
  static constexpr std::size_t values = QK_K;
  using Activation = BlockQ8K;
};

template <class Block>
constexpr bool block_matches_ggml_table() {
  const auto info = ggml_type_info(BlockTraits<Block>::type);
  return info.block_bytes == sizeof(Block) && info.block_values == BlockTraits<Block>::values;
}
static_assert(block_matches_ggml_table<BlockQ4_0>() && block_matches_ggml_table<BlockQ8_0>() &&
              block_matches_ggml_table<BlockQ4K>() && block_matches_ggml_table<BlockQ6K>() &&
              block_matches_ggml_table<BlockQ8K>());

// Unpacks Q4_K's 12 scale bytes into 8 scales and 8 mins (6 bits each): bytes 0-3
// hold the low 6 bits of scales 0-3, bytes 4-7 those of mins 0-3, bytes 8-11 the
// low 4 bits of scale/min 4-7, and the top 2 bits of bytes 0-7 the high bits of 4-7.
inline void unpack_q4k_scales(const std::uint8_t packed[12], std::uint8_t scales[8],
                              std::uint8_t mins[8]) noexcept {
  for (int j = 0; j < 4; ++j) {
    scales[j] = packed[j] & 63;
    mins[j] = packed[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    scales[j] = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
    mins[j] = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

}  // namespace smol
