// IQ4_NL and IQ4_XS's x86 kernels: the dots, the prefill tiles and what the matrix unit reads of
// a block, templated on the set (the 256-bit ones serve AVX2 and every AVX-512 set).
// kernels_iq4.hpp says which set takes which; the scalar reference is in
// scalar_kernels.hpp, the NEON kernels in neon.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/half.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_amx_blocks32.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_blocks32.hpp"
#include "smol/simd/x86_avx512_pairs.hpp"
#include "smol/simd/x86_avx512_rows16.hpp"
#include "smol/simd/x86_avx512_token_lanes.hpp"
#include "smol/simd/x86_legacy.hpp"

#if defined(SMOL_X86)
namespace smol::simd::x86 {

// The 16 levels in both 128-bit lanes (vpshufb looks up within each lane).
template <class Arch>
inline __m256i iq4_table() noexcept {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
}

// A block's 32 levels as signed bytes, in value order.
template <class Arch>
inline __m256i iq4nl_levels(const BlockIQ4NL& b, __m256i table) noexcept {
  return _mm256_shuffle_epi8(table, low_nibbles<Arch>(b));
}
// The same as a function object, for the kernels that take a block's levels.
template <class Arch>
struct IQ4NLLevels {
  __m256i operator()(const BlockIQ4NL& b) const noexcept {
    return iq4nl_levels<Arch>(b, iq4_table<Arch>());
  }
};

// The 32 signed levels, in value order, of a sub-block's 16 packed bytes (value i in the
// low nibble of byte i, value 16 + i in its high nibble).
template <class Arch>
inline __m256i iq4_packed_levels(__m128i packed) noexcept {
  return _mm256_shuffle_epi8(iq4_table<Arch>(),
                             _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                                              _mm256_set1_epi8(0x0F)));
}

// IQ4_XS's sub-block j (values 32 j .. 32 j + 31) as signed levels, in value order.
template <class Arch>
inline __m256i iq4xs_sub_block_levels(const BlockIQ4XS& b, std::size_t j) noexcept {
  return iq4_packed_levels<Arch>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * j)));
}

// 256-bit, for every x86 set (a block is one ymm; the VNNI sets use vpdpbusd). |level|
// <= 127 and |y| <= 127, so vpmaddubsw's pairs stay below 2^15.
template <class Arch>
float dot_iq4nl_q8_0(const BlockIQ4NL* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  const __m256i table = iq4_table<Arch>();
  __m256 acc = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const __m256i sumi = dot_s8s8<Arch>(iq4nl_levels<Arch>(x[b], table), load256<Arch>(y[b].qs));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi),
                          _mm256_set1_ps(_cvtsh_ss(x[b].d) * _cvtsh_ss(y[b].d)), acc);
  }
  return hsum<Arch>(acc);
}

// IQ4_XS's eight sub-block scales s_j - 32 as int16, in both 128-bit lanes: the low
// nibbles of scales_l interleaved, the bit pairs of scales_h moved to the top of each
// word by a multiply (word j times 2^(14 - 2j)) and shifted down.
template <class Arch>
inline __m256i iq4xs_scales16(const BlockIQ4XS& b) noexcept {
  std::uint32_t low_bits;
  std::memcpy(&low_bits, b.scales_l, sizeof(low_bits));
  const __m128i packed = _mm_cvtsi32_si128(static_cast<int>(low_bits));
  const __m128i nibble = _mm_set1_epi8(0x0F);
  const __m128i low = _mm_unpacklo_epi8(_mm_and_si128(packed, nibble),
                                        _mm_and_si128(_mm_srli_epi16(packed, 4), nibble));
  const __m128i high = _mm_srli_epi16(
      _mm_mullo_epi16(_mm_set1_epi16(static_cast<short>(b.scales_h)),
                      _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1)),
      14);
  const __m128i scales = _mm_sub_epi16(
      _mm_or_si128(_mm_cvtepu8_epi16(low), _mm_slli_epi16(high, 4)), _mm_set1_epi16(32));
  return _mm256_broadcastsi128_si256(scales);
}

