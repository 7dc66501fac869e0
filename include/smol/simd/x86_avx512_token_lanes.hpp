// AVX-512 prefill on the eight-row Q6_K copy (quant/rows8.hpp) with the tokens in the
// lanes: a vector holds one quad of sixteen tokens, and each dot broadcasts one row's quad.
//
// Why: the eight-row kernels (x86_avx512_rows8.hpp) put the rows in the lanes and
// broadcast each token's quads, and Q6_K's quants reach 63, so every two dots must be
// packed to words and scaled by a word dot before their sums outgrow a word: two vector
// ops a dot, where Q4_K needs 1.25, and on Zen 4 Q6_K ran at 60 % of Q4_K's pace. With the
// tokens in the lanes a sub-block's sums stay in int32, and its scale is one vpmulld per
// sixteen tokens: 1.5 ops a dot (bench/README.md has the count and a prototype's figures).
//
// The activations are the matrix unit's TokenTiles (token_tiles.hpp, made once per
// matmul: 16 tokens' quads side by side, AMX's B-tile order). vpdpbusd takes one operand
// unsigned and only the other broadcast, so the tokens' quants go in unsigned, x + 128
// (one xor per load, shared by eight rows), and the weights signed, q - 32, each call
// unpacking its rows' blocks to bytes once for all its token tiles. The 128 x sum of a
// sub-block's weights that the offset adds is taken off, scaled, before the first dot.
//
// Same bits as the eight-row kernel (rows8_q6k_tile_512), so decode, the few-token passes
// that take that kernel and this prefill give a token the same row: per row and block it
// forms the same two exact integers (the eight-row kernel's lanes of parity 0, sub-blocks
// 0-3 and 8-11, and of parity 1, the others), takes the same float steps on each, and
// adds the two parities' sums at the end.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/token_tiles.hpp"
#include "smol/simd/x86_avx512_rows8.hpp"
#include "smol/simd/x86_avx512_tiles.hpp"

namespace smol::simd::x86 {

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
inline void unpack_q6k_token_lanes(const BlockQ6KRows8& wb, Q6KTokenLanesBlock& out) noexcept {
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
  for (int n = 0; n < 2; ++n) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.offsets[n]),
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offsets[n], 7)));
  }
  _mm256_storeu_ps(out.d, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d))));
}

// One group's eight rows times one tile of sixteen tokens over every block.
template <class Arch>
inline void q6k_token_lanes_tile(const Q6KTokenLanesBlock* w, const TokenTiles& act,
                                 std::size_t tile, float* y, std::size_t y_stride) noexcept {
  constexpr std::size_t R = kRowsPerGroup;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
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
            __m512i sub[R];
            for (auto& v : sub) v = _mm512_setzero_si512();
            for (int g = 4 * gg; g < 4 * gg + 4; ++g) {
              const __m512i x = _mm512_xor_si512(load512<Arch>(chunk + (8 * s + g) * 64), flip);
#pragma GCC unroll 8
              for (std::size_t r = 0; r < R; ++r) {
                std::int32_t quad;
                std::memcpy(&quad, wb.quants[h][s][n][g][r], sizeof quad);
                sub[r] = dot_u8s8<Arch>(sub[r], x, _mm512_set1_epi32(quad));
              }
            }
            const int j = 8 * h + 4 * n + 2 * s + gg;
#pragma GCC unroll 8
            for (std::size_t r = 0; r < R; ++r) {
              total[r] = _mm512_add_epi32(
                  total[r], _mm512_mullo_epi32(sub[r], _mm512_set1_epi32(wb.scales[j][r])));
            }
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
  alignas(64) float rows[R][kTokenTile];
  for (std::size_t r = 0; r < R; ++r) {
    _mm512_store_ps(rows[r], _mm512_add_ps(_mm512_load_ps(acc[0][r]), _mm512_load_ps(acc[1][r])));
  }
  const std::size_t first = tile * kTokenTile;
  const std::size_t count = act.n_tokens - first < kTokenTile ? act.n_tokens - first : kTokenTile;
  for (std::size_t t = 0; t < count; ++t) {
    for (std::size_t r = 0; r < R; ++r) y[t * y_stride + r] = rows[r][t];
  }
}

// WeightKernels::matrix_rows8 of Q6_K on the AVX-512 sets without AMX: `n_rows` rows (a
// multiple of 8) from the group at `w`, groups 8 * row_bytes apart, times every token of
// `act`. Two groups at a time are unpacked into `scratch` (matrix_scratch_bytes), then
// every token tile passes over them while they stay in L2.
template <class Arch>
void rows8_q6k_token_lanes_512(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                               const TokenTiles& act, float* y, std::size_t y_stride,
                               std::byte* scratch) noexcept {
  constexpr std::size_t kGroupsAtOnce = 2;
  const std::size_t nblocks = act.nblocks, groups = n_rows / kRowsPerGroup;
  auto* unpacked = reinterpret_cast<Q6KTokenLanesBlock*>(
      (reinterpret_cast<std::uintptr_t>(scratch) + 63) & ~std::uintptr_t{63});
  for (std::size_t g0 = 0; g0 < groups; g0 += kGroupsAtOnce) {
    const std::size_t g1 = g0 + kGroupsAtOnce < groups ? g0 + kGroupsAtOnce : groups;
    for (std::size_t g = g0; g < g1; ++g) {
      const auto* copy = reinterpret_cast<const BlockQ6KRows8*>(w + g * kRowsPerGroup * row_bytes);
      for (std::size_t b = 0; b < nblocks; ++b) {
        unpack_q6k_token_lanes<Arch>(copy[b], unpacked[(g - g0) * nblocks + b]);
      }
    }
    for (std::size_t tile = 0; tile < act.tiles(); ++tile) {
      for (std::size_t g = g0; g < g1; ++g) {
        q6k_token_lanes_tile<Arch>(unpacked + (g - g0) * nblocks, act, tile,
                                   y + tile * kTokenTile * y_stride + g * kRowsPerGroup, y_stride);
      }
    }
  }
}

// What a call unpacks into its scratch, for `cols` values a row: within
// matrix_scratch_bytes(cols) (token_tiles.hpp).
inline constexpr std::size_t q6k_token_lanes_scratch_bytes(std::size_t cols) noexcept {
  return 2 * (cols / QK_K) * sizeof(Q6KTokenLanesBlock) + 64;
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
