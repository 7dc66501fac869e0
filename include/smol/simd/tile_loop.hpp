// The loop every prefill tile kernel shares: tokens in tiles, rows inner.
//
// A row tile kernel (RowTile<Arch, T>::run) multiplies ONE weight row with T tokens,
// unpacking each weight block once for all T. This loop cuts the tokens into tiles of
// at most kMaxTokens (then halves for the rest) and passes every row over each tile
// while the tile's activations stay in L1. Results are added to y, so a caller may
// split long rows into segments; with kAssign they replace it (WeightKernels::tile_dots).
// The activations are lane-packed blocks (`tile`) or the type's own (`tile_dots`).
#pragma once

#include <cstddef>

#include "smol/simd/q8k_lanes.hpp"

namespace smol::simd {

template <class Block, class Arch, template <class, std::size_t> class RowTile,
          std::size_t kMaxTokens, bool kAssign = false, class Act = BlockQ8KLanes>
void run_tiles(const std::byte* w, std::size_t row_bytes, std::size_t n_rows, const Act* act,
               std::size_t act_stride, std::size_t nblocks, std::size_t n_tokens, float* y,
               std::size_t y_stride) noexcept {
  static_assert(kMaxTokens == 16 || kMaxTokens == 8 || kMaxTokens == 4);
  float out[kMaxTokens];
  for (std::size_t t0 = 0; t0 < n_tokens;) {
    const std::size_t left = n_tokens - t0;
    std::size_t tn = 1;
    while (tn < kMaxTokens && 2 * tn <= left) tn *= 2;
    const Act* a = act + t0 * act_stride;
    for (std::size_t r = 0; r < n_rows; ++r) {
      const auto* row = reinterpret_cast<const Block*>(w + r * row_bytes);
      switch (tn) {
        case 16:
          if constexpr (kMaxTokens >= 16) RowTile<Arch, 16>::run(row, a, act_stride, nblocks, out);
          break;
        case 8:
          if constexpr (kMaxTokens >= 8) RowTile<Arch, 8>::run(row, a, act_stride, nblocks, out);
          break;
        case 4:
          RowTile<Arch, 4>::run(row, a, act_stride, nblocks, out);
          break;
        case 2:
          RowTile<Arch, 2>::run(row, a, act_stride, nblocks, out);
          break;
        default:
          RowTile<Arch, 1>::run(row, a, act_stride, nblocks, out);
          break;
      }
      for (std::size_t t = 0; t < tn; ++t) {
        float& dst = y[(t0 + t) * y_stride + r];
        dst = kAssign ? out[t] : dst + out[t];
      }
    }
    t0 += tn;
  }
}

}  // namespace smol::simd
