// 512-bit Q4_K / Q6_K dot products for decode (matvec), on plain Q8_K activations.
//
// One 64-byte vector covers two Q4_K sub-blocks (or four Q6_K groups); the quants are
// multiplied with vpmaddubsw and weighted by their integer scales with vpdpwssd (VNNI)
// or vpmaddwd, so the block stays integer until one float multiply. Hand-written because
// xsimd 8.1 has no u8 x s8 multiply-add.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "smol/quant/blocks.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx512_tiles.hpp"

namespace smol::simd::x86 {

// acc + sum of adjacent int16 pairs of a*b, in int32 lanes.
template <class Arch>
inline __m512i madd16_acc512(__m512i acc, __m512i a, __m512i b) noexcept {
  if constexpr (has_vnni_v<Arch>) {
    return _mm512_dpwssd_epi32(acc, a, b);
  } else {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
  }
}

// Word index vector: lanes 0-15 pick word `lo`, lanes 16-31 word `hi`.
template <class Arch>
inline __m512i pick_halves(short lo, short hi) noexcept {
  return _mm512_inserti64x4(_mm512_set1_epi16(lo), _mm256_set1_epi16(hi), 1);
}

// Word index vector for scales as int16 in words 0-15: 128-bit lanes 0-1 hold words
// a,a,a,a,b,b,b,b and lanes 2-3 words c,c,c,c,d,d,d,d (the order vpackssdw leaves).
template <class Arch>
inline __m512i pick_packed(short a, short b, short c, short d) noexcept {
  const __m128i lo = _mm_setr_epi16(a, a, a, a, b, b, b, b);
  const __m128i hi = _mm_setr_epi16(c, c, c, c, d, d, d, d);
  const __m256i l2 = _mm256_set_m128i(lo, lo), h2 = _mm256_set_m128i(hi, hi);
  return _mm512_inserti64x4(_mm512_castsi256_si512(l2), h2, 1);
}

// The 64 quants of chunk c of a Q4_K block (its qs bytes 32c .. 32c+31): sub-block 2c's
// low nibbles in bytes 0-31, sub-block 2c+1's high nibbles in bytes 32-63.
template <class Arch>
inline __m512i q4k_chunk_nibbles(const std::uint8_t* qs, int c) noexcept {
  const __m512i shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  return _mm512_and_si512(
      _mm512_srlv_epi64(
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c))),
          shift),
      _mm512_set1_epi8(0x0F));
}

// A Q4_K block's quants by chunk, for the dots below (Q5_K's, x86_q5_k.hpp, adds its
// fifth bit).
template <class Arch>
struct Q4KChunks {
  using Block = BlockQ4K;
  const BlockQ4K& x;
  explicit Q4KChunks(const BlockQ4K& block) noexcept : x(block) {}
  __m512i operator()(int c) const noexcept { return q4k_chunk_nibbles<Arch>(x.qs, c); }
};

// The dots of the blocks with Q4_K's shape (eight sub-blocks of 32 under 6-bit scales and
// mins packed in 12 bytes, d and dmin): Q4_K and Q5_K, whose quants come by chunk from
// Chunks.
//
// VNNI: vpdpbusd sums 4 u8 x s8 products into int32 lanes without the scale; each lane
// stays within int16 (4 * 31 * 128 for Q5_K's quants), so two such vectors pack exactly
// into one of int16 and one vpdpwssd applies the scales: 6 multiply-adds per block
// instead of 8, and half the scale permutes. Exact, like the reference.
template <class Arch, class Chunks>
float dot_q4k_like_512_vnni(const typename Chunks::Block* x, const BlockQ8K* y,
                            std::size_t nblocks) noexcept {
  const __m128i mins_per_group =
      _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  // Chunk c holds sub-block 2c in 128-bit lanes 0-1 and 2c+1 in lanes 2-3; packing
  // chunks 2p and 2p+1 gives lanes 0-1 = (4p, 4p+2), lanes 2-3 = (4p+1, 4p+3).
  const __m512i pick01 = pick_packed<Arch>(0, 2, 1, 3);
  const __m512i pick23 = pick_packed<Arch>(4, 6, 5, 7);
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    stream_block_ahead<Arch>(x + b);
    const float yd = y[b].d;
    const __m128i packed = q4k_scales_and_mins<Arch>(x[b]);
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(packed));
    const __m256i min_products =
        _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_shuffle_epi8(packed, mins_per_group)),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].bsums)));
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_products),
                              _mm256_set1_ps(_cvtsh_ss(x[b].dmin) * yd), acc_min);
    const Chunks chunks(x[b]);
    __m512i d[4];
    for (int c = 0; c < 4; ++c) {
      d[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), chunks(c),
                                 _mm512_loadu_si512(y[b].qs + 64 * c));
    }
    __m512i sumi =
        _mm512_madd_epi16(_mm512_packs_epi32(d[0], d[1]), _mm512_permutexvar_epi16(pick01, sc16));
    sumi = _mm512_dpwssd_epi32(sumi, _mm512_packs_epi32(d[2], d[3]),
                               _mm512_permutexvar_epi16(pick23, sc16));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(_cvtsh_ss(x[b].d) * yd), acc);
  }
  return _mm512_reduce_add_ps(acc) - hsum<Arch>(acc_min);
}

