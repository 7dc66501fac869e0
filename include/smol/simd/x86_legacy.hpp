// Q4_1, Q5_0 and Q5_1's x86 kernels: the dots, the prefill tiles and what the matrix unit reads of
// a block, templated on the set (the 256-bit ones serve AVX2 and every AVX-512 set).
// kernels_legacy.hpp says which set takes which; the scalar reference is in
// scalar_kernels.hpp, the NEON kernels in neon.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/half.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_amx_blocks32.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_blocks32.hpp"
#include "smol/simd/x86_avx512_pairs.hpp"
#include "smol/simd/x86_avx512_rows16.hpp"

#if defined(SMOL_X86)
namespace smol::simd::x86 {

// 0x10 in byte j where bit j of the 32-bit word qh is set, else 0: the fifth bits in
// place. Each byte takes qh byte j / 8 (vpshufb stays within 128-bit lanes, and both
// lanes hold the whole word), then a compare keeps bit j % 8.
template <class Arch>
inline __m256i fifth_bits(const std::uint8_t qh[4]) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                          _mm256_set1_epi8(0x10));
}

// The 32 low 4-bit quants of a block in value order (low nibbles, then high ones).
template <class Arch, class Block>
inline __m256i low_nibbles(const Block& block) noexcept {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// A block's 32 levels as bytes: unsigned q (0..31) for the types with a min, signed q - 16
// for Q5_0.
template <class Arch>
inline __m256i legacy_levels(const BlockQ4_1& b) noexcept {
  return low_nibbles<Arch>(b);
}
template <class Arch>
inline __m256i legacy_levels(const BlockQ5_0& b) noexcept {
  return _mm256_sub_epi8(_mm256_or_si256(low_nibbles<Arch>(b), fifth_bits<Arch>(b.qh)),
                         _mm256_set1_epi8(16));
}
template <class Arch>
inline __m256i legacy_levels(const BlockQ5_1& b) noexcept {
  return _mm256_or_si256(low_nibbles<Arch>(b), fifth_bits<Arch>(b.qh));
}
// The same as a function object, for the kernels that take a block's levels.
template <class Arch>
struct LegacyLevels {
  template <class Block>
  __m256i operator()(const Block& b) const noexcept {
    return legacy_levels<Arch>(b);
  }
};

// 256-bit, the AVX2 set's (a block is one ymm). Levels reach 31 and activations |127|,
// so vpmaddubsw's pairs stay below 2^13.
template <class Arch, class Block>
float dot_legacy(const Block* x, const LegacyActivation<Block>* y, std::size_t nblocks) noexcept {
  return scaled_block_sums<Arch>(x, y, nblocks, [&](std::size_t b) {
    const __m256i yq = load256<Arch>(y[b].qs);
    const __m256i levels = legacy_levels<Arch>(x[b]);
    if constexpr (kHasMin<Block>) {
      return _mm256_maddubs_epi16(levels, yq);  // unsigned levels
    } else {
      return products_s8s8<Arch>(levels, yq);
    }
  });
}

// 512-bit prefill tiles (WeightKernels::tile_dots) for the types with a min (Q4_1, Q5_1);
// the 256-bit set's tiles, for every 32-value type, are in x86_avx2_blocks32.hpp. Each
// weight block is unpacked once for a tile of tokens. The tile's activations are first
// copied, per segment of at most kLegacySegment blocks, into a plain layout (quants side
// by side, d and s as floats), so that a 64-byte vector holds two blocks of a token and
// each block's d is stored eight times, a vector to load. Per token and segment: one float
// vector accumulates d_x d_y sum_i for every block (exact integers first), then the min
// terms m_x s_y, then a horizontal sum added to y. Each token has its own accumulator, so
// its float order depends neither on the tile size nor on the number of rows.
inline constexpr std::size_t kLegacySegment = 32;  // blocks; a multiple of 16

template <std::size_t T>
struct LegacyTileActs {
  alignas(64) std::int8_t qs[T][kLegacySegment * 32];
  alignas(64) float d[T][kLegacySegment * 8];  // each block's d eight times
  alignas(64) float s[T][kLegacySegment];
};

// Tokens [0, tn) of x, blocks [b0, b0 + nb) into `a`; an odd last block gets a zero
// partner, and the s column is zero up to a multiple of 16.
template <class Arch, std::size_t T>
inline void pack_legacy_tile(const BlockQ8_1* x, std::size_t x_stride, std::size_t b0,
                             std::size_t nb, std::size_t tn, LegacyTileActs<T>& a) noexcept {
  for (std::size_t t = 0; t < tn; ++t) {
    const BlockQ8_1* row = x + t * x_stride + b0;
    for (std::size_t b = 0; b < nb; ++b) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(a.qs[t] + 32 * b), load256<Arch>(row[b].qs));
      _mm256_store_ps(a.d[t] + 8 * b, _mm256_set1_ps(_cvtsh_ss(row[b].d)));
      a.s[t][b] = _cvtsh_ss(row[b].s);
    }
    for (std::size_t b = nb; b < kLegacySegment; ++b) a.s[t][b] = 0.0f;
    if (nb % 2 != 0) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(a.qs[t] + 32 * nb), _mm256_setzero_si256());
      _mm256_store_ps(a.d[t] + 8 * nb, _mm256_setzero_ps());
    }
  }
}

