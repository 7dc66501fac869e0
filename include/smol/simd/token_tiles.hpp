// TokenTiles: Q8_K activations laid out as AMX B tiles, 16 tokens per tile.
//
// A tile multiply takes its right operand as 16 rows of 64 bytes where row q holds, for
// each of 16 tokens, the 4 consecutive quants 4q..4q+3 of a 64-value chunk ("VNNI"
// order). Each token's quants are rearranged into that order once per matmul; the
// Q8_K scales go alongside, per tile and block, as one float per token, and the sums of
// its sub-blocks of 32 (the min terms of Q4_K and Q5_K): as floats times d for the matrix
// unit, as exact integers for the tokens-in-lanes kernels (x86_avx512_token_lanes.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"

namespace smol {

inline constexpr std::size_t kTokenTile = 16;

struct TokenTiles {
  const std::int8_t* quants = nullptr;  // [tile][chunk of 64 values][16 quads][16 tokens][4]
  const float* scales = nullptr;        // [tile][block][16 tokens]; 0 for padding tokens
  const float* sub_sums = nullptr;  // [tile][block][8 sub-blocks][16 tokens]: d * sum of 32 quants
  // [tile][block][4 pairs i][16 tokens][2]: the sums of sub-blocks 2i and 2i + 1 (|sum| <=
  // 32 x 127 fits a word) side by side, a dword per token, as vpdpwssd takes them.
  const std::int16_t* pair_sums = nullptr;
  std::size_t n_tokens = 0;  // the last tile is padded with zero tokens
  std::size_t nblocks = 0;   // Q8_K blocks per token

  std::size_t tiles() const noexcept { return (n_tokens + kTokenTile - 1) / kTokenTile; }
  const std::int8_t* chunk(std::size_t tile, std::size_t chunk) const noexcept {
    return quants + (tile * nblocks * 4 + chunk) * 1024;
  }
  const float* block_scales(std::size_t tile, std::size_t block) const noexcept {
    return scales + (tile * nblocks + block) * kTokenTile;
  }
  const float* block_sub_sums(std::size_t tile, std::size_t block) const noexcept {
    return sub_sums + (tile * nblocks + block) * 8 * kTokenTile;
  }
  const std::int16_t* block_pair_sums(std::size_t tile, std::size_t block) const noexcept {
    return pair_sums + (tile * nblocks + block) * 8 * kTokenTile;
  }
};

inline std::size_t token_tile_count(std::size_t n_tokens) noexcept {
  return (n_tokens + kTokenTile - 1) / kTokenTile;
}
inline std::size_t token_tiles_quant_bytes(std::size_t n_tokens, std::size_t nblocks) noexcept {
  return token_tile_count(n_tokens) * nblocks * QK_K * kTokenTile;
}
inline std::size_t token_tiles_scale_count(std::size_t n_tokens, std::size_t nblocks) noexcept {
  return token_tile_count(n_tokens) * nblocks * kTokenTile;
}

inline std::size_t token_tiles_sub_sum_count(std::size_t n_tokens, std::size_t nblocks) noexcept {
  return token_tiles_scale_count(n_tokens, nblocks) * 8;
}
inline std::size_t token_tiles_pair_sum_count(std::size_t n_tokens, std::size_t nblocks) noexcept {
  return token_tiles_scale_count(n_tokens, nblocks) * 8;
}

// Zeroes the padding of the last tile; call once before packing the tokens.
inline void clear_token_padding(std::size_t n_tokens, std::size_t nblocks, std::int8_t* quants,
                                float* scales, float* sub_sums, std::int16_t* pair_sums) noexcept {
  if (n_tokens % kTokenTile == 0) return;
  const std::size_t last = token_tile_count(n_tokens) - 1;
  std::memset(quants + last * nblocks * QK_K * kTokenTile, 0, nblocks * QK_K * kTokenTile);
  std::memset(scales + last * nblocks * kTokenTile, 0, nblocks * kTokenTile * sizeof(float));
  std::memset(sub_sums + last * nblocks * 8 * kTokenTile, 0,
              nblocks * 8 * kTokenTile * sizeof(float));
  std::memset(pair_sums + last * nblocks * 8 * kTokenTile, 0,
              nblocks * 8 * kTokenTile * sizeof(std::int16_t));
}

// Places token `t` (its `nblocks` Q8_K blocks) into its tile.
inline void pack_token_tile(const BlockQ8K* q8, std::size_t t, std::size_t nblocks,
                            std::int8_t* quants, float* scales, float* sub_sums,
                            std::int16_t* pair_sums) noexcept {
  const std::size_t tile = t / kTokenTile, slot = t % kTokenTile;
  for (std::size_t b = 0; b < nblocks; ++b) {
    scales[(tile * nblocks + b) * kTokenTile + slot] = q8[b].d;
    for (std::size_t s = 0; s < 8; ++s) {
      const int sum = q8[b].bsums[2 * s] + q8[b].bsums[2 * s + 1];
      sub_sums[((tile * nblocks + b) * 8 + s) * kTokenTile + slot] =
          q8[b].d * static_cast<float>(sum);
      pair_sums[(((tile * nblocks + b) * 4 + s / 2) * kTokenTile + slot) * 2 + s % 2] =
          static_cast<std::int16_t>(sum);
    }
    for (std::size_t quad = 0; quad < QK_K / 4; ++quad) {
      const std::size_t chunk = b * 4 + quad / 16;
      std::int8_t* dst = quants + ((tile * nblocks * 4 + chunk) * 16 + quad % 16) * 64 + slot * 4;
      std::memcpy(dst, q8[b].qs + 4 * quad, 4);
    }
  }
}

// Block32Tiles: the Q8_0 / Q8_1 activations of the 32-value types laid out as AMX A
// tiles, 16 tokens per tile: for each tile and block, the 16 tokens' 32 quants one after
// another (a tile load of 16 rows x 32 bytes, contiguous), and their d (and Q8_1's s)
// as floats, 16 to a block. Made once per matmul: in the blocks' own layout a tile row
// starts every 34 or 36 bytes, across cache lines, and every call of the tile loop
// (a chunk of rows) gathered and converted the scales again.
struct Block32Tiles {             // filled by pack_block32_token, read by the kernels
  std::int8_t* quants = nullptr;  // [tile][block][16 tokens][32]
  float* d = nullptr;             // [tile][block][16 tokens]; 0 for padding tokens
  float* s = nullptr;             // Q8_1's s likewise; null for Q8_0
  std::size_t n_tokens = 0;       // the last tile is padded with zero tokens
  std::size_t nblocks = 0;        // 32-value blocks per token

