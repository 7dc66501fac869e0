// AMX-INT8 prefill tiles for the 32-value block types (Q4_0, Q8_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL): per 32 values, one tile multiply of 16 tokens x 32 values x 16 rows.
//
// Each of these blocks has its own float scale, so the products are summed per block and
// the floats applied after each multiply (the K-quants instead fold their integer
// sub-block scales into the weights and multiply 64 values at a time: x86_amx.hpp, as
// IQ4_XS's eight 32-value sub-blocks do with their integer scales: kernels_iq4.hpp).
// The roles are the transpose of the K-quants' kernel: the activations are the A operand,
// packed from their Q8_0 / Q8_1 blocks once per matmul as Block32Tiles (simd/token_tiles.hpp:
// one token's 32 quants per tile row, a tile's 16 rows contiguous, the scales as floats;
// TDPBSUD / TDPBSSD take A signed); the weights are the B operand,
// expanded once per call into AMX's order (for each 4 consecutive values, the 4 bytes of 16 rows
// side by side) with their scales as floats. A result tile row then holds one token's 16 rows,
// scaled by a vector of the rows' d and a broadcast of the token's d; the min terms (rows' m times
// the token's s) are summed apart, and a token's 16 rows leave as one 64-byte store.
//
// A token's float order depends on neither the number of tokens nor of rows (every
// token's sums are its own), as WeightKernels::tile_dots requires. Hand-written because
// xsimd has no tile instructions.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/quant/rows16.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/token_tiles.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_avx512_rows16.hpp"

namespace smol::simd::x86 {

// Tile registers (literals below), two blocks at a time: 0 and 3 their sums, 1 and 4 the
// tokens' quants (16 rows x 32 bytes), 2 and 5 the weights (8 rows x 64 bytes).
template <class Arch>
inline void configure_amx_block32_tiles() noexcept {
  constexpr TileShape sums{16, 64}, tokens{16, 32}, weights{8, 64}, unused{};
  configure_tiles<Arch>({sums, tokens, weights, sums, tokens, weights, unused, unused});
}

// Tile stores are asm that names no memory: this tells the compiler that the tiles
// wrote `object` (read it again), without the full barrier's cost of reloading
// everything else, the running sums included.
template <class Arch, class T>
inline void written_by_tiles(T& object) noexcept {
  __asm__ volatile("" : "+m"(object));
}

// A thread's working memory for one call: the expanded weights of its rows and their
// scales. Kept between calls (prefill calls this for every chunk of rows of every matrix).
struct Block32Scratch {
  std::vector<std::uint8_t> planes;  // [16-row group][block][8 quads][16 rows][4]
  std::vector<float> wd, wm;         // [16-row group][block][16 rows]
};

inline Block32Scratch& block32_scratch() noexcept {
  thread_local Block32Scratch scratch;
  return scratch;
}

// One token tile's running sums for one group of sixteen rows: token t's sixteen rows in
// token[t]. Passed and returned by value and only ever indexed in unrolled loops, so that
// GCC keeps all sixteen in registers (indexed by a loop it did not unroll, and live
// across a memcpy call, they were on the stack, and every block loaded and stored each).
struct TileSums {
  __m512 token[kTokenTile];
};

// sums += block b's integer sums (a result tile: token t's sixteen rows at 16 t) times the
// rows' d and the token's d: the references' float steps, in their order.
template <class Arch>
[[gnu::always_inline]] inline TileSums add_block(TileSums sums, const std::int32_t* block_sums,
                                                 const float* wd, const float* yd) noexcept {
  const __m512 d = _mm512_loadu_ps(wd);
#pragma GCC unroll 16
  for (std::size_t t = 0; t < kTokenTile; ++t) {
    const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(block_sums + 16 * t)), d);
    sums.token[t] = _mm512_fmadd_ps(v, _mm512_set1_ps(yd[t]), sums.token[t]);
  }
  return sums;
}

// The min terms of the types with a min, summed apart as the references do: mins[t][r] =
// sum over the blocks of wm[b][r] * ys[b][t], in block order. Apart from the tile loop
// too: there, with the tile unit busy, each vector step costs about three times as much,
// and this one took a quarter of the Q4_1 tile loop's time.
template <class Arch>
inline void min_terms(const float* wm, const float* ys, std::size_t nblocks,
                      float (&mins)[kTokenTile][16]) noexcept {
  __m512 m[kTokenTile];
#pragma GCC unroll 16
  for (std::size_t t = 0; t < kTokenTile; ++t) m[t] = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const __m512 w = _mm512_loadu_ps(wm + b * kTokenTile);
#pragma GCC unroll 16
    for (std::size_t t = 0; t < kTokenTile; ++t) {
      m[t] = _mm512_fmadd_ps(w, _mm512_set1_ps(ys[b * kTokenTile + t]), m[t]);
    }
  }
