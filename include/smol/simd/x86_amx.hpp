// AMX-INT8 prefill: 16 weight rows x 16 tokens per tile multiply (TDPBUSD / TDPBSSD).
//
// A tile multiply sums 64 products per output before anything can be scaled, but Q4_K,
// Q5_K and Q6_K change scale every 32 / 16 values. So each weight is expanded with its
// integer sub-block scale folded in, s * q (up to 945 for Q4_K, 1953 for Q5_K, +-8128 for
// Q6_K), and split into two byte planes, s * q = 32 h + l (Q4_K, Q5_K) or 128 h + l (Q6_K). The
// integer products then give exactly the reference's per-block sum of s*q*a, and floats appear once
// per block. Q6_K's -32 offset is a third plane (its group scale); Q4_K's and Q5_K's min term is
// done in AVX-512 from the activations' sub-block sums, which frees the tiles to multiply each
// weight chunk with two token tiles at once (tile loads, not multiplies, are the limit).
// Q2_K, Q3_K and IQ4_XS (x86_iq4.hpp: (s_j - 32) x level, 128 h + l with no offset
// plane) take the same planes. The expansion is done once per 16 rows and reused by every
// token tile. Hand-written because xsimd has no tile instructions.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/quant/blocks.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/token_tiles.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx512_tiles.hpp"

namespace smol::simd::x86 {

// Tile registers are literals below (the intrinsics paste them into the asm). Q4_K, Q5_K,
// Q2_K: 0-3 results (two planes x two token tiles), 4-5 the planes, 6-7 the token tiles.
// Q6_K: 0-2 results, 3-5 the planes, 6 the token tile.

// One tile register's shape.
struct TileShape {
  std::uint8_t rows = 16;
  std::uint16_t bytes_per_row = 64;
};

// Loads palette 1 with the shapes of tile registers 0-7.
template <class Arch>
inline void configure_tiles(const TileShape (&shapes)[8]) noexcept {
  struct alignas(64) Config {
    std::uint8_t palette = 1, start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t bytes_per_row[16] = {};
    std::uint8_t rows[16] = {};
  } config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = shapes[t].bytes_per_row;
    config.rows[t] = shapes[t].rows;
  }
  _tile_loadconfig(&config);
}

// The K-quants' kernels: every register 16 rows of 64 bytes.
template <class Arch>
inline void configure_amx_tiles() noexcept {
  configure_tiles<Arch>({{}, {}, {}, {}, {}, {}, {}, {}});
}

// Tile loads are asm without a memory operand: the compiler must finish our stores first.
template <class Arch>
inline void memory_barrier() noexcept {
  __asm__ volatile("" ::: "memory");
}

struct ExpandedRows {
  std::uint8_t* plane[3];  // 16 rows x cols bytes each
  std::int32_t* results;   // 2 x 4 tiles of 16 x 16 int32 (double-buffered)
  float* acc;              // 2 token tiles x 16 rows x 16 tokens
  float* d;                // [block][16 rows]
  float* min;              // Q4_K: [block][16 rows][8 sub-blocks], dmin * m
};

template <class Arch>
inline ExpandedRows carve_scratch(std::byte* scratch, std::size_t cols) noexcept {
  auto* base = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(scratch) + 63) &
                                               ~std::uintptr_t{63});
  ExpandedRows e;
  for (int p = 0; p < 3; ++p) e.plane[p] = base + p * kTokenTile * cols;
  e.results = reinterpret_cast<std::int32_t*>(base + 3 * kTokenTile * cols);
  e.acc = reinterpret_cast<float*>(e.results + 2 * 4 * 256);
  e.d = e.acc + 2 * 256;
  e.min = e.d + kTokenTile * (cols / QK_K);
  return e;
}

