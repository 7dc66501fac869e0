// AMX-INT8 prefill tiles for the 32-value block types (Q4_0, Q8_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL), and for IQ4_XS, whose eight 32-value sub-blocks each have a scale of their own:
// per 32 values, one tile multiply of 16 tokens x 32 values x 16 rows.
//
// Each of these blocks has its own float scale, so the products are summed per block and
// the floats applied after each multiply (the K-quants instead fold their integer
// sub-block scales into the weights and multiply 64 values at a time: x86_amx.hpp).
// The roles are the transpose of the K-quants' kernel: the activations are the A operand,
// read straight from their Q8_0 / Q8_1 blocks, or from each 32 quants of IQ4_XS's Q8_K
// blocks (one token's 32 quants per tile row, the tokens x_stride blocks apart; TDPBSUD /
// TDPBSSD take A signed); the weights are the B operand, expanded once per call into
// AMX's order (for each 4 consecutive values, the 4 bytes of 16 rows side by side) with
// their scales as floats. A result tile row then holds one token's 16 rows, scaled by a
// vector of the rows' d (and min) and a broadcast of the token's d (and s), and leaves as
// one 64-byte store.
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
#include "smol/simd/x86_amx.hpp"

namespace smol::simd::x86 {

// Tile registers (literals below), two blocks at a time: 0 and 3 their sums, 1 and 4 the
// tokens' quants (16 rows x 32 bytes), 2 and 5 the weights (8 rows x 64 bytes); 6 a
// weights-shaped tile of one constant, for the copies stored with an offset.
template <class Arch>
inline void configure_amx_block32_tiles() noexcept {
  constexpr TileShape sums{16, 64}, tokens{16, 32}, weights{8, 64}, unused{};
  configure_tiles<Arch>({sums, tokens, weights, sums, tokens, weights, weights, unused});
}

// Tile loads and stores are asm that names no memory: these tell the compiler that the
// tiles read `object` (finish storing it first) or wrote it (read it again), without
// the full barrier's cost of reloading everything else, the accumulators included.
template <class Arch, class T>
inline void read_by_tiles(const T& object) noexcept {
  __asm__ volatile("" ::"m"(object));
}
template <class Arch, class T>
inline void written_by_tiles(T& object) noexcept {
  __asm__ volatile("" : "+m"(object));
}

// A thread's working memory for one call: the expanded weights of its rows and their
// scales, and a token tile's activation scales. Kept between calls (prefill calls this
// for every chunk of rows of every matrix).
struct Block32Scratch {
  std::vector<std::uint8_t> planes;  // [16-row group][block][8 quads][16 rows][4]
  std::vector<float> wd, wm;         // [16-row group][block][16 rows]
  std::vector<float> yd, ys;         // [block][16 tokens]
};

inline Block32Scratch& block32_scratch() noexcept {
  thread_local Block32Scratch scratch;
  return scratch;
}

// The 32-value blocks of a weight block: the block itself, or IQ4_XS's eight sub-blocks.
template <class Block>
inline constexpr std::size_t kBlocks32In = 1;
template <>
inline constexpr std::size_t kBlocks32In<BlockIQ4XS> = 8;

// 32-value block b of a token's activations (`row`, its first block): a Q8_0 / Q8_1
// block, or the b % 8-th 32 quants of Q8_K block b / 8, under that block's scale.
template <class Activation>
inline const std::int8_t* block32_quants(const Activation* row, std::size_t b) noexcept {
  if constexpr (std::is_same_v<Activation, BlockQ8K>) {
    return row[b / 8].qs + 32 * (b % 8);
  } else {
    return row[b].qs;
  }
}

// The d (and Q8_1's s) of every block of `nt` <= 16 tokens `x_stride` blocks apart, as
// floats [block][16 tokens], zeros past nt. The tile loop reads each once per row group,
// and every call (a chunk of rows) needs all of them: converted one by one they took a
// fifth of SmolLM2's prefill, so the 16 tokens' first four bytes of a block (d, and s or
// two quants) are gathered into one vector and converted by F16C, exactly as f16_to_f32.
template <class Arch, class Activation>
inline void token_block_scales(const Activation* x, std::size_t x_stride, std::size_t nt,
                               std::size_t nblocks, float* yd, float* ys) noexcept {
  if constexpr (std::is_same_v<Activation, BlockQ8K>) {  // float scales, one per 8 blocks
    for (std::size_t b = 0; b < nblocks; ++b) {
      for (std::size_t t = 0; t < kTokenTile; ++t) {
        yd[b * kTokenTile + t] = t < nt ? x[t * x_stride + b / 8].d : 0.0f;
      }
    }
  } else {
    static_assert(offsetof(Activation, d) == 0 && sizeof(Activation) >= 4);
    const __m512i offsets =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(static_cast<int>(x_stride * sizeof(Activation))));
    const __mmask16 tokens = static_cast<__mmask16>((1u << nt) - 1);
    for (std::size_t b = 0; b < nblocks; ++b) {
      const __m512i first_words =
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), tokens, offsets, x + b, 1);
      _mm512_storeu_ps(yd + b * kTokenTile, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(first_words)));
      if constexpr (std::is_same_v<Activation, BlockQ8_1>) {
        static_assert(offsetof(BlockQ8_1, s) == 2);
        _mm512_storeu_ps(
            ys + b * kTokenTile,
            _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(first_words, 16))));
      }
    }
  }
}