#pragma GCC unroll 16
  for (std::size_t t = 0; t < kTokenTile; ++t) _mm512_storeu_ps(mins[t], m[t]);
}

// Blocks b and b + 1 (when `two`) of a token tile (`tokens(b)`: 16 rows of 32 quants)
// times the weights' planes, into out[0] and out[1]: signed tokens times unsigned
// weights where there is a min, signed times signed otherwise.
template <class Arch, bool kMin, class Tokens>
[[gnu::always_inline]] inline void multiply_pair(Tokens tokens, const std::uint8_t* planes,
                                                 std::size_t b, bool two,
                                                 std::int32_t (&out)[2][256]) noexcept {
  _tile_loadd(1, tokens(b), 32);
  _tile_loadd(2, planes + b * 512, 64);
  _tile_zero(0);
  if (two) {
    _tile_loadd(4, tokens(b + 1), 32);
    _tile_loadd(5, planes + (b + 1) * 512, 64);
    _tile_zero(3);
  }
  if constexpr (kMin) {
    _tile_dpbsud(0, 1, 2);
    if (two) _tile_dpbsud(3, 4, 5);
  } else {
    _tile_dpbssd(0, 1, 2);
    if (two) _tile_dpbssd(3, 4, 5);
  }
  _tile_stored(0, out[0], 64);
  if (two) _tile_stored(3, out[1], 64);
  written_by_tiles<Arch>(out);
}

// The tile loop for `n_rows` rows: y[t * y_stride + r] = row r . token t. The weights'
// planes (512 bytes per block of sixteen rows, AMX's order: signed levels, or unsigned
// ones for the types with a min) and their scales are in the thread's scratch.
//
// The tile unit does one thing at a time, and per block it loads the tokens and the
// weights, multiplies, and stores the 16 x 16 sums for the float steps (the store costs
// about as much as the multiply, and a multiply of 32 values as much as one of 64): so
// every block is one multiply only (the levels are stored signed rather than with an
// offset taken off by a second multiply). The float steps of a pair of blocks are issued
// while the next pair is in the tile unit, though as measured the two did not overlap:
// per block, the tile unit's time plus the vector unit's is the floor, whatever the
// order (bench/HISTORY.md measures the parts: "The 32-value types' tokens packed once per
// matmul", "Where a 32-value block's time goes on AMX"). Nothing in the loop calls out or
// reaches memory the compiler cannot see through: a call (a thread-local's address)
// would move the sixteen running sums to the stack on every block.
template <class Arch, bool kMin>
void amx_multiply_blocks32(Block32Scratch& s, std::size_t n_rows, const Block32Tiles& x, float* y,
                           std::size_t y_stride) {
  const std::size_t groups = (n_rows + kTokenTile - 1) / kTokenTile, nblocks = x.nblocks;
  const std::uint8_t* all_planes = s.planes.data();
  const float* all_wd = s.wd.data();
  const float* all_wm = s.wm.data();

  // results[slot]: the sums of a pair of blocks; two slots, so that a pair's sums are
  // read back while the next pair multiplies.
  alignas(64) std::int32_t results[2][2][256];
  configure_amx_block32_tiles<Arch>();
  memory_barrier<Arch>();  // the planes are stored before the tiles read them
  for (std::size_t tile = 0; tile < x.tiles(); ++tile) {
    const std::size_t t0 = tile * kTokenTile, nt = std::min(kTokenTile, x.n_tokens - t0);
    const float* yd = x.block_d(tile);
    const float* ys = kMin ? x.block_s(tile) : nullptr;
    const std::int8_t* tile_quants = x.block_quants(tile, 0);
    const auto tokens = [tile_quants](std::size_t b) { return tile_quants + b * kTokenTile * 32; };
    for (std::size_t g = 0; g < groups; ++g) {
      const std::uint8_t* planes = all_planes + g * nblocks * 512;
      const float* wd = all_wd + g * nblocks * kTokenTile;
      alignas(64) float mins[kTokenTile][16];
      if constexpr (kMin) min_terms<Arch>(all_wm + g * nblocks * kTokenTile, ys, nblocks, mins);
      TileSums sums;
#pragma GCC unroll 16
      for (std::size_t t = 0; t < kTokenTile; ++t) sums.token[t] = _mm512_setzero_ps();
      // Pair b multiplies while pair b - 2's sums become floats.
      for (std::size_t b = 0; b < nblocks + 2; b += 2) {
        if (b < nblocks) {
          multiply_pair<Arch, kMin>(tokens, planes, b, b + 1 < nblocks, results[(b / 2) % 2]);
        }
        if (b == 0) continue;
        const std::size_t done = b - 2;
        const auto& pair = results[(done / 2) % 2];
        sums = add_block<Arch>(sums, pair[0], wd + done * kTokenTile, yd + done * kTokenTile);
        if (done + 1 < nblocks) {
          sums = add_block<Arch>(sums, pair[1], wd + (done + 1) * kTokenTile,
                                 yd + (done + 1) * kTokenTile);
        }
      }
      const std::size_t nr = std::min(kTokenTile, n_rows - g * kTokenTile);
      const __mmask16 rows = static_cast<__mmask16>((1u << nr) - 1);
      // Every t, not t < nt: an index the compiler cannot unroll would move `sums` into memory.
#pragma GCC unroll 16
      for (std::size_t t = 0; t < kTokenTile; ++t) {
        if (t < nt) {
          __m512 v = sums.token[t];
          if constexpr (kMin) v = _mm512_add_ps(v, _mm512_load_ps(mins[t]));
          _mm512_mask_storeu_ps(y + (t0 + t) * y_stride + g * kTokenTile, rows, v);
        }
      }
    }
  }
  _tile_release();
}