// IQ4_XS, 256-bit for every x86 set. Two sub-blocks per pass: one 32-byte load holds
// their indices, its low nibbles are values 0-15 of both (one per 128-bit lane), its
// high nibbles values 16-31, and the activations are loaded to match. The levels'
// products in int16 pairs (|level y| pairs < 2^15), then each lane's sub-block scale
// through vpmaddwd (vpdpwssd on the VNNI sets) into one int32 sum per super-block.
// kStreams: the AVX-512 sets ask for each block's lines 4 KB ahead into L2
// (stream_block_ahead, with WeightKernels::dot_streams), AVX2 for 8 KB ahead into L1.
// A 512-bit version of this dot (two sub-blocks per vector) decoded the 3B IQ4_XS file
// no faster (bench/HISTORY.md, "Every AVX-512 decode dot streams").
template <class Arch, bool kStreams = false>
float dot_iq4xs_q8k(const BlockIQ4XS* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  const __m256i table = iq4_table<Arch>();
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256i pick[4];
  for (int p = 0; p < 4; ++p) pick[p] = pick_words<Arch>(2 * p, 2 * p + 1);
  __m256 acc = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    if constexpr (kStreams) {
      stream_block_ahead<Arch>(x + b);
    } else {
      prefetch_ahead<Arch>(x + b, sizeof(BlockIQ4XS));
    }
    const __m256i scales = iq4xs_scales16<Arch>(x[b]);
    __m256i sumi = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      const __m256i q = load256<Arch>(x[b].qs + 32 * p);
      const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, nibble));
      const __m256i hi =
          _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble));
      const std::int8_t* yq = y[b].qs + 64 * p;
      const __m256i y_lo = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(yq + 32),
                                               reinterpret_cast<const __m128i*>(yq));
      const __m256i y_hi = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(yq + 48),
                                               reinterpret_cast<const __m128i*>(yq + 16));
      const __m256i p_lo =
          _mm256_maddubs_epi16(_mm256_sign_epi8(lo, lo), _mm256_sign_epi8(y_lo, lo));
      const __m256i p_hi =
          _mm256_maddubs_epi16(_mm256_sign_epi8(hi, hi), _mm256_sign_epi8(y_hi, hi));
      const __m256i sc = _mm256_shuffle_epi8(scales, pick[p]);
      sumi = madd16_acc<Arch>(sumi, p_lo, sc);
      sumi = madd16_acc<Arch>(sumi, p_hi, sc);
    }
    acc =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(_cvtsh_ss(x[b].d) * y[b].d), acc);
  }
  return hsum<Arch>(acc);
}

// 512-bit prefill tiles (WeightKernels::tile_dots), as Q4_1's (kernels_legacy.hpp); the
// 256-bit set's are every 32-value type's (x86_avx2_blocks32.hpp). The tile's
// Q8_0 activations are copied per segment of kLegacySegment blocks into a plain layout
// (quants side by side, each block's d eight times), each weight block's levels are
// made once for the tile, and each token keeps its own float accumulator, so its bits
// depend on neither the tile size nor the row count. The levels are signed: u8 x s8
// multiplies take |level| and the activation with the level's sign (a masked negation,
// the mask made once per weight vector).
template <std::size_t T>
struct Iq4nlTileActs {
  alignas(64) std::int8_t qs[T][kLegacySegment * 32];
  alignas(64) float d[T][kLegacySegment * 8];
};