// The tile loop for `n_rows` rows: y[t * y_stride + r] = row r . token t. The weights'
// planes (512 bytes per block of sixteen rows, AMX's order) lie `block_bytes` apart from
// `planes` on (the thread's scratch, or a sixteen-row copy as it is); their scales are in
// the scratch's wd and wm. kOffset: the planes hold each level plus kOffset (Q8_0's copy:
// 128, Q4_0's: 8); a second tile multiply of the tokens by a tile of -kOffset adds
// -kOffset x each token block's quant sum to every row's sum, so the sums are the
// levels' exactly before they become floats (the tile unit has time to spare here: the
// float steps after each block are the slow part, and they stay as they are).
template <class Arch, class Activation, std::int32_t kOffset = 0>
void amx_multiply_blocks32(Block32Scratch& s, const std::uint8_t* planes_from,
                           std::size_t block_bytes, std::size_t n_rows, const Activation* x,
                           std::size_t x_stride, std::size_t nblocks, std::size_t n_tokens,
                           float* y, std::size_t y_stride) {
  constexpr bool kMin = std::is_same_v<Activation, BlockQ8_1>;
  const std::size_t groups = (n_rows + kTokenTile - 1) / kTokenTile;
  s.yd.resize(nblocks * kTokenTile);
  s.ys.resize(nblocks * kTokenTile);
  memory_barrier<Arch>();  // the planes are stored before the tile loads read them

  // results[slot][i]: the sums of the i-th block of a pair; two slots, so that a pair's
  // sums are read back while the next pair multiplies.
  alignas(64) std::int32_t results[2][2][256];
  alignas(64) std::int8_t partial[2][kTokenTile * 32];  // a last tile's tokens, zero-padded
  const long act_stride = static_cast<long>(x_stride * sizeof(Activation));
  configure_amx_block32_tiles<Arch>();
  if constexpr (kOffset != 0) {
    alignas(64) static constexpr auto minus_offset = [] {
      std::array<std::int8_t, 512> bytes{};
      bytes.fill(static_cast<std::int8_t>(-kOffset));
      return bytes;
    }();
    _tile_loadd(6, minus_offset.data(), 64);
  }
  for (std::size_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
    const std::size_t nt = std::min(kTokenTile, n_tokens - t0);
    token_block_scales<Arch>(x + t0 * x_stride, x_stride, nt, nblocks, s.yd.data(), s.ys.data());
    if (nt < kTokenTile) std::memset(partial, 0, sizeof(partial));
    // The tokens' quants of block b as tile 1 (i = 0) or 4 (i = 1).
    const auto load_tokens = [&](std::size_t b, int i) {
      const std::int8_t* from = block32_quants(x + t0 * x_stride, b);
      long stride = act_stride;
      if (nt < kTokenTile) {
        for (std::size_t t = 0; t < nt; ++t) {
          std::memcpy(partial[i] + 32 * t, block32_quants(x + (t0 + t) * x_stride, b), 32);
        }
        read_by_tiles<Arch>(partial[i]);
        from = partial[i];
        stride = 32;
      }
      if (i == 0) {
        _tile_loadd(1, from, stride);
      } else {
        _tile_loadd(4, from, stride);
      }
    };
    for (std::size_t g = 0; g < groups; ++g) {
      const std::uint8_t* planes = planes_from + g * nblocks * block_bytes;
      // Blocks b and b + 1 (when `two`) multiplied into results[slot].
      const auto multiply = [&](std::size_t b, bool two, std::size_t slot) {
        load_tokens(b, 0);
        _tile_loadd(2, planes + b * block_bytes, 64);
        _tile_zero(0);
        if (two) {
          load_tokens(b + 1, 1);
          _tile_loadd(5, planes + (b + 1) * block_bytes, 64);
          _tile_zero(3);
        }
        if constexpr (kMin || kOffset != 0) {  // signed tokens x unsigned weights
          _tile_dpbsud(0, 1, 2);
          if (two) _tile_dpbsud(3, 4, 5);
          if constexpr (kOffset != 0) {  // and the offsets taken off
            _tile_dpbssd(0, 1, 6);
            if (two) _tile_dpbssd(3, 4, 6);
          }
        } else {
          _tile_dpbssd(0, 1, 2);
          if (two) _tile_dpbssd(3, 4, 5);
        }
        _tile_stored(0, results[slot][0], 64);
        if (two) _tile_stored(3, results[slot][1], 64);
        written_by_tiles<Arch>(results[slot]);
      };
      __m512 acc[kTokenTile];
      for (auto& a : acc) a = _mm512_setzero_ps();
      const auto finish_block = [&](std::size_t b, const std::int32_t* sums) {
        const std::size_t at = (g * nblocks + b) * kTokenTile;
        const __m512 wd = _mm512_loadu_ps(s.wd.data() + at);
        [[maybe_unused]] __m512 wm = _mm512_setzero_ps();
        if constexpr (kMin) wm = _mm512_loadu_ps(s.wm.data() + at);
#pragma GCC unroll 16
        for (std::size_t t = 0; t < kTokenTile; ++t) {
          const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums + 16 * t)), wd);
          acc[t] = _mm512_fmadd_ps(v, _mm512_set1_ps(s.yd[b * kTokenTile + t]), acc[t]);
          if constexpr (kMin) {
            acc[t] = _mm512_fmadd_ps(wm, _mm512_set1_ps(s.ys[b * kTokenTile + t]), acc[t]);
          }
        }
      };
      const auto finish_pair = [&](std::size_t b, std::size_t slot) {
        finish_block(b, results[slot][0]);
        if (b + 1 < nblocks) finish_block(b + 1, results[slot][1]);
      };
      for (std::size_t b = 0; b < nblocks; b += 2) {
        multiply(b, b + 1 < nblocks, (b / 2) % 2);
        if (b > 0) finish_pair(b - 2, (b / 2 - 1) % 2);
      }
      const std::size_t last = (nblocks - 1) / 2 * 2;
      finish_pair(last, (last / 2) % 2);
      const std::size_t nr = std::min(kTokenTile, n_rows - g * kTokenTile);
      const __mmask16 rows = static_cast<__mmask16>((1u << nr) - 1);
      for (std::size_t t = 0; t < nt; ++t) {
        _mm512_mask_storeu_ps(y + (t0 + t) * y_stride + g * kTokenTile, rows, acc[t]);
      }
    }
  }
  _tile_release();
}