// y[t * y_stride + r] = row r . token t for `n_rows` rows `row_bytes` apart and the
// tokens of `x`. `levels(block)` gives the block's 32 integer levels as bytes in value
// order: unsigned for the types with a min (dotted with Q8_1 blocks, whose s carries the
// min term), signed otherwise; `scale(block)` their float scale.
template <class Arch, class Block, class Levels, class Scale>
void amx_tile_dots_blocks32(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                            const Block32Tiles& x, float* y, std::size_t y_stride, Levels levels,
                            Scale scale) {
  constexpr bool kMin = requires(const Block& b) {
    b.m;
  };
  const std::size_t nblocks = x.nblocks;
  const std::size_t groups = (n_rows + kTokenTile - 1) / kTokenTile;
  Block32Scratch& s = block32_scratch();
  s.planes.resize(groups * nblocks * 512);
  s.wd.resize(groups * nblocks * kTokenTile);
  s.wm.resize(groups * nblocks * kTokenTile);

  // The weights, once: quad q of row r's block b goes to bytes 64 q + 4 r of the block's
  // 512; rows past n_rows are zeros, their results dropped.
  const __m256i quad_offsets = _mm256_setr_epi32(0, 64, 128, 192, 256, 320, 384, 448);
  for (std::size_t g = 0; g < groups; ++g) {
    for (std::size_t r = 0; r < kTokenTile; ++r) {
      const std::size_t row = g * kTokenTile + r;
      const auto* blocks = reinterpret_cast<const Block*>(w + row * row_bytes);
      for (std::size_t b = 0; b < nblocks; ++b) {
        std::uint8_t* plane = s.planes.data() + (g * nblocks + b) * 512 + 4 * r;
        const std::size_t at = (g * nblocks + b) * kTokenTile + r;
        if (row < n_rows) {
          _mm256_i32scatter_epi32(plane, quad_offsets, levels(blocks[b]), 1);
          s.wd[at] = scale(blocks[b]);
          if constexpr (kMin) s.wm[at] = f16_to_f32(blocks[b].m);
        } else {
          _mm256_i32scatter_epi32(plane, quad_offsets, _mm256_setzero_si256(), 1);
          s.wd[at] = s.wm[at] = 0.0f;
        }
      }
    }
  }

  amx_multiply_blocks32<Arch, kMin>(s, n_rows, x, y, y_stride);
}

