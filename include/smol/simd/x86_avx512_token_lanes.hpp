// AVX-512 prefill on the eight-row Q3_K, Q4_K, Q5_K and Q6_K copies (quant/rows8.hpp) and
// the sixteen-row IQ4_XS copy (quant/rows16.hpp) with the tokens in the lanes: a vector
// holds one quad of sixteen tokens, and each dot broadcasts one row's quad.
//
// Why: the eight-row kernels (x86_avx512_rows8.hpp) put the rows in the lanes and
// broadcast each token's quads, so a lane's sums must fit a word before vpdpwssd scales
// them: Q6_K's quants reach 63, and every two dots are packed to words and scaled (two
// vector ops a dot, where Q4_K needs 1.25), and Q5_K's reach 31, every four dots (1.5 ops
// a dot), so both ran well behind Q4_K's pace; Q3_K's sub-blocks of 16 are scaled every
// two dots. With the tokens in the lanes a sub-block's sums stay in int32, and its scale
// is one vpmulld per row and sixteen tokens (bench/README.md has the counts and the
// figures). IQ4_XS's sixteen-row kernel (x86_avx512_rows16.hpp) keeps int32 lanes
// already but broadcasts each token's quads: four tokens per pass over a group, against
// sixteen here.
//
// The activations are the matrix unit's TokenTiles (token_tiles.hpp, made once per
// matmul: 16 tokens' quads side by side, AMX's B-tile order, with each token's sums of
// its sub-blocks of 32 for Q4_K's and Q5_K's min terms). vpdpbusd takes one operand
// unsigned and only the other broadcast, so the tokens' quants go in unsigned, x + 128
// (one xor per load, shared by eight rows), and the weights signed (Q6_K's q - 32, Q3_K's
// level - 4, IQ4_XS's levels; Q4_K's and Q5_K's q as they are), each call unpacking its rows'
// blocks to bytes once for all its token tiles. The 128 x sum of a sub-block's weights that the
// offset adds is taken off, scaled, before the first dot.
//
// Same bits as the eight-row kernels (rows8_q6k_tile_512, rows8_with_mins_tile_512,
// rows8_two_bit_tile_512), so decode, the few-token passes that take those kernels and
// this prefill give a token the same row: per row and block it forms the same two exact
// integers as the eight-row kernel's two lanes of the row (Q6_K: parity 0, sub-blocks 0-3
// and 8-11, and parity 1, the others; Q4_K and Q5_K: the even and the odd sub-blocks, and
// the min terms of sub-blocks 0-3 and 4-7), takes the same float steps on each, and adds
// the two at the end; Q3_K's kernel adds its lanes in integers, so one sum per row here.
// IQ4_XS's sixteen-row kernel (rows16_512) sums a super-block in integers, scales and all,
// and takes one float step per block: the same one integer and step here (VNNI only: its
// levels reach 127, and without VNNI the x + 128 pairs would saturate vpmaddubsw).
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/quant/rows16.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/token_tiles.hpp"
#include "smol/simd/x86_avx512.hpp"
#include "smol/simd/x86_avx512_rows8.hpp"
#include "smol/simd/x86_avx512_tiles.hpp"