// One row's d and m as floats, zero up to a multiple of 16.
template <class Arch, class Block>
inline void legacy_row_scales(const Block* row, std::size_t nb, float* d, float* m) noexcept {
  std::size_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const LeadingHalves4 dm = leading_halves4<Arch>(row + b);
    _mm_storeu_ps(d + b, dm.first);
    _mm_storeu_ps(m + b, dm.second);
  }
  for (; b < nb; ++b) {
    d[b] = _cvtsh_ss(row[b].d);
    m[b] = _cvtsh_ss(row[b].m);
  }
  for (b = nb; b < (nb + 15) / 16 * 16; ++b) d[b] = m[b] = 0.0f;
}

// One row (nb <= kLegacySegment blocks) times T tokens of `a`: out[t].
template <class Arch, class Block, std::size_t T, std::size_t TA>
inline void legacy_row_tile(const Block* row, std::size_t nb, const LegacyTileActs<TA>& a,
                            float* out) noexcept {
  static_assert(is_avx512_v<Arch>);
  alignas(64) float dx[kLegacySegment], mx[kLegacySegment];
  legacy_row_scales<Arch>(row, nb, dx, mx);
  __m512 acc[T];
#pragma GCC unroll 16
  for (std::size_t t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nb; b += 2) {
    const __m256i lo = legacy_levels<Arch>(row[b]);
    const __m256i hi = b + 1 < nb ? legacy_levels<Arch>(row[b + 1]) : _mm256_setzero_si256();
    const __m512i lev = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    const __m512 dxv = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(dx[b])),
                                          _mm256_set1_ps(dx[b + 1]), 1);
#pragma GCC unroll 16
    for (std::size_t t = 0; t < T; ++t) {
      const __m512i act = _mm512_load_si512(a.qs[t] + 32 * b);
      __m512i sumi;
      if constexpr (has_vnni_v<Arch>) {
        sumi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lev, act);
      } else {
        sumi = _mm512_madd_epi16(_mm512_maddubs_epi16(lev, act), _mm512_set1_epi16(1));
      }
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi),
                               _mm512_mul_ps(dxv, _mm512_load_ps(a.d[t] + 8 * b)), acc[t]);
    }
  }
  for (std::size_t b = 0; b < nb; b += 16) {
    const __m512 m = _mm512_load_ps(mx + b);
#pragma GCC unroll 16
    for (std::size_t t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(m, _mm512_load_ps(a.s[t] + b), acc[t]);
    }
  }
#pragma GCC unroll 16
  for (std::size_t t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
}

template <class Arch, class Block>
void tile_dots_legacy(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                      const BlockQ8_1* x, std::size_t x_stride, std::size_t nblocks,
                      std::size_t n_tokens, float* y, std::size_t y_stride) noexcept {
  constexpr std::size_t kTile = 16;
  LegacyTileActs<kTile> acts;
  for_each_tile<kTile>(
      n_rows, nblocks, kLegacySegment, n_tokens, y, y_stride, /*assign=*/true,
      [&](std::size_t t0, std::size_t tn, std::size_t b0, std::size_t nb) {
        pack_legacy_tile<Arch>(x + t0 * x_stride, x_stride, b0, nb, tn, acts);
      },
      [&]<std::size_t T>(TileTokens<T>, std::size_t r, std::size_t, std::size_t b0, std::size_t nb,
                         float* out) {
        const Block* row = reinterpret_cast<const Block*>(w + r * row_bytes) + b0;
        legacy_row_tile<Arch, Block, T>(row, nb, acts, out);
      });
}

}  // namespace smol::simd::x86
#endif  // SMOL_X86
