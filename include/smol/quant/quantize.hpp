// Scalar reference quantizers: f32 rows -> Q4_0, Q8_0, Q4_K, Q6_K (and f16/bf16/f32).
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
#include "smol/quant/row_blocks.hpp"

namespace smol {

namespace detail {

// Round to nearest, ties to even, valid for |x| < 2^22: adding 1.5 * 2^23 pushes
// the fraction out of the mantissa, so the float addition itself rounds. This is
// ggml's nearest_int, kept so that ties land on the same integer.
constexpr int nearest_int(float x) noexcept {
  const float shifted = x + 12582912.0f;
  return static_cast<int>(std::bit_cast<std::uint32_t>(shifted) & 0x7fffffu) - 0x400000;
}

constexpr int clamp_int(int value, int low, int high) noexcept {
  return value < low ? low : (value > high ? high : value);
}

// Finds scale s >= 0 and offset m <= 0 so that x[i] ~ s * L[i] + m with L[i] in
// 0..nmax, minimising sum w[i] * (s * L[i] + m - x[i])^2. Starts from the grid that
// spans [min(x, 0), max(x)], then tries nstep + 1 slightly stretched grids
// (nmax + rmin + rdelta * k steps over the same range); for each rounding it solves
// the 2x2 least-squares problem for s and m and keeps the best. Returns s and
// stores -m in `negated_min` (ggml's make_qkx2_quants).
inline float search_scale_and_min(int n, int nmax, const float* x, const float* weights,
                                  std::uint8_t* levels, float& negated_min, float rmin,
                                  float rdelta, int nstep) noexcept {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    negated_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
    levels[i] = static_cast<std::uint8_t>(l);
    const float diff = scale * static_cast<float>(l) + min - x[i];
    best_error += weights[i] * (diff * diff);
  }
  std::uint8_t trial[QK_K];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0;
    float sum_l2 = 0;
    float sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<std::uint8_t>(l);
      const float fl = static_cast<float>(l);
      sum_l += weights[i] * fl;
      sum_l2 += weights[i] * fl * fl;
      sum_xl += weights[i] * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float trial_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float trial_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (trial_min > 0) {  // the offset may only lower values: refit the scale alone
      trial_min = 0;
      trial_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = trial_scale * static_cast<float>(trial[i]) + trial_min - x[i];
      error += weights[i] * (diff * diff);
    }
    if (error < best_error) {
      for (int i = 0; i < n; ++i) levels[i] = trial[i];
      best_error = error;
      scale = trial_scale;
      min = trial_min;
    }
  }
  negated_min = -min;
  return scale;
}

// Finds a signed scale s so that x[i] ~ s * (L[i] - nmax) with L[i] in 0..2*nmax-1,
// maximising the weighted fit (sum w x l)^2 / (sum w l^2) with w = x^2 (large values
// matter most). The grid is anchored on the largest-magnitude value so that it maps
// to -nmax exactly; 18 grids stretched by +-0.1..0.9 steps are tried as well
// (ggml's make_qx_quants with rmse_type 1).
inline float search_symmetric_scale(int n, int nmax, const float* x, std::int8_t* levels) noexcept {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < 1e-15f) {  // all (nearly) zero
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.0f;
  }
  const auto fit = [&](float iscale, float& sum_lx, float& sum_l2) {
    sum_lx = 0;
    sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      const float w = x[i] * x[i];
      sum_lx += w * x[i] * l;
      sum_l2 += w * l * l;
    }
  };
  const auto store_levels = [&](float iscale) {
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      levels[i] = static_cast<std::int8_t>(l + nmax);
    }
  };
  float iscale = -static_cast<float>(nmax) / max;
  float sum_lx = 0;
  float sum_l2 = 0;
  fit(iscale, sum_lx, sum_l2);
  store_levels(iscale);
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    fit(iscale, sum_lx, sum_l2);
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      store_levels(iscale);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

}  // namespace detail

// Inverse of unpack_q4k_scales: packs eight 6-bit scales and mins into 12 bytes.
inline void pack_q4k_scales(const std::uint8_t scales[8], const std::uint8_t mins[8],
                            std::uint8_t packed[12]) noexcept {
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<std::uint8_t>((scales[j] & 63) | ((scales[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<std::uint8_t>((mins[j] & 63) | ((mins[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<std::uint8_t>((scales[j + 4] & 0xF) | ((mins[j + 4] & 0xF) << 4));
  }
}

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
  float scales[8];
  float mins[8];
  float max_scale = 0;
  float max_min = 0;
  for (std::size_t j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (std::size_t l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    // Weighting by |x| plus the sub-block RMS favours the large values without
    // letting the small ones go entirely unfitted.
    const float rms = std::sqrt(sum_x2 / 32);
    float weights[32];
    for (std::size_t l = 0; l < 32; ++l) weights[l] = rms + std::fabs(xs[l]);
    scales[j] = detail::search_scale_and_min(32, 15, xs, weights, levels + 32 * j, mins[j], -1.0f,
                                             0.1f, 20);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  std::uint8_t scale_codes[8];
  std::uint8_t min_codes[8];
  for (std::size_t j = 0; j < 8; ++j) {
    scale_codes[j] = static_cast<std::uint8_t>(
        detail::clamp_int(detail::nearest_int(inv_scale * scales[j]), 0, 63));
    min_codes[j] =
        static_cast<std::uint8_t>(detail::clamp_int(detail::nearest_int(inv_min * mins[j]), 0, 63));
  }
  pack_q4k_scales(scale_codes, min_codes, out.scales);
  out.d = f32_to_f16(max_scale / 63.0f);
  out.dmin = f32_to_f16(max_min / 63.0f);

  // Re-round every value against the scales actually stored (f16 x 6 bits).
  const float d = f16_to_f32(out.d);
  const float dmin = f16_to_f32(out.dmin);
  for (std::size_t j = 0; j < 8; ++j) {
    const float sub_scale = d * scale_codes[j];
    if (sub_scale == 0) continue;
    const float sub_min = dmin * min_codes[j];
    for (std::size_t l = 0; l < 32; ++l) {
      const int q = detail::nearest_int((x[32 * j + l] + sub_min) / sub_scale);
      levels[32 * j + l] = static_cast<std::uint8_t>(detail::clamp_int(q, 0, 15));
    }
  }
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

// Whether quantize_row can write `type`.
constexpr bool can_quantize(GgmlType type) noexcept {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
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
  const std::size_t n_blocks = row_blocks("quantize_row", type, can_quantize(type), n);
  switch (type) {
    case GgmlType::F32:
      std::memcpy(out, in, n * sizeof(float));
      return;
    case GgmlType::F16:
      for (std::size_t i = 0; i < n; ++i) {
        const f16_bits bits = f32_to_f16(in[i]);
        std::memcpy(out + 2 * i, &bits, 2);
      }
      return;
    case GgmlType::BF16:
      for (std::size_t i = 0; i < n; ++i) {
        const bf16_bits bits = f32_to_bf16(in[i]);
        std::memcpy(out + 2 * i, &bits, 2);
      }
      return;
    case GgmlType::Q4_0:
      return detail::quantize_blocks<BlockQ4_0>(in, out, n_blocks);
    case GgmlType::Q8_0:
      return detail::quantize_blocks<BlockQ8_0>(in, out, n_blocks);
    case GgmlType::Q4_K:
      return detail::quantize_blocks<BlockQ4K>(in, out, n_blocks);
    case GgmlType::Q6_K:
      return detail::quantize_blocks<BlockQ6K>(in, out, n_blocks);
    default:
      break;  // excluded by can_quantize above
  }
}

}  // namespace smol
