// x86 attention scores over a quantized (Q8_0 or Q4_0) key cache: many key rows against
// the Q8_0 queries of one KV head's group, in 256-bit (AVX2) and 512-bit (AVX-512) form.
//
// Decode at depth reads every cached key once per token, so this loop runs once per
// position per KV head per layer. The queries' scales are converted once per call; per
// key row, the |k| and sign of each block are made once for the whole group. Each
// block's integer sums stay in their own lanes until they are scaled by the key's and
// the query's d (the per-block scale the format demands), and the group's score vectors
// are reduced together. A ymm holds one 32-value block, a zmm two. With VNNI, sixteen
// positions share each vector instead (score_positions_q8_0_512, at the end). Hand-written
// because xsimd 8.1 has no u8 x s8 multiply-add.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/quant/blocks.hpp"
#include "smol/quant/kv_layout.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx512_tiles.hpp"  // the 512-bit dot_u8s8

namespace smol::simd::x86 {

// Block pairs per row the kernels hold queries for: the largest head a quantized cache
// takes.
inline constexpr std::size_t kMaxKeyBlockPairs = kMaxQuantizedHeadDim / 64;

// Rows ahead of the hardware prefetcher, which restarts at every 4 KiB page.
template <class Block>
inline void prefetch_rows_ahead(const Block* row, std::size_t nb) noexcept {
  constexpr std::size_t kAhead = 16;
  const char* ahead = reinterpret_cast<const char*>(row + kAhead * nb);
  for (std::size_t b = 0; b < nb * sizeof(Block); b += 64) __builtin_prefetch(ahead + b);
}

// Position p's scores of the group's NH heads, from their sums in the lanes of `sums`.
template <std::size_t NH>
inline void store_scores(__m128 sums, float scale, float* scores, std::size_t stride,
                         std::size_t p) noexcept {
  alignas(16) float s[4];
  _mm_store_ps(s, _mm_mul_ps(sums, _mm_set1_ps(scale)));
  for (std::size_t j = 0; j < NH; ++j) scores[j * stride + p] = s[j];
}

// The quantized values of blocks b and b + 1 of a row, one zmm (b's in the low half).
template <class Arch, class Block>
inline __m512i block_pair(const Block* row) noexcept {
  return _mm512_inserti64x4(_mm512_castsi256_si512(block_quants<Arch>(row[0])),
                            block_quants<Arch>(row[1]), 1);
}

// The two blocks' scales, each in its 8 lanes.
template <class Arch, class Block>
inline __m512 pair_scales(const Block* row) noexcept {
  return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(static_cast<short>(row[1].d)),
                                          _mm_set1_epi16(static_cast<short>(row[0].d))));
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
  for (std::size_t p = 0; p < count; ++p) {
    const Block* row = keys + p * nb;
    prefetch_rows_ahead(row, nb);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (std::size_t b = 0; b < nb; ++b) {
      const __m256i k = block_quants<Arch>(row[b]);
      const __m256i abs_k = _mm256_sign_epi8(k, k);
      const float kd = _cvtsh_ss(row[b].d);
      for (std::size_t j = 0; j < NH; ++j) {
        const __m256i signed_q = _mm256_sign_epi8(load256<Arch>(queries[j * nb + b].qs), k);
        const __m256 sums = _mm256_cvtepi32_ps(dot_u8s8<Arch>(abs_k, signed_q));
        acc[j] = _mm256_fmadd_ps(sums, _mm256_set1_ps(kd * qd[j][b]), acc[j]);
      }
    }
    store_scores<NH>(hsum4<Arch>(acc[0], acc[1], acc[2], acc[3]), scale, scores, stride, p);
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
  for (std::size_t p = 0; p < count; ++p) {
    const Block* row = keys + p * nb;
    prefetch_rows_ahead(row, nb);
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
        const __m512 sums =
            _mm512_cvtepi32_ps(dot_u8s8<Arch>(_mm512_setzero_si512(), abs_k, signed_q));
        acc[j] = _mm512_fmadd_ps(sums, _mm512_mul_ps(kd, qd[j][c]), acc[j]);
      }
    }
    store_scores<NH>(hsum4<Arch>(acc[0], acc[1], acc[2], acc[3]), scale, scores, stride, p);
  }
}