// One block of 8 sub-blocks of 32 values with 6-bit scales and mins (Q4_K, Q5_K) ->
// planes at column `at` of row r: s*q >> 5 and s*q & 31 in natural order, plus dmin * m
// per sub-block. `sm` holds the scales (0-7) and mins (8-15); `chunk(c)` gives the quants
// of sub-block 2c in its low 256 bits and of 2c + 1 in its high 256 bits, one byte each
// (q <= 31, so s*q <= 63 * 31 and the high plane stays below 64).
template <class Arch, class Chunk>
inline void expand_scaled_sub_blocks(const std::uint8_t (&sm)[16], f16_bits d, f16_bits dmin_bits,
                                     std::size_t b, std::size_t at, std::size_t r,
                                     const ExpandedRows& e, Chunk chunk) noexcept {
  const __m512i low5 = _mm512_set1_epi16(31);
  for (int c = 0; c < 4; ++c) {
    const __m512i q = chunk(c);
    for (int half = 0; half < 2; ++half) {
      const __m512i words = _mm512_cvtepu8_epi16(half == 0 ? _mm512_castsi512_si256(q)
                                                           : _mm512_extracti64x4_epi64(q, 1));
      const __m512i scaled = _mm512_mullo_epi16(words, _mm512_set1_epi16(sm[2 * c + half]));
      const std::size_t o = at + 64 * c + 32 * half;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(e.plane[0] + o),
                          _mm512_cvtepi16_epi8(_mm512_srli_epi16(scaled, 5)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(e.plane[1] + o),
                          _mm512_cvtepi16_epi8(_mm512_and_si512(scaled, low5)));
    }
  }
  e.d[b * kTokenTile + r] = _cvtsh_ss(d);
  const float dmin = _cvtsh_ss(dmin_bits);
  for (int sub = 0; sub < 8; ++sub) {
    e.min[(b * kTokenTile + r) * 8 + sub] = dmin * static_cast<float>(sm[8 + sub]);
  }
}

// The same for a file block (Q4_K, Q5_K), its scales and mins unpacked from 12 bytes.
template <class Arch, class Block, class Chunk>
inline void expand_scaled_block(const Block& x, std::size_t b, std::size_t at, std::size_t r,
                                const ExpandedRows& e, Chunk chunk) noexcept {
  alignas(16) std::uint8_t sm[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(sm), q4k_scales_and_mins<Arch>(x));
  expand_scaled_sub_blocks<Arch>(sm, x.d, x.dmin, b, at, r, e, chunk);
}

// Chunk c's 32 bytes in both halves of a vector, the high half shifted right by
// `high_shift` bits and the low one by `low_shift` (per 64-bit lane).
template <class Arch>
inline __m512i broadcast_shifted(const std::uint8_t* bytes, int low_shift,
                                 int high_shift) noexcept {
  const __m512i shift = _mm512_set_epi64(high_shift, high_shift, high_shift, high_shift, low_shift,
                                         low_shift, low_shift, low_shift);
  return _mm512_srlv_epi64(
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes))), shift);
}

// Q4_K block b of row r -> planes: chunk c's low nibbles are sub-block 2c, its high
// nibbles 2c + 1.
template <class Arch>
inline void expand_q4k_block(const BlockQ4K& x, std::size_t b, std::size_t cols, std::size_t r,
                             const ExpandedRows& e) noexcept {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  expand_scaled_block<Arch>(x, b, r * cols + b * QK_K, r, e, [&](int c) {
    return _mm512_and_si512(broadcast_shifted<Arch>(x.qs + 32 * c, 0, 4), nibble);
  });
}