namespace smol::simd::x86 {

// __m512i, as a type that depends on Arch (see dot_u8s8_broadcast). Not std::conditional_t:
// GCC warns that a template argument drops __m512i's vector attributes.
template <class Arch>
struct DependentVec512 {
  using type = __m512i;
};

// acc + per lane, the dot of u's quad with the signed quad at `quad`, broadcast. With VNNI
// one vpdpbusd with an embedded broadcast ({1to16}), in assembly: GCC 12 first loads the
// quad into a register with a vpbroadcastd of its own, an instruction more per dot in
// kernels that are nothing but dots (the 3B prefill matrices run a little faster so; the
// sixteen-row kernels' token quads ran slower the same way, and keep theirs: bench/HISTORY.md,
// "Q3_K, Q4_K and Q5_K with the tokens in the lanes").
template <class Arch>
inline __m512i dot_u8s8_broadcast(__m512i acc, __m512i u, const std::int8_t* quad) noexcept {
  if constexpr (has_vnni_v<Arch>) {
    struct Quad {
      std::int8_t bytes[4];
    };
    // Operands of a type that depends on Arch: clang checks an asm's register sizes where
    // it reads the statement, and a unit built without AVX-512 (any program's own code,
    // which includes this header but runs the kernels through the dispatch units) has no
    // 512-bit "v" register; so the check waits for a VNNI set's instantiation.
    using Vec = typename DependentVec512<Arch>::type;
    Vec sum = acc;
    const Vec unsigned_quads = u;
    asm("vpdpbusd %2%{1to16%}, %1, %0"
        : "+v"(sum)
        : "v"(unsigned_quads), "m"(*reinterpret_cast<const Quad*>(quad)));
    return sum;
  } else {
    std::int32_t bytes;
    std::memcpy(&bytes, quad, sizeof bytes);
    return dot_u8s8<Arch>(acc, u, _mm512_set1_epi32(bytes));
  }
}

// Adds each row's parities (the eight-row kernel's lanes, one or two) and stores the tile's
// tokens (the padding ones left out) for the first `n_rows` rows (a sixteen-row copy's
// last group may be part padding).
template <class Arch, std::size_t P>
inline void store_token_lanes_rows(const float (&acc)[P][kRowsPerGroup][kTokenTile],
                                   const TokenTiles& act, std::size_t tile, float* y,
                                   std::size_t y_stride, std::size_t n_rows) noexcept {
  alignas(64) float rows[kRowsPerGroup][kTokenTile];
  for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
    __m512 row = _mm512_load_ps(acc[0][r]);
    if constexpr (P == 2) row = _mm512_add_ps(row, _mm512_load_ps(acc[1][r]));
    _mm512_store_ps(rows[r], row);
  }
  const std::size_t first = tile * kTokenTile;
  const std::size_t count = act.n_tokens - first < kTokenTile ? act.n_tokens - first : kTokenTile;
  for (std::size_t t = 0; t < count; ++t) {
    for (std::size_t r = 0; r < n_rows; ++r) y[t * y_stride + r] = rows[r][t];
  }
}

// -128 x each row's weighted sum of its weights: what the tokens' + 128 adds to each dot.
inline void store_offsets(std::int32_t* out, __m256i weighted_sums) noexcept {
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(out),
      _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(weighted_sums, 7)));
}

// The eight rows' f16 factors as floats, to broadcast.
inline void store_row_factors(float* out, const f16_bits* factors) noexcept {
  _mm256_storeu_ps(out,
                   _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(factors))));
}

// The step every tile function repeats, once per sub-block: its G quads of the tile's
// sixteen tokens (`x_quads`, 64 bytes apart, made unsigned by the flip) dotted with the
// eight rows' quads broadcast (row r's quad g at w_quads + g * kQuadStride + 4 r), then
// each row's exact int32 times its sub-block scale (scales[r]) added to total[r].
template <class Arch, std::size_t G, std::size_t kQuadStride = kRowsPerGroup * 4>
inline void add_scaled_sub_block(__m512i (&total)[kRowsPerGroup], const std::int8_t* x_quads,
                                 const std::int8_t* w_quads, const std::int32_t* scales) noexcept {
  constexpr std::size_t R = kRowsPerGroup;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i sub[R];
  for (auto& v : sub) v = _mm512_setzero_si512();
  for (std::size_t g = 0; g < G; ++g) {
    const __m512i x = _mm512_xor_si512(load512<Arch>(x_quads + g * 64), flip);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      sub[r] = dot_u8s8_broadcast<Arch>(sub[r], x, w_quads + g * kQuadStride + 4 * r);
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r) {
    total[r] = _mm512_add_epi32(total[r], _mm512_mullo_epi32(sub[r], _mm512_set1_epi32(scales[r])));
  }
}

