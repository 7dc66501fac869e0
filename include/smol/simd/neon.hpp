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

}  // namespace neon

}  // namespace smol::simd

#endif  // __aarch64__
