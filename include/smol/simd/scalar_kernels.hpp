// The scalar reference kernels: the math exactly as ggml defines it, written plainly.
//
// Every vector kernel is tested against these. Integer work stays integer (a sum per
// sub-block, weighted by the integer sub-block scales) until one float multiply per
// block, as in ggml, so the integer part of a SIMD kernel must match exactly.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/quant/mxfp4.hpp"
#include "smol/quant/q2_k.hpp"
#include "smol/quant/q3_k.hpp"
#include "smol/quant/q5_k.hpp"
#include "smol/simd/kernels.hpp"

namespace smol::scalar {

// Q4_K . Q8_K: sum_j d*sc_j*S_j - dmin*m_j*B_j, with S_j the integer dot of sub-block j
// and B_j its activation sum (from the Q8_K bsums, so the min term is free).
inline float dot_q4k_q8k(const BlockQ4K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::uint8_t scales[8], mins[8];
    unpack_q4k_scales(x[b].scales, scales, mins);
    std::int32_t sumi = 0, summ = 0;
    for (std::size_t j = 0; j < 8; ++j) {
      const std::uint8_t* q = x[b].qs + 32 * (j / 2);
      const int shift = (j % 2) * 4;
      std::int32_t s = 0;
      for (std::size_t i = 0; i < 32; ++i) s += ((q[i] >> shift) & 0xF) * y[b].qs[32 * j + i];
      sumi += scales[j] * s;
      summ += mins[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
    }
    sum += f16_to_f32(x[b].d) * y[b].d * static_cast<float>(sumi) -
           f16_to_f32(x[b].dmin) * y[b].d * static_cast<float>(summ);
  }
  return sum;
}

// The 6-bit quant `i` (0..255) of a Q6_K block, 0..63 (subtract 32 for the value).
inline int q6k_quant(const BlockQ6K& x, std::size_t i) noexcept {
  const std::size_t half = i / 128, v = i % 128, l = v % 32, quarter = v / 32;
  const std::uint8_t low = x.ql[64 * half + l + 32 * (quarter % 2)];
  const int low4 = quarter < 2 ? (low & 0xF) : (low >> 4);
  const int high2 = (x.qh[32 * half + l] >> (2 * quarter)) & 3;
  return low4 | (high2 << 4);
}

inline float dot_q6k_q8k(const BlockQ6K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t sumi = 0;
    for (std::size_t g = 0; g < 16; ++g) {
      std::int32_t s = 0;
      for (std::size_t i = 16 * g; i < 16 * g + 16; ++i) {
        s += (q6k_quant(x[b], i) - 32) * y[b].qs[i];
      }
      sumi += x[b].scales[g] * s;
    }
    sum += f16_to_f32(x[b].d) * y[b].d * static_cast<float>(sumi);
  }
  return sum;
}

inline float dot_q4_0_q8_0(const BlockQ4_0* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t s = 0;
    for (std::size_t i = 0; i < 16; ++i) {
      s += ((x[b].qs[i] & 0xF) - 8) * y[b].qs[i] + ((x[b].qs[i] >> 4) - 8) * y[b].qs[i + 16];
    }
    sum += f16_to_f32(x[b].d) * f16_to_f32(y[b].d) * static_cast<float>(s);
  }
  return sum;
}

inline float dot_q8_0_q8_0(const BlockQ8_0* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t s = 0;
    for (std::size_t i = 0; i < 32; ++i) s += x[b].qs[i] * y[b].qs[i];
    sum += f16_to_f32(x[b].d) * f16_to_f32(y[b].d) * static_cast<float>(s);
  }
  return sum;
}

inline float dot_f32(const float* x, const float* y, std::size_t n) noexcept {
  float sum = 0.0f;
  for (std::size_t i = 0; i < n; ++i) sum += x[i] * y[i];
  return sum;
}

