// 256-bit prefill tiles (WeightKernels::tile_dots) for the 32-value block types: Q4_0,
// Q8_0 and Q5_0 (signed levels, Q8_0 activations), Q4_1 and Q5_1 (unsigned levels and a
// min, Q8_1 activations). The AVX-512 sets have tiles of their own for the types with a
// min (x86_legacy.hpp) and AMX has its tile unit (x86_amx_blocks32.hpp); without
// these tiles, prefill on AVX2 dotted every row with every token, unpacking each weight
// block once per token, and Q8_0 prefilled slower than llama.cpp's on a SmolLM2-135M shape
// (bench/HISTORY.md, "AVX2 only: AMD Zen 1 VM").
//
// Each weight block is unpacked once for a tile of up to eight tokens. The tile's
// activations are first copied, per segment of at most kBlocks32Segment blocks, into a
// plain layout: quants side by side, each block's d for the tile's tokens side by side
// (one multiply by the weight's d per block gives all eight scale products, so the inner
// loop's float work is a convert and an FMA, the scale a broadcast from memory), and s
// (Q8_1's d times its quants' sum) where the weights have a min. Where four blocks' int16
// products may be summed before widening (kBlocks32Fours: levels of at most 32), each
// whole four of a token's blocks is stored transposed (transpose_words4: the k-th vector
// holds every block's k-th word), the weights' levels transposed alike once per row, so
// that four vpmaddubsw and three int16 adds give each block's sums in lanes of its own
// (block j in lanes j and 4 + j) with no shuffle per token; each token's d by block
// (`dt`) then gives the four blocks' scales as one 128-bit load. Per token and segment
// one float vector accumulates d_x d_y sum_i for every block (exact integers first) and
// another the min terms m_x s_y of whole groups of eight blocks (block 8k + j in lane j);
// the horizontal sum of the two, plus the min terms of the blocks past the last whole
// eight one by one, is added to y. Each token has its own accumulators, so its float order depends
// neither on the tile size nor on the number of rows, as tile_dots requires; and it is
// the order of the decode dot, scaled_block_sums (x86_avx2.hpp), so that a token gets
// the same bits from either (WeightKernels::dot_rounds_like_tile_dots). Hand-written: xsimd has no
// u8 x s8 dot.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "smol/quant/mxfp4.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol::simd::x86 {

inline constexpr std::size_t kBlocks32Tile = 8;  // tokens

// Whether a block type's values carry a min (value = d * q + m): its activations are
// Q8_1, whose s carries the min term.
template <class Block>
inline constexpr bool kBlocks32HasMin = requires(const Block& b) {
  b.m;
};

struct Blocks32TileActs {
  alignas(32) std::int8_t qs[kBlocks32Tile][kBlocks32Segment * 32];
  alignas(32) float d[kBlocks32Segment][kBlocks32Tile];   // block by block, token by token
  alignas(32) float dt[kBlocks32Tile][kBlocks32Segment];  // token by token (kBlocks32Fours)
  alignas(32) float s[kBlocks32Tile][kBlocks32Segment];
};