template <class Arch>
float dot_q6k_q8k_512_vnni(const BlockQ6K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  // Vector k holds group 4k+j in 128-bit lane j; packing vectors 0,1 (2,3) gives lane j =
  // groups (j, 4+j) ((8+j, 12+j)).
  alignas(64) short idx0[32], idx1[32];
  for (int i = 0; i < 32; ++i) {
    const int lane = i / 8, second = (i % 8) / 4;
    idx0[i] = static_cast<short>(lane + 4 * second);
    idx1[i] = static_cast<short>(8 + lane + 4 * second);
  }
  const __m512i pick0 = _mm512_load_si512(idx0), pick1 = _mm512_load_si512(idx1);
  __m512 acc = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    stream_block_ahead<Arch>(x + b);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    // The -32 offset: 32 * sum_g scale_g * bsum_g, subtracted in integers.
    const __m256i offset =
        _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].bsums)));
    __m512i q[4], d[4];
    unpack_q6k_natural<Arch>(x[b], q);
    for (int k = 0; k < 4; ++k) {
      d[k] =
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], _mm512_loadu_si512(y[b].qs + 64 * k));
    }
    const __m512i sc16z = _mm512_castsi256_si512(sc16);
    __m512i sumi = _mm512_castsi256_si512(
        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 5)));
    sumi = _mm512_inserti64x4(sumi, _mm256_setzero_si256(), 1);
    sumi = _mm512_dpwssd_epi32(sumi, _mm512_packs_epi32(d[0], d[1]),
                               _mm512_permutexvar_epi16(pick0, sc16z));
    sumi = _mm512_dpwssd_epi32(sumi, _mm512_packs_epi32(d[2], d[3]),
                               _mm512_permutexvar_epi16(pick1, sc16z));
    acc =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(_cvtsh_ss(x[b].d) * y[b].d), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// Without VNNI: vpmaddubsw, then the scales by vpmaddwd (Q5_K's pair sums reach
// 2 * 31 * 128, within int16).
template <class Arch, class Chunks>
float dot_q4k_like_512(const typename Chunks::Block* x, const BlockQ8K* y,
                       std::size_t nblocks) noexcept {
  const __m128i mins_per_group =
      _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  __m512i pick[4];
  for (int c = 0; c < 4; ++c) {
    pick[c] = pick_halves<Arch>(static_cast<short>(2 * c), static_cast<short>(2 * c + 1));
  }
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    stream_block_ahead<Arch>(x + b);
    const float yd = y[b].d;
    const __m128i packed = q4k_scales_and_mins<Arch>(x[b]);
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(packed));
    const __m256i min_products =
        _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_shuffle_epi8(packed, mins_per_group)),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].bsums)));
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_products),
                              _mm256_set1_ps(_cvtsh_ss(x[b].dmin) * yd), acc_min);
    const Chunks chunks(x[b]);
    __m512i sumi = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m512i p = _mm512_maddubs_epi16(chunks(c), _mm512_loadu_si512(y[b].qs + 64 * c));
      sumi = madd16_acc512<Arch>(sumi, p, _mm512_permutexvar_epi16(pick[c], sc16));
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(_cvtsh_ss(x[b].d) * yd), acc);
  }
  return _mm512_reduce_add_ps(acc) - hsum<Arch>(acc_min);
}

template <class Arch>
float dot_q6k_q8k_512(const BlockQ6K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  // Chunk k's words 0-7, 8-15, 16-23, 24-31 belong to groups 4k .. 4k+3.
  __m512i pick[4];
  for (int k = 0; k < 4; ++k) {
    alignas(64) short idx[32];
    for (int i = 0; i < 32; ++i) idx[i] = static_cast<short>(4 * k + i / 8);
    pick[k] = _mm512_load_si512(idx);
  }
  __m512 acc = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    stream_block_ahead<Arch>(x + b);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    // The -32 offset: 32 * sum_g scale_g * bsum_g, subtracted in integers.
    const __m256i offset =
        _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].bsums)));
    __m512i q[4];
    unpack_q6k_natural<Arch>(x[b], q);
    __m512i sumi = _mm512_castsi256_si512(
        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 5)));
    sumi = _mm512_inserti64x4(sumi, _mm256_setzero_si256(), 1);
    const __m512i sc16z = _mm512_castsi256_si512(sc16);
    for (int k = 0; k < 4; ++k) {
      const __m512i p = _mm512_maddubs_epi16(q[k], _mm512_loadu_si512(y[b].qs + 64 * k));
      sumi = madd16_acc512<Arch>(sumi, p, _mm512_permutexvar_epi16(pick[k], sc16z));
    }
    acc =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(_cvtsh_ss(x[b].d) * y[b].d), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