// One group's block of Q6_K unpacked for the token-lanes kernel (in a call's scratch).
struct Q6KTokenLanesBlock {
  // q - 32 of value 128h + 64n + 32s + 4g + e of row r at [h][s][n][g][r][e]: the order
  // the copy's bytes unpack in, 64 bytes at a time; a quad of one row is 4 bytes.
  std::int8_t quants[2][2][2][8][kRowsPerGroup][4];
  std::int32_t scales[16][kRowsPerGroup];  // [sub-block of 16][row], widened to broadcast
  // -128 x sum over the sub-blocks of parity p of scale x their weights' sum: [p][row].
  std::int32_t offsets[2][kRowsPerGroup];
  float d[kRowsPerGroup];
};

template <class Arch>
inline void unpack_token_lanes(const BlockQ6KRows8& wb, Q6KTokenLanesBlock& out) noexcept {
  const __m512i thirty_two = _mm512_set1_epi8(32), ones = _mm512_set1_epi8(1);
  __m256i sums[16];  // per sub-block, the sums of its weights by row
  for (int h = 0; h < 2; ++h) {
    for (int s = 0; s < 2; ++s) {
      __m512i dots[2][2] = {};  // [n][g / 4]: per lane (g % 2, r), sums of four weights
      for (int p = 0; p < 4; ++p) {
        __m512i lo, hi;
        q6k_copy_quants<Arch>(load512<Arch>(wb.ql[2 * h + s][2 * p]),
                              load512<Arch>(wb.qh[h][2 * p]), s, lo, hi);
        lo = _mm512_sub_epi8(lo, thirty_two);
        hi = _mm512_sub_epi8(hi, thirty_two);
        _mm512_storeu_si512(out.quants[h][s][0][2 * p], lo);
        _mm512_storeu_si512(out.quants[h][s][1][2 * p], hi);
        dots[0][p / 2] = dot_u8s8<Arch>(dots[0][p / 2], ones, lo);
        dots[1][p / 2] = dot_u8s8<Arch>(dots[1][p / 2], ones, hi);
      }
      for (int n = 0; n < 2; ++n) {
        for (int gg = 0; gg < 2; ++gg) {
          const __m512i v = dots[n][gg];
          sums[8 * h + 4 * n + 2 * s + gg] =
              _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
        }
      }
    }
  }
  __m256i offsets[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int j = 0; j < 16; ++j) {
    std::int64_t bytes;
    std::memcpy(&bytes, wb.scales[j], sizeof bytes);
    const __m256i scale = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(bytes));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.scales[j]), scale);
    __m256i& offset = offsets[(j % 8) / 4];
    offset = _mm256_add_epi32(offset, _mm256_mullo_epi32(scale, sums[j]));
  }
  for (int n = 0; n < 2; ++n) store_offsets(out.offsets[n], offsets[n]);
  store_row_factors(out.d, wb.d);
}

// One group's eight rows times one tile of sixteen tokens over every block.
template <class Arch>
inline void token_lanes_tile(const Q6KTokenLanesBlock* w, const TokenTiles& act, std::size_t tile,
                             float* y, std::size_t y_stride, std::size_t n_rows) noexcept {
  constexpr std::size_t R = kRowsPerGroup;
  // [parity][row], a lane per token: in memory, as the dots need the registers and these
  // are touched once per block.
  alignas(64) float acc[2][R][kTokenTile] = {};
  for (std::size_t b = 0; b < act.nblocks; ++b) {
    const Q6KTokenLanesBlock& wb = w[b];
    const __m512 token_d = _mm512_loadu_ps(act.block_scales(tile, b));
    for (int n = 0; n < 2; ++n) {  // the parity: sub-blocks 8h + 4n + 2s + gg
      __m512i total[R];
      for (std::size_t r = 0; r < R; ++r) total[r] = _mm512_set1_epi32(wb.offsets[n][r]);
      for (int h = 0; h < 2; ++h) {
        const std::int8_t* chunk = act.chunk(tile, 4 * b + 2 * h + n);
        for (int s = 0; s < 2; ++s) {
          for (int gg = 0; gg < 2; ++gg) {
            add_scaled_sub_block<Arch, 4>(total, chunk + (8 * s + 4 * gg) * 64,
                                          wb.quants[h][s][n][4 * gg][0],
                                          wb.scales[8 * h + 4 * n + 2 * s + gg]);
          }
        }
      }
      // The eight-row kernel's float steps: (d x the token's d) x the sum, added per block.
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) {
        _mm512_store_ps(acc[n][r],
                        _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(wb.d[r]), token_d),
                                        _mm512_cvtepi32_ps(total[r]), _mm512_load_ps(acc[n][r])));
      }
    }
  }
  store_token_lanes_rows<Arch, 2>(acc, act, tile, y, y_stride, n_rows);
}

