// AArch64 NEON kernels: integer dots per sub-block with widening multiplies
// (vmull_s8 / vpadalq_s16, baseline ARMv8-A: no dotprod extension assumed), combined
// exactly as the scalar reference does. Intrinsics because xsimd 8.1 has no widening
// int8 multiply-add.
#pragma once

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/quant/blocks.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/quant/mxfp4.hpp"
#include "smol/quant/q2_k.hpp"
#include "smol/quant/q3_k.hpp"
#include "smol/quant/q5_k.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/float_kernels.hpp"
#include "smol/simd/kernels.hpp"

namespace smol::simd {

template <>
struct HalfLoads<neon_arch> {
  using batch = xsimd::batch<float, neon_arch>;
  static batch f16(const f16_bits* p) noexcept {
    return batch(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))));
  }
  static batch bf16(const bf16_bits* p) noexcept {
    return batch(vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)));
  }
  static float f16_one(f16_bits h) noexcept {
    __fp16 v;
    std::memcpy(&v, &h, sizeof(v));
    return static_cast<float>(v);
  }
};

template <>
struct BlockLoads<neon_arch> {
  using batch = xsimd::batch<float, neon_arch>;
  // 16 signed bytes as floats times d: four batches.
  static void widen16(int8x16_t q, float d, batch* out) noexcept {
    const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_s8(vget_high_s8(q));
    out[0] = batch(vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d));
    out[1] = batch(vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))), d));
    out[2] = batch(vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d));
    out[3] = batch(vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))), d));
  }
  static void q8_0(const BlockQ8_0& b, batch* out) noexcept {
    const float d = HalfLoads<neon_arch>::f16_one(b.d);
    widen16(vld1q_s8(b.qs), d, out);
    widen16(vld1q_s8(b.qs + 16), d, out + 4);
  }
  // Values 0-15 are the low nibbles of the 16 bytes, 16-31 the high ones, each minus 8.
  static void q4_0(const BlockQ4_0& b, batch* out) noexcept {
    const float d = HalfLoads<neon_arch>::f16_one(b.d);
    const uint8x16_t packed = vld1q_u8(b.qs);
    const int8x16_t eight = vdupq_n_s8(8);
    widen16(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0F))), eight), d, out);
    widen16(vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(packed, 4)), eight), d, out + 4);
  }
};

namespace neon {

// Sum of a[i] * b[i] over 16 signed bytes (|a * b| < 2^14, so int16 pairs are safe).
template <class Arch>
inline std::int32_t dot16(int8x16_t a, int8x16_t b) noexcept {
  int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  p = vmlal_s8(p, vget_high_s8(a), vget_high_s8(b));
  return vaddlvq_s16(p);
}

template <class Arch>
float dot_q4k_q8k(const BlockQ4K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  const uint8x16_t nibble = vdupq_n_u8(0x0F);
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::uint8_t scales[8], mins[8];
    unpack_q4k_scales(x[b].scales, scales, mins);
    std::int32_t sumi = 0, summ = 0;
    for (std::size_t j = 0; j < 8; ++j) {
      const std::uint8_t* q = x[b].qs + 32 * (j / 2);
      const std::int8_t* yq = y[b].qs + 32 * j;
      std::int32_t s = 0;
      for (int half = 0; half < 2; ++half) {
        const uint8x16_t raw = vld1q_u8(q + 16 * half);
        const uint8x16_t v = j % 2 == 0 ? vandq_u8(raw, nibble) : vshrq_n_u8(raw, 4);
        s += dot16<Arch>(vreinterpretq_s8_u8(v), vld1q_s8(yq + 16 * half));
      }
      sumi += scales[j] * s;
      summ += mins[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
    }
    sum += HalfLoads<Arch>::f16_one(x[b].d) * y[b].d * static_cast<float>(sumi) -
           HalfLoads<Arch>::f16_one(x[b].dmin) * y[b].d * static_cast<float>(summ);
  }
  return sum;
}

template <class Arch>
float dot_q6k_q8k(const BlockQ6K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  const uint8x16_t nibble = vdupq_n_u8(0x0F), two_bits = vdupq_n_u8(3);
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t sumi = 0;
    for (std::size_t g = 0; g < 16; ++g) {
      const std::size_t half = g / 8, v0 = 16 * (g % 8), quarter = v0 / 32, l0 = v0 % 32;
      const uint8x16_t raw = vld1q_u8(x[b].ql + 64 * half + l0 + 32 * (quarter % 2));
      const uint8x16_t low = quarter < 2 ? vandq_u8(raw, nibble) : vshrq_n_u8(raw, 4);
      const uint8x16_t hbits = vld1q_u8(x[b].qh + 32 * half + l0);
      const int8x16_t shift = vdupq_n_s8(static_cast<std::int8_t>(-2 * static_cast<int>(quarter)));
      const uint8x16_t high = vandq_u8(vshlq_u8(hbits, shift), two_bits);
      const int8x16_t q =
          vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low, vshlq_n_u8(high, 4))), vdupq_n_s8(32));
      sumi += x[b].scales[g] * dot16<Arch>(q, vld1q_s8(y[b].qs + 16 * g));
    }
    sum += HalfLoads<Arch>::f16_one(x[b].d) * y[b].d * static_cast<float>(sumi);
  }
  return sum;
}