// Tokens [0, tn) of x, blocks [b0, b0 + nb) into `a`; with kFours each whole four of
// blocks transposed (transpose_words4).
template <class Arch, bool kFours, class Activation>
inline void pack_blocks32_tile(const Activation* x, std::size_t x_stride, std::size_t b0,
                               std::size_t nb, std::size_t tn, Blocks32TileActs& a) noexcept {
  for (std::size_t t = 0; t < tn; ++t) {
    const Activation* row = x + t * x_stride + b0;
    auto* qs = reinterpret_cast<__m256i*>(a.qs[t]);
    std::size_t b = 0;
    if constexpr (kFours) {
      for (; b + 4 <= nb; b += 4) {
        __m256i v[4];
        for (std::size_t i = 0; i < 4; ++i) v[i] = load256<Arch>(row[b + i].qs);
        transpose_words4(v);
        for (std::size_t i = 0; i < 4; ++i) _mm256_store_si256(qs + b + i, v[i]);
      }
    }
    for (; b < nb; ++b) _mm256_store_si256(qs + b, load256<Arch>(row[b].qs));
    for (b = 0; b < nb; ++b) {
      a.d[b][t] = _cvtsh_ss(row[b].d);
      if constexpr (kFours) a.dt[t][b] = a.d[b][t];
      if constexpr (std::is_same_v<Activation, BlockQ8_1>) a.s[t][b] = _cvtsh_ss(row[b].s);
    }
  }
  // A smaller tile's d is zero for the tokens it lacks, so that the row tile scales all
  // eight tokens' d with one multiply whatever the tile's size.
  for (std::size_t b = 0; b < nb; ++b) {
    for (std::size_t t = tn; t < kBlocks32Tile; ++t) a.d[b][t] = 0.0f;
  }
}

// One row's d (and m) as floats: the blocks' leading f16s, or MXFP4's E8M0 exponents.
template <class Arch, class Block>
inline void blocks32_row_scales(const Block* row, std::size_t nb, float* d, float* m) noexcept {
  if constexpr (std::is_same_v<Block, BlockMXFP4>) {
    for (std::size_t b = 0; b < nb; ++b) d[b] = e8m0_half(row[b].e);
  } else {
    std::size_t b = 0;
    for (; b + 4 <= nb; b += 4) {
      const LeadingHalves4 dm = leading_halves4<Arch>(row + b);
      _mm_storeu_ps(d + b, dm.first);
      if constexpr (kBlocks32HasMin<Block>) _mm_storeu_ps(m + b, dm.second);
    }
    for (; b < nb; ++b) {
      d[b] = _cvtsh_ss(row[b].d);
      if constexpr (kBlocks32HasMin<Block>) m[b] = _cvtsh_ss(row[b].m);
    }
  }
}

// One row (nb <= kBlocks32Segment blocks) times T tokens of `a`: out[t]. `levels` gives a
// block's 32 integer levels as bytes, signed where kSigned (then |w| times y with w's sign,
// as dot_s8s8), else unsigned.
template <class Arch, class Block, bool kSigned, std::size_t T, class Levels>
inline void blocks32_row_tile(const Block* row, std::size_t nb, const Blocks32TileActs& a,
                              Levels levels, float* out) noexcept {
  constexpr bool kFours = kBlocks32Fours<Arch, Block>;
  const std::size_t fours_end = kFours ? nb / 4 * 4 : 0;  // blocks summed four at a time
  alignas(32) float dx[kBlocks32Segment], mx[kBlocks32Segment];
  blocks32_row_scales<Arch>(row, nb, dx, mx);
  // The scale products d_x d_y. Block by block, every tile size scales all eight tokens'
  // d (pack_blocks32_tile zeroes those it lacks): one multiply a block. Written out:
  // GCC's own vectorizing of a loop over T tokens transposes, which cost a two-token tile
  // more than its dots. Four blocks at a time, token by token.
  alignas(32) float dd[kBlocks32Segment][kBlocks32Tile];
  for (std::size_t b = fours_end; b < nb; ++b) {
    _mm256_store_ps(dd[b], _mm256_mul_ps(_mm256_set1_ps(dx[b]), _mm256_load_ps(a.d[b])));
  }
  alignas(32) float ddt[kFours ? T : 1][kFours ? kBlocks32Segment : 1];
  if constexpr (kFours) {
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t b = 0; b < fours_end; b += 4) {
        _mm_store_ps(ddt[t] + b, _mm_mul_ps(_mm_load_ps(dx + b), _mm_load_ps(a.dt[t] + b)));
      }
    }
  }
  __m256 acc[T];