// One group's block of Q4_K or Q5_K unpacked for the token-lanes kernel.
struct WithMinsTokenLanesBlock {
  // The quant of value 64c + 32n + 4g + e (sub-block 2c + n) of row r at [c][n][g][r][e]:
  // the copy's qs bytes split into nibbles (and Q5_K's fifth bits added) in place.
  std::int8_t quants[4][2][8][kRowsPerGroup][4];
  std::int32_t scales[8][kRowsPerGroup];  // [sub-block][row], widened to broadcast
  // The mins of sub-blocks 2i and 2i + 1 as the two words of a dword: [i][row].
  std::int32_t min_pairs[4][kRowsPerGroup];
  // -128 x sum over the sub-blocks of parity n of scale x their quants' sum: [n][row].
  std::int32_t offsets[2][kRowsPerGroup];
  float d[kRowsPerGroup], dmin[kRowsPerGroup];
};

template <class Arch, class Rows8>
  requires std::is_same_v<Rows8, BlockQ4KRows8> || std::is_same_v<Rows8, BlockQ5KRows8>
inline void unpack_token_lanes(const Rows8& wb, WithMinsTokenLanesBlock& out) noexcept {
  constexpr bool kFifthBit = std::is_same_v<Rows8, BlockQ5KRows8>;
  const __m512i nibble = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
  const __m512i ones = _mm512_set1_epi8(1);
  __m256i offsets[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int c = 0; c < 4; ++c) {
    __m512i dots[2] = {};  // [n]: per lane (g % 2, r), sums of four quants
    for (int p = 0; p < 4; ++p) {
      const __m512i q = load512<Arch>(wb.qs[c][2 * p]);
      __m512i lo = _mm512_and_si512(q, nibble);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), nibble);
      if constexpr (kFifthBit) {
        const __m512i qh = load512<Arch>(wb.qh[2 * p]);
        const __m512i bit_lo = _mm512_set1_epi8(static_cast<char>(1 << (2 * c)));
        const __m512i bit_hi = _mm512_set1_epi8(static_cast<char>(2 << (2 * c)));
        lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, bit_lo), lo, sixteen);
        hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh, bit_hi), hi, sixteen);
      }
      _mm512_storeu_si512(out.quants[c][0][2 * p], lo);
      _mm512_storeu_si512(out.quants[c][1][2 * p], hi);
      dots[0] = dot_u8s8<Arch>(dots[0], ones, lo);
      dots[1] = dot_u8s8<Arch>(dots[1], ones, hi);
    }
    for (int n = 0; n < 2; ++n) {
      const __m256i sums =  // per row, its sub-block's 32 quants
          _mm256_add_epi32(_mm512_castsi512_si256(dots[n]), _mm512_extracti64x4_epi64(dots[n], 1));
      const __m256i scale = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.scales[2 * c + n])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.scales[2 * c + n]), scale);
      offsets[n] = _mm256_add_epi32(offsets[n], _mm256_mullo_epi32(scale, sums));
    }
  }
  for (int n = 0; n < 2; ++n) store_offsets(out.offsets[n], offsets[n]);
  for (int i = 0; i < 4; ++i) {
    const __m256i even =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.mins[2 * i])));
    const __m256i odd =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.mins[2 * i + 1])));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.min_pairs[i]),
                        _mm256_or_si256(even, _mm256_slli_epi32(odd, 16)));
  }
  store_row_factors(out.d, wb.d);
  store_row_factors(out.dmin, wb.dmin);
}