template <class Arch>
float dot_q8_0_q8_0(const BlockQ8_0* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    const std::int32_t s = dot16<Arch>(vld1q_s8(x[b].qs), vld1q_s8(y[b].qs)) +
                           dot16<Arch>(vld1q_s8(x[b].qs + 16), vld1q_s8(y[b].qs + 16));
    sum +=
        HalfLoads<Arch>::f16_one(x[b].d) * HalfLoads<Arch>::f16_one(y[b].d) * static_cast<float>(s);
  }
  return sum;
}

template <class Arch>
float dot_q4_0_q8_0(const BlockQ4_0* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    const uint8x16_t raw = vld1q_u8(x[b].qs);
    const int8x16_t lo =
        vsubq_s8(vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(raw, 4)), vdupq_n_s8(8));
    const std::int32_t s =
        dot16<Arch>(lo, vld1q_s8(y[b].qs)) + dot16<Arch>(hi, vld1q_s8(y[b].qs + 16));
    sum +=
        HalfLoads<Arch>::f16_one(x[b].d) * HalfLoads<Arch>::f16_one(y[b].d) * static_cast<float>(s);
  }
  return sum;
}

// Q2_K (wired by kernels_q2_k.hpp).

template <class Arch>
float dot_q2k_q8k(const BlockQ2K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  const uint8x16_t three = vdupq_n_u8(3);
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t sumi = 0, summ = 0;
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 4; ++j) {
        const int8x16_t shift = vdupq_n_s8(static_cast<std::int8_t>(-2 * j));
        for (int half = 0; half < 2; ++half) {
          const std::size_t g = 8 * h + 2 * j + half;  // the sub-block
          const uint8x16_t raw = vld1q_u8(x[b].qs + 32 * h + 16 * half);
          const uint8x16_t quants = vandq_u8(vshlq_u8(raw, shift), three);
          const std::int32_t s =
              dot16<Arch>(vreinterpretq_s8_u8(quants), vld1q_s8(y[b].qs + 16 * g));
          sumi += (x[b].scales[g] & 0xF) * s;
          summ += (x[b].scales[g] >> 4) * y[b].bsums[g];
        }
      }
    }
    sum += HalfLoads<Arch>::f16_one(x[b].d) * y[b].d * static_cast<float>(sumi) -
           HalfLoads<Arch>::f16_one(x[b].dmin) * y[b].d * static_cast<float>(summ);
  }
  return sum;
}

// Q3_K (wired by kernels_q3_k.hpp).