// Tokens [0, tn) of x, blocks [b0, b0 + nb) into `a`; an odd last block gets a zero
// partner.
template <class Arch, std::size_t T>
inline void pack_iq4nl_tile(const BlockQ8_0* x, std::size_t x_stride, std::size_t b0,
                            std::size_t nb, std::size_t tn, Iq4nlTileActs<T>& a) noexcept {
  for (std::size_t t = 0; t < tn; ++t) {
    const BlockQ8_0* row = x + t * x_stride + b0;
    for (std::size_t b = 0; b < nb; ++b) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(a.qs[t] + 32 * b), load256<Arch>(row[b].qs));
      _mm256_store_ps(a.d[t] + 8 * b, _mm256_set1_ps(_cvtsh_ss(row[b].d)));
    }
    if (nb % 2 != 0) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(a.qs[t] + 32 * nb), _mm256_setzero_si256());
      _mm256_store_ps(a.d[t] + 8 * nb, _mm256_setzero_ps());
    }
  }
}

// One row (nb <= kLegacySegment blocks) times T tokens of `a`: out[t].
template <class Arch, std::size_t T, std::size_t TA>
inline void iq4nl_row_tile(const BlockIQ4NL* row, std::size_t nb, const Iq4nlTileActs<TA>& a,
                           float* out) noexcept {
  static_assert(is_avx512_v<Arch>);
  const __m256i table = iq4_table<Arch>();
  __m512 acc[T];
#pragma GCC unroll 16
  for (std::size_t t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nb; b += 2) {
    const __m256i lo = iq4nl_levels<Arch>(row[b], table);
    const __m256i hi = b + 1 < nb ? iq4nl_levels<Arch>(row[b + 1], table) : _mm256_setzero_si256();
    const __m512i lev = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    const __m512i magnitude = _mm512_abs_epi8(lev);
    const __mmask64 negative = _mm512_movepi8_mask(lev);
    const float d1 = b + 1 < nb ? _cvtsh_ss(row[b + 1].d) : 0.0f;
    const __m512 dxv = _mm512_insertf32x8(
        _mm512_castps256_ps512(_mm256_set1_ps(_cvtsh_ss(row[b].d))), _mm256_set1_ps(d1), 1);
#pragma GCC unroll 16
    for (std::size_t t = 0; t < T; ++t) {
      const __m512i act = _mm512_load_si512(a.qs[t] + 32 * b);
      const __m512i signed_act = _mm512_mask_sub_epi8(act, negative, _mm512_setzero_si512(), act);
      __m512i sumi;
      if constexpr (has_vnni_v<Arch>) {
        sumi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), magnitude, signed_act);
      } else {
        sumi = _mm512_madd_epi16(_mm512_maddubs_epi16(magnitude, signed_act), _mm512_set1_epi16(1));
      }
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi),
                               _mm512_mul_ps(dxv, _mm512_load_ps(a.d[t] + 8 * b)), acc[t]);
    }
  }
#pragma GCC unroll 16
  for (std::size_t t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
}

template <class Arch>
void tile_dots_iq4nl(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                     const BlockQ8_0* x, std::size_t x_stride, std::size_t nblocks,
                     std::size_t n_tokens, float* y, std::size_t y_stride) noexcept {
  constexpr std::size_t kTile = 16;
  Iq4nlTileActs<kTile> acts;
  for_each_tile<kTile>(
      n_rows, nblocks, kLegacySegment, n_tokens, y, y_stride, /*assign=*/true,
      [&](std::size_t t0, std::size_t tn, std::size_t b0, std::size_t nb) {
        pack_iq4nl_tile<Arch>(x + t0 * x_stride, x_stride, b0, nb, tn, acts);
      },
      [&]<std::size_t T>(TileTokens<T>, std::size_t r, std::size_t, std::size_t b0, std::size_t nb,
                         float* out) {
        const auto* row = reinterpret_cast<const BlockIQ4NL*>(w + r * row_bytes) + b0;
        iq4nl_row_tile<Arch, T>(row, nb, acts, out);
      });
}