// One group's eight rows times one tile of sixteen tokens over every block. The eight-row
// kernel (rows8_with_mins_tile_512) sums a row's even sub-blocks in one lane and its odd
// ones in the other, and its min terms by halves (sub-blocks 0-3 with the even lane, 4-7
// with the odd): per parity n, d x the one minus dmin x the other, times the token's d.
template <class Arch>
inline void token_lanes_tile(const WithMinsTokenLanesBlock* w, const TokenTiles& act,
                             std::size_t tile, float* y, std::size_t y_stride,
                             std::size_t n_rows) noexcept {
  constexpr std::size_t R = kRowsPerGroup;
  alignas(64) float acc[2][R][kTokenTile] = {};  // [parity][row], a lane per token
  for (std::size_t b = 0; b < act.nblocks; ++b) {
    const WithMinsTokenLanesBlock& wb = w[b];
    const __m512 token_d = _mm512_loadu_ps(act.block_scales(tile, b));
    const std::int16_t* pair_sums = act.block_pair_sums(tile, b);
    for (int n = 0; n < 2; ++n) {  // the parity: sub-blocks 2c + n
      __m512i total[R];
      for (std::size_t r = 0; r < R; ++r) total[r] = _mm512_set1_epi32(wb.offsets[n][r]);
      for (int c = 0; c < 4; ++c) {
        add_scaled_sub_block<Arch, 8>(total, act.chunk(tile, 4 * b + c) + 8 * n * 64,
                                      wb.quants[c][n][0][0], wb.scales[2 * c + n]);
      }
      // The min term of sub-blocks 4n .. 4n + 3: pairs 2n and 2n + 1.
      const __m512i sums_a = load512<Arch>(pair_sums + 2 * n * 2 * kTokenTile);
      const __m512i sums_b = load512<Arch>(pair_sums + (2 * n + 1) * 2 * kTokenTile);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < R; ++r) {
        __m512i mins = madd16_acc512<Arch>(_mm512_setzero_si512(), sums_a,
                                           _mm512_set1_epi32(wb.min_pairs[2 * n][r]));
        mins = madd16_acc512<Arch>(mins, sums_b, _mm512_set1_epi32(wb.min_pairs[2 * n + 1][r]));
        const __m512 row_sums =
            _mm512_fmsub_ps(_mm512_set1_ps(wb.d[r]), _mm512_cvtepi32_ps(total[r]),
                            _mm512_mul_ps(_mm512_set1_ps(wb.dmin[r]), _mm512_cvtepi32_ps(mins)));
        _mm512_store_ps(acc[n][r], _mm512_fmadd_ps(row_sums, token_d, _mm512_load_ps(acc[n][r])));
      }
    }
  }
  store_token_lanes_rows<Arch, 2>(acc, act, tile, y, y_stride, n_rows);
}

// One group's block of Q3_K unpacked for the token-lanes kernel.
struct Q3KTokenLanesBlock {
  // The quant (-4..3) of value 128h + 32j + 4g + e (sub-block 8h + 2j + g / 4) of row r at
  // [h][j][g][r][e]: the copy's 2-bit shifts and third bits, 64 bytes at a time.
  std::int8_t quants[2][4][8][kRowsPerGroup][4];
  std::int32_t scales[16][kRowsPerGroup];  // [sub-block of 16][row], -32..31
  std::int32_t offsets[kRowsPerGroup];     // -128 x sum of scale x the sub-block's quants
  float d[kRowsPerGroup];
};

