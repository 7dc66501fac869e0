// x86 attention scores over a quantized (Q8_0 or Q4_0) key cache: many key rows against
// the Q8_0 queries of one KV head's group, in 256-bit (AVX2) and 512-bit (AVX-512) form.
//
// Decode at depth reads every cached key once per token, so this loop runs once per
// position per KV head per layer. The queries' scales are converted once per call; per
// key row, the |k| and sign of each block are made once for the whole group. Each
// block's integer sums stay in their own lanes until they are scaled by the key's and
// the query's d (the per-block scale the format demands), and the group's score vectors
// are reduced together. A ymm holds one 32-value block, a zmm two. Hand-written because
// xsimd 8.1 has no u8 x s8 multiply-add.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>
#include <type_traits>

#include "smol/quant/blocks.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol::simd::x86 {

// Blocks per row the kernel holds queries for: 512-value heads.
inline constexpr std::size_t kMaxKeyBlockPairs = 8;

// The quantized values of blocks b and b + 1 of a row, one zmm (b's in the low half).
template <class Arch, class Block>
inline __m512i block_pair(const Block* row) noexcept {
  if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load256<Arch>(row[0].qs)),
                              load256<Arch>(row[1].qs), 1);
  } else {
    static_assert(std::is_same_v<Block, BlockQ4_0>);
    // Values 0-15 are the low nibbles, 16-31 the high ones, each minus 8.
    const __m128i p0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[0].qs));
    const __m128i p1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[1].qs));
    const __m512i both =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(_mm_srli_epi16(p0, 4), p0)),
                           _mm256_set_m128i(_mm_srli_epi16(p1, 4), p1), 1);
    return _mm512_sub_epi8(_mm512_and_si512(both, _mm512_set1_epi8(0x0F)), _mm512_set1_epi8(8));
  }
}

// The two blocks' scales, each in its 8 lanes.
template <class Arch, class Block>
inline __m512 pair_scales(const Block* row) noexcept {
  return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(static_cast<short>(row[1].d)),
                                          _mm_set1_epi16(static_cast<short>(row[0].d))));
}

// Sums of 4 products of |k| (u8) and q with k's sign, in int32 lanes (|q| <= 127, so
// vpmaddubsw's int16 pairs cannot saturate: 2 * 128 * 127 < 2^15).
template <class Arch>
inline __m512i dot_s8_512(__m512i abs_k, __m512i signed_q) noexcept {
  if constexpr (has_vnni_v<Arch>) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), abs_k, signed_q);
  } else {
    return _mm512_madd_epi16(_mm512_maddubs_epi16(abs_k, signed_q), _mm512_set1_epi16(1));
  }
}

// The horizontal sums of four vectors, as the lanes of one 128-bit vector.
template <class Arch>
inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) noexcept {
  const __m256 ab = _mm256_hadd_ps(a, b);  // a0+a1 a2+a3 b0+b1 b2+b3 | ...
  const __m256 cd = _mm256_hadd_ps(c, d);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);  // a b c d per 128-bit lane
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}
template <class Arch>
inline __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) noexcept {
  const auto half = [](__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  };
  return hsum4<Arch>(half(a), half(b), half(c), half(d));
}

