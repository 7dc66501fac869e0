// AVX2 kernels on lane-packed activations (q8k_lanes.hpp): the Q4_K decode dot, and
// prefill tiles of one weight row times up to 8 tokens.
//
// A 64-byte vector c of the lane layout is two ymm here: half 0 holds lanes 0-7, half 1
// lanes 8-15, and within a half every 32-bit lane keeps one scale group across all four
// vectors. So the four vpmaddubsw products of a half can be summed in int16 before a
// single vpmaddwd (Q4_K: 4 x 2 x 15 x 128 < 2^15; Q6_K's 6-bit quants allow only pairs):
// two multiplies per 64 values fewer than on the natural order, where each 32 values
// need their own scale (x86_avx2.hpp). The price is a transpose of the weights, and
// activations packed once per matvec or matmul. Prefill tiles keep a half (4 weight
// vectors, its scales, the token accumulators) in the 16 ymm registers, hence halves
// outer and tokens inner. Intrinsics, because xsimd 8.1 has no u8 x s8 dot.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "smol/quant/blocks.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/q8k_lanes.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol::simd::x86 {

inline constexpr std::size_t kTileTokens256 = 8;

// Q4_K: lane-layout vector c is qword c of each 32-byte quarter of qs (low nibbles in
// half 0, high nibbles in half 1): a 4x4 transpose of qwords.
template <class Arch>
inline void unpack_q4k_lanes_256(const BlockQ4K& x, __m256i packed[4]) noexcept {
  const __m256i a = load256<Arch>(x.qs), b = load256<Arch>(x.qs + 32);
  const __m256i c = load256<Arch>(x.qs + 64), d = load256<Arch>(x.qs + 96);
  const __m256i t0 = _mm256_unpacklo_epi64(a, b), t1 = _mm256_unpackhi_epi64(a, b);
  const __m256i t2 = _mm256_unpacklo_epi64(c, d), t3 = _mm256_unpackhi_epi64(c, d);
  packed[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
  packed[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
  packed[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
  packed[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
}

// Q6_K: the 32 values 32 * k .. 32 * k + 31 of the block, in order, for k = 0..7.
template <class Arch>
inline void unpack_q6k_natural_256(const BlockQ6K& x, __m256i q[8]) noexcept {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i m03 = _mm256_set1_epi8(0x03), m0c = _mm256_set1_epi8(0x0C);
  const __m256i m30 = _mm256_set1_epi8(0x30), mc0 = _mm256_set1_epi8(static_cast<char>(0xC0));
  for (int h = 0; h < 2; ++h) {
    const __m256i ql0 = load256<Arch>(x.ql + 64 * h);
    const __m256i ql1 = load256<Arch>(x.ql + 64 * h + 32);
    const __m256i qh = load256<Arch>(x.qh + 32 * h);
    q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(ql0, nibble),
                                   _mm256_slli_epi16(_mm256_and_si256(qh, m03), 4));
    q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql1, nibble),
                                   _mm256_slli_epi16(_mm256_and_si256(qh, m0c), 2));
    q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), nibble),
                                   _mm256_and_si256(qh, m30));
    q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), nibble),
                                   _mm256_srli_epi16(_mm256_and_si256(qh, mc0), 2));
  }
}

// Q6_K lane layout, half h: a 4x4 transpose of 32-bit units inside each 128-bit piece of
// the natural vectors holding values 64 * m + 32 * h .. + 31 (m = 0..3).
template <class Arch>
inline void q6k_lanes_half(const __m256i natural[8], int h, __m256i v[4]) noexcept {
  const __m256i n0 = natural[h], n1 = natural[2 + h], n2 = natural[4 + h], n3 = natural[6 + h];
  const __m256i t0 = _mm256_unpacklo_epi32(n0, n1), t1 = _mm256_unpackhi_epi32(n0, n1);
  const __m256i t2 = _mm256_unpacklo_epi32(n2, n3), t3 = _mm256_unpackhi_epi32(n2, n3);
  v[0] = _mm256_unpacklo_epi64(t0, t2);
  v[1] = _mm256_unpackhi_epi64(t0, t2);
  v[2] = _mm256_unpacklo_epi64(t1, t3);
  v[3] = _mm256_unpackhi_epi64(t1, t3);
}

