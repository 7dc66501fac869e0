// Scalar reference quantizers: f32 rows -> every weight type (quant/weight_types.hpp);
// a block type with a header of its own, like quant/q5_k.hpp, has its quantizer there.
//
// They follow the algorithms of ggml's reference quantizers (what llama-quantize
// runs without an importance matrix): Q4_K searches each sub-block's scale and min
// by weighted least squares over a sweep of candidate grids (make_qkx2_quants),
// Q6_K searches a symmetric scale the same way (make_qx_quants), and both then
// quantize the sub-block scales to 6 / 8 bits and re-round every value against the
// final scales. Used to build synthetic models and test data; not a hot path.
// Weights are never quantized at load time.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/error.hpp"
#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/k_quant_scales.hpp"
#include "smol/quant/row_blocks.hpp"
#include "smol/quant/weight_types.hpp"

namespace smol {

// Q4_0: d = -max/8 for the largest-magnitude value max, q = trunc(x/d + 8.5) capped at 15.
inline void quantize_block(const float* x, BlockQ4_0& out) noexcept {
  float amax = 0;
  float max = 0;
  for (std::size_t j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  out.d = f32_to_f16(d);
  for (std::size_t j = 0; j < 16; ++j) {
    const int low = detail::clamp_int(static_cast<int>(x[j] * id + 8.5f), 0, 15);
    const int high = detail::clamp_int(static_cast<int>(x[j + 16] * id + 8.5f), 0, 15);
    out.qs[j] = static_cast<std::uint8_t>(low | (high << 4));
  }
}

// Q8_0: d = max|x| / 127, q = round-half-away(x / d).
inline void quantize_block(const float* x, BlockQ8_0& out) noexcept {
  float amax = 0;
  for (std::size_t j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  out.d = f32_to_f16(d);
  for (std::size_t j = 0; j < 32; ++j) out.qs[j] = static_cast<std::int8_t>(std::round(x[j] * id));
}

inline void quantize_block(const float* x, BlockQ4K& out) noexcept {
  std::uint8_t levels[QK_K];
  quantize_k_sub_blocks(x, 15, -1.0f, 20, levels, out.d, out.dmin, out.scales);
  for (std::size_t chunk = 0; chunk < 4; ++chunk) {
    for (std::size_t l = 0; l < 32; ++l) {
      out.qs[32 * chunk + l] =
          static_cast<std::uint8_t>(levels[64 * chunk + l] | (levels[64 * chunk + 32 + l] << 4));
    }
  }
}

// Packs 256 six-bit levels (0..63) into Q6_K's ql/qh layout (see dequantize_block).
inline void pack_q6k_levels(const std::uint8_t levels[QK_K], BlockQ6K& out) noexcept {
  for (std::size_t half = 0; half < 2; ++half) {
    const std::uint8_t* run = levels + 128 * half;
    std::uint8_t* ql = out.ql + 64 * half;
    std::uint8_t* qh = out.qh + 32 * half;
    for (std::size_t l = 0; l < 32; ++l) {
      ql[l] = static_cast<std::uint8_t>((run[l] & 0xF) | ((run[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<std::uint8_t>((run[l + 32] & 0xF) | ((run[l + 96] & 0xF) << 4));
      qh[l] = static_cast<std::uint8_t>((run[l] >> 4) | ((run[l + 32] >> 4) << 2) |
                                        ((run[l + 64] >> 4) << 4) | ((run[l + 96] >> 4) << 6));
    }
  }
}

inline void quantize_block(const float* x, BlockQ6K& out) noexcept {
  std::int8_t signed_levels[QK_K];
  float scales[16];
  float max_scale = 0;
  float max_abs_scale = 0;
  for (std::size_t g = 0; g < 16; ++g) {
    scales[g] = detail::search_symmetric_scale(16, 32, x + 16 * g, signed_levels + 16 * g);
    if (std::fabs(scales[g]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[g]);
      max_scale = scales[g];
    }
  }
  if (max_abs_scale < 1e-15f) {
    std::memset(&out, 0, sizeof(out));
    return;
  }
  // The group with the largest scale gets code -128, so d can be negative.
  const float iscale = -128.0f / max_scale;
  out.d = f32_to_f16(1 / iscale);
  for (std::size_t g = 0; g < 16; ++g) {
    const int code = detail::nearest_int(iscale * scales[g]);
    out.scales[g] = static_cast<std::int8_t>(code < 127 ? code : 127);
  }
  std::uint8_t levels[QK_K];
  for (std::size_t i = 0; i < QK_K; ++i) levels[i] = static_cast<std::uint8_t>(signed_levels[i]);
  const float d = f16_to_f32(out.d);
  for (std::size_t g = 0; g < 16; ++g) {
    const float group_scale = d * static_cast<float>(out.scales[g]);
    if (group_scale == 0) continue;
    for (std::size_t l = 0; l < 16; ++l) {
      const int q = detail::nearest_int(x[16 * g + l] / group_scale);
      levels[16 * g + l] = static_cast<std::uint8_t>(detail::clamp_int(q, -32, 31) + 32);
    }
  }
  pack_q6k_levels(levels, out);
}

namespace detail {

template <class Block>
void quantize_blocks(const float* in, std::byte* out, std::size_t n_blocks) noexcept {
  for (std::size_t b = 0; b < n_blocks; ++b) {
    Block block;
    quantize_block(in + b * BlockTraits<Block>::values, block);
    std::memcpy(out + b * sizeof(Block), &block, sizeof(Block));
  }
}

}  // namespace detail

// Quantizes `n` floats into ggml_row_bytes(type, n) bytes at `out`. Throws
// smol::Error for a type it cannot write or an `n` that is not a whole number of
// blocks.
inline void quantize_row(GgmlType type, const float* in, std::byte* out, std::size_t n) {
  const std::size_t n_blocks = row_blocks("quantize_row", type, is_weight_type(type), n);
  visit_weight_type(type, [&]<class W>(W) {
    if constexpr (W::type == GgmlType::F32) {
      std::memcpy(out, in, n * sizeof(float));
    } else if constexpr (W::type == GgmlType::F16 || W::type == GgmlType::BF16) {
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t bits =
            W::type == GgmlType::F16 ? f32_to_f16(in[i]) : f32_to_bf16(in[i]);
        std::memcpy(out + 2 * i, &bits, 2);
      }
    } else {
      detail::quantize_blocks<typename W::Block>(in, out, n_blocks);
    }
  });
}

}  // namespace smol