// IQ4_XS prefill tiles (WeightKernels::tile_dots) on Q8_K activations: each weight
// super-block's levels, |levels|, signs and sub-block scales are made once for a tile of
// tokens (AVX-512: two sub-blocks per zmm, 16 tokens; AVX2: one per ymm, 4 tokens: with
// 8, GCC kept the eight sums on the stack and the SmolLM3-3B-shaped prefill ran slower,
// and 4 also beat 8 with the sub-block loop kept rolled; bench/HISTORY.md, "Figures moved
// from code comments").
// Per token and super-block the integer sum is the dot kernel's (pairs of |level| and
// the signed activation by vpmaddubsw, the scale by vpmaddwd / vpdpwssd), then one
// float multiply-add by d_x d_y into the token's own accumulator, so a token's bits
// depend on neither the tile size nor the row count. The activations are read in place.
template <class Arch, std::size_t T>
inline void iq4xs_row_tile(const BlockIQ4XS* row, std::size_t nb, const BlockQ8K* x,
                           std::size_t x_stride, float* out) noexcept {
  alignas(64) float acc[T][16];
  for (std::size_t t = 0; t < T; ++t) {
    for (float& a : acc[t]) a = 0.0f;
  }
  for (std::size_t b = 0; b < nb; ++b) {
    alignas(16) short scale[8];  // s_j - 32, each broadcast to a vector below
    _mm_store_si128(reinterpret_cast<__m128i*>(scale),
                    _mm256_castsi256_si128(iq4xs_scales16<Arch>(row[b])));
    const float dx = _cvtsh_ss(row[b].d);
    if constexpr (is_avx512_v<Arch>) {
      __m256i lev[8];
      for (std::size_t j = 0; j < 8; ++j) lev[j] = iq4xs_sub_block_levels<Arch>(row[b], j);
      __m512i sumi[T];
#pragma GCC unroll 16
      for (std::size_t t = 0; t < T; ++t) sumi[t] = _mm512_setzero_si512();
      for (std::size_t p = 0; p < 4; ++p) {
        const __m512i l = _mm512_inserti64x4(_mm512_castsi256_si512(lev[2 * p]), lev[2 * p + 1], 1);
        const __m512i magnitude = _mm512_abs_epi8(l);
        const __mmask64 negative = _mm512_movepi8_mask(l);
        const __m512i sc =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(scale[2 * p])),
                               _mm256_set1_epi16(scale[2 * p + 1]), 1);
#pragma GCC unroll 16
        for (std::size_t t = 0; t < T; ++t) {
          const __m512i act = _mm512_loadu_si512(x[t * x_stride + b].qs + 64 * p);
          const __m512i products = _mm512_maddubs_epi16(
              magnitude, _mm512_mask_sub_epi8(act, negative, _mm512_setzero_si512(), act));
          if constexpr (has_vnni_v<Arch>) {
            sumi[t] = _mm512_dpwssd_epi32(sumi[t], products, sc);
          } else {
            sumi[t] = _mm512_add_epi32(sumi[t], _mm512_madd_epi16(products, sc));
          }
        }
      }
#pragma GCC unroll 16
      for (std::size_t t = 0; t < T; ++t) {
        const __m512 d = _mm512_set1_ps(dx * x[t * x_stride + b].d);
        _mm512_store_ps(acc[t],
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[t]), d, _mm512_load_ps(acc[t])));
      }
    } else {
      __m256i sumi[T];
#pragma GCC unroll 8
      for (std::size_t t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
      for (std::size_t j = 0; j < 8; ++j) {
        const __m256i lev = iq4xs_sub_block_levels<Arch>(row[b], j);
        const __m256i magnitude = _mm256_sign_epi8(lev, lev);
        const __m256i sc = _mm256_set1_epi16(scale[j]);
#pragma GCC unroll 8
        for (std::size_t t = 0; t < T; ++t) {
          const __m256i act = _mm256_sign_epi8(load256<Arch>(x[t * x_stride + b].qs + 32 * j), lev);
          sumi[t] = madd16_acc<Arch>(sumi[t], _mm256_maddubs_epi16(magnitude, act), sc);
        }
      }
#pragma GCC unroll 8
      for (std::size_t t = 0; t < T; ++t) {
        const __m256 d = _mm256_set1_ps(dx * x[t * x_stride + b].d);
        _mm256_store_ps(acc[t],
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[t]), d, _mm256_load_ps(acc[t])));
      }
    }
  }
  for (std::size_t t = 0; t < T; ++t) {
    if constexpr (is_avx512_v<Arch>) {
      out[t] = _mm512_reduce_add_ps(_mm512_load_ps(acc[t]));
    } else {
      out[t] = hsum<Arch>(_mm256_load_ps(acc[t]));
    }
  }
}

