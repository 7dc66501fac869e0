// Scalar reference dequantizers: quantized blocks and f16/bf16/f32 rows -> f32 (a
// block type with a header of its own, like quant/q5_k.hpp, has its dequantizer there).
//
// Bit-exact with ggml's dequantize_row_* for every supported type. They are the
// ground truth that SIMD kernels are tested against, the f32 reference forward
// pass, and the embedding lookup (one row per token, so speed does not matter).
//
// The float expressions keep ggml's order: (d * scale) * q - dmin * min. For the
// k-quants every product is exact in f32 (f16 mantissa x 6-8 bit scale x 4-6 bit q
// fits 24 bits), so only the final subtraction rounds and fused multiply-add
// cannot change a result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/error.hpp"
#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/row_blocks.hpp"
#include "smol/quant/weight_types.hpp"

namespace smol {

inline void dequantize_block(const BlockQ4_0& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  for (std::size_t j = 0; j < 16; ++j) {
    out[j] = static_cast<float>((block.qs[j] & 0xF) - 8) * d;
    out[j + 16] = static_cast<float>((block.qs[j] >> 4) - 8) * d;
  }
}

inline void dequantize_block(const BlockQ8_0& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  for (std::size_t j = 0; j < 32; ++j) out[j] = static_cast<float>(block.qs[j]) * d;
}

inline void dequantize_block(const BlockQ4K& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  const float dmin = f16_to_f32(block.dmin);
  std::uint8_t scales[8];
  std::uint8_t mins[8];
  unpack_q4k_scales(block.scales, scales, mins);
  for (std::size_t chunk = 0; chunk < 4; ++chunk) {
    const std::uint8_t* q = block.qs + 32 * chunk;
    const float d_low = d * scales[2 * chunk];
    const float m_low = dmin * mins[2 * chunk];
    const float d_high = d * scales[2 * chunk + 1];
    const float m_high = dmin * mins[2 * chunk + 1];
    for (std::size_t l = 0; l < 32; ++l) *out++ = d_low * static_cast<float>(q[l] & 0xF) - m_low;
    for (std::size_t l = 0; l < 32; ++l) *out++ = d_high * static_cast<float>(q[l] >> 4) - m_high;
  }
}

// Q6_K stores each half (128 values) as: ql[0..63] low nibbles for values 0-63,
// high nibbles for 64-127; qh[0..31] two bits for each of the four runs of 32.
// Value l (0-31) of run r (0-3) takes its low 4 bits from ql[l + 32*(r&1)]
// (low nibble for r < 2, high nibble for r >= 2) and its high 2 bits from
// qh[l] >> 2r.
inline void dequantize_block(const BlockQ6K& block, float* out) noexcept {
  const float d = f16_to_f32(block.d);
  for (std::size_t half = 0; half < 2; ++half) {
    const std::uint8_t* ql = block.ql + 64 * half;
    const std::uint8_t* qh = block.qh + 32 * half;
    const std::int8_t* sc = block.scales + 8 * half;
    float* y = out + 128 * half;
    for (std::size_t l = 0; l < 32; ++l) {
      const std::size_t group = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[group]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[group + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[group + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[group + 6]) * static_cast<float>(q4);
    }
  }
}

namespace detail {

// Rows come straight from an mmap'd file at any offset, so each block is copied
// into a properly aligned object before it is read.
template <class Block>
void dequantize_blocks(const std::byte* row, float* out, std::size_t n_blocks) noexcept {
  for (std::size_t b = 0; b < n_blocks; ++b) {
    Block block;
    std::memcpy(&block, row + b * sizeof(Block), sizeof(Block));
    dequantize_block(block, out + b * BlockTraits<Block>::values);
  }
}

template <class Bits, class Convert>
void convert_halves(const std::byte* row, float* out, std::size_t n, Convert convert) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    Bits bits;
    std::memcpy(&bits, row + i * sizeof(Bits), sizeof(Bits));
    out[i] = convert(bits);
  }
}

}  // namespace detail

// Dequantizes `n` values stored as `type` starting at `row` (ggml_row_bytes(type, n)
// bytes). Every weight type (quant/weight_types.hpp) can. Throws smol::Error for a
// type it does not know or an `n` that is not a whole number of blocks.
inline void dequantize_row(GgmlType type, const std::byte* row, float* out, std::size_t n) {
  const std::size_t n_blocks = row_blocks("dequantize_row", type, is_weight_type(type), n);
  visit_weight_type(type, [&]<class W>(W) {
    if constexpr (W::type == GgmlType::F32) {
      std::memcpy(out, row, n * sizeof(float));
    } else if constexpr (W::type == GgmlType::F16) {
      detail::convert_halves<f16_bits>(row, out, n, f16_to_f32);
    } else if constexpr (W::type == GgmlType::BF16) {
      detail::convert_halves<bf16_bits>(row, out, n, bf16_to_f32);
    } else {
      detail::dequantize_blocks<typename W::Block>(row, out, n_blocks);
    }
  });
}

}  // namespace smol