// The planes of expand_q4k_block from lane `lane` of an interleaved group's block: the
// lane's scales and mins are bytes of the group, unpacked already, and chunk c's 32 bytes
// one gather (dword 8g + lane of qs[c], g < 8).
template <class Arch>
inline void expand_q4k_copy_block(const BlockQ4KRows8& g, std::size_t lane, std::size_t b,
                                  std::size_t cols, std::size_t r, const ExpandedRows& e) noexcept {
  alignas(16) std::uint8_t sm[16];
  for (std::size_t j = 0; j < 8; ++j) {
    sm[j] = g.scales[j][lane];
    sm[8 + j] = g.mins[j][lane];
  }
  const __m256i index = _mm256_add_epi32(_mm256_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56),
                                         _mm256_set1_epi32(static_cast<int>(lane)));
  const __m512i shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  expand_scaled_sub_blocks<Arch>(
      sm, g.d[lane], g.dmin[lane], b, r * cols + b * QK_K, r, e, [&](int c) {
        const __m256i bytes =
            _mm256_i32gather_epi32(reinterpret_cast<const int*>(&g.qs[c][0][0][0]), index, 4);
        return _mm512_and_si512(_mm512_srlv_epi64(_mm512_broadcast_i64x4(bytes), shift), nibble);
      });
}

// A block of sixteen groups of 16 values with signed 8-bit scales and unsigned quants
// stored with an offset (Q6_K: q - 32, Q3_K: q - 4) -> planes at column `at` of row r:
// s*q >> 7 (signed), s*q & 127, and the group scale s; `n[c]` holds the quants of values
// 64c .. 64c + 63 in natural order, `scales` the sixteen scales (|s*q| < 2^13).
// kSignedLevels: `n` holds signed levels with no offset (IQ4_XS, whose 32-value
// sub-blocks give two groups the same scale), and there is no third plane.
template <class Arch, bool kSignedLevels = false>
inline void expand_offset_planes(const __m512i (&n)[4], const std::int8_t* scales, f16_bits d,
                                 std::size_t b, std::size_t at, std::size_t r,
                                 const ExpandedRows& e) noexcept {
  const __m512i low7 = _mm512_set1_epi16(127);
  const __m512i sc16 = _mm512_castsi256_si512(
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales))));
  for (int c = 0; c < 4; ++c) {
    for (int half = 0; half < 2; ++half) {
      // Word lane i of this half belongs to group 4c + 2 half + i / 16.
      const short g = static_cast<short>(4 * c + 2 * half);
      const __m512i idx = _mm512_set_epi16(g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1,
                                           g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1, g + 1,
                                           g, g, g, g, g, g, g, g, g, g, g, g, g, g, g, g);
      const __m512i scale = _mm512_permutexvar_epi16(idx, sc16);
      const __m256i bytes =
          half == 0 ? _mm512_castsi512_si256(n[c]) : _mm512_extracti64x4_epi64(n[c], 1);
      const __m512i words =
          kSignedLevels ? _mm512_cvtepi8_epi16(bytes) : _mm512_cvtepu8_epi16(bytes);
      const __m512i scaled = _mm512_mullo_epi16(words, scale);
      const std::size_t o = at + 64 * c + 32 * half;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(e.plane[0] + o),
                          _mm512_cvtepi16_epi8(_mm512_srai_epi16(scaled, 7)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(e.plane[1] + o),
                          _mm512_cvtepi16_epi8(_mm512_and_si512(scaled, low7)));
      if constexpr (!kSignedLevels) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(e.plane[2] + o),
                            _mm512_cvtepi16_epi8(scale));
      }
    }
  }
  e.d[b * kTokenTile + r] = _cvtsh_ss(d);
}

// Q6_K block b of row r -> its offset planes (amx_matrix_with_offset<.., 32>).
template <class Arch>
inline void expand_q6k_block(const BlockQ6K& x, std::size_t b, std::size_t cols, std::size_t r,
                             const ExpandedRows& e) noexcept {
  __m512i n[4];
  unpack_q6k_natural<Arch>(x, n);
  expand_offset_planes<Arch>(n, x.scales, x.d, b, r * cols + b * QK_K, r, e);
}

// The planes of expand_q6k_block from lane `lane` of an interleaved group's block, through
// the file's block (Q6_K is the smaller share of a Q4_K_M file's weights).
template <class Arch>
inline void expand_q6k_copy_block(const BlockQ6KRows8& g, std::size_t lane, std::size_t b,
                                  std::size_t cols, std::size_t r, const ExpandedRows& e) noexcept {
  expand_q6k_block<Arch>(file_block_of(g, lane), b, cols, r, e);
}