// The low 8 bytes of `bytes` (one per lane of a half), as float lanes times `factor`.
template <class Arch>
inline __m256 lane_floats_u8_256(__m128i bytes, float factor) noexcept {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)), _mm256_set1_ps(factor));
}
template <class Arch>
inline __m256 lane_floats_s8_256(__m128i bytes, float factor) noexcept {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)), _mm256_set1_ps(factor));
}

// Decode: sum over the block of scale * (int16 sums of a half) via vpmaddwd with the
// scales in int16, so the integers stay exact until one float multiply per block.
template <class Arch>
float dot_q4k_lanes_256(const BlockQ4K* x, const BlockQ8KLanes* y, std::size_t nblocks) noexcept {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  // int16 element i of half 0 (1) is in lane i / 2, of sub-block 2 * (i / 4) (+ 1).
  const __m128i half0_scales = _mm_setr_epi8(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
  const __m128i half1_scales = _mm_setr_epi8(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7);
  // Each min twice: once per bsum (natural group of 16) of its sub-block.
  const __m128i mins_per_group =
      _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    __m256i packed[4];
    unpack_q4k_lanes_256<Arch>(x[b], packed);
    const __m128i scales_mins = q4k_scales_and_mins<Arch>(x[b]);
    const std::int8_t* q = y[b].qs;
    __m256i half0 = _mm256_maddubs_epi16(_mm256_and_si256(packed[0], nibble), load256<Arch>(q));
    __m256i half1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(packed[0], 4), nibble),
                                         load256<Arch>(q + 32));
    for (int c = 1; c < 4; ++c) {
      half0 = _mm256_add_epi16(half0, _mm256_maddubs_epi16(_mm256_and_si256(packed[c], nibble),
                                                           load256<Arch>(q + 64 * c)));
      half1 = _mm256_add_epi16(
          half1, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(packed[c], 4), nibble),
                                      load256<Arch>(q + 64 * c + 32)));
    }
    const __m256i scaled = _mm256_add_epi32(
        _mm256_madd_epi16(half0, _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scales_mins, half0_scales))),
        _mm256_madd_epi16(half1,
                          _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scales_mins, half1_scales))));
    const __m256i min_products =
        _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_shuffle_epi8(scales_mins, mins_per_group)),
                          load256<Arch>(y[b].bsums));
    const float yd = y[b].d;
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(scaled), _mm256_set1_ps(_cvtsh_ss(x[b].d) * yd), acc);
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_products),
                              _mm256_set1_ps(_cvtsh_ss(x[b].dmin) * yd), acc_min);
  }
  return hsum<Arch>(acc) - hsum<Arch>(acc_min);
}

template <class Arch, std::size_t T>
void q4k_row_tile_256(const BlockQ4K* w, const BlockQ8KLanes* act, std::size_t act_stride,
                      std::size_t nblocks, float* out) noexcept {
  // Lane l of the lane layout belongs to sub-block 2 * ((l % 8) / 2) + l / 8.
  const __m128i lane_scale = _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 1, 1, 3, 3, 5, 5, 7, 7);
  const __m128i lane_min = _mm_add_epi8(lane_scale, _mm_set1_epi8(8));
  const __m256i nibble = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    __m256i packed[4];
    unpack_q4k_lanes_256<Arch>(w[b], packed);
    const __m128i scales_mins = q4k_scales_and_mins<Arch>(w[b]);
    const __m128i sc = _mm_shuffle_epi8(scales_mins, lane_scale);
    const __m128i mn = _mm_shuffle_epi8(scales_mins, lane_min);
    const float d = _cvtsh_ss(w[b].d), dmin = _cvtsh_ss(w[b].dmin);
    for (int h = 0; h < 2; ++h) {
      const __m256 scale = lane_floats_u8_256<Arch>(h == 0 ? sc : _mm_srli_si128(sc, 8), d);
      const __m256 min = lane_floats_u8_256<Arch>(h == 0 ? mn : _mm_srli_si128(mn, 8), dmin);
      __m256i v[4];
      for (int c = 0; c < 4; ++c) {
        v[c] = h == 0 ? _mm256_and_si256(packed[c], nibble)
                      : _mm256_and_si256(_mm256_srli_epi16(packed[c], 4), nibble);
      }
      for (std::size_t t = 0; t < T; ++t) {
        const BlockQ8KLanes& a = act[t * act_stride + b];
        const std::int8_t* qs = a.qs + 32 * h;
        __m256i s16 = _mm256_maddubs_epi16(v[0], load256<Arch>(qs));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[1], load256<Arch>(qs + 64)));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[2], load256<Arch>(qs + 128)));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(v[3], load256<Arch>(qs + 192)));
        const __m256 sum = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones));
        acc[t] = _mm256_fmadd_ps(scale, _mm256_mul_ps(sum, _mm256_set1_ps(a.d)), acc[t]);
        acc[t] = _mm256_fnmadd_ps(min, _mm256_load_ps(a.d_lane_sums + 8 * h), acc[t]);
      }
    }
  }
  for (std::size_t t = 0; t < T; ++t) out[t] = hsum<Arch>(acc[t]);
}