template <class Arch>
void tile_dots_iq4xs(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                     const BlockQ8K* x, std::size_t x_stride, std::size_t nblocks,
                     std::size_t n_tokens, float* y, std::size_t y_stride) noexcept {
  constexpr std::size_t kTile = is_avx512_v<Arch> ? 16 : 4;
  for_each_tile<kTile>(n_rows, nblocks, nblocks, n_tokens, y, y_stride, /*assign=*/true,
                       NoTilePacking{},
                       [&]<std::size_t T>(TileTokens<T>, std::size_t r, std::size_t t0, std::size_t,
                                          std::size_t, float* out) {
                         const auto* row = reinterpret_cast<const BlockIQ4XS*>(w + r * row_bytes);
                         iq4xs_row_tile<Arch, T>(row, nblocks, x + t0 * x_stride, x_stride, out);
                       });
}

// AMX prefill (amx_matrix_with_offset<.., 0>): IQ4_XS's super-block as two byte planes of
// (s_j - 32) x level, |(s_j - 32) x level| <= 32 x 127 < 2^13 (expand_offset_planes with
// signed levels, each sub-block's scale given to its two groups of 16), so a block's 256
// products are summed in integers before any float step, as the K-quants' are: one float
// step per super-block instead of eight (one per sub-block) in the tile loop. `levels(j)`
// gives sub-block j's 32 levels, `scale(j)` its s_j - 32.
template <class Arch, class Levels, class Scale>
inline void expand_iq4xs_planes(f16_bits d, std::size_t b, std::size_t cols, std::size_t r,
                                const ExpandedRows& e, Levels levels, Scale scale) noexcept {
  __m512i n[4];
  for (std::size_t c = 0; c < 4; ++c) {
    n[c] = _mm512_inserti64x4(_mm512_castsi256_si512(levels(2 * c)), levels(2 * c + 1), 1);
  }
  std::int8_t scales[16];
  for (std::size_t g = 0; g < 16; ++g) scales[g] = static_cast<std::int8_t>(scale(g / 2));
  expand_offset_planes<Arch, /*kSignedLevels=*/true>(n, scales, d, b, r * cols + b * QK_K, r, e);
}

// Block b of a file row.
template <class Arch>
inline void expand_iq4xs_block(const BlockIQ4XS& x, std::size_t b, std::size_t cols, std::size_t r,
                               const ExpandedRows& e) noexcept {
  expand_iq4xs_planes<Arch>(
      x.d, b, cols, r, e, [&](std::size_t j) { return iq4xs_sub_block_levels<Arch>(x, j); },
      [&](std::size_t j) { return iq4xs_scale(x, j); });
}

// Block b of lane `lane` of a sixteen-row group: sub-block j's 16 bytes are four dwords
// 64 bytes apart (qs[j][c][lane]), its scale unpacked already.
template <class Arch>
inline void expand_iq4xs_copy_block(const BlockIQ4XSRows16& g, std::size_t lane, std::size_t b,
                                    std::size_t cols, std::size_t r,
                                    const ExpandedRows& e) noexcept {
  expand_iq4xs_planes<Arch>(
      g.d[lane], b, cols, r, e,
      [&](std::size_t j) {
        const __m128i index = _mm_setr_epi32(0, 16, 32, 48);
        return iq4_packed_levels<Arch>(
            _mm_i32gather_epi32(reinterpret_cast<const int*>(&g.qs[j][0][lane][0]), index, 4));
      },
      [&](std::size_t j) { return g.scales[j][lane]; });
}

}  // namespace smol::simd::x86
#endif  // SMOL_X86