// The same on Q4_1, Q4_0, IQ4_NL, Q5_0 or Q5_1 rows interleaved by sixteen
// (quant/rows16.hpp), whose byte order is the planes' already: splitting each 64-byte
// vector of nibble pairs into its low and high nibbles gives quads q and q + 4 of all
// sixteen rows, with no scatter (Q4_0's levels are its nibbles minus 8, IQ4_NL's a byte
// shuffle of its table; Q5's nibbles take their fifth bits as the decode kernel merges
// them, then Q5_0's levels are the quants minus 16). Decode
// (matvec) and prefill then read one copy, and a token's result is the same bit for bit
// (the float steps are the references').
template <class Arch, class Group>
void amx_tile_dots_nibbles_rows16(const Group* copy, std::size_t n_rows, const Block32Tiles& x,
                                  float* y, std::size_t y_stride) {
  constexpr bool kMin =
      std::is_same_v<Group, BlockQ4_1Rows16> || std::is_same_v<Group, BlockQ5_1Rows16>;
  constexpr bool kTable = std::is_same_v<Group, BlockIQ4NLRows16>;
  static_assert(Group::kOffset == (kMin                ? 0
                                   : kTable            ? 128
                                   : kFifthBits<Group> ? 16
                                                       : 8) &&
                Group::kSubBlocks == 1);
  const std::size_t groups = (n_rows + kTokenTile - 1) / kTokenTile, nblocks = x.nblocks;
  Block32Scratch& s = block32_scratch();
  s.planes.resize(groups * nblocks * 512);
  s.wd.resize(groups * nblocks * kTokenTile);
  if constexpr (kMin) s.wm.resize(groups * nblocks * kTokenTile);
  const __m512i low = _mm512_set1_epi8(0x0F);
  // The signed levels of sixty-four nibbles (Q4_1's unsigned: its min is a term apart).
  const auto levels = [&](__m512i nibbles) {
    if constexpr (kTable) {
      return _mm512_shuffle_epi8(
          _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues))),
          nibbles);
    } else {
      return _mm512_sub_epi8(nibbles, _mm512_set1_epi8(Group::kOffset));
    }
  };
  for (std::size_t i = 0; i < groups * nblocks; ++i) {
    const Group& c = copy[i];
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(c.d)));
    std::uint8_t* plane = s.planes.data() + i * 512;
    if constexpr (kFifthBits<Group>) {
      __m512i quants[8];
      unsigned_quads<Arch>(c, 0, quants);  // x86_avx512_rows16.hpp: the decode kernel's own
      for (std::size_t q = 0; q < 8; ++q) _mm512_storeu_si512(plane + 64 * q, levels(quants[q]));
    } else {
      for (std::size_t q = 0; q < 4; ++q) {
        const __m512i v = _mm512_loadu_si512(c.qs[q]);
        const __m512i lows = _mm512_and_si512(v, low);
        const __m512i highs = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
        _mm512_storeu_si512(plane + 64 * q, levels(lows));
        _mm512_storeu_si512(plane + 64 * (q + 4), levels(highs));
      }
    }
    _mm512_storeu_ps(s.wd.data() + i * kTokenTile, d);
    if constexpr (kMin) {
      _mm512_storeu_ps(s.wm.data() + i * kTokenTile,
                       _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(c.m))));
    }
  }
  amx_multiply_blocks32<Arch, kMin>(s, n_rows, x, y, y_stride);
}

// The same on Q8_0 rows interleaved by sixteen: the copy's quants are the planes' order
// already, stored plus 128 (the sign bit flipped), so the planes are the copy with the
// sign bit flipped back and the scales made floats.
template <class Arch>
void amx_tile_dots_q8_0_rows16(const BlockQ8_0Rows16* copy, std::size_t n_rows,
                               const Block32Tiles& x, float* y, std::size_t y_stride) {
  static_assert(BlockQ8_0Rows16::kOffset == 128);
  const std::size_t groups = (n_rows + kTokenTile - 1) / kTokenTile, nblocks = x.nblocks;
  Block32Scratch& s = block32_scratch();
  s.planes.resize(groups * nblocks * 512);
  s.wd.resize(groups * nblocks * kTokenTile);
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  for (std::size_t i = 0; i < groups * nblocks; ++i) {
    std::uint8_t* plane = s.planes.data() + i * 512;
    for (std::size_t q = 0; q < 8; ++q) {
      _mm512_storeu_si512(plane + 64 * q,
                          _mm512_xor_si512(_mm512_loadu_si512(copy[i].qs[q]), sign));
    }
    _mm512_storeu_ps(
        s.wd.data() + i * kTokenTile,
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(copy[i].d))));
  }
  amx_multiply_blocks32<Arch, false>(s, n_rows, x, y, y_stride);
}

// amx_tile_dots_blocks32 as a WeightKernels::tile_dots_packed entry, for the blocks whose
// scale is their f16 `d`, with a default-made `Levels`.
template <class Arch, class Block, class Levels>
void amx_tile_dots_blocks32_entry(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                                  const Block32Tiles& x, float* y, std::size_t y_stride) {
  amx_tile_dots_blocks32<Arch, Block>(w, row_bytes, n_rows, x, y, y_stride, Levels{},
                                      [](const Block& b) { return f16_to_f32(b.d); });
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
