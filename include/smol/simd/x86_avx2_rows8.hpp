// AVX2 kernel on eight interleaved Q4_K rows (quant/q4k_rows8.hpp) times up to
// kRows8Tokens Q8_K tokens at a time: the decode matvec (one token) and prefill.
//
// Lane r of every vector is row r. Per 4-byte group of a chunk, one load serves eight
// rows; the token's matching 4 activation bytes are broadcast to all lanes. The eight
// vpmaddubsw products of a sub-block are summed in int16 (8 x 2 x 15 x 128 < 2^15)
// before one vpmaddwd with the rows' scales, so the integers stay exact until one float
// multiply per super-block, and the eight row results leave as one vector.
// Intrinsics, because xsimd 8.1 has no u8 x s8 dot.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/quant/blocks.hpp"
#include "smol/quant/q4k_rows8.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol::simd::x86 {

// Tokens per pass: two keep the int16 and int32 accumulators in the 16 ymm registers.
inline constexpr std::size_t kRows8Tokens = 2;
inline constexpr std::size_t kRows8PrefetchBytes = 4096;

template <class Arch>
inline __m256i broadcast4(const std::int8_t* p) noexcept {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// int16 pairs (s[2c], s[2c + 1]) of the token's sub-block sums, one per chunk c, each in
// every lane: the activation side of the Q4_K min term.
template <class Arch>
inline void sub_block_sum_pairs(const BlockQ8K& x, __m256i pairs[4]) noexcept {
  const __m256i sums = _mm256_madd_epi16(load256<Arch>(x.bsums), _mm256_set1_epi16(1));
  // 128-bit halves: [s0 s1 s2 s3 s0 s1 s2 s3 | s4 s5 s6 s7 s4 s5 s6 s7] as int16.
  const __m256i packed = _mm256_packs_epi32(sums, sums);
  pairs[0] = _mm256_permutevar8x32_epi32(packed, _mm256_set1_epi32(0));
  pairs[1] = _mm256_permutevar8x32_epi32(packed, _mm256_set1_epi32(1));
  pairs[2] = _mm256_permutevar8x32_epi32(packed, _mm256_set1_epi32(4));
  pairs[3] = _mm256_permutevar8x32_epi32(packed, _mm256_set1_epi32(5));
}

template <class Arch, std::size_t T>
void rows8_q4k_tile_256(const BlockQ4KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                        std::size_t x_stride, float* y, std::size_t y_stride) noexcept {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  // Byte 2 * j of lane r (j = 0, 1) takes byte `row` of a 16-byte row of bytes (both
  // 128-bit halves hold the same 16), the odd bytes become 0: int16 pairs per lane.
  // scale_lo: both words = byte r (sub-block 2c); scale_hi: byte 8 + r (2c + 1);
  // min_pair: (byte r, byte 8 + r), matching sub_block_sum_pairs.
  const auto lane_words = [](int first, int second) {
    return _mm256_setr_epi8(first, -1, second, -1, first + 1, -1, second + 1, -1, first + 2, -1,
                            second + 2, -1, first + 3, -1, second + 3, -1, first + 4, -1,
                            second + 4, -1, first + 5, -1, second + 5, -1, first + 6, -1,
                            second + 6, -1, first + 7, -1, second + 7, -1);
  };
  const __m256i scale_lo = lane_words(0, 0), scale_hi = lane_words(8, 8);
  const __m256i min_pair = lane_words(0, 8);
  __m256 acc[T];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const BlockQ4KRows8& wb = w[b];
    // Decode streams the weights: ask for the bytes ~4 KB ahead (they may lie in the
    // next group, which is contiguous), as the hardware prefetcher alone falls behind.
    const char* ahead = reinterpret_cast<const char*>(&wb) + kRows8PrefetchBytes;
    for (std::size_t off = 0; off < sizeof(BlockQ4KRows8); off += 64) {
      _mm_prefetch(ahead + off, _MM_HINT_T1);
    }
    __m256i isum[T], msum[T];
    for (std::size_t t = 0; t < T; ++t) isum[t] = msum[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      __m256i lo16[T], hi16[T];
      for (std::size_t t = 0; t < T; ++t) lo16[t] = hi16[t] = _mm256_setzero_si256();
      for (int g = 0; g < 8; ++g) {
        const __m256i q = load256<Arch>(wb.qs[c][g]);
        const __m256i lo = _mm256_and_si256(q, nibble);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble);
        for (std::size_t t = 0; t < T; ++t) {
          const std::int8_t* xq = x[t * x_stride + b].qs + 64 * c + 4 * g;
          lo16[t] = _mm256_add_epi16(lo16[t], _mm256_maddubs_epi16(lo, broadcast4<Arch>(xq)));
          hi16[t] = _mm256_add_epi16(hi16[t], _mm256_maddubs_epi16(hi, broadcast4<Arch>(xq + 32)));
        }
      }
      const __m256i scales = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales[2 * c])));
      const __m256i s_lo = _mm256_shuffle_epi8(scales, scale_lo);
      const __m256i s_hi = _mm256_shuffle_epi8(scales, scale_hi);
      for (std::size_t t = 0; t < T; ++t) {
        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(lo16[t], s_lo),
                                                             _mm256_madd_epi16(hi16[t], s_hi)));
      }
    }
    for (std::size_t t = 0; t < T; ++t) {
      __m256i pairs[4];
      sub_block_sum_pairs<Arch>(x[t * x_stride + b], pairs);
      for (int c = 0; c < 4; ++c) {
        const __m256i mins = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.mins[2 * c])));
        msum[t] = _mm256_add_epi32(
            msum[t], _mm256_madd_epi16(_mm256_shuffle_epi8(mins, min_pair), pairs[c]));
      }
    }
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d)));
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.dmin)));
    for (std::size_t t = 0; t < T; ++t) {
      const __m256 xd = _mm256_set1_ps(x[t * x_stride + b].d);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, xd), _mm256_cvtepi32_ps(msum[t]), acc[t]);
    }
  }
  for (std::size_t t = 0; t < T; ++t) _mm256_storeu_ps(y + t * y_stride, acc[t]);
}

// Kernels::rows8_q4k_q8k: every token, kRows8Tokens at a time.
template <class Arch>
void rows8_q4k_q8k_256(const BlockQ4KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                       std::size_t x_stride, std::size_t n_tokens, float* y,
                       std::size_t y_stride) noexcept {
  std::size_t t = 0;
  for (; t + kRows8Tokens <= n_tokens; t += kRows8Tokens) {
    rows8_q4k_tile_256<Arch, kRows8Tokens>(w, nblocks, x + t * x_stride, x_stride, y + t * y_stride,
                                           y_stride);
  }
  for (; t < n_tokens; ++t) {
    rows8_q4k_tile_256<Arch, 1>(w, nblocks, x + t * x_stride, x_stride, y + t * y_stride, y_stride);
  }
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