// Block b's quants of 16 rows `nb` blocks apart, transposed: lane p of words[i] is dword
// i (quants 4i .. 4i + 3) of row p. An 8 x 8 dword transpose per 256-bit half, 24
// shuffles.
template <class Arch, class Block>
inline void transposed_block_words(const Block* rows, std::size_t nb,
                                   __m512i (&words)[8]) noexcept {
  // z[k]: rows kRows[k] (low half) and kRows[k] + 4 (high half), so the transpose below
  // leaves rows 0-3, 4-7, 8-11, 12-15 in the four 128-bit chunks, in order.
  constexpr std::size_t kRows[8] = {0, 1, 2, 3, 8, 9, 10, 11};
  __m512i z[8];
  for (std::size_t k = 0; k < 8; ++k) {
    z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(block_quants<Arch>(rows[kRows[k] * nb])),
                              block_quants<Arch>(rows[(kRows[k] + 4) * nb]), 1);
  }
  // Per 128-bit chunk: interleave dwords, then qwords: u[m] holds dword m (chunks 0, 2)
  // and 4 + m (chunks 1, 3) of its four rows.
  __m512i u[8];
  for (std::size_t h = 0; h < 8; h += 4) {
    const __m512i t0 = _mm512_unpacklo_epi32(z[h], z[h + 1]);
    const __m512i t1 = _mm512_unpackhi_epi32(z[h], z[h + 1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[h + 2], z[h + 3]);
    const __m512i t3 = _mm512_unpackhi_epi32(z[h + 2], z[h + 3]);
    u[h] = _mm512_unpacklo_epi64(t0, t2);
    u[h + 1] = _mm512_unpackhi_epi64(t0, t2);
    u[h + 2] = _mm512_unpacklo_epi64(t1, t3);
    u[h + 3] = _mm512_unpackhi_epi64(t1, t3);
  }
  for (std::size_t m = 0; m < 4; ++m) {
    words[m] = _mm512_shuffle_i32x4(u[m], u[m + 4], _MM_SHUFFLE(2, 0, 2, 0));
    words[m + 4] = _mm512_shuffle_i32x4(u[m], u[m + 4], _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// Sixteen positions per vector (AVX-512 VNNI, any block count). The row kernels above
// pay a horizontal sum and four scalar stores per position, and a |k| and sign per
// block; here lane p of every vector is position p0 + p, so a 16-row step ends in one
// vector store per head. Each block of the 16 rows is transposed in registers (an
// 8 x 8 dword transpose per 256-bit half: 24 shuffles), so dword i of the block, for
// all 16 rows, is one vector matched by one broadcast query dword. vpdpbusd takes
// unsigned keys: k + 128 (k xor 0x80), and the sums start at -128 x the query block's
// sum of quants, so each lane ends with the exact integer k . q. Rows past the last
// multiple of 16 go through the row kernel.
template <class Arch, std::size_t NH, class Block>
void score_positions_q8_0_512(const Block* keys, std::size_t count, const BlockQ8_0* queries,
                              std::size_t nb, float scale, float* scores,
                              std::size_t stride) noexcept {
  static_assert(NH >= 1 && NH <= 4 && has_vnni_v<Arch>);
  // The gather of each row's scale reads the four bytes at a block's start.
  static_assert(offsetof(Block, d) == 0 && sizeof(Block) >= 4);
  constexpr std::size_t P = 16;
  // Per query block: its quants four at a time (broadcast at use), -128 x their sum,
  // and its d.
  std::int32_t q_words[NH][2 * kMaxKeyBlockPairs][8];
  std::int32_t offset[NH][2 * kMaxKeyBlockPairs];
  float qd[NH][2 * kMaxKeyBlockPairs];
  for (std::size_t j = 0; j < NH; ++j) {
    for (std::size_t b = 0; b < nb; ++b) {
      const BlockQ8_0& q = queries[j * nb + b];
      std::memcpy(q_words[j][b], q.qs, sizeof q.qs);
      std::int32_t sum = 0;
      for (const std::int8_t v : q.qs) sum += v;
      offset[j][b] = -128 * sum;
      qd[j][b] = _cvtsh_ss(q.d);
    }
  }
  const std::size_t row_bytes = nb * sizeof(Block);
  // Byte offsets of the 16 rows; a gather at block b's start picks up each row's d.
  const __m512i row_offsets =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(row_bytes)));
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  std::size_t p0 = 0;
  for (; p0 + P <= count; p0 += P) {
    const Block* rows = keys + p0 * nb;
    // Four steps (8.7 KB of SmolLM3's q8_0 rows) ahead of the hardware prefetcher,
    // which restarts at every 4 KiB page: a little faster than two steps with one thread
    // (bench/HISTORY.md, "Figures moved from code comments").
    const char* ahead = reinterpret_cast<const char*>(rows) + 4 * P * row_bytes;
    for (std::size_t off = 0; off < P * row_bytes; off += 64) __builtin_prefetch(ahead + off);
    __m512 acc[NH];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (std::size_t b = 0; b < nb; ++b) {
      __m512i words[8];
      transposed_block_words<Arch>(rows + b, nb, words);
      for (auto& w : words) w = _mm512_xor_si512(w, flip);
      const __m512 kd =
          _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(row_offsets, rows + b, 1)));
      for (std::size_t j = 0; j < NH; ++j) {
        __m512i sum = _mm512_set1_epi32(offset[j][b]);
        for (std::size_t i = 0; i < 8; ++i) {
          sum = dot_u8s8<Arch>(sum, words[i], _mm512_set1_epi32(q_words[j][b][i]));
        }
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                                 _mm512_mul_ps(kd, _mm512_set1_ps(qd[j][b])), acc[j]);
      }
    }
    for (std::size_t j = 0; j < NH; ++j) {
      _mm512_storeu_ps(scores + j * stride + p0, _mm512_mul_ps(acc[j], _mm512_set1_ps(scale)));
    }
  }
  if (p0 == count) return;
  if (nb % 2 == 0) {
    score_rows_q8_0_512<Arch, NH>(keys + p0 * nb, count - p0, queries, nb, scale, scores + p0,
                                  stride);
  } else {
    score_rows_q8_0_256<Arch, NH>(keys + p0 * nb, count - p0, queries, nb, scale, scores + p0,
                                  stride);
  }
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
