// The loop every prefill tile kernel shares: tokens in tiles, rows inner.
//
// A row tile kernel multiplies ONE weight row with T tokens, unpacking each weight block
// once for all T. The loop cuts the tokens into tiles of at most kMaxTokens (then halves
// for the rest) and passes every row over each tile while the tile's activations stay in
// L1. Kernels that first copy a tile's activations into a layout of their own (the
// 32-value types' tiles) copy them one segment of a row's blocks at a time, so that the
// copy too stays in L1, and each segment's sums are added to y.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "smol/simd/q8k_lanes.hpp"

namespace smol::simd {

// A tile's token count as a type, so that a row tile's loops over tokens unroll.
template <std::size_t T>
using TileTokens = std::integral_constant<std::size_t, T>;

// For kernels that read the tile's activations where they are.
struct NoTilePacking {
  void operator()(std::size_t, std::size_t, std::size_t, std::size_t) const noexcept {}
};

// for_each_tile<kMaxTokens>(n_rows, nblocks, segment, n_tokens, y, y_stride, assign,
//                           pack, row_tile):
//   pack(t0, tn, b0, nb)                        copy tokens [t0, t0 + tn), blocks
//                                               [b0, b0 + nb) for the rows that follow
//   row_tile(TileTokens<T>{}, r, t0, b0, nb, out)   row r's blocks [b0, b0 + nb) times
//                                               tokens [t0, t0 + T): out[0, T)
// y[t * y_stride + r] gets each token's sums over the segments, added to what y holds, or
// replacing it where `assign` (WeightKernels::tile_dots). A segment of nblocks (or more)
// is the whole row at once. Each token's sum is the row tile's for it alone, so a token's
// bits never depend on the tile it shares or on the number of rows.
template <std::size_t kMaxTokens, class Pack, class RowTile>
void for_each_tile(std::size_t n_rows, std::size_t nblocks, std::size_t segment,
                   std::size_t n_tokens, float* y, std::size_t y_stride, bool assign, Pack&& pack,
                   RowTile&& row_tile) noexcept {
  static_assert(kMaxTokens == 16 || kMaxTokens == 8 || kMaxTokens == 4);
  segment = std::max<std::size_t>(segment, 1);
  float out[kMaxTokens];
  for (std::size_t t0 = 0; t0 < n_tokens;) {
    const std::size_t left = n_tokens - t0;
    std::size_t tn = 1;
    while (tn < kMaxTokens && 2 * tn <= left) tn *= 2;
    for (std::size_t b0 = 0; b0 == 0 || b0 < nblocks; b0 += segment) {
      const std::size_t nb = std::min(segment, nblocks - b0);
      pack(t0, tn, b0, nb);
      for (std::size_t r = 0; r < n_rows; ++r) {
        switch (tn) {
          case 16:
            if constexpr (kMaxTokens >= 16) row_tile(TileTokens<16>{}, r, t0, b0, nb, out);
            break;
          case 8:
            if constexpr (kMaxTokens >= 8) row_tile(TileTokens<8>{}, r, t0, b0, nb, out);
            break;
          case 4:
            row_tile(TileTokens<4>{}, r, t0, b0, nb, out);
            break;
          case 2:
            row_tile(TileTokens<2>{}, r, t0, b0, nb, out);
            break;
          default:
            row_tile(TileTokens<1>{}, r, t0, b0, nb, out);
            break;
        }
        const bool replace = assign && b0 == 0;
        for (std::size_t t = 0; t < tn; ++t) {
          float& dst = y[(t0 + t) * y_stride + r];
          dst = replace ? out[t] : dst + out[t];
        }
      }
    }
    t0 += tn;
  }
}

// The row tiles that are class templates (RowTile<Arch, T>::run(row, act, act_stride,
// nblocks, out)) over lane-packed blocks (`tile`) or the type's own (`tile_dots`), the
// whole row at once.
template <class Block, class Arch, template <class, std::size_t> class RowTile,
          std::size_t kMaxTokens, bool kAssign = false, class Act = BlockQ8KLanes>
void run_tiles(const std::byte* w, std::size_t row_bytes, std::size_t n_rows, const Act* act,
               std::size_t act_stride, std::size_t nblocks, std::size_t n_tokens, float* y,
               std::size_t y_stride) noexcept {
  for_each_tile<kMaxTokens>(
      n_rows, nblocks, nblocks, n_tokens, y, y_stride, kAssign, NoTilePacking{},
      [&]<std::size_t T>(TileTokens<T>, std::size_t r, std::size_t t0, std::size_t, std::size_t,
                         float* out) {
        RowTile<Arch, T>::run(reinterpret_cast<const Block*>(w + r * row_bytes),
                              act + t0 * act_stride, act_stride, nblocks, out);
      });
}

}  // namespace smol::simd