template <class Arch>
inline void unpack_token_lanes(const BlockQ3KRows8& wb, Q3KTokenLanesBlock& out) noexcept {
  const __m512i three = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
  const __m512i ones = _mm512_set1_epi8(1);
  for (std::size_t j = 0; j < 16; ++j) {  // the copy keeps the scales in its kernel's lane order
    for (std::size_t r = 0; r < kRowsPerGroup; ++r)
      out.scales[j][r] = rows8_sub_block_byte(wb, r, j);
  }
  __m256i offset = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      __m512i dots[2] = {};  // [g / 4]: per lane (g % 2, r), sums of four quants
      for (int p = 0; p < 4; ++p) {
        __m512i level =
            _mm512_and_si512(_mm512_srli_epi16(load512<Arch>(wb.qs[h][2 * p]), 2 * j), three);
        const __m512i bit = _mm512_set1_epi8(static_cast<char>(1 << (4 * h + j)));
        // Without the third bit the quant is the level - 4.
        level = _mm512_mask_sub_epi8(
            level, _mm512_testn_epi8_mask(load512<Arch>(wb.hmask[2 * p]), bit), level, four);
        _mm512_storeu_si512(out.quants[h][j][2 * p], level);
        dots[p / 2] = dot_u8s8<Arch>(dots[p / 2], ones, level);
      }
      for (int k = 0; k < 2; ++k) {
        const __m256i sums = _mm256_add_epi32(_mm512_castsi512_si256(dots[k]),
                                              _mm512_extracti64x4_epi64(dots[k], 1));
        const __m256i scale =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(out.scales[8 * h + 2 * j + k]));
        offset = _mm256_add_epi32(offset, _mm256_mullo_epi32(scale, sums));
      }
    }
  }
  store_offsets(out.offsets, offset);
  store_row_factors(out.d, wb.d);
}

// One group's eight rows times one tile of sixteen tokens over every block. The eight-row
// kernel (rows8_two_bit_tile_512) adds a row's two lanes in integers per block: one exact
// sum per row and block, then (d x the token's d) x the sum.
template <class Arch>
inline void token_lanes_tile(const Q3KTokenLanesBlock* w, const TokenTiles& act, std::size_t tile,
                             float* y, std::size_t y_stride, std::size_t n_rows) noexcept {
  constexpr std::size_t R = kRowsPerGroup;
  alignas(64) float acc[1][R][kTokenTile] = {};  // [row], a lane per token
  for (std::size_t b = 0; b < act.nblocks; ++b) {
    const Q3KTokenLanesBlock& wb = w[b];
    const __m512 token_d = _mm512_loadu_ps(act.block_scales(tile, b));
    __m512i total[R];
    for (std::size_t r = 0; r < R; ++r) total[r] = _mm512_set1_epi32(wb.offsets[r]);
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 4; ++j) {
        // Values 128h + 32j .. + 31: quads 8 (j % 2) .. + 7 of chunk 2h + j / 2.
        const std::int8_t* quads = act.chunk(tile, 4 * b + 2 * h + j / 2) + 8 * (j % 2) * 64;
        for (int k = 0; k < 2; ++k) {
          add_scaled_sub_block<Arch, 4>(total, quads + 4 * k * 64, wb.quants[h][j][4 * k][0],
                                        wb.scales[8 * h + 2 * j + k]);
        }
      }
    }
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      _mm512_store_ps(acc[0][r],
                      _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(wb.d[r]), token_d),
                                      _mm512_cvtepi32_ps(total[r]), _mm512_load_ps(acc[0][r])));
    }
  }
  store_token_lanes_rows<Arch, 1>(acc, act, tile, y, y_stride, n_rows);
}

// One block of eight rows of IQ4_XS's sixteen-row copy (quant/rows16.hpp), one half of a
// group, unpacked for the token-lanes kernel. The decode kernel (rows16_512) sums a row's
// super-block in integers, sub-block scales and all, and takes one float step per block:
// one exact integer per row and block here too.
struct IQ4XSTokenLanesBlock {
  // The level of value 32j + 4g + e of row r at [j][g][r][e]: the copy's nibbles looked up.
  std::int8_t levels[8][8][kRowsPerGroup][4];
  std::int32_t scales[8][kRowsPerGroup];  // s_j - 32 of sub-block j: [j][row]
  std::int32_t offsets[kRowsPerGroup];    // -128 x sum of scale x the sub-block's levels
  float d[kRowsPerGroup];
};

