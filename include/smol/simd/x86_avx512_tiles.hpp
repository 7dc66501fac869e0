// AVX-512 prefill tiles: one weight row times up to 8 tokens per pass, so each Q4_K /
// Q6_K block is unpacked once and used for several tokens (prefill is compute-bound).
//
// The unpacked weights are shuffled in registers so that each 32-bit lane of the four
// 64-byte vectors of a super-block holds a single scale group; four vpdpbusd then
// accumulate into ONE int32 vector per token, and the scales are applied once per block
// as a float vector. The activations were stored in the matching order by
// pack_q8k_lanes (q8k_lanes.hpp). Intrinsics, because xsimd 8.1 has no u8 x s8 dot.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "smol/quant/blocks.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/q8k_lanes.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol::simd::x86 {

inline constexpr std::size_t kTileTokens = 16;

// acc + per 32-bit lane, the sum of 4 products u8 x s8.
template <class Arch>
inline __m512i dot_u8s8(__m512i acc, __m512i u, __m512i s) noexcept {
  if constexpr (has_vnni_v<Arch>) {
    return _mm512_dpbusd_epi32(acc, u, s);
  } else {  // both operands stay below 2^15 / 2 per pair, so vpmaddubsw cannot saturate
    return _mm512_add_epi32(acc,
                            _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
  }
}

template <class Arch>
inline __m512i load512(const void* p) noexcept {
  return _mm512_loadu_si512(p);
}

// Q4_K: vector c holds qword c of each 32-byte quarter (low nibbles, then high nibbles).
template <class Arch>
inline void unpack_q4k_lanes(const BlockQ4K& x, __m512i v[4]) noexcept {
  const __m512i lo = load512<Arch>(x.qs), hi = load512<Arch>(x.qs + 64);
  const __m512i shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  for (int c = 0; c < 4; ++c) {
    const __m512i idx = _mm512_set_epi64(12 + c, 8 + c, 4 + c, c, 12 + c, 8 + c, 4 + c, c);
    v[c] =
        _mm512_and_si512(_mm512_srlv_epi64(_mm512_permutex2var_epi64(lo, idx, hi), shift), nibble);
  }
}

// Q6_K's 256 quants (0..63) in their natural order, 64 per vector.
template <class Arch>
inline void unpack_q6k_natural(const BlockQ6K& x, __m512i n[4]) noexcept {
  const __m512i nibble = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  // Rotations that bring the right 2 high bits of each qh byte to bits 4-5.
  const __m512i rot_low = _mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4);
  const __m512i rot_high = _mm512_set_epi32(30, 30, 30, 30, 30, 30, 30, 30, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int h = 0; h < 2; ++h) {
    const __m512i ql = load512<Arch>(x.ql + 64 * h);
    const __m512i qh =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh + 32 * h)));
    n[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, nibble),
                               _mm512_and_si512(_mm512_rolv_epi32(qh, rot_low), bits45));
    n[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nibble),
                                   _mm512_and_si512(_mm512_rolv_epi32(qh, rot_high), bits45));
  }
}

// Q6_K: the natural vectors, then a 4x4 transpose of 32-bit units inside each 128-bit
// piece so that lane l holds group 4 * (l % 4) + l / 4 in every vector.
template <class Arch>
inline void unpack_q6k_lanes(const BlockQ6K& x, __m512i v[4]) noexcept {
  __m512i n[4];
  unpack_q6k_natural<Arch>(x, n);
  const __m512i t0 = _mm512_unpacklo_epi32(n[0], n[1]), t1 = _mm512_unpackhi_epi32(n[0], n[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(n[2], n[3]), t3 = _mm512_unpackhi_epi32(n[2], n[3]);
  v[0] = _mm512_unpacklo_epi64(t0, t2);
  v[1] = _mm512_unpackhi_epi64(t0, t2);
  v[2] = _mm512_unpacklo_epi64(t1, t3);
  v[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Per lane: the lane's scale group's value, as float.
template <class Arch>
inline __m512 lane_floats_u8(__m128i bytes, __m128i lane_to_byte, float factor) noexcept {
  const __m512i wide = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(bytes, lane_to_byte));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(wide), _mm512_set1_ps(factor));
}
template <class Arch>
inline __m512 lane_floats_s8(__m128i bytes, __m128i lane_to_byte, float factor) noexcept {
  const __m512i wide = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(bytes, lane_to_byte));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(wide), _mm512_set1_ps(factor));
}