// scores[j * stride + p] = scale * (key row p . query row j) for NH <= 4 query rows of
// nb blocks (at most 2 * kMaxKeyBlockPairs) and `count` contiguous key rows, one block
// per vector: AVX2, and AVX-512 when the row has an odd count of blocks.
template <class Arch, std::size_t NH, class Block>
void score_rows_q8_0_256(const Block* keys, std::size_t count, const BlockQ8_0* queries,
                         std::size_t nb, float scale, float* scores, std::size_t stride) noexcept {
  static_assert(NH >= 1 && NH <= 4);
  float qd[NH][2 * kMaxKeyBlockPairs];
  for (std::size_t j = 0; j < NH; ++j) {
    for (std::size_t b = 0; b < nb; ++b) qd[j][b] = _cvtsh_ss(queries[j * nb + b].d);
  }
  const __m256i nibble = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
  const __m128 vscale = _mm_set1_ps(scale);
  constexpr std::size_t kAhead = 16;
  for (std::size_t p = 0; p < count; ++p) {
    const Block* row = keys + p * nb;
    const char* ahead = reinterpret_cast<const char*>(row + kAhead * nb);
    for (std::size_t b = 0; b < nb * sizeof(Block); b += 64) __builtin_prefetch(ahead + b);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (std::size_t b = 0; b < nb; ++b) {
      __m256i k;
      if constexpr (std::is_same_v<Block, BlockQ8_0>) {
        k = load256<Arch>(row[b].qs);
      } else {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[b].qs));
        k = _mm256_sub_epi8(
            _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), nibble), eight);
      }
      const __m256i abs_k = _mm256_sign_epi8(k, k);
      const float kd = _cvtsh_ss(row[b].d);
      for (std::size_t j = 0; j < NH; ++j) {
        const __m256i signed_q = _mm256_sign_epi8(load256<Arch>(queries[j * nb + b].qs), k);
        __m256i sums;
        if constexpr (has_vnni_v<Arch>) {
          sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs_k, signed_q);
        } else {
          sums = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_k, signed_q), _mm256_set1_epi16(1));
        }
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(kd * qd[j][b]), acc[j]);
      }
    }
    alignas(16) float s[4];
    _mm_store_ps(s, _mm_mul_ps(hsum4<Arch>(acc[0], acc[1], acc[2], acc[3]), vscale));
    for (std::size_t j = 0; j < NH; ++j) scores[j * stride + p] = s[j];
  }
}

// The same, two blocks per vector (AVX-512; nb even).
template <class Arch, std::size_t NH, class Block>
void score_rows_q8_0_512(const Block* keys, std::size_t count, const BlockQ8_0* queries,
                         std::size_t nb, float scale, float* scores, std::size_t stride) noexcept {
  static_assert(NH >= 1 && NH <= 4);
  const std::size_t pairs = nb / 2;
  __m512i q[NH][kMaxKeyBlockPairs];
  __m512 qd[NH][kMaxKeyBlockPairs];
  for (std::size_t j = 0; j < NH; ++j) {
    for (std::size_t c = 0; c < pairs; ++c) {
      q[j][c] = block_pair<Arch>(queries + j * nb + 2 * c);
      qd[j][c] = pair_scales<Arch>(queries + j * nb + 2 * c);
    }
  }
  const __m128 vscale = _mm_set1_ps(scale);
  constexpr std::size_t kAhead = 16;
  for (std::size_t p = 0; p < count; ++p) {
    const Block* row = keys + p * nb;
    // Rows ahead of the hardware prefetcher, which restarts at every 4 KiB page.
    const char* ahead = reinterpret_cast<const char*>(row + kAhead * nb);
    for (std::size_t b = 0; b < nb * sizeof(Block); b += 64) __builtin_prefetch(ahead + b);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    for (std::size_t c = 0; c < pairs; ++c) {
      const __m512i k = block_pair<Arch>(row + 2 * c);
      const __m512i abs_k = _mm512_abs_epi8(k);
      const __mmask64 negative = _mm512_movepi8_mask(k);
      const __m512 kd = pair_scales<Arch>(row + 2 * c);
      for (std::size_t j = 0; j < NH; ++j) {
        const __m512i signed_q =
            _mm512_mask_sub_epi8(q[j][c], negative, _mm512_setzero_si512(), q[j][c]);
        const __m512 sums = _mm512_cvtepi32_ps(dot_s8_512<Arch>(abs_k, signed_q));
        acc[j] = _mm512_fmadd_ps(sums, _mm512_mul_ps(kd, qd[j][c]), acc[j]);
      }
    }
    alignas(16) float s[4];
    _mm_store_ps(s, _mm_mul_ps(hsum4<Arch>(acc[0], acc[1], acc[2], acc[3]), vscale));
    for (std::size_t j = 0; j < NH; ++j) scores[j * stride + p] = s[j];
  }
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