// Rows 8 half .. 8 half + 7 of the copy's group block.
template <class Arch>
inline void unpack_token_lanes(const BlockIQ4XSRows16& blk, std::size_t half,
                               IQ4XSTokenLanesBlock& out) noexcept {
  const std::size_t r0 = half * kRowsPerGroup;
  const __m512i table =
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m512i nibble = _mm512_set1_epi8(0x0F), ones = _mm512_set1_epi8(1);
  __m256i offset = _mm256_setzero_si256();
  for (int j = 0; j < 8; ++j) {
    __m512i dots = _mm512_setzero_si512();  // per lane (c % 2, r): sums of four levels
    for (int c = 0; c < 4; c += 2) {
      // Quads c and c + 1 of the half's rows: their low nibbles are values 4c + e and
      // 4c + 4 + e of the sub-block, the high nibbles 16 more.
      const __m512i q = _mm512_inserti64x4(
          _mm512_castsi256_si512(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs[j][c][r0]))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs[j][c + 1][r0])), 1);
      const __m512i lo = _mm512_shuffle_epi8(table, _mm512_and_si512(q, nibble));
      const __m512i hi =
          _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), nibble));
      _mm512_storeu_si512(out.levels[j][c], lo);
      _mm512_storeu_si512(out.levels[j][c + 4], hi);
      dots = dot_u8s8<Arch>(dot_u8s8<Arch>(dots, ones, lo), ones, hi);
    }
    const __m256i sums =  // per row, its sub-block's 32 levels
        _mm256_add_epi32(_mm512_castsi512_si256(dots), _mm512_extracti64x4_epi64(dots, 1));
    const __m256i scale =
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.scales[j] + r0)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.scales[j]), scale);
    offset = _mm256_add_epi32(offset, _mm256_mullo_epi32(scale, sums));
  }
  store_offsets(out.offsets, offset);
  store_row_factors(out.d, blk.d + r0);
}

// Eight rows times one tile of sixteen tokens over every block, with the decode kernel's
// float steps (rows16_tokens_512): (the sum x d) first, then times the token's d.
template <class Arch>
inline void token_lanes_tile(const IQ4XSTokenLanesBlock* w, const TokenTiles& act, std::size_t tile,
                             float* y, std::size_t y_stride, std::size_t n_rows) noexcept {
  // Without VNNI a dot is vpmaddubsw's pairs, and 2 x 255 x 127 would saturate them.
  static_assert(has_vnni_v<Arch>, "IQ4_XS's levels need vpdpbusd");
  constexpr std::size_t R = kRowsPerGroup;
  alignas(64) float acc[1][R][kTokenTile] = {};  // [row], a lane per token
  for (std::size_t b = 0; b < act.nblocks; ++b) {
    const IQ4XSTokenLanesBlock& wb = w[b];
    const __m512 token_d = _mm512_loadu_ps(act.block_scales(tile, b));
    __m512i total[R];
    for (std::size_t r = 0; r < R; ++r) total[r] = _mm512_set1_epi32(wb.offsets[r]);
    for (int j = 0; j < 8; ++j) {  // values 32j .. 32j + 31: quads 8 (j % 2) .. of chunk j / 2
      add_scaled_sub_block<Arch, 8>(total, act.chunk(tile, 4 * b + j / 2) + 8 * (j % 2) * 64,
                                    wb.levels[j][0][0], wb.scales[j]);
    }
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      _mm512_store_ps(acc[0][r], _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(total[r]),
                                                               _mm512_set1_ps(wb.d[r])),
                                                 token_d, _mm512_load_ps(acc[0][r])));
    }
  }
  store_token_lanes_rows<Arch, 1>(acc, act, tile, y, y_stride, n_rows);
}