  std::size_t tiles() const noexcept { return (n_tokens + kTokenTile - 1) / kTokenTile; }
  const std::int8_t* block_quants(std::size_t tile, std::size_t block) const noexcept {
    return quants + (tile * nblocks + block) * kTokenTile * 32;
  }
  const float* block_d(std::size_t tile) const noexcept { return d + tile * nblocks * kTokenTile; }
  const float* block_s(std::size_t tile) const noexcept { return s + tile * nblocks * kTokenTile; }
};

inline std::size_t block32_tiles_quant_bytes(std::size_t n_tokens, std::size_t nblocks) noexcept {
  return token_tile_count(n_tokens) * nblocks * kTokenTile * 32;
}
inline std::size_t block32_tiles_scale_count(std::size_t n_tokens, std::size_t nblocks) noexcept {
  return token_tile_count(n_tokens) * nblocks * kTokenTile;
}

// Zeroes the padding tokens of the last tile; call once before packing the tokens.
inline void clear_block32_padding(const Block32Tiles& tiles) noexcept {
  const std::size_t n_tokens = tiles.n_tokens, nblocks = tiles.nblocks;
  if (n_tokens % kTokenTile == 0) return;
  const std::size_t last = token_tile_count(n_tokens) - 1, count = nblocks * kTokenTile;
  std::memset(tiles.quants + last * count * 32, 0, count * 32);
  std::memset(tiles.d + last * count, 0, count * sizeof(float));
  if (tiles.s != nullptr) std::memset(tiles.s + last * count, 0, count * sizeof(float));
}

// Places token `t` (its Q8_0 or Q8_1 blocks) into its tile; `s` is written for Q8_1 only.
template <class Activation>
void pack_block32_token(const Activation* x, std::size_t t, const Block32Tiles& tiles) noexcept {
  static_assert(sizeof(Activation::qs) == 32);
  const std::size_t tile = t / kTokenTile, slot = t % kTokenTile, nblocks = tiles.nblocks;
  for (std::size_t b = 0; b < nblocks; ++b) {
    const std::size_t at = (tile * nblocks + b) * kTokenTile + slot;
    std::memcpy(tiles.quants + at * 32, x[b].qs, 32);
    tiles.d[at] = f16_to_f32(x[b].d);
    if constexpr (requires { x[b].s; }) tiles.s[at] = f16_to_f32(x[b].s);
  }
}

// Block32Tiles with storage of its own, packed from `n_tokens` tokens `x_stride` blocks
// apart (tests and benchmarks; prefill packs into the context's scratch).
struct Block32TilesBuffer {
  std::vector<std::int8_t> quants;
  std::vector<float> d, s;
  Block32Tiles tiles;
};

template <class Activation>
Block32TilesBuffer pack_block32_tiles(const Activation* x, std::size_t x_stride,
                                      std::size_t nblocks, std::size_t n_tokens) {
  Block32TilesBuffer b;
  b.quants.resize(block32_tiles_quant_bytes(n_tokens, nblocks));
  b.d.resize(block32_tiles_scale_count(n_tokens, nblocks));
  if constexpr (requires { x->s; }) b.s.resize(b.d.size());
  b.tiles = {b.quants.data(), b.d.data(), b.s.empty() ? nullptr : b.s.data(), n_tokens, nblocks};
  clear_block32_padding(b.tiles);
  for (std::size_t t = 0; t < n_tokens; ++t) pack_block32_token(x + t * x_stride, t, b.tiles);
  return b;
}

}  // namespace smol

namespace smol {

// Bytes of scratch a Kernels::matrix_* call needs for rows of `cols` values: three byte
// planes of 16 expanded weight rows, the three int32 result tiles, and per-row scales.
inline std::size_t matrix_scratch_bytes(std::size_t cols) noexcept {
  return 3 * kTokenTile * cols + 8 * 1024 + 2 * 1024 * sizeof(float) +
         10 * kTokenTile * (cols / QK_K) * sizeof(float) + 64;
}

}  // namespace smol