inline float dot_f16_f32(const f16_bits* x, const float* y, std::size_t n) noexcept {
  float sum = 0.0f;
  for (std::size_t i = 0; i < n; ++i) sum += f16_to_f32(x[i]) * y[i];
  return sum;
}

inline float dot_bf16_f32(const bf16_bits* x, const float* y, std::size_t n) noexcept {
  float sum = 0.0f;
  for (std::size_t i = 0; i < n; ++i) sum += bf16_to_f32(x[i]) * y[i];
  return sum;
}

// ggml's reference Q8_0 quantizer: d = amax / 127, q = round-half-away(x / d).
inline void quantize_row_q8_0(const float* x, BlockQ8_0* out, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n / 32; ++b) {
    float amax = 0.0f;
    for (std::size_t i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[32 * b + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = f32_to_f16(d);
    for (std::size_t i = 0; i < 32; ++i) {
      out[b].qs[i] = static_cast<std::int8_t>(std::round(x[32 * b + i] * id));
    }
  }
}

// Same rounding as quantize_q8k.hpp, restated here so the table does not depend on
// who owns that header; the tests check the two agree.
inline void quantize_row_q8k(const float* x, BlockQ8K* out, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float max = 0.0f, amax = 0.0f;
    for (std::size_t j = 0; j < QK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    BlockQ8K& o = out[b];
    if (amax == 0.0f) {
      std::memset(&o, 0, sizeof(o));
      continue;
    }
    const float iscale = -127.0f / max;
    for (std::size_t j = 0; j < QK_K; ++j) {
      const int v = static_cast<int>(std::nearbyint(iscale * x[j]));
      o.qs[j] = static_cast<std::int8_t>(v < 127 ? v : 127);
    }
    for (std::size_t g = 0; g < 16; ++g) {
      int s = 0;
      for (std::size_t k = 0; k < 16; ++k) s += o.qs[16 * g + k];
      o.bsums[g] = static_cast<std::int16_t>(s);
    }
    o.d = 1.0f / iscale;
  }
}

inline float silu(float x) noexcept {
  return x / (1.0f + std::exp(-x));
}

inline void swiglu(const float* gate, const float* up, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

// Q2_K (quant/q2_k.hpp; wired by kernels_q2_k.hpp).

// The reference: sum_j d*sc_j*S_j - dmin*m_j*B_j, with S_j = sum_l q_l y_l and B_j the
// group's bsum.
inline float dot_q2k_q8k(const BlockQ2K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t sumi = 0, summ = 0;
    for (std::size_t j = 0; j < 16; ++j) {
      std::int32_t s = 0;
      for (std::size_t l = 0; l < 16; ++l) s += q2k_quant(x[b], 16 * j + l) * y[b].qs[16 * j + l];
      sumi += (x[b].scales[j] & 0xF) * s;
      summ += (x[b].scales[j] >> 4) * y[b].bsums[j];
    }
    sum += f16_to_f32(x[b].d) * y[b].d * static_cast<float>(sumi) -
           f16_to_f32(x[b].dmin) * y[b].d * static_cast<float>(summ);
  }
  return sum;
}

// Q3_K (quant/q3_k.hpp; wired by kernels_q3_k.hpp).

// The reference: sum_j d * (sc_j - 32) * sum_l q_l y_l, in integers per block.
inline float dot_q3k_q8k(const BlockQ3K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int8_t scales[16];
    unpack_q3k_scales(x[b].scales, scales);
    std::int32_t sumi = 0;
    for (std::size_t j = 0; j < 16; ++j) {
      std::int32_t s = 0;
      for (std::size_t l = 0; l < 16; ++l) s += q3k_quant(x[b], 16 * j + l) * y[b].qs[16 * j + l];
      sumi += scales[j] * s;
    }
    sum += f16_to_f32(x[b].d) * y[b].d * static_cast<float>(sumi);
  }
  return sum;
}

// Q5_K (quant/q5_k.hpp; wired by kernels_q5_k.hpp).

