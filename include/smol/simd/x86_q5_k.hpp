// Q5_K's x86 kernels: the dots, the prefill tiles and what the matrix unit reads of
// a block, templated on the set (the 256-bit ones serve AVX2 and every AVX-512 set).
// kernels_q5_k.hpp says which set takes which; the scalar reference is in
// scalar_kernels.hpp, the NEON kernels in neon.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/q5_k.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_rows8.hpp"
#include "smol/simd/x86_avx512.hpp"
#include "smol/simd/x86_avx512_rows8.hpp"
#include "smol/simd/x86_avx512_token_lanes.hpp"
#include "smol/simd/x86_k_quant_sums.hpp"

#if defined(SMOL_X86)
namespace smol::simd::x86 {

// A Q5_K block unpacked for the 256-bit kernels (x86_k_quant_sums.hpp): the 5-bit quants of
// sub-block v in quants[v] with its scale, the eight mins as int16 pairs matching the
// activations' sixteen bsums.
template <class Arch>
inline void unpack_q5k(const BlockQ5K& x, KQuantUnpacked<Arch>& u) noexcept {
  const __m256i nibble = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  const __m128i mins_per_group =
      _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  const __m128i packed = q4k_scales_and_mins<Arch>(x);
  const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(packed));
  u.mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(packed, mins_per_group));
  // Bit 2c of each qh byte belongs to sub-block 2c: shifted down two bits per chunk.
  // (A 16-bit shift moves the high byte's bits into the low byte's top, which the
  // mask by 1 discards.)
  __m256i high_bits = load256<Arch>(x.qh);
  for (int c = 0; c < 4; ++c) {
    const __m256i q = load256<Arch>(x.qs + 32 * c);
    u.quants[2 * c] = _mm256_or_si256(_mm256_and_si256(q, nibble),
                                      _mm256_slli_epi16(_mm256_and_si256(high_bits, one), 4));
    u.quants[2 * c + 1] = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble),
        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 1), one), 4));
    high_bits = _mm256_srli_epi16(high_bits, 2);
  }
  for (int v = 0; v < 8; ++v) u.scales[v] = _mm256_shuffle_epi8(sc16, pick_words<Arch>(v, v));
  u.d = _cvtsh_ss(x.d);
  u.dmin = _cvtsh_ss(x.dmin);
}

// A Q5_K block's quants by chunk for the AVX-512 dots of Q4_K's shape (x86_avx512.hpp):
// Q4_K's nibbles of chunk c, plus 16 where the fifth bit is set (bit 2c of qh[l] for
// sub-block 2c in bytes 0-31, bit 2c+1 for sub-block 2c+1 in bytes 32-63): one test
// against a per-half bit and one masked add.
template <class Arch>
struct Q5KChunks {
  using Block = BlockQ5K;
  const BlockQ5K& x;
  __m512i high_bits;  // qh's 32 bytes in both halves
  explicit Q5KChunks(const BlockQ5K& block) noexcept
      : x(block),
        high_bits(_mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh)))) {}
  __m512i operator()(int c) const noexcept {
    const __m512i low4 = q4k_chunk_nibbles<Arch>(x.qs, c);
    const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * c))),
                                           _mm256_set1_epi8(static_cast<char>(2 << (2 * c))), 1);
    return _mm512_mask_add_epi8(low4, _mm512_test_epi8_mask(high_bits, bit), low4,
                                _mm512_set1_epi8(16));
  }
};

// Prefill (WeightKernels::tile_dots): each block unpacked once per tile, with AVX2's dot's
// bits (on the AVX-512 sets decode's 512-bit dot sums in another order).
template <class Arch, std::size_t T>
using Q5KRowTile = KQuantRowTile<Arch, T, BlockQ5K, unpack_q5k<Arch>>;

template <class Arch>
void tile_dots_q5k(const std::byte* w, std::size_t row_bytes, std::size_t n_rows, const BlockQ8K* x,
                   std::size_t x_stride, std::size_t nblocks, std::size_t n_tokens, float* y,
                   std::size_t y_stride) noexcept {
  run_tiles<BlockQ5K, Arch, Q5KRowTile, is_avx512_v<Arch> ? 8 : 4, /*kAssign=*/true>(
      w, row_bytes, n_rows, x, x_stride, nblocks, n_tokens, y, y_stride);
}

// AMX prefill (WeightKernels::matrix, amx_matrix_with_mins): Q4_K's expansion with the fifth
// bit of every quant (bit 2c of qh[l] for sub-block 2c, bit 2c + 1 for 2c + 1) added to the
// nibble.
template <class Arch>
inline void expand_q5k_block(const BlockQ5K& x, std::size_t b, std::size_t cols, std::size_t r,
                             const ExpandedRows& e) noexcept {
  const __m512i nibble = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
  expand_scaled_block<Arch>(x, b, r * cols + b * QK_K, r, e, [&](int c) {
    const __m512i low4 = _mm512_and_si512(broadcast_shifted<Arch>(x.qs + 32 * c, 0, 4), nibble);
    const __m512i bit5 = _mm512_and_si512(broadcast_shifted<Arch>(x.qh, 2 * c, 2 * c + 1), one);
    return _mm512_or_si512(low4, _mm512_slli_epi16(bit5, 4));
  });
}

// The planes of expand_q5k_block from lane `lane` of an eight-row copy's block, through
// the file's block.
template <class Arch>
inline void expand_q5k_copy_block(const BlockQ5KRows8& g, std::size_t lane, std::size_t b,
                                  std::size_t cols, std::size_t r, const ExpandedRows& e) noexcept {
  expand_q5k_block<Arch>(file_block_of(g, lane), b, cols, r, e);
}

}  // namespace smol::simd::x86
#endif  // SMOL_X86
