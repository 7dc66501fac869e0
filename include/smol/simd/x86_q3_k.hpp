// Q3_K's x86 kernels: the dots, the prefill tiles and what the matrix unit reads of
// a block, templated on the set (the 256-bit ones serve AVX2 and every AVX-512 set).
// kernels_q3_k.hpp says which set takes which; the scalar reference is in
// scalar_kernels.hpp, the NEON kernels in neon.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/half.hpp"
#include "smol/quant/q3_k.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_rows8.hpp"
#include "smol/simd/x86_avx512_rows8.hpp"
#include "smol/simd/x86_avx512_token_lanes.hpp"

#if defined(SMOL_X86)
namespace smol::simd::x86 {

// The sixteen scales of a Q3_K block as signed bytes (-32..31), in order: with a0, a1, a2
// the packed words, the low nibbles are [a0, a1, a0 >> 4, a1 >> 4] & 0x0f.. and the high
// bits [a2 << 4, a2 << 2, a2, a2 >> 2] & 0x30.. (unpack_q3k_scales, four per lane). The
// loads stay inside the 12 scale bytes.
template <class Arch>
inline __m128i q3k_scales(const BlockQ3K& block) noexcept {
  const __m128i a01 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block.scales));
  std::int32_t a2;
  std::memcpy(&a2, block.scales + 8, sizeof(a2));
  const __m128i low = _mm_and_si128(
      _mm_srlv_epi32(_mm_shuffle_epi32(a01, _MM_SHUFFLE(1, 0, 1, 0)), _mm_setr_epi32(0, 0, 4, 4)),
      _mm_set1_epi8(0x0F));
  const __m128i high =
      _mm_and_si128(_mm_srlv_epi32(_mm_sllv_epi32(_mm_set1_epi32(a2), _mm_setr_epi32(4, 2, 0, 0)),
                                   _mm_setr_epi32(0, 0, 0, 2)),
                    _mm_set1_epi8(0x30));
  return _mm_sub_epi8(_mm_or_si128(low, high), _mm_set1_epi8(32));
}

// A Q3_K block unpacked for the 256-bit kernels: the levels L = q + 4 in value order (32
// per vector: vector v = 4h + j holds sub-blocks 2v and 2v + 1 in its 128-bit lanes), each
// vector's two scales as int16 in the matching lanes, and the sixteen scales as int16.
template <class Arch>
struct Q3KUnpacked {
  __m256i levels[8];
  __m256i scales[8];
  __m256i sc16;
  float d;
};

// Each 32-byte load of qs serves four shifts; shift j of half h takes hmask bit 4h + j.
template <class Arch>
inline void unpack_q3k(const BlockQ3K& x, Q3KUnpacked<Arch>& u) noexcept {
  const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
  u.sc16 = _mm256_cvtepi8_epi16(q3k_scales<Arch>(x));
  // Scales 0-7 and 8-15, each in both 128-bit lanes (for pick_words).
  const __m256i halves[2] = {_mm256_permute2x128_si256(u.sc16, u.sc16, 0x00),
                             _mm256_permute2x128_si256(u.sc16, u.sc16, 0x11)};
  const __m256i hmask = load256<Arch>(x.hmask);
  for (int h = 0; h < 2; ++h) {
    const __m256i q = load256<Arch>(x.qs + 32 * h);
    // Bit 4h + j of each hmask byte, moved to bit 2 (value 4) at step j. 16-bit shifts
    // of at most 5 places keep each byte's bit 2 within the byte.
    __m256i high = h == 0 ? _mm256_slli_epi16(hmask, 2) : _mm256_srli_epi16(hmask, 2);
    for (int j = 0; j < 4; ++j) {
      const __m256i low2 = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three);
      u.levels[4 * h + j] = _mm256_or_si256(low2, _mm256_and_si256(high, four));
      high = _mm256_srli_epi16(high, 1);
      u.scales[4 * h + j] = _mm256_shuffle_epi8(halves[h], pick_words<Arch>(2 * j, 2 * j + 1));
    }
  }
  u.d = _cvtsh_ss(x.d);
}

// sum_j sc_j * (sum_l L_l y_l - 4 * bsum_j) of an unpacked block and one activation block,
// in int32 lanes. Levels reach 7 and activations |127|, so a vpmaddubsw pair sum stays
// below 2^11.
template <class Arch>
inline __m256i q3k_sums(const Q3KUnpacked<Arch>& u, const BlockQ8K& y) noexcept {
  const __m256i offsets = _mm256_madd_epi16(u.sc16, load256<Arch>(y.bsums));
  __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offsets, 2));
  for (int v = 0; v < 8; ++v) {
    const __m256i p = _mm256_maddubs_epi16(u.levels[v], load256<Arch>(y.qs + 32 * v));
    sumi = madd16_acc<Arch>(sumi, p, u.scales[v]);
  }
  return sumi;
}