// Where a matrix kernel finds the rows it expands, as kExpandRow functions: row r of the
// slab of up to 16 rows that starts at `slab`, in natural order, from the file's rows
// (`row_bytes` apart) ...
template <class Arch, class Block, auto kExpandBlock>
inline void expand_file_row(const std::byte* slab, std::size_t row_bytes, std::size_t r,
                            std::size_t nblocks, const ExpandedRows& e) noexcept {
  const auto* x = reinterpret_cast<const Block*>(slab + r * row_bytes);
  for (std::size_t b = 0; b < nblocks; ++b) kExpandBlock(x[b], b, nblocks * QK_K, r, e);
}

// ... or from a sixteen-row copy (quant/rows16.hpp), where the slab is one group and
// kExpandBlock takes a group's block and a lane ...
template <class Arch, class Rows16, auto kExpandBlock>
inline void expand_rows16_copy_row(const std::byte* slab, std::size_t /*row_bytes*/, std::size_t r,
                                   std::size_t nblocks, const ExpandedRows& e) noexcept {
  const Rows16* group = reinterpret_cast<const Rows16*>(slab);
  for (std::size_t b = 0; b < nblocks; ++b) kExpandBlock(group[b], r, b, nblocks * QK_K, r, e);
}

// ... or from the interleaved copy that decode reads (quant/rows8.hpp), where the slab is
// two groups of eight and kExpandBlock takes a group's block and a lane: its planes, and
// every bit after them, are the file rows' (test_matmul). The copy then serves decode
// and prefill, and the file's pages are not read again.
template <class Arch, class Rows8, auto kExpandBlock>
inline void expand_copy_row(const std::byte* slab, std::size_t /*row_bytes*/, std::size_t r,
                            std::size_t nblocks, const ExpandedRows& e) noexcept {
  const Rows8* group = reinterpret_cast<const Rows8*>(slab) + (r / kRowsPerGroup) * nblocks;
  for (std::size_t b = 0; b < nblocks; ++b) {
    kExpandBlock(group[b], r % kRowsPerGroup, b, nblocks * QK_K, r, e);
  }
}

// Expands the slab's first `nr` rows (up to 16; missing rows become zeros) into the planes.
template <class Arch, auto kExpandRow>
inline void expand_rows(const std::byte* slab, std::size_t row_bytes, std::size_t nr,
                        std::size_t nblocks, const ExpandedRows& e) noexcept {
  const std::size_t cols = nblocks * QK_K;
  for (std::size_t r = 0; r < kTokenTile; ++r) {
    if (r < nr) {
      kExpandRow(slab, row_bytes, r, nblocks, e);
    } else {  // rows past the end: zero weights, their results are dropped
      for (auto* plane : e.plane) std::memset(plane + r * cols, 0, cols);
      for (std::size_t b = 0; b < nblocks; ++b) {
        e.d[b * kTokenTile + r] = 0;
        for (int sub = 0; sub < 8; ++sub) e.min[(b * kTokenTile + r) * 8 + sub] = 0;
      }
    }
  }
  memory_barrier<Arch>();
}

// acc_rows[r] holds row r0 + r for the tile's 16 tokens; y is token-major, so the block
// is transposed through L1 and each token's 16 rows written as one 64-byte store
// (scattering columns into y instead costs a cache-line write per value).
template <class Arch>
inline void store_tile_results(const __m512* acc_rows, std::size_t tile, std::size_t n_tokens,
                               std::size_t r0, std::size_t nr, float* y,
                               std::size_t y_stride) noexcept {
  alignas(64) float by_row[kTokenTile * kTokenTile];
  for (std::size_t r = 0; r < kTokenTile; ++r) _mm512_store_ps(by_row + 16 * r, acc_rows[r]);
  const std::size_t nt = std::min(kTokenTile, n_tokens - tile * kTokenTile);
  const __mmask16 rows = static_cast<__mmask16>((1u << nr) - 1);
  const __m512i column =
      _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
  for (std::size_t t = 0; t < nt; ++t) {
    const __m512 values = _mm512_i32gather_ps(column, by_row + t, 4);
    _mm512_mask_storeu_ps(y + (tile * kTokenTile + t) * y_stride + r0, rows, values);
  }
}

