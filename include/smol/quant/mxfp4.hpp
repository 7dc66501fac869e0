// MXFP4, the OCP microscaling 4-bit float that gpt-oss's experts ship in: blocks of 32
// E2M1 values (1 sign, 2 exponent and 1 mantissa bits: 0, 0.5, 1, 1.5, 2, 3, 4, 6) under
// one E8M0 scale (a power of two, 2^(e - 127)). Everything the quant layer knows about it
// is here (the layout, the reference dequantizer and quantizer); its dot kernels are in
// simd/kernels_mxfp4.hpp, and quant/weight_types.hpp lists it.
//
// As ggml stores it: the 16 E2M1 values doubled to integers (kMxfp4Values, so that a
// dot sums int8 products exactly, as IQ4_NL's levels do) and the scale halved to match
// (e8m0_half); the low nibble of qs[j] is value j, its high nibble value j + 16. Rows
// are dotted with Q8_0 activations.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "smol/core/ggml_type.hpp"
#include "smol/quant/blocks.hpp"

namespace smol {

// ggml's kvalues_mxfp4: twice each E2M1 value, by its 4-bit code (bit 3 the sign).
inline constexpr std::int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                                 0, -1, -2, -3, -4, -6, -8, -12};

struct BlockMXFP4 {
  std::uint8_t e;  // E8M0: the block's scale is 2^(e - 127)
  std::uint8_t qs[16];
};
static_assert(sizeof(BlockMXFP4) == 17 && offsetof(BlockMXFP4, qs) == 1);

template <>
struct BlockTraits<BlockMXFP4> {
  static constexpr GgmlType type = GgmlType::MXFP4;
  static constexpr std::size_t values = 32;
  using Activation = BlockQ8_0;
};
static_assert(block_matches_ggml_table<BlockMXFP4>());

// Half the E8M0 scale, 2^(e - 128), bit for bit as ggml_e8m0_to_fp32_half: e = 0 and 1
// are the subnormals 2^-128 and 2^-127; e = 255 (E8M0's NaN) is not special-cased,
// as in ggml.
constexpr float e8m0_half(std::uint8_t e) noexcept {
  const std::uint32_t bits = e < 2 ? std::uint32_t{0x00200000} << e : std::uint32_t(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// Value j (0..31) of a block: e8m0_half(e) * kMxfp4Values[code j].
inline void dequantize_block(const BlockMXFP4& block, float* out) noexcept {
  const float d = e8m0_half(block.e);
  for (std::size_t j = 0; j < 16; ++j) {
    out[j] = static_cast<float>(kMxfp4Values[block.qs[j] & 0xF]) * d;
    out[j + 16] = static_cast<float>(kMxfp4Values[block.qs[j] >> 4]) * d;
  }
}

// The code whose value times `d` is nearest x, the first on a tie (ggml's
// best_index_mxfp4: a scan of all 16, both zeros included).
inline std::uint8_t nearest_mxfp4_code(float x, float d) noexcept {
  std::uint8_t best = 0;
  float best_error = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (std::uint8_t code = 1; code < 16; ++code) {
    const float error = std::fabs(static_cast<float>(kMxfp4Values[code]) * d - x);
    if (error < best_error) {
      best = code;
      best_error = error;
    }
  }
  return best;
}

// Bit-exact with ggml's quantize_row_mxfp4_ref: the scale puts the block's largest
// magnitude in [4, 8) times 2^(e - 127) (e = floor(log2 amax) - 2 + 127), each value
// then the nearest code. ggml casts that float exponent to uint8_t, which wraps for
// amax below 2^-125 (float-to-integer conversion, then the low byte, as x86 does);
// so does this, through int.
inline void quantize_block(const float* x, BlockMXFP4& out) noexcept {
  float amax = 0.0f;
  for (std::size_t j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  out.e = amax > 0.0f
              ? static_cast<std::uint8_t>(static_cast<int>(std::floor(std::log2(amax)) - 2 + 127))
              : 0;
  const float d = e8m0_half(out.e);
  for (std::size_t j = 0; j < 16; ++j) {
    out.qs[j] = static_cast<std::uint8_t>(nearest_mxfp4_code(x[j], d) |
                                          (nearest_mxfp4_code(x[j + 16], d) << 4));
  }
}

}  // namespace smol
