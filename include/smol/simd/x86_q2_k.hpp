// Q2_K's x86 kernels: the dots, the prefill tiles and what the matrix unit reads of
// a block, templated on the set (the 256-bit ones serve AVX2 and every AVX-512 set).
// kernels_q2_k.hpp says which set takes which; the scalar reference is in
// scalar_kernels.hpp, the NEON kernels in neon.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/q2_k.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_rows8.hpp"
#include "smol/simd/x86_avx512_rows8.hpp"
#include "smol/simd/x86_k_quant_sums.hpp"

#if defined(SMOL_X86)
namespace smol::simd::x86 {

// A Q2_K block unpacked for the 256-bit kernels (x86_k_quant_sums.hpp): vector v = 4h + j
// holds sub-blocks 2v and 2v + 1 in its 128-bit lanes, with their scales; the sixteen mins
// match the activations' sixteen bsums. Each 32-byte load of qs serves four shifts.
template <class Arch>
inline void unpack_q2k(const BlockQ2K& x, KQuantUnpacked<Arch>& u) noexcept {
  const __m256i three = _mm256_set1_epi8(3);
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales));
  u.mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), nibble));
  const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(packed, nibble));
  // Scales 0-7 and 8-15, each in both 128-bit lanes (for pick_words).
  const __m256i halves[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                             _mm256_permute2x128_si256(sc16, sc16, 0x11)};
  for (int h = 0; h < 2; ++h) {
    const __m256i q = load256<Arch>(x.qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      u.quants[4 * h + j] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three);
      u.scales[4 * h + j] = _mm256_shuffle_epi8(halves[h], pick_words<Arch>(2 * j, 2 * j + 1));
    }
  }
  u.d = _cvtsh_ss(x.d);
  u.dmin = _cvtsh_ss(x.dmin);
}

// AMX's decode dot: the same integers, summed whole per block, then the float steps of its
// matrix-unit prefill (PlanesProductAndMin, then one fma by the token's scale), so that
// one token decoded and the same token in a prefill are the same bits
// (WeightKernels::dot_rounds_like_matrix): a batch-invariant one-token step (the server,
// speculative decoding) then takes this dot, not the matrix unit for a single token.
// Its two horizontal sums per block slow plain decode, which asks for no batch invariance,
// so plain decode takes the VNNI sets' dot instead (WeightKernels::dot_plain;
// bench/HISTORY.md, "Plain decode of Q2_K and Q3_K").
template <class Arch>
float dot_q2k_q8k_like_matrix(const BlockQ2K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  __m128 acc = _mm_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    stream_block_ahead<Arch>(x + b);
    KQuantUnpacked<Arch> u;
    unpack_q2k<Arch>(x[b], u);
    const std::int32_t products = hsum_epi32<Arch>(k_quant_sums<Arch>(u, y[b]));
    const std::int32_t mins =
        hsum_epi32<Arch>(_mm256_madd_epi16(u.mins, load256<Arch>(y[b].bsums)));
    const __m128 value =
        _mm_fmsub_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), products), _mm_set_ss(u.d),
                     _mm_mul_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), mins), _mm_set_ss(u.dmin)));
    acc = _mm_fmadd_ss(value, _mm_set_ss(y[b].d), acc);
  }
  return _mm_cvtss_f32(acc);
}

// Prefill (WeightKernels::tile_dots): each block unpacked once per tile, the dot's bits.
template <class Arch, std::size_t T>
using Q2KRowTile = KQuantRowTile<Arch, T, BlockQ2K, unpack_q2k<Arch>>;

template <class Arch>
void tile_dots_q2k(const std::byte* w, std::size_t row_bytes, std::size_t n_rows, const BlockQ8K* x,
                   std::size_t x_stride, std::size_t nblocks, std::size_t n_tokens, float* y,
                   std::size_t y_stride) noexcept {
  run_tiles<BlockQ2K, Arch, Q2KRowTile, is_avx512_v<Arch> ? 8 : 4, /*kAssign=*/true>(
      w, row_bytes, n_rows, x, x_stride, nblocks, n_tokens, y, y_stride);
}

// AMX prefill (WeightKernels::matrix, amx_matrix_with_mins with PlanesProductAndMin):
// block b of row r -> the planes s*q and m in natural order, one byte each (s and m the
// 4-bit scale and min of the value's group of 16, q <= 3), and d, dmin. Chunk c holds
// values 64c .. 64c + 63: bits 4(c % 2) and 4(c % 2) + 2 of qs bytes 32(c / 2) .. + 31,
// in groups 4c .. 4c + 3, one per 128-bit lane.
template <class Arch>
inline void expand_q2k_block(const BlockQ2K& x, std::size_t b, std::size_t cols, std::size_t r,
                             const ExpandedRows& e) noexcept {
  const __m512i three = _mm512_set1_epi8(3), low4 = _mm512_set1_epi8(0x0F);
  const __m512i one = _mm512_set1_epi8(1), two = _mm512_set1_epi8(2);
  const __m512i scales =
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales)));
  const __m512i lane_group = _mm512_set_epi32(
      0x03030303, 0x03030303, 0x03030303, 0x03030303, 0x02020202, 0x02020202, 0x02020202,
      0x02020202, 0x01010101, 0x01010101, 0x01010101, 0x01010101, 0, 0, 0, 0);
  const std::size_t at = r * cols + b * QK_K;
  for (int c = 0; c < 4; ++c) {
    const int shift = 4 * (c % 2);
    const __m512i q =
        _mm512_and_si512(broadcast_shifted<Arch>(x.qs + 32 * (c / 2), shift, shift + 2), three);
    const __m512i packed = _mm512_shuffle_epi8(
        scales, _mm512_add_epi8(lane_group, _mm512_set1_epi8(static_cast<char>(4 * c))));
    const __m512i s = _mm512_and_si512(packed, low4);
    const __m512i m = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low4);
    // s * q for q in 0..3, without a byte multiply: s where bit 0 is set, plus 2s where
    // bit 1 is.
    __m512i products = _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(q, one), s);
    products = _mm512_mask_add_epi8(products, _mm512_test_epi8_mask(q, two), products,
                                    _mm512_add_epi8(s, s));
    _mm512_storeu_si512(e.plane[0] + at + 64 * c, products);
    _mm512_storeu_si512(e.plane[1] + at + 64 * c, m);
  }
  e.d[b * kTokenTile + r] = _cvtsh_ss(x.d);
  e.min[(b * kTokenTile + r) * 8] = _cvtsh_ss(x.dmin);
}

}  // namespace smol::simd::x86
#endif  // SMOL_X86