template <class Arch>
float dot_q3k_q8k(const BlockQ3K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  const uint8x16_t three = vdupq_n_u8(3), one = vdupq_n_u8(1);
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int8_t scales[16];
    unpack_q3k_scales(x[b].scales, scales);
    const uint8x16_t hmask[2] = {vld1q_u8(x[b].hmask), vld1q_u8(x[b].hmask + 16)};
    std::int32_t sumi = 0, offset = 0;
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 4; ++j) {
        const int8x16_t low_shift = vdupq_n_s8(static_cast<std::int8_t>(-2 * j));
        const int8x16_t high_shift = vdupq_n_s8(static_cast<std::int8_t>(-(4 * h + j)));
        for (int half = 0; half < 2; ++half) {
          const std::size_t g = 8 * h + 2 * j + half;  // the sub-block
          const uint8x16_t raw = vld1q_u8(x[b].qs + 32 * h + 16 * half);
          const uint8x16_t low2 = vandq_u8(vshlq_u8(raw, low_shift), three);
          const uint8x16_t bit3 = vshlq_n_u8(vandq_u8(vshlq_u8(hmask[half], high_shift), one), 2);
          const std::int32_t s =
              dot16<Arch>(vreinterpretq_s8_u8(vorrq_u8(low2, bit3)), vld1q_s8(y[b].qs + 16 * g));
          sumi += scales[g] * s;
          offset += scales[g] * y[b].bsums[g];
        }
      }
    }
    sumi -= 4 * offset;
    sum += HalfLoads<Arch>::f16_one(x[b].d) * y[b].d * static_cast<float>(sumi);
  }
  return sum;
}

// Q5_K (wired by kernels_q5_k.hpp).

template <class Arch>
float dot_q5k_q8k(const BlockQ5K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  const uint8x16_t nibble = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::uint8_t scales[8], mins[8];
    unpack_q4k_scales(x[b].scales, scales, mins);
    const uint8x16_t qh[2] = {vld1q_u8(x[b].qh), vld1q_u8(x[b].qh + 16)};
    std::int32_t sumi = 0, summ = 0;
    for (std::size_t j = 0; j < 8; ++j) {
      const std::uint8_t* q = x[b].qs + 32 * (j / 2);
      const std::int8_t* yq = y[b].qs + 32 * j;
      const int8x16_t down = vdupq_n_s8(static_cast<std::int8_t>(-static_cast<int>(j)));
      std::int32_t s = 0;
      for (int half = 0; half < 2; ++half) {
        const uint8x16_t raw = vld1q_u8(q + 16 * half);
        const uint8x16_t low4 = j % 2 == 0 ? vandq_u8(raw, nibble) : vshrq_n_u8(raw, 4);
        const uint8x16_t bit5 = vshlq_n_u8(vandq_u8(vshlq_u8(qh[half], down), one), 4);
        s += dot16<Arch>(vreinterpretq_s8_u8(vorrq_u8(low4, bit5)), vld1q_s8(yq + 16 * half));
      }
      sumi += scales[j] * s;
      summ += mins[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
    }
    sum += HalfLoads<Arch>::f16_one(x[b].d) * y[b].d * static_cast<float>(sumi) -
           HalfLoads<Arch>::f16_one(x[b].dmin) * y[b].d * static_cast<float>(summ);
  }
  return sum;
}

// IQ4_NL and IQ4_XS (wired by kernels_iq4.hpp).

// A block's 32 levels as two vectors of signed bytes: one tbl per 16 indices.
template <class Arch>
inline void iq4_levels(const std::uint8_t qs[16], int8x16_t table, int8x16_t out[2]) noexcept {
  const uint8x16_t raw = vld1q_u8(qs);
  out[0] = vqtbl1q_s8(table, vandq_u8(raw, vdupq_n_u8(0x0F)));
  out[1] = vqtbl1q_s8(table, vshrq_n_u8(raw, 4));
}

// A block of 32 4-bit codes looked up in `values` (IQ4_NL's levels, MXFP4's doubled E2M1
// values) dotted with Q8_0: per block scale(x, y) * the integer sum, as the scalar dots.
template <class Arch, class Block, class Scale>
float dot_lookup_q8_0(const Block* x, const BlockQ8_0* y, std::size_t nblocks,
                      const std::int8_t values[16], Scale scale) noexcept {
  const int8x16_t table = vld1q_s8(values);
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    int8x16_t levels[2];
    iq4_levels<Arch>(x[b].qs, table, levels);
    const std::int32_t sumi =
        dot16<Arch>(levels[0], vld1q_s8(y[b].qs)) + dot16<Arch>(levels[1], vld1q_s8(y[b].qs + 16));
    sum += scale(x[b], y[b]) * static_cast<float>(sumi);
  }
  return sum;
}

template <class Arch>
float dot_iq4nl_q8_0(const BlockIQ4NL* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  return dot_lookup_q8_0<Arch>(
      x, y, nblocks, kIq4nlValues, [](const BlockIQ4NL& xb, const BlockQ8_0& yb) {
        return HalfLoads<Arch>::f16_one(xb.d) * HalfLoads<Arch>::f16_one(yb.d);
      });
}