// The min terms of sixteen rows for one token tile: mins[r] (the tile's 16 tokens) =
// sum over blocks and sub-blocks of dmin * m (e.min) times the token's d * sum of the
// sub-block's quants, in block and sub-block order. Summed apart from the tile loop,
// where with the tile unit busy each vector step costs about three times as much (they
// were eight of a row's eleven steps there).
template <class Arch>
inline void min_terms_rows(const ExpandedRows& e, const TokenTiles& act, std::size_t tile,
                           __m512 (&mins)[kTokenTile]) noexcept {
#pragma GCC unroll 16
  for (std::size_t r = 0; r < kTokenTile; ++r) mins[r] = _mm512_setzero_ps();
  for (std::size_t b = 0; b < act.nblocks; ++b) {
    const float* sums = act.block_sub_sums(tile, b);
    const float* min = e.min + b * kTokenTile * 8;
    __m512 sub_sum[8];
    for (int sub = 0; sub < 8; ++sub) sub_sum[sub] = _mm512_loadu_ps(sums + 16 * sub);
#pragma GCC unroll 16
    for (std::size_t r = 0; r < kTokenTile; ++r) {
      for (int sub = 0; sub < 8; ++sub) {
        mins[r] = _mm512_fmadd_ps(_mm512_set1_ps(min[8 * r + sub]), sub_sum[sub], mins[r]);
      }
    }
  }
}

// What amx_matrix_with_mins makes of a row's two tile sums for one block (the tokens of a
// tile in the lanes), before the token's scale: Q4_K and Q5_K expand s*q into the planes
// 32 h + l, so d * (32 sum(h a) + sum(l a)), and their min term is summed apart
// (min_terms_rows) from the sub-blocks' dmin * m ...
template <class Arch>
struct PlanesHighLow {
  static constexpr bool kMinTermsApart = true;
  static __m512 block_value(__m512i high, __m512i low, const ExpandedRows& e, std::size_t b,
                            std::size_t r) noexcept {
    const __m512i sum = _mm512_add_epi32(_mm512_slli_epi32(high, 5), low);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(e.d[b * kTokenTile + r]));
  }
};

// ... Q2_K's s*q (at most 15 x 3) fits one plane, and its min term is the second: the
// planes s*q and m, so d * sum(s q a) - dmin * sum(m a), all in the tiles (dmin at
// e.min[(b * 16 + r) * 8], the slot expand_rows clears for padding rows).
template <class Arch>
struct PlanesProductAndMin {
  static constexpr bool kMinTermsApart = false;
  static __m512 block_value(__m512i products, __m512i mins, const ExpandedRows& e, std::size_t b,
                            std::size_t r) noexcept {
    const std::size_t i = b * kTokenTile + r;
    return _mm512_fmsub_ps(_mm512_cvtepi32_ps(products), _mm512_set1_ps(e.d[i]),
                           _mm512_mul_ps(_mm512_cvtepi32_ps(mins), _mm512_set1_ps(e.min[8 * i])));
  }
};