// The reference: sum_j d*sc_j*S_j - dmin*m_j*B_j as for Q4_K, with 5-bit quants.
inline float dot_q5k_q8k(const BlockQ5K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::uint8_t scales[8], mins[8];
    unpack_q4k_scales(x[b].scales, scales, mins);
    std::int32_t sumi = 0, summ = 0;
    for (std::size_t j = 0; j < 8; ++j) {
      std::int32_t s = 0;
      for (std::size_t l = 0; l < 32; ++l) s += q5k_quant(x[b], j, l) * y[b].qs[32 * j + l];
      sumi += scales[j] * s;
      summ += mins[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
    }
    sum += f16_to_f32(x[b].d) * y[b].d * static_cast<float>(sumi) -
           f16_to_f32(x[b].dmin) * y[b].d * static_cast<float>(summ);
  }
  return sum;
}

// MXFP4 (quant/mxfp4.hpp; wired by kernels_mxfp4.hpp): as ggml's, per block
// d_y * e8m0_half(e) * sum value * y, the sum exact in integers.
inline float dot_mxfp4_q8_0(const BlockMXFP4* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t sumi = 0;
    for (std::size_t j = 0; j < 16; ++j) {
      sumi += kMxfp4Values[x[b].qs[j] & 0xF] * y[b].qs[j] +
              kMxfp4Values[x[b].qs[j] >> 4] * y[b].qs[j + 16];
    }
    sum += f16_to_f32(y[b].d) * e8m0_half(x[b].e) * static_cast<float>(sumi);
  }
  return sum;
}

// IQ4_NL and IQ4_XS (quant/iq4.hpp; wired by kernels_iq4.hpp).

inline float dot_iq4nl_q8_0(const BlockIQ4NL* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t sumi = 0;
    for (std::size_t j = 0; j < 32; ++j) sumi += kIq4nlValues[iq4_index(x[b].qs, j)] * y[b].qs[j];
    sum += f16_to_f32(x[b].d) * f16_to_f32(y[b].d) * static_cast<float>(sumi);
  }
  return sum;
}

// IQ4_XS: the integer sum over the super-block (|s_j level y| <= 32 * 127 * 127 < 2^19
// per value, so < 2^27 per super-block), then one float product.
inline float dot_iq4xs_q8k(const BlockIQ4XS* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t sumi = 0;
    for (std::size_t j = 0; j < 8; ++j) {
      const std::uint8_t* qs = x[b].qs + 16 * j;
      const std::int8_t* yq = y[b].qs + 32 * j;
      std::int32_t s = 0;
      for (std::size_t l = 0; l < 32; ++l) s += kIq4nlValues[iq4_index(qs, l)] * yq[l];
      sumi += iq4xs_scale(x[b], j) * s;
    }
    sum += f16_to_f32(x[b].d) * y[b].d * static_cast<float>(sumi);
  }
  return sum;
}

// Q4_1, Q5_0 and Q5_1 (quant/legacy_blocks.hpp; wired by kernels_legacy.hpp).

// Value j's integer level: q for the types with a min, q - 16 for Q5_0.
inline int legacy_level(const BlockQ4_1& b, std::size_t j) noexcept {
  return legacy_low4(b, j);
}
inline int legacy_level(const BlockQ5_0& b, std::size_t j) noexcept {
  return legacy_q5_quant(b, j) - 16;
}
inline int legacy_level(const BlockQ5_1& b, std::size_t j) noexcept {
  return legacy_q5_quant(b, j);
}

template <class Block>
float dot_legacy(const Block* x, const LegacyActivation<Block>* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t sumi = 0;
    for (std::size_t j = 0; j < 32; ++j) sumi += legacy_level(x[b], j) * y[b].qs[j];
    sum += f16_to_f32(x[b].d) * f16_to_f32(y[b].d) * static_cast<float>(sumi);
    if constexpr (kHasMin<Block>) sum += f16_to_f32(x[b].m) * f16_to_f32(y[b].s);
  }
  return sum;
}

}  // namespace smol::scalar