template <class Arch>
float dot_iq4xs_q8k(const BlockIQ4XS* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  const int8x16_t table = vld1q_s8(kIq4nlValues);
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t sumi = 0;
    for (std::size_t j = 0; j < 8; ++j) {
      int8x16_t levels[2];
      iq4_levels<Arch>(x[b].qs + 16 * j, table, levels);
      const std::int8_t* yq = y[b].qs + 32 * j;
      sumi += iq4xs_scale(x[b], j) *
              (dot16<Arch>(levels[0], vld1q_s8(yq)) + dot16<Arch>(levels[1], vld1q_s8(yq + 16)));
    }
    sum += HalfLoads<Arch>::f16_one(x[b].d) * y[b].d * static_cast<float>(sumi);
  }
  return sum;
}

// MXFP4 (wired by kernels_mxfp4.hpp): IQ4_NL's lookup with MXFP4's doubled values, the
// scale as scalar::dot_mxfp4_q8_0 takes it.
template <class Arch>
float dot_mxfp4_q8_0(const BlockMXFP4* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  return dot_lookup_q8_0<Arch>(x, y, nblocks, kMxfp4Values,
                               [](const BlockMXFP4& xb, const BlockQ8_0& yb) {
                                 return HalfLoads<Arch>::f16_one(yb.d) * e8m0_half(xb.e);
                               });
}

// Q4_1, Q5_0 and Q5_1 (wired by kernels_legacy.hpp).

// 0x10 in byte j where bit j of the 32-bit word qh is set, else 0, for values 0-15
// (out[0]) and 16-31 (out[1]): each byte takes qh byte j / 8, then a test keeps bit j % 8.
template <class Arch>
inline void fifth_bits(const std::uint8_t qh[4], uint8x16_t out[2]) noexcept {
  static constexpr std::uint8_t kByteOf[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                                  {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}};
  static constexpr std::uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128,
                                            1, 2, 4, 8, 16, 32, 64, 128};
  std::uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const uint8x16_t table = vcombine_u8(vcreate_u8(bits), vdup_n_u8(0));
  const uint8x16_t bit = vld1q_u8(kBit), sixteen = vdupq_n_u8(0x10);
  for (int half = 0; half < 2; ++half) {
    const uint8x16_t spread = vqtbl1q_u8(table, vld1q_u8(kByteOf[half]));
    out[half] = vandq_u8(vtstq_u8(spread, bit), sixteen);
  }
}

// A block's 32 levels as two vectors of bytes, as in the x86 kernel.
template <class Arch, class Block>
inline void legacy_levels(const Block& b, int8x16_t out[2]) noexcept {
  const uint8x16_t raw = vld1q_u8(b.qs);
  uint8x16_t q[2] = {vandq_u8(raw, vdupq_n_u8(0x0F)), vshrq_n_u8(raw, 4)};
  if constexpr (!std::is_same_v<Block, BlockQ4_1>) {
    uint8x16_t high[2];
    fifth_bits<Arch>(b.qh, high);
    q[0] = vorrq_u8(q[0], high[0]);
    q[1] = vorrq_u8(q[1], high[1]);
  }
  for (int half = 0; half < 2; ++half) {
    out[half] = vreinterpretq_s8_u8(q[half]);
    if constexpr (!kHasMin<Block>) out[half] = vsubq_s8(out[half], vdupq_n_s8(16));
  }
}

template <class Arch, class Block>
float dot_legacy(const Block* x, const LegacyActivation<Block>* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    int8x16_t levels[2];
    legacy_levels<Arch>(x[b], levels);
    const std::int32_t sumi =
        dot16<Arch>(levels[0], vld1q_s8(y[b].qs)) + dot16<Arch>(levels[1], vld1q_s8(y[b].qs + 16));
    sum += HalfLoads<Arch>::f16_one(x[b].d) * HalfLoads<Arch>::f16_one(y[b].d) *
           static_cast<float>(sumi);
    if constexpr (kHasMin<Block>) {
      sum += HalfLoads<Arch>::f16_one(x[b].m) * HalfLoads<Arch>::f16_one(y[b].s);
    }
  }
  return sum;
}

}  // namespace neon

}  // namespace smol::simd

#endif  // __aarch64__