// y[t * y_stride + r] = row r . token t for `n_rows` rows `row_bytes` apart and
// `n_tokens` activation rows `x_stride` blocks apart. `levels(block, j)` gives the 32
// integer levels of the block's j-th 32-value block (j < kBlocks32In<Block>) as bytes in
// value order: unsigned for the types with a min (dotted with Q8_1 blocks, whose s carries
// the min term), signed otherwise; `scale(block, j)` their float scale.
template <class Arch, class Block, class Activation, class Levels, class Scale>
void amx_tile_dots_blocks32(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                            const Activation* x, std::size_t x_stride, std::size_t nblocks,
                            std::size_t n_tokens, float* y, std::size_t y_stride, Levels levels,
                            Scale scale) {
  constexpr bool kMin = std::is_same_v<Activation, BlockQ8_1>;
  constexpr std::size_t kSub = kBlocks32In<Block>;
  const std::size_t n32 = nblocks * kSub;  // 32-value blocks per row
  const std::size_t groups = (n_rows + kTokenTile - 1) / kTokenTile;
  Block32Scratch& s = block32_scratch();
  s.planes.resize(groups * n32 * 512);
  s.wd.resize(groups * n32 * kTokenTile);
  s.wm.resize(groups * n32 * kTokenTile);

  // The weights, once: quad q of row r's block b goes to bytes 64 q + 4 r of the block's
  // 512; rows past n_rows are zeros, their results dropped.
  const __m256i quad_offsets = _mm256_setr_epi32(0, 64, 128, 192, 256, 320, 384, 448);
  for (std::size_t g = 0; g < groups; ++g) {
    for (std::size_t r = 0; r < kTokenTile; ++r) {
      const std::size_t row = g * kTokenTile + r;
      const auto* blocks = reinterpret_cast<const Block*>(w + row * row_bytes);
      for (std::size_t i = 0; i < n32; ++i) {
        const std::size_t b = i / kSub, j = i % kSub;
        std::uint8_t* plane = s.planes.data() + (g * n32 + i) * 512 + 4 * r;
        const std::size_t at = (g * n32 + i) * kTokenTile + r;
        if (row < n_rows) {
          _mm256_i32scatter_epi32(plane, quad_offsets, levels(blocks[b], j), 1);
          s.wd[at] = scale(blocks[b], j);
          if constexpr (kMin) s.wm[at] = f16_to_f32(blocks[b].m);
        } else {
          _mm256_i32scatter_epi32(plane, quad_offsets, _mm256_setzero_si256(), 1);
          s.wd[at] = s.wm[at] = 0.0f;
        }
      }
    }
  }

  amx_multiply_blocks32<Arch>(s, s.planes.data(), 512, n_rows, x, x_stride, n32, n_tokens, y,
                              y_stride);
}