// The unpacked block of each copy, and the copy's rows per group (unpacked eight at a time).
template <class Group>
struct TokenLanesBlockOf;
template <>
struct TokenLanesBlockOf<BlockQ6KRows8> {
  using type = Q6KTokenLanesBlock;
  static constexpr std::size_t kGroupRows = kRowsPerGroup;
};
template <>
struct TokenLanesBlockOf<BlockQ3KRows8> {
  using type = Q3KTokenLanesBlock;
  static constexpr std::size_t kGroupRows = kRowsPerGroup;
};
template <>
struct TokenLanesBlockOf<BlockQ4KRows8> {
  using type = WithMinsTokenLanesBlock;
  static constexpr std::size_t kGroupRows = kRowsPerGroup;
};
template <>
struct TokenLanesBlockOf<BlockQ5KRows8> {
  using type = WithMinsTokenLanesBlock;
  static constexpr std::size_t kGroupRows = kRowsPerGroup;
};
template <>
struct TokenLanesBlockOf<BlockIQ4XSRows16> {
  using type = IQ4XSTokenLanesBlock;
  static constexpr std::size_t kGroupRows = kRows16;
};

// WeightKernels::packed_rows8 of Q3_K, Q4_K, Q5_K and Q6_K and packed_rows16 of IQ4_XS on
// the AVX-512 sets without AMX (Q4_K and IQ4_XS: with VNNI): `n_rows` rows from the group at `w`,
// groups kGroupRows x row_bytes apart, times every token of `act`. Sixteen rows at a time (two
// groups of eight, or one of sixteen) are unpacked eight by eight into `scratch`
// (matrix_scratch_bytes), then every token tile passes over them while they stay in L2.
template <class Arch, class Group>
void token_lanes_512(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                     const TokenTiles& act, float* y, std::size_t y_stride,
                     std::byte* scratch) noexcept {
  using Unpacked = typename TokenLanesBlockOf<Group>::type;
  constexpr std::size_t kGroupRows = TokenLanesBlockOf<Group>::kGroupRows;
  constexpr std::size_t kEighthsPerGroup = kGroupRows / kRowsPerGroup, kEighthsAtOnce = 2;
  const std::size_t nblocks = act.nblocks;
  const std::size_t eighths = (n_rows + kRowsPerGroup - 1) / kRowsPerGroup;
  auto* unpacked = reinterpret_cast<Unpacked*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) &
                                               ~std::uintptr_t{63});
  for (std::size_t e0 = 0; e0 < eighths; e0 += kEighthsAtOnce) {
    const std::size_t e1 = e0 + kEighthsAtOnce < eighths ? e0 + kEighthsAtOnce : eighths;
    for (std::size_t e = e0; e < e1; ++e) {
      const auto* copy =
          reinterpret_cast<const Group*>(w + e / kEighthsPerGroup * kGroupRows * row_bytes);
      for (std::size_t b = 0; b < nblocks; ++b) {
        Unpacked& out = unpacked[(e - e0) * nblocks + b];
        if constexpr (kEighthsPerGroup == 1) {
          unpack_token_lanes<Arch>(copy[b], out);
        } else {
          unpack_token_lanes<Arch>(copy[b], e % kEighthsPerGroup, out);
        }
      }
    }
    for (std::size_t tile = 0; tile < act.tiles(); ++tile) {
      for (std::size_t e = e0; e < e1; ++e) {
        const std::size_t r0 = e * kRowsPerGroup;
        token_lanes_tile<Arch>(unpacked + (e - e0) * nblocks, act, tile,
                               y + tile * kTokenTile * y_stride + r0, y_stride,
                               n_rows - r0 < kRowsPerGroup ? n_rows - r0 : kRowsPerGroup);
      }
    }
  }
}

// What a call unpacks into its scratch, for `cols` values a row: within
// matrix_scratch_bytes(cols) (token_tiles.hpp).
template <class Group>
inline constexpr std::size_t token_lanes_scratch_bytes(std::size_t cols) noexcept {
  return 2 * (cols / QK_K) * sizeof(typename TokenLanesBlockOf<Group>::type) + 64;
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