#pragma GCC unroll 8
  for (std::size_t t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (std::size_t b = 0; b < fours_end; b += 4) {
    __m256i w[4], u[4];
    for (std::size_t i = 0; i < 4; ++i) w[i] = levels(row[b + i]);
    transpose_words4(w);
    for (std::size_t i = 0; i < 4; ++i) u[i] = kSigned ? _mm256_sign_epi8(w[i], w[i]) : w[i];
#pragma GCC unroll 8
    for (std::size_t t = 0; t < T; ++t) {
      __m256i sums = _mm256_setzero_si256();
      for (std::size_t i = 0; i < 4; ++i) {
        __m256i y = load256<Arch>(a.qs[t] + 32 * (b + i));
        if constexpr (kSigned) y = _mm256_sign_epi8(y, w[i]);
        sums = _mm256_add_epi16(sums, _mm256_maddubs_epi16(u[i], y));
      }
      acc[t] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(sums, _mm256_set1_epi16(1))),
                          _mm256_broadcast_ps(reinterpret_cast<const __m128*>(ddt[t] + b)), acc[t]);
    }
  }
  for (std::size_t b = fours_end; b < nb; ++b) {
    const __m256i lev = levels(row[b]);
    const __m256i u = kSigned ? _mm256_sign_epi8(lev, lev) : lev;
#pragma GCC unroll 8
    for (std::size_t t = 0; t < T; ++t) {
      __m256i y = load256<Arch>(a.qs[t] + 32 * b);
      if constexpr (kSigned) y = _mm256_sign_epi8(y, lev);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_u8s8<Arch>(u, y)),
                               _mm256_broadcast_ss(&dd[b][t]), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (std::size_t t = 0; t < T; ++t) {
    if constexpr (kBlocks32HasMin<Block>) {
      __m256 mins = _mm256_setzero_ps();
      std::size_t b = 0;
      for (; b + 8 <= nb; b += 8) {
        mins = _mm256_fmadd_ps(_mm256_load_ps(mx + b), _mm256_load_ps(a.s[t] + b), mins);
      }
      float tail = 0.0f;
      for (; b < nb; ++b) tail = fmadd_ss(mx[b], a.s[t][b], tail);
      out[t] = hsum<Arch>(_mm256_add_ps(acc[t], mins)) + tail;
    } else {
      out[t] = hsum<Arch>(acc[t]);
    }
  }
}

template <class Arch, class Block, bool kSigned, class Activation, class Levels>
void tile_dots_blocks32(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                        const Activation* x, std::size_t x_stride, std::size_t nblocks,
                        std::size_t n_tokens, float* y, std::size_t y_stride,
                        Levels levels) noexcept {
  Blocks32TileActs acts;
  for_each_tile<kBlocks32Tile>(
      n_rows, nblocks, kBlocks32Segment, n_tokens, y, y_stride, /*assign=*/true,
      [&](std::size_t t0, std::size_t tn, std::size_t b0, std::size_t nb) {
        pack_blocks32_tile<Arch, kBlocks32Fours<Arch, Block>>(x + t0 * x_stride, x_stride, b0, nb,
                                                              tn, acts);
      },
      [&]<std::size_t T>(TileTokens<T>, std::size_t r, std::size_t, std::size_t b0, std::size_t nb,
                         float* out) {
        const Block* row = reinterpret_cast<const Block*>(w + r * row_bytes) + b0;
        blocks32_row_tile<Arch, Block, kSigned, T>(row, nb, acts, levels, out);
      });
}

// tile_dots_blocks32 as a WeightKernels::tile_dots entry, with a default-made `Levels`.
template <class Arch, class Block, bool kSigned, class Levels, class Activation>
void tile_dots_blocks32_entry(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                              const Activation* x, std::size_t x_stride, std::size_t nblocks,
                              std::size_t n_tokens, float* y, std::size_t y_stride) noexcept {
  tile_dots_blocks32<Arch, Block, kSigned>(w, row_bytes, n_rows, x, x_stride, nblocks, n_tokens, y,
                                           y_stride, Levels{});
}

}  // namespace smol::simd::x86
#endif  // SMOL_X86