// The same on Q4_1 or Q4_0 rows interleaved by sixteen (quant/rows16.hpp), whose byte
// order is the planes' already: splitting each 64-byte vector of nibble pairs into its
// low and high nibbles gives quads q and q + 4 of all sixteen rows, with no scatter
// (Q4_0's nibbles are its levels plus 8, taken off per token block). Decode (matvec) and
// prefill then read one copy, and a token's result is the same bit for bit (the float
// steps are the references').
template <class Arch, class Group>
void amx_tile_dots_nibbles_rows16(
    const Group* copy, std::size_t n_rows,
    const std::conditional_t<std::is_same_v<Group, BlockQ4_1Rows16>, BlockQ8_1, BlockQ8_0>* x,
    std::size_t x_stride, std::size_t nblocks, std::size_t n_tokens, float* y,
    std::size_t y_stride) {
  constexpr bool kMin = std::is_same_v<Group, BlockQ4_1Rows16>;
  const std::size_t groups = (n_rows + kTokenTile - 1) / kTokenTile;
  Block32Scratch& s = block32_scratch();
  s.planes.resize(groups * nblocks * 512);
  s.wd.resize(groups * nblocks * kTokenTile);
  if constexpr (kMin) s.wm.resize(groups * nblocks * kTokenTile);
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (std::size_t i = 0; i < groups * nblocks; ++i) {
    const Group& c = copy[i];
    std::uint8_t* plane = s.planes.data() + i * 512;
    for (std::size_t q = 0; q < 4; ++q) {
      const __m512i v = _mm512_loadu_si512(c.qs[q]);
      _mm512_storeu_si512(plane + 64 * q, _mm512_and_si512(v, low));
      _mm512_storeu_si512(plane + 64 * (q + 4), _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
    }
    _mm512_storeu_ps(s.wd.data() + i * kTokenTile,
                     _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(c.d))));
    if constexpr (kMin) {
      _mm512_storeu_ps(s.wm.data() + i * kTokenTile,
                       _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(c.m))));
    }
  }
  amx_multiply_blocks32<Arch, std::remove_cvref_t<decltype(*x)>, Group::kOffset>(
      s, s.planes.data(), 512, n_rows, x, x_stride, nblocks, n_tokens, y, y_stride);
}

// The same on Q8_0 rows interleaved by sixteen: the copy's quants are the planes already
// (plus 128, taken off per token block), so the tiles load them where they lie and only
// the scales become floats.
template <class Arch>
void amx_tile_dots_q8_0_rows16(const BlockQ8_0Rows16* copy, std::size_t n_rows, const BlockQ8_0* x,
                               std::size_t x_stride, std::size_t nblocks, std::size_t n_tokens,
                               float* y, std::size_t y_stride) {
  const std::size_t groups = (n_rows + kTokenTile - 1) / kTokenTile;
  Block32Scratch& s = block32_scratch();
  s.wd.resize(groups * nblocks * kTokenTile);
  for (std::size_t i = 0; i < groups * nblocks; ++i) {
    _mm512_storeu_ps(
        s.wd.data() + i * kTokenTile,
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(copy[i].d))));
  }
  amx_multiply_blocks32<Arch, BlockQ8_0, BlockQ8_0Rows16::kOffset>(
      s, copy[0].qs[0][0], sizeof(BlockQ8_0Rows16), n_rows, x, x_stride, nblocks, n_tokens, y,
      y_stride);
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
