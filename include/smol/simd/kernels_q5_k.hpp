// The kernel unit of Q5_K (quant/q5_k.hpp): its dot with Q8_K activations in every
// instruction set, all here. Q5_K is Q4_K plus a fifth bit per value, so each kernel is
// its Q4_K sibling with the bit from qh added to the nibble before the multiply; the
// min term is Q4_K's. No interleaved copy or prefill tiles yet: matmul loops the dot
// over cache-sized blocks of rows and tokens.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/q5_k.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol {

namespace scalar {

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

}  // namespace scalar

#if defined(SMOL_X86)
namespace simd::x86 {

// 256-bit, for every x86 set (the VNNI sets fuse each madd+add into one vpdpwssd).
// Quants reach 31 and activations |127|, so a vpmaddubsw pair sum stays below 2^13.
template <class Arch>
float dot_q5k_q8k(const BlockQ5K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  const __m256i nibble = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  const __m128i mins_per_group =
      _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  __m256i pick[8];
  for (int j = 0; j < 8; ++j) pick[j] = pick_words<Arch>(j, j);
  __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const float yd = y[b].d;
    const __m128i packed = q4k_scales_and_mins<Arch>(x[b]);
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(packed));
    const __m256i min_products = _mm256_madd_epi16(
        _mm256_cvtepu8_epi16(_mm_shuffle_epi8(packed, mins_per_group)), load256<Arch>(y[b].bsums));
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_products),
                              _mm256_set1_ps(_cvtsh_ss(x[b].dmin) * yd), acc_min);
    // Bit 2c of each qh byte belongs to sub-block 2c: shifted down two bits per chunk.
    // (A 16-bit shift moves the high byte's bits into the low byte's top, which the
    // mask by 1 discards.)
    __m256i high_bits = load256<Arch>(x[b].qh);
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256<Arch>(x[b].qs + 32 * c);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, nibble),
                                         _mm256_slli_epi16(_mm256_and_si256(high_bits, one), 4));
      const __m256i hi = _mm256_or_si256(
          _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble),
          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 1), one), 4));
      high_bits = _mm256_srli_epi16(high_bits, 2);
      const __m256i p_lo = _mm256_maddubs_epi16(lo, load256<Arch>(y[b].qs + 64 * c));
      const __m256i p_hi = _mm256_maddubs_epi16(hi, load256<Arch>(y[b].qs + 64 * c + 32));
      sumi = madd16_acc<Arch>(sumi, p_lo, _mm256_shuffle_epi8(sc16, pick[2 * c]));
      sumi = madd16_acc<Arch>(sumi, p_hi, _mm256_shuffle_epi8(sc16, pick[2 * c + 1]));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(_cvtsh_ss(x[b].d) * yd), acc);
  }
  return hsum<Arch>(acc) - hsum<Arch>(acc_min);
}

}  // namespace simd::x86
#endif  // SMOL_X86

#if defined(__aarch64__)
namespace simd::neon {

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

}  // namespace simd::neon
#endif  // __aarch64__

template <>
struct KernelUnit<BlockWeight<BlockQ5K>> {
  template <class Arch>
  static WeightKernels<BlockWeight<BlockQ5K>> make() noexcept {
    WeightKernels<BlockWeight<BlockQ5K>> k;
    if constexpr (std::is_same_v<Arch, scalar_arch>) {
      k.dot = scalar::dot_q5k_q8k;
#if defined(SMOL_X86)
    } else if constexpr (std::is_same_v<Arch, avx2_arch> || is_avx512_v<Arch>) {
      k.dot = simd::x86::dot_q5k_q8k<Arch>;
#endif
#if defined(__aarch64__)
    } else if constexpr (std::is_same_v<Arch, neon_arch>) {
      k.dot = simd::neon::dot_q5k_q8k<Arch>;
#endif
    }
    return k;
  }
};

}  // namespace smol
