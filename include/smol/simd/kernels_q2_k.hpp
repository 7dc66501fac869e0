// The kernel unit of Q2_K (quant/q2_k.hpp): its dot with Q8_K activations in every
// instruction set, all here. Q2_K's sub-blocks are the activations' groups of 16, so the
// min term is sum_j m_j * bsum_j, as Q4_K's is per pair of groups; the quants sit in the
// bytes as Q3_K's low bits do (kernels_q3_k.hpp). The sums stay integer until one float
// multiply per block and term. No interleaved copy or prefill tiles yet: matmul loops the
// dot over cache-sized blocks of rows and tokens.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/q2_k.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol {

namespace scalar {

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

}  // namespace scalar

#if defined(SMOL_X86)
namespace simd::x86 {

// 256-bit, for every x86 set (the VNNI sets fuse each madd+add into one vpdpwssd). Each
// 32-byte load of qs serves four shifts; shift j of half h is sub-blocks 8h + 2j (low
// 128-bit lane) and 8h + 2j + 1 (high lane). Quants reach 3 and activations |127|, so a
// vpmaddubsw pair sum stays below 2^10.
template <class Arch>
float dot_q2k_q8k(const BlockQ2K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  const __m256i three = _mm256_set1_epi8(3);
  const __m128i nibble = _mm_set1_epi8(0x0F);
  __m256i pick[4];
  for (int j = 0; j < 4; ++j) pick[j] = pick_words<Arch>(2 * j, 2 * j + 1);
  __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const float yd = y[b].d;
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), nibble));
    const __m256i min_products = _mm256_madd_epi16(mins, load256<Arch>(y[b].bsums));
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_products),
                              _mm256_set1_ps(_cvtsh_ss(x[b].dmin) * yd), acc_min);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, nibble));
    // Scales 0-7 and 8-15, each in both 128-bit lanes (for pick_words).
    const __m256i halves[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                               _mm256_permute2x128_si256(sc16, sc16, 0x11)};
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256<Arch>(x[b].qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const __m256i quants = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three);
        const __m256i p = _mm256_maddubs_epi16(quants, load256<Arch>(y[b].qs + 128 * h + 32 * j));
        sumi = madd16_acc<Arch>(sumi, p, _mm256_shuffle_epi8(halves[h], pick[j]));
      }
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

}  // namespace simd::neon
#endif  // __aarch64__

template <>
struct KernelUnit<BlockWeight<BlockQ2K>> {
  template <class Arch>
  static WeightKernels<BlockWeight<BlockQ2K>> make() noexcept {
    WeightKernels<BlockWeight<BlockQ2K>> k;
    if constexpr (std::is_same_v<Arch, scalar_arch>) {
      k.dot = scalar::dot_q2k_q8k;
#if defined(SMOL_X86)
    } else if constexpr (std::is_same_v<Arch, avx2_arch> || is_avx512_v<Arch>) {
      k.dot = simd::x86::dot_q2k_q8k<Arch>;
#endif
#if defined(__aarch64__)
    } else if constexpr (std::is_same_v<Arch, neon_arch>) {
      k.dot = simd::neon::dot_q2k_q8k<Arch>;
#endif
    }
    return k;
  }
};

}  // namespace smol