// Q4_K, Q5_K and Q2_K (whose rows kExpandRow, expand_file_row or expand_copy_row of a
// block expander, turns into two unsigned byte planes, as Planes says): two token tiles
// per pass; Q4_K's and Q5_K's min term in AVX-512, summed apart and taken off at the end.
// `w` and `row_bytes` address rows as kExpandRow does: the file's rows, or the copy's
// groups at row_bytes = a group's bytes / 8 (so w + r0 * row_bytes is row r0's group for
// r0 a multiple of 16).
template <class Arch, auto kExpandRow, class Planes = PlanesHighLow<Arch>>
void amx_matrix_with_mins(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                          const TokenTiles& act, float* y, std::size_t y_stride,
                          std::byte* scratch) noexcept {
  const std::size_t nblocks = act.nblocks, cols = nblocks * QK_K;
  const ExpandedRows e = carve_scratch<Arch>(scratch, cols);
  const long stride = static_cast<long>(cols);
  configure_amx_tiles<Arch>();
  for (std::size_t r0 = 0; r0 < n_rows; r0 += kTokenTile) {
    const std::size_t nr = std::min(kTokenTile, n_rows - r0);
    expand_rows<Arch, kExpandRow>(w + r0 * row_bytes, row_bytes, nr, nblocks, e);
    for (std::size_t tile = 0; tile < act.tiles(); tile += 2) {
      // Two token tiles per pass; an odd last tile is paired with itself.
      const std::size_t pair[2] = {tile, std::min(tile + 1, act.tiles() - 1)};
      for (std::size_t i = 0; i < 2 * 256; i += 16) _mm512_store_ps(e.acc + i, _mm512_setzero_ps());
      // Block b's results are read back one block later, so the loads never wait on
      // tile stores still in flight.
      const auto finish_block = [&](std::size_t b) {
        const std::int32_t* results = e.results + 1024 * (b % 2);
        for (std::size_t u = 0; u < 2; ++u) {
          const __m512 yd = _mm512_loadu_ps(act.block_scales(pair[u], b));
          const std::int32_t* first = results + 512 * u;
          float* acc = e.acc + 256 * u;
#pragma GCC unroll 4
          for (std::size_t r = 0; r < kTokenTile; ++r) {
            const __m512 value =
                Planes::block_value(_mm512_load_si512(first + 16 * r),
                                    _mm512_load_si512(first + 256 + 16 * r), e, b, r);
            const __m512 a = _mm512_load_ps(acc + 16 * r);
            _mm512_store_ps(acc + 16 * r, _mm512_fmadd_ps(value, yd, a));
          }
        }
      };
      for (std::size_t b = 0; b < nblocks; ++b) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (std::size_t c = 0; c < 4; ++c) {
          const std::size_t at = b * QK_K + 64 * c;
          _tile_loadd(4, e.plane[0] + at, stride);
          _tile_loadd(5, e.plane[1] + at, stride);
          _tile_loadd(6, act.chunk(pair[0], 4 * b + c), 64);
          _tile_loadd(7, act.chunk(pair[1], 4 * b + c), 64);
          _tile_dpbusd(0, 4, 6);  // unsigned weights x signed activations
          _tile_dpbusd(1, 5, 6);
          _tile_dpbusd(2, 4, 7);
          _tile_dpbusd(3, 5, 7);
        }
        std::int32_t* results = e.results + 1024 * (b % 2);
        _tile_stored(0, results, 64);
        _tile_stored(1, results + 256, 64);
        _tile_stored(2, results + 512, 64);
        _tile_stored(3, results + 768, 64);
        if (b > 0) finish_block(b - 1);
      }
      finish_block(nblocks - 1);
      for (std::size_t u = 0; u < (pair[1] != pair[0] ? 2u : 1u); ++u) {
        __m512 rows[kTokenTile];
        if constexpr (Planes::kMinTermsApart) {
          min_terms_rows<Arch>(e, act, pair[u], rows);
#pragma GCC unroll 16
          for (std::size_t r = 0; r < kTokenTile; ++r)
            rows[r] = _mm512_sub_ps(_mm512_load_ps(e.acc + 256 * u + 16 * r), rows[r]);
        } else {
#pragma GCC unroll 16
          for (std::size_t r = 0; r < kTokenTile; ++r)
            rows[r] = _mm512_load_ps(e.acc + 256 * u + 16 * r);
        }
        store_tile_results<Arch>(rows, pair[u], act.n_tokens, r0, nr, y, y_stride);
      }
    }
  }
  _tile_release();
}

