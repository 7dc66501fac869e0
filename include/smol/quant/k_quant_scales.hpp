// The searches behind ggml's reference k-quantizers, shared by every k-quant block:
// a scale and min per sub-block by weighted least squares (make_qkx2_quants), a
// symmetric scale (make_qx_quants), and the common second step of Q4_K and Q5_K, which
// quantizes the sub-block scales and mins to 6 bits and re-rounds every value against
// what is actually stored. Used to build synthetic models and test data; not a hot path.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"

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
// stores -m in `negated_min` (ggml's make_qkx2_quants). With `absolute_error` the grids
// are compared by sum w[i] * |s * L[i] + m - x[i]| instead (ggml's use_mad, Q2_K's
// choice); the scale and offset of each grid are still the least-squares ones.
inline float search_scale_and_min(int n, int nmax, const float* x, const float* weights,
                                  std::uint8_t* levels, float& negated_min, float rmin,
                                  float rdelta, int nstep, bool absolute_error = false) noexcept {
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
    best_error += weights[i] * (absolute_error ? std::fabs(diff) : diff * diff);
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
      error += weights[i] * (absolute_error ? std::fabs(diff) : diff * diff);
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

// The value of largest magnitude among x[0..n) (the first of equals), or 0 when every
// |x| is below 1e-15: the anchor of the symmetric scale searches.
inline float largest_magnitude(int n, const float* x) noexcept {
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return amax < 1e-15f ? 0.0f : max;
}

// Finds a signed scale s so that x[i] ~ s * (L[i] - nmax) with L[i] in 0..2*nmax-1,
// maximising the weighted fit (sum w x l)^2 / (sum w l^2) with w = x^2 (large values
// matter most). The grid is anchored on the largest-magnitude value so that it maps
// to -nmax exactly; 18 grids stretched by +-0.1..0.9 steps are tried as well
// (ggml's make_qx_quants with rmse_type 1).
inline float search_symmetric_scale(int n, int nmax, const float* x, std::int8_t* levels) noexcept {
  const float max = largest_magnitude(n, x);
  if (max == 0.0f) {  // all (nearly) zero
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

// Q4_K and Q5_K (`max_level` 15 and 31): searches each of the 8 sub-blocks' scale and
// min, stores them as 6-bit codes under the f16 `d` and `dmin`, and writes the levels
// (0..max_level) re-rounded against the stored scales. The caller packs the levels.
inline void quantize_k_sub_blocks(const float* x, int max_level, float rmin, int nstep,
                                  std::uint8_t levels[QK_K], f16_bits& d_out, f16_bits& dmin_out,
                                  std::uint8_t packed_scales[12]) noexcept {
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
    scales[j] = detail::search_scale_and_min(32, max_level, xs, weights, levels + 32 * j, mins[j],
                                             rmin, 0.1f, nstep);
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
  pack_q4k_scales(scale_codes, min_codes, packed_scales);
  d_out = f32_to_f16(max_scale / 63.0f);
  dmin_out = f32_to_f16(max_min / 63.0f);

  // Re-round every value against the scales actually stored (f16 x 6 bits).
  const float d = f16_to_f32(d_out);
  const float dmin = f16_to_f32(dmin_out);
  for (std::size_t j = 0; j < 8; ++j) {
    const float sub_scale = d * scale_codes[j];
    if (sub_scale == 0) continue;
    const float sub_min = dmin * min_codes[j];
    for (std::size_t l = 0; l < 32; ++l) {
      const int q = detail::nearest_int((x[32 * j + l] + sub_min) / sub_scale);
      levels[32 * j + l] = static_cast<std::uint8_t>(detail::clamp_int(q, 0, max_level));
    }
  }
}

}  // namespace smol