template <class Arch, std::size_t T>
void q6k_row_tile_256(const BlockQ6K* w, const BlockQ8KLanes* act, std::size_t act_stride,
                      std::size_t nblocks, float* out) noexcept {
  // Lane l of the lane layout belongs to group 4 * (l % 4) + l / 4.
  const __m128i lane_group = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    __m256i natural[8];
    unpack_q6k_natural_256<Arch>(w[b], natural);
    const __m128i sc = _mm_shuffle_epi8(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales)), lane_group);
    const float d = _cvtsh_ss(w[b].d);
    for (int h = 0; h < 2; ++h) {
      const __m256 scale = lane_floats_s8_256<Arch>(h == 0 ? sc : _mm_srli_si128(sc, 8), d);
      __m256i v[4];
      q6k_lanes_half<Arch>(natural, h, v);
      for (std::size_t t = 0; t < T; ++t) {
        const BlockQ8KLanes& a = act[t * act_stride + b];
        const std::int8_t* qs = a.qs + 32 * h;
        const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(v[0], load256<Arch>(qs)),
                                             _mm256_maddubs_epi16(v[1], load256<Arch>(qs + 64)));
        const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(v[2], load256<Arch>(qs + 128)),
                                             _mm256_maddubs_epi16(v[3], load256<Arch>(qs + 192)));
        __m256i s = _mm256_add_epi32(_mm256_madd_epi16(s01, ones), _mm256_madd_epi16(s23, ones));
        s = _mm256_add_epi32(s, load256<Arch>(a.minus32_sums + 8 * h));  // the -32 offset
        const __m256 sum = _mm256_cvtepi32_ps(s);
        acc[t] = _mm256_fmadd_ps(scale, _mm256_mul_ps(sum, _mm256_set1_ps(a.d)), acc[t]);
      }
    }
  }
  for (std::size_t t = 0; t < T; ++t) out[t] = hsum<Arch>(acc[t]);
}

template <class Arch, std::size_t T>
struct Q4KRowTile256 {
  static void run(const BlockQ4K* w, const BlockQ8KLanes* a, std::size_t stride, std::size_t nb,
                  float* out) noexcept {
    q4k_row_tile_256<Arch, T>(w, a, stride, nb, out);
  }
};
template <class Arch, std::size_t T>
struct Q6KRowTile256 {
  static void run(const BlockQ6K* w, const BlockQ8KLanes* a, std::size_t stride, std::size_t nb,
                  float* out) noexcept {
    q6k_row_tile_256<Arch, T>(w, a, stride, nb, out);
  }
};

template <class Arch>
void tile_q4k_q8k_256(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                      const BlockQ8KLanes* act, std::size_t act_stride, std::size_t nblocks,
                      std::size_t n_tokens, float* y, std::size_t y_stride) noexcept {
  run_tiles<BlockQ4K, Arch, Q4KRowTile256, kTileTokens256>(w, row_bytes, n_rows, act, act_stride,
                                                           nblocks, n_tokens, y, y_stride);
}

template <class Arch>
void tile_q6k_q8k_256(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                      const BlockQ8KLanes* act, std::size_t act_stride, std::size_t nblocks,
                      std::size_t n_tokens, float* y, std::size_t y_stride) noexcept {
  run_tiles<BlockQ6K, Arch, Q6KRowTile256, kTileTokens256>(w, row_bytes, n_rows, act, act_stride,
                                                           nblocks, n_tokens, y, y_stride);
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