// Q6_K, Q3_K and IQ4_XS (whose rows kExpandRow turns into expand_offset_planes's planes):
// one token tile per pass, d * (sum(s q a) - kOffset sum(s a)) per block with
// s q = 128 high + low, all in the tiles; kOffset 0 (IQ4_XS's signed levels): two planes.
template <class Arch, auto kExpandRow, int kOffset>
void amx_matrix_with_offset(const std::byte* w, std::size_t row_bytes, std::size_t n_rows,
                            const TokenTiles& act, float* y, std::size_t y_stride,
                            std::byte* scratch) noexcept {
  static_assert(kOffset == 32 || kOffset == 4 || kOffset == 0,
                "32 or 4 (taken off as a shift below), or 0 (no offset plane)");
  constexpr bool kOffsetPlane = kOffset != 0;
  constexpr int kOffsetShift = kOffset == 32 ? 5 : kOffset == 4 ? 2 : 0;  // unused for 0
  const std::size_t nblocks = act.nblocks, cols = nblocks * QK_K;
  const ExpandedRows e = carve_scratch<Arch>(scratch, cols);
  const long stride = static_cast<long>(cols);
  configure_amx_tiles<Arch>();
  for (std::size_t r0 = 0; r0 < n_rows; r0 += kTokenTile) {
    const std::size_t nr = std::min(kTokenTile, n_rows - r0);
    expand_rows<Arch, kExpandRow>(w + r0 * row_bytes, row_bytes, nr, nblocks, e);
    for (std::size_t tile = 0; tile < act.tiles(); ++tile) {
      __m512 acc[kTokenTile];
      for (auto& a : acc) a = _mm512_setzero_ps();
      for (std::size_t b = 0; b < nblocks; ++b) {
        _tile_zero(0);
        _tile_zero(1);
        if constexpr (kOffsetPlane) _tile_zero(2);
        for (std::size_t c = 0; c < 4; ++c) {
          const std::size_t at = b * QK_K + 64 * c;
          _tile_loadd(6, act.chunk(tile, 4 * b + c), 64);
          _tile_loadd(3, e.plane[0] + at, stride);
          _tile_loadd(4, e.plane[1] + at, stride);
          _tile_dpbssd(0, 3, 6);  // signed x signed
          _tile_dpbssd(1, 4, 6);
          if constexpr (kOffsetPlane) {
            _tile_loadd(5, e.plane[2] + at, stride);
            _tile_dpbssd(2, 5, 6);
          }
        }
        _tile_stored(0, e.results, 64);
        _tile_stored(1, e.results + 256, 64);
        if constexpr (kOffsetPlane) _tile_stored(2, e.results + 512, 64);
        const __m512 yd = _mm512_loadu_ps(act.block_scales(tile, b));
        const float* d = e.d + b * kTokenTile;
#pragma GCC unroll 16
        for (std::size_t r = 0; r < kTokenTile; ++r) {
          // d * (sum(s q a) - kOffset sum(s a)), with s q = 128 high + low
          const __m512i high = _mm512_load_si512(e.results + 16 * r);
          const __m512i low = _mm512_load_si512(e.results + 256 + 16 * r);
          __m512i sum = _mm512_add_epi32(_mm512_slli_epi32(high, 7), low);
          if constexpr (kOffsetPlane) {
            const __m512i offset = _mm512_load_si512(e.results + 512 + 16 * r);
            sum = _mm512_sub_epi32(sum, _mm512_slli_epi32(offset, kOffsetShift));
          }
          const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d[r]));
          acc[r] = _mm512_fmadd_ps(v, yd, acc[r]);
        }
      }
      store_tile_results<Arch>(acc, tile, act.n_tokens, r0, nr, y, y_stride);
    }
  }
  _tile_release();
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