// 256-bit, for every x86 set (the VNNI sets fuse each madd+add into one vpdpwssd).
// Decode asks for each block's lines ahead itself (stream_block_ahead; the unit sets
// WeightKernels::dot_streams): on AVX2 too, where it decodes faster than with matvec's
// requests a row ahead (bench/HISTORY.md, "decode asks for its weights in two steps").
template <class Arch>
float dot_q3k_q8k(const BlockQ3K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  __m256 acc = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    stream_block_ahead<Arch>(x + b);
    Q3KUnpacked<Arch> u;
    unpack_q3k<Arch>(x[b], u);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q3k_sums<Arch>(u, y[b])), _mm256_set1_ps(u.d * y[b].d),
                          acc);
  }
  return hsum<Arch>(acc);
}

// AMX's decode dot: the same integers, summed whole per block, then the float steps of its
// matrix-unit prefill (amx_matrix_with_offset: times d, then one fma by the token's
// scale), so that one token decoded and the same token in a prefill are the same bits
// (WeightKernels::dot_rounds_like_matrix, as Q2_K's; plain decode takes the VNNI sets'
// dot, WeightKernels::dot_plain, as Q2_K's does).
template <class Arch>
float dot_q3k_q8k_like_matrix(const BlockQ3K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  __m128 acc = _mm_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    stream_block_ahead<Arch>(x + b);
    Q3KUnpacked<Arch> u;
    unpack_q3k<Arch>(x[b], u);
    const std::int32_t sum = hsum_epi32<Arch>(q3k_sums<Arch>(u, y[b]));
    const __m128 value = _mm_mul_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), sum), _mm_set_ss(u.d));
    acc = _mm_fmadd_ss(value, _mm_set_ss(y[b].d), acc);
  }
  return _mm_cvtss_f32(acc);
}

// Prefill (WeightKernels::tile_dots): one row times T tokens, each block unpacked once for
// all T. Each token's accumulator sees exactly the dot's operations in the dot's order, so
// a tile gives every token the dot's bits, whatever the tile size.
template <class Arch, std::size_t T>
struct Q3KRowTile {
  static void run(const BlockQ3K* row, const BlockQ8K* act, std::size_t act_stride,
                  std::size_t nblocks, float* out) noexcept {
    __m256 acc[T];
    for (std::size_t t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (std::size_t b = 0; b < nblocks; ++b) {
      Q3KUnpacked<Arch> u;
      unpack_q3k<Arch>(row[b], u);
      for (std::size_t t = 0; t < T; ++t) {
        const BlockQ8K& y = act[t * act_stride + b];
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q3k_sums<Arch>(u, y)),
                                 _mm256_set1_ps(u.d * y.d), acc[t]);
      }
    }
    for (std::size_t t = 0; t < T; ++t) out[t] = hsum<Arch>(acc[t]);
  }
};

template <class Arch>
void tile_dots_q3k(const std::byte* w, std::size_t row_bytes, std::size_t n_rows, const BlockQ8K* x,
                   std::size_t x_stride, std::size_t nblocks, std::size_t n_tokens, float* y,
                   std::size_t y_stride) noexcept {
  run_tiles<BlockQ3K, Arch, Q3KRowTile, is_avx512_v<Arch> ? 8 : 4, /*kAssign=*/true>(
      w, row_bytes, n_rows, x, x_stride, nblocks, n_tokens, y, y_stride);
}

// AMX prefill (WeightKernels::matrix, amx_matrix_with_offset<.., 4>): block b of row r ->
// Q6_K's offset planes of the levels L = q + 4 (0..7) and the signed scales. Chunk c
// holds values 64c .. 64c + 63: the two low bits as Q2_K's (bits 4(c % 2) and
// 4(c % 2) + 2 of qs bytes 32(c / 2) .. + 31), the third bits 2c and 2c + 1 of hmask.
template <class Arch>
inline void expand_q3k_block(const BlockQ3K& x, std::size_t b, std::size_t cols, std::size_t r,
                             const ExpandedRows& e) noexcept {
  const __m512i three = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1);
  __m512i levels[4];
  for (int c = 0; c < 4; ++c) {
    const int shift = 4 * (c % 2);
    const __m512i low2 =
        _mm512_and_si512(broadcast_shifted<Arch>(x.qs + 32 * (c / 2), shift, shift + 2), three);
    const __m512i high = _mm512_and_si512(broadcast_shifted<Arch>(x.hmask, 2 * c, 2 * c + 1), one);
    levels[c] = _mm512_or_si512(low2, _mm512_slli_epi16(high, 2));
  }
  std::int8_t scales[16];
  unpack_q3k_scales(x.scales, scales);
  expand_offset_planes<Arch>(levels, scales, x.d, b, r * cols + b * QK_K, r, e);
}

}  // namespace smol::simd::x86
#endif  // SMOL_X86