template <class Arch, std::size_t T>
void q4k_row_tile(const BlockQ4K* w, const BlockQ8KLanes* act, std::size_t act_stride,
                  std::size_t nblocks, float* out) noexcept {
  // Lane l of the Q4_K lane layout belongs to sub-block 2 * ((l % 8) / 2) + l / 8.
  const __m128i lane_scale = _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 1, 1, 3, 3, 5, 5, 7, 7);
  const __m128i lane_min = _mm_add_epi8(lane_scale, _mm_set1_epi8(8));
  __m512 acc[T];
#pragma GCC unroll 16
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    __m512i v[4];
    unpack_q4k_lanes<Arch>(w[b], v);
    const __m128i packed = q4k_scales_and_mins<Arch>(w[b]);
    const __m512 scale = lane_floats_u8<Arch>(packed, lane_scale, _cvtsh_ss(w[b].d));
    const __m512 min = lane_floats_u8<Arch>(packed, lane_min, _cvtsh_ss(w[b].dmin));
    // Fully unrolled so every token's accumulator stays in a register.
#pragma GCC unroll 16
    for (std::size_t t = 0; t < T; ++t) {
      const BlockQ8KLanes& a = act[t * act_stride + b];
      __m512i s = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) s = dot_u8s8<Arch>(s, v[c], load512<Arch>(a.qs + 64 * c));
      const __m512 sd = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(a.d));
      acc[t] = _mm512_fmadd_ps(scale, sd, acc[t]);
      acc[t] = _mm512_fnmadd_ps(min, _mm512_load_ps(a.d_lane_sums), acc[t]);
    }
  }
  for (std::size_t t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
}

template <class Arch, std::size_t T>
void q6k_row_tile(const BlockQ6K* w, const BlockQ8KLanes* act, std::size_t act_stride,
                  std::size_t nblocks, float* out) noexcept {
  // Lane l of the Q6_K lane layout belongs to group 4 * (l % 4) + l / 4.
  const __m128i lane_group = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  __m512 acc[T];
#pragma GCC unroll 16
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    __m512i v[4];
    unpack_q6k_lanes<Arch>(w[b], v);
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    const __m512 scale = lane_floats_s8<Arch>(sc, lane_group, _cvtsh_ss(w[b].d));
    // Fully unrolled so every token's accumulator stays in a register.
#pragma GCC unroll 16
    for (std::size_t t = 0; t < T; ++t) {
      const BlockQ8KLanes& a = act[t * act_stride + b];
      __m512i s = _mm512_load_si512(a.minus32_sums);  // starts at the -32 offset
      for (int c = 0; c < 4; ++c) s = dot_u8s8<Arch>(s, v[c], load512<Arch>(a.qs + 64 * c));
      const __m512 sd = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(a.d));
      acc[t] = _mm512_fmadd_ps(scale, sd, acc[t]);
    }
  }
  for (std::size_t t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
}

template <class Arch, std::size_t T>
struct Q4KRowTile {
  static void run(const BlockQ4K* w, const BlockQ8KLanes* a, std::size_t stride, std::size_t nb,
                  float* out) noexcept {
    q4k_row_tile<Arch, T>(w, a, stride, nb, out);
  }
};
template <class Arch, std::size_t T>
struct Q6KRowTile {
  static void run(const BlockQ6K* w, const BlockQ8KLanes* a, std::size_t stride, std::size_t nb,
                  float* out) noexcept {
    q6k_row_tile<Arch, T>(w, a, stride, nb, out);
  }
};

template <class Arch>
void tile_q4k_q8k(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                  const BlockQ8KLanes* act, std::size_t act_stride, std::size_t nblocks,
                  std::size_t n_tokens, float* y, std::size_t y_stride) noexcept {
  run_tiles<BlockQ4K, Arch, Q4KRowTile, kTileTokens>(w, row_bytes, n_rows, act, act_stride, nblocks,
                                                     n_tokens, y, y_stride);
}

template <class Arch>
void tile_q6k_q8k(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                  const BlockQ8KLanes* act, std::size_t act_stride, std::size_t nblocks,
                  std::size_t n_tokens, float* y, std::size_t y_stride) noexcept {
  run_tiles<BlockQ6K, Arch, Q6KRowTile, kTileTokens>(w, row_bytes, n_rows, act, act_stride, nblocks,
                                                     n_tokens, y, y_stride);
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
