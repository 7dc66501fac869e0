// matmul: Y = X W^T for a block of tokens (prefill). Compute-bound, so each weight
// block is loaded once and used for a tile of tokens: where a type's kernel unit has
// them, the interleaved-rows, matrix-unit or tile kernels (simd/q8k_lanes.hpp, or the
// type's own activation blocks for the 32-value types); otherwise its dot kernel looped over
// cache-sized blocks of rows and tokens.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <span>
#include <utility>

#include "smol/ops/context.hpp"
#include "smol/ops/matvec.hpp"
#include "smol/ops/weight_matrix.hpp"
#include "smol/ops/weight_rows.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/simd/q8k_lanes.hpp"

namespace smol {
namespace detail {

// Tiled path. Rows are split over threads in chunks whose weights (~256 KB) stay in L2
// while every block of tokens passes; long rows are cut into segments so that one
// 16-token tile of activations (16 x 8 blocks x 384 B) stays in L1/L2 across the rows.
inline void matmul_tiled(Context& ctx, const WeightMatrix& w, const float* x, std::size_t n_tokens,
                         float* y, TileFn tile, LaneSums kind) {
  const Kernels& k = ctx.kernels();
  const std::size_t nblocks = w.cols / QK_K;
  auto* q8 = ctx.scratch_as<BlockQ8K>(Scratch::activations, n_tokens * nblocks);
  auto* lanes = ctx.scratch_as<BlockQ8KLanes>(Scratch::packed_activations, n_tokens * nblocks);
  parallel_chunks(ctx, n_tokens, 8, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) {
      k.quantize_row_q8k(x + t * w.cols, q8 + t * nblocks, w.cols);
      pack_q8k_lanes(kind, q8 + t * nblocks, lanes + t * nblocks, nblocks);
    }
  });
  std::fill(y, y + n_tokens * w.rows, 0.0f);
  const std::size_t block_bytes = w.row_bytes / nblocks;
  const std::size_t chunk_rows = std::clamp<std::size_t>(256 * 1024 / w.row_bytes, 8, 64);
  constexpr std::size_t kTokenBlock = 64, kSegmentBlocks = 8;
  parallel_chunks(ctx, w.rows, chunk_rows, [&](std::size_t first, std::size_t last) {
    for (std::size_t r0 = first; r0 < last; r0 += chunk_rows) {
      const std::size_t nr = std::min(chunk_rows, last - r0);
      for (std::size_t t0 = 0; t0 < n_tokens; t0 += kTokenBlock) {
        const std::size_t nt = std::min(kTokenBlock, n_tokens - t0);
        for (std::size_t b0 = 0; b0 < nblocks; b0 += kSegmentBlocks) {
          tile(w.row(r0) + b0 * block_bytes, w.row_bytes, nr, lanes + t0 * nblocks + b0, nblocks,
               std::min(kSegmentBlocks, nblocks - b0), nt, y + t0 * w.rows + r0, w.rows);
        }
      }
    }
  });
}

// Packed-tokens path (AMX's matrix unit; the AVX-512 tokens-in-lanes kernels): tokens
// packed into 16-token tiles once (packed_token_tiles), then each thread takes whole groups
// of 16 rows; the kernel expands or unpacks a group's weights once for all tiles. The
// tokens are Q8_K tiles whatever the weights' type, so matrices that read the same input
// share them (matmul_shared_input).
inline TokenTiles packed_token_tiles(Context& ctx, const float* x, std::size_t cols,
                                     std::size_t n_tokens) {
  const Kernels& k = ctx.kernels();
  const std::size_t nblocks = cols / QK_K;
  auto* q8 = ctx.scratch_as<BlockQ8K>(Scratch::activations, n_tokens * nblocks);
  auto* quants = ctx.scratch_as<std::int8_t>(Scratch::packed_activations,
                                             token_tiles_quant_bytes(n_tokens, nblocks));
  auto* scales = ctx.scratch_as<float>(
      Scratch::activation_scales,
      token_tiles_scale_count(n_tokens, nblocks) + token_tiles_sub_sum_count(n_tokens, nblocks));
  float* sub_sums = scales + token_tiles_scale_count(n_tokens, nblocks);
  auto* pair_sums = ctx.scratch_as<std::int16_t>(Scratch::token_pair_sums,
                                                 token_tiles_pair_sum_count(n_tokens, nblocks));
  clear_token_padding(n_tokens, nblocks, quants, scales, sub_sums, pair_sums);
  parallel_chunks(ctx, n_tokens, 8, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) {
      k.quantize_row_q8k(x + t * cols, q8 + t * nblocks, cols);
      pack_token_tile(q8 + t * nblocks, t, nblocks, quants, scales, sub_sums, pair_sums);
    }
  });
  return TokenTiles{quants, scales, sub_sums, pair_sums, n_tokens, nblocks};
}

// The rows of a packed-tokens call: read from `rows` at `row_bytes` apart, the file's, or the
// interleaved copy's (WeightKernels::packed_rows8, whose groups of 8 rows lie 8 * row_bytes
// apart).
struct PackedTokensCall {
  MatrixFn matrix = nullptr;  // none: the path does not take packed tokens for this count
  const std::byte* rows = nullptr;
  std::size_t row_bytes = 0;
};

inline void matmul_packed_tokens(Context& ctx, const WeightMatrix& w, const TokenTiles& act,
                                 float* y, const PackedTokensCall& call) {
  const std::size_t per_thread = matrix_scratch_bytes(w.cols);
  std::byte* scratch = ctx.scratch(Scratch::rows, per_thread * (ctx.threads() + 1));
  const std::size_t groups = (w.rows + kTokenTile - 1) / kTokenTile;
  parallel_chunks(ctx, groups, 1, [&](std::size_t first, std::size_t last) {
    const std::size_t r0 = first * kTokenTile, r1 = std::min(last * kTokenTile, w.rows);
    call.matrix(call.rows + r0 * call.row_bytes, call.row_bytes, r1 - r0, act, y + r0, w.rows,
                scratch + thread_slot(ctx) * per_thread);
  });
}

// Repacked rows (WeightMatrix::rows8): threads take chunks of 8-row groups (~256 KB of
// weights, which stay in L2); each group passes over a block of tokens whose Q8_K rows
// (16 x up to 43 blocks x 292 B) stay in L2 too.
template <class Rows8>
void matmul_rows8(Context& ctx, const WeightMatrix& w, const BlockQ8K* q8, std::size_t n_tokens,
                  Rows8Fn<Rows8> kernel, float* y) {
  const auto* rows8 = reinterpret_cast<const Rows8*>(w.rows8);
  const std::size_t nblocks = w.cols / QK_K, groups = w.rows / kRowsPerGroup;
  constexpr std::size_t kTokenBlock = 16;
  const std::size_t chunk_groups = std::max<std::size_t>(1, 256 * 1024 / (nblocks * sizeof(Rows8)));
  parallel_chunks(ctx, groups, chunk_groups, [&](std::size_t first, std::size_t last) {
    for (std::size_t g0 = first; g0 < last; g0 += chunk_groups) {
      const std::size_t g1 = std::min(g0 + chunk_groups, last);
      for (std::size_t t0 = 0; t0 < n_tokens; t0 += kTokenBlock) {
        const std::size_t nt = std::min(kTokenBlock, n_tokens - t0);
        // The first token block meets the chunk in memory, the later ones in L2.
        const WeightsFrom from = t0 == 0 ? WeightsFrom::memory : WeightsFrom::cache;
        for (std::size_t g = g0; g < g1; ++g) {
          kernel(rows8 + g * nblocks, nblocks, q8 + t0 * nblocks, nblocks, nt,
                 y + t0 * w.rows + g * kRowsPerGroup, w.rows, from);
        }
      }
    }
  });
}

// Up to this many tokens, an eight-row copy that prefill reads on packed tokens takes the
// decode kernel over the tokens instead (WeightKernels::rows8, each block's weights
// loaded once for all of them) where that kernel rounds alike
// (WeightKernels::rows8_rounds_like_packed): a server decoding a few sequences,
// speculative decoding verifying a draft. The matrix unit first expands every block of
// the copy into bytes, a cost that a long prefill shares among its tiles and a few tokens
// pay alone: for 8 tokens the decode kernel's weight pass costs well under half the
// matrix unit's, and not twice one token's (bench/HISTORY.md, "Figures moved from code
// comments"). A remainder past whole tiles stays on the matrix unit, whose expansion the
// tiles already paid for.
inline constexpr std::size_t kRows8FewTokens = 16;

// Up to this many tokens, the file's rows of a type whose dot rounds as its matrix unit
// (WeightKernels::dot_rounds_like_matrix: Q2_K, Q3_K on AMX) take that dot per token, a
// row's weights read once from memory for all of them, instead of the matrix unit, which
// expands every block of the rows first whatever the count. The dots' pass grows with the
// tokens and the matrix unit's barely does: on the 3B Q2_K and Q3_K_M files (smol-bench
// -npl) the dots win up to about 4 sequences and lose clearly at 8 (bench/HISTORY.md, "A
// few tokens off the matrix unit").
inline constexpr std::size_t kDotsFewTokens = 4;

// Any type through its dot kernel, in blocks of rows x tokens that fit in cache. `xs`
// holds n_tokens activation rows of `count` elements (blocks, or floats).
template <class Block, class Act>
void matmul_by_dots(Context& ctx, const WeightMatrix& w, const Act* xs, std::size_t n_tokens,
                    float* y, float (*dot)(const Block*, const Act*, std::size_t)) {
  const std::size_t count = w.cols / ggml_type_info(w.type).block_values;
  constexpr std::size_t kTokenBlock = 16;
  const std::size_t chunk_rows = std::clamp<std::size_t>(64 * 1024 / w.row_bytes, 4, 256);
  parallel_chunks(ctx, w.rows, chunk_rows, [&](std::size_t first, std::size_t last) {
    for (std::size_t r0 = first; r0 < last; r0 += chunk_rows) {
      const std::size_t r1 = std::min(r0 + chunk_rows, last);
      for (std::size_t t0 = 0; t0 < n_tokens; t0 += kTokenBlock) {
        const std::size_t t1 = std::min(t0 + kTokenBlock, n_tokens);
        for (std::size_t r = r0; r < r1; ++r) {
          const auto* row = reinterpret_cast<const Block*>(w.row(r));
          for (std::size_t t = t0; t < t1; ++t) y[t * w.rows + r] = dot(row, xs + t * count, count);
        }
      }
    }
  });
}

// The row chunks of the tile kernels on the file's rows (tile_dots, tile_dots_packed):
// threads take chunks of rows (a few KB of weights, which stay in L1/L2 while every token
// tile passes); small chunks, since these matrices are small and compute-bound.
// tile(r0, nr) runs rows [r0, r0 + nr).
template <class Tile>
void for_each_tile_chunk(Context& ctx, const WeightMatrix& w, const Tile& tile) {
  const std::size_t threads = static_cast<std::size_t>(ctx.threads());
  const std::size_t chunk_rows = std::clamp<std::size_t>(w.rows / (4 * threads), 16, 64);
  parallel_chunks(ctx, w.rows, chunk_rows, [&](std::size_t first, std::size_t last) {
    for (std::size_t r0 = first; r0 < last; r0 += chunk_rows) {
      tile(r0, std::min(chunk_rows, last - r0));
    }
  });
}

// A type's tiles on its own activation blocks (WeightKernels::tile_dots).
template <class W>
void matmul_tile_dots(Context& ctx, const WeightMatrix& w, const typename W::Activation* xs,
                      std::size_t n_tokens, float* y, decltype(WeightKernels<W>::tile_dots) tile) {
  const std::size_t count = w.cols / ggml_type_info(w.type).block_values;
  for_each_tile_chunk(ctx, w, [&](std::size_t r0, std::size_t nr) {
    tile(w.row(r0), w.row_bytes, nr, xs, count, count, n_tokens, y + r0, w.rows);
  });
}

// The activations of a 32-value type W in both forms its kernels take: quantized to its
// blocks (Scratch::activations, for a few tokens on the decode kernel), and the first
// `tiled` of them packed as Block32Tiles (Scratch::packed_activations and
// activation_scales, padding cleared), each token packed by the thread that quantized it.
template <class W>
std::pair<const typename W::Activation*, Block32Tiles> block32_activations(
    Context& ctx, const float* x, std::size_t cols, std::size_t n_tokens, std::size_t tiled) {
  using Act = typename W::Activation;
  constexpr bool kMin = std::is_same_v<Act, BlockQ8_1>;
  const std::size_t nblocks = cols / W::values_per_block;
  auto* quants = ctx.scratch_as<std::int8_t>(Scratch::packed_activations,
                                             block32_tiles_quant_bytes(tiled, nblocks));
  const std::size_t scale_count = block32_tiles_scale_count(tiled, nblocks);
  float* d = ctx.scratch_as<float>(Scratch::activation_scales, (kMin ? 2 : 1) * scale_count);
  const Block32Tiles tiles{quants, d, kMin ? d + scale_count : nullptr, tiled, nblocks};
  clear_block32_padding(tiles);
  const Act* xs = activations_for<W>(ctx, x, cols, n_tokens, [&](std::size_t t, const Act* blocks) {
    if (t < tiled) pack_block32_token(blocks, t, tiles);
  });
  return {xs, tiles};
}

// The file's rows of a 32-value type on tiles that take the tokens packed
// (WeightKernels::tile_dots_packed).
template <class W>
void matmul_tile_dots_packed(Context& ctx, const WeightMatrix& w, const Block32Tiles& tiles,
                             float* y, decltype(WeightKernels<W>::tile_dots_packed) tile) {
  for_each_tile_chunk(ctx, w, [&](std::size_t r0, std::size_t nr) {
    tile(w.row(r0), w.row_bytes, nr, tiles, y + r0, w.rows);
  });
}

// Prefill on a sixteen-row copy (WeightMatrix::rows8 of a 32-value type) where the set
// reads it with tiles (AMX), the tokens packed as tiles once per matmul (Block32Tiles):
// threads take chunks of whole groups, 16 to 128 rows a call, whose weights the kernel
// expands once for every token tile.
template <class W>
void matmul_rows16(Context& ctx, const WeightMatrix& w, const Block32Tiles& tiles, float* y,
                   decltype(WeightKernels<W>::tile_dots_rows16) tile) {
  using Rows16 = typename WeightKernels<W>::Rows16;
  const std::size_t nblocks = tiles.nblocks, groups = (w.rows + kRows16 - 1) / kRows16;
  const std::size_t threads = static_cast<std::size_t>(ctx.threads());
  const std::size_t chunk_groups = std::clamp<std::size_t>(w.rows / (4 * threads), 16, 128) / 16;
  const auto* copy = reinterpret_cast<const Rows16*>(w.rows8);
  parallel_chunks(ctx, groups, chunk_groups, [&](std::size_t first, std::size_t last) {
    for (std::size_t g0 = first; g0 < last; g0 += chunk_groups) {
      const std::size_t g1 = std::min(g0 + chunk_groups, last);
      const std::size_t nr = std::min(g1 * kRows16, w.rows) - g0 * kRows16;
      tile(copy + g0 * nblocks, nr, tiles, y + g0 * kRows16, w.rows);
    }
  });
}

// Up to this many tokens, a sixteen-row copy that AMX's tiles read takes the decode
// kernel over the tokens instead (WeightKernels::rows16, each block's weights loaded
// once for all of them), and so does a remainder this small past whole tiles of 16: the
// tiles' fixed cost per call (the weights unpacked into tile order, a whole tile's work
// for any count up to 16) outweighs their speed for a few tokens, as when speculative
// decoding verifies a draft or a server decodes a few sequences. Both round a token
// alike, so the choice is speed alone (bench: smol-bench --spec-type).
inline constexpr std::size_t kRows16FewTokens = 16;

// The kernels a prefill of W's matrix `w` runs on, in matmul_of's order of preference:
// one decision, which matmul_of follows and matvec_rounds_like_tiles reads.
enum class PrefillPath {
  rows8_packed,       // the eight-row copy, on packed token tiles (AMX's matrix unit;
                      // the tokens in the lanes on the other AVX-512 sets)
  rows8,              // the eight-row copy, through its multi-token kernel
  rows16_packed,      // the sixteen-row copy, on packed token tiles (IQ4_XS: AMX's matrix
                      // unit; the tokens in the lanes with AVX-512 VNNI)
  rows16,             // the sixteen-row copy, through its multi-token kernel (x86 but AMX)
  block32_copy,       // a 32-value type's sixteen-row copy, on tiles of packed tokens (AMX)
  block32_file_rows,  // a 32-value type's file rows, on tiles of packed tokens (AMX)
  matrix,             // the file's rows, through the matrix unit
  tile,               // the file's rows, on the lane tiles
  tile_dots,          // the file's rows, on the dot's tiles of tokens
  dots,               // the file's rows, one dot per row and token
};

template <class W>
PrefillPath prefill_path(const WeightKernels<W>& k, const WeightMatrix& w) {
  if constexpr (!std::is_void_v<typename WeightKernels<W>::Rows8>) {
    if (w.rows8 != nullptr) {
      return k.packed_rows8 != nullptr ? PrefillPath::rows8_packed : PrefillPath::rows8;
    }
  }
  if constexpr (!std::is_void_v<typename WeightKernels<W>::Rows16>) {
    if (w.rows8 != nullptr && k.packed_rows16 != nullptr) return PrefillPath::rows16_packed;
    if (w.rows8 != nullptr && k.rows16_prefills) return PrefillPath::rows16;
  }
  if constexpr (W::values_per_block == 32) {
    if (w.rows8 != nullptr && k.tile_dots_rows16 != nullptr) return PrefillPath::block32_copy;
    if (k.matrix == nullptr && k.tile == nullptr && k.tile_dots_packed != nullptr) {
      return PrefillPath::block32_file_rows;
    }
  }
  if (k.matrix != nullptr) return PrefillPath::matrix;
  if (k.tile != nullptr) return PrefillPath::tile;
  if (k.tile_dots != nullptr) return PrefillPath::tile_dots;
  return PrefillPath::dots;
}

inline bool is_block32(PrefillPath path) noexcept {
  return path == PrefillPath::block32_copy || path == PrefillPath::block32_file_rows;
}

// The tokens a block32 path takes packed: on the copy, whole tiles of 16, and a remainder
// of a few (or up to kRows16FewTokens in all) goes to the decode kernel over them, since
// a tile costs the same for 1 token as for 16; on the file rows, all of them.
inline std::size_t block32_tiled(PrefillPath path, std::size_t n_tokens) noexcept {
  if (path == PrefillPath::block32_file_rows) return n_tokens;
  const std::size_t rest = n_tokens <= kRows16FewTokens ? n_tokens : n_tokens % kTokenTile;
  return n_tokens - rest;
}

// The packed-tokens call matmul_of makes for `n_tokens` tokens on `path`, if it takes
// packed tokens: not on other paths, nor for a few tokens where the path's decode kernel
// rounds alike (kRows8FewTokens, kRows16FewTokens, kDotsFewTokens).
template <class W>
PackedTokensCall packed_tokens_call(const WeightKernels<W>& k, const WeightMatrix& w,
                                    PrefillPath path, std::size_t n_tokens) {
  using Rows8 = typename WeightKernels<W>::Rows8;
  using Rows16 = typename WeightKernels<W>::Rows16;
  switch (path) {
    case PrefillPath::rows8_packed:
      if constexpr (!std::is_void_v<Rows8>) {
        if (n_tokens <= kRows8FewTokens && k.rows8_rounds_like_packed) return {};
        return {k.packed_rows8, w.rows8, w.cols / QK_K * sizeof(Rows8) / kRowsPerGroup};
      }
      return {};
    case PrefillPath::rows16_packed:
      if constexpr (!std::is_void_v<Rows16>) {
        // The matrix unit expands every block first, and the tokens-in-lanes kernel unpacks
        // it, whatever the count (see kRows8FewTokens).
        if (n_tokens <= kRows16FewTokens) return {};
        return {k.packed_rows16, w.rows8, w.cols / W::values_per_block * sizeof(Rows16) / kRows16};
      }
      return {};
    case PrefillPath::matrix:
      if (n_tokens <= kDotsFewTokens && k.dot_rounds_like_matrix) return {};
      return {k.matrix, w.row(0), w.row_bytes};
    case PrefillPath::rows8:  // the paths that never take the matrix unit
    case PrefillPath::rows16:
    case PrefillPath::block32_copy:
    case PrefillPath::block32_file_rows:
    case PrefillPath::tile:
    case PrefillPath::tile_dots:
    case PrefillPath::dots:
      return {};
  }
  return {};
}

// Prefill on a block32 path with the tokens made once (block32_activations): `xs`, all
// n_tokens quantized; `tiles`, the first block32_tiled(path, n_tokens) packed.
template <class W>
void matmul_block32(Context& ctx, const WeightMatrix& w, PrefillPath path,
                    const typename W::Activation* xs, const Block32Tiles& tiles,
                    std::size_t n_tokens, float* y) {
  const WeightKernels<W>& k = ctx.kernels().of(W{});
  if (path == PrefillPath::block32_file_rows) {
    return matmul_tile_dots_packed<W>(ctx, w, tiles, y, k.tile_dots_packed);
  }
  if constexpr (!std::is_void_v<typename WeightKernels<W>::Rows16>) {
    const std::size_t tiled = tiles.n_tokens, rest = n_tokens - tiled;
    if (tiled > 0) matmul_rows16<W>(ctx, w, tiles, y, k.tile_dots_rows16);
    if (rest > 0) {
      stream_rows16<typename WeightKernels<W>::Rows16>(ctx, w, xs + tiled * tiles.nblocks, k.rows16,
                                                       y + tiled * w.rows, rest);
    }
  }
}

// Prefill for weights of type W, on the fastest path the set and the model offer
// (prefill_path): the interleaved copy (on the matrix unit where the set has it), the
// matrix unit, the tiles, else the dot kernel. A few tokens on a path whose decode kernel
// rounds as it does take that kernel over them (kRows8FewTokens, kRows16FewTokens,
// kDotsFewTokens).
template <class W>
void matmul_of(Context& ctx, const WeightMatrix& w, const float* x, std::size_t n_tokens,
               float* y) {
  const WeightKernels<W>& k = ctx.kernels().of(W{});
  using Rows8 = typename WeightKernels<W>::Rows8;
  using Rows16 = typename WeightKernels<W>::Rows16;
  const auto activations = [&] { return activations_for<W>(ctx, x, w.cols, n_tokens); };
  const PrefillPath path = prefill_path<W>(k, w);
  if (const PackedTokensCall call = packed_tokens_call<W>(k, w, path, n_tokens); call.matrix) {
    return matmul_packed_tokens(ctx, w, packed_token_tiles(ctx, x, w.cols, n_tokens), y, call);
  }
  switch (path) {  // every other path, and the packed-tokens paths with a few tokens
    case PrefillPath::rows8_packed:
      if constexpr (!std::is_void_v<Rows8>) {
        return stream_rows8<Rows8>(ctx, w, activations(), k.rows8, y, n_tokens);
      }
      break;
    case PrefillPath::rows8:
      if constexpr (!std::is_void_v<Rows8>) {
        return matmul_rows8<Rows8>(ctx, w, activations(), n_tokens, k.rows8, y);
      }
      break;
    case PrefillPath::rows16_packed:  // a few tokens, off the packed tiles
    case PrefillPath::rows16:
      if constexpr (!std::is_void_v<Rows16>) {
        return stream_rows16<Rows16>(ctx, w, activations(), k.rows16, y, n_tokens);
      }
      break;
    case PrefillPath::block32_copy:
    case PrefillPath::block32_file_rows:
      if constexpr (W::values_per_block == 32) {
        const auto [xs, tiles] =
            block32_activations<W>(ctx, x, w.cols, n_tokens, block32_tiled(path, n_tokens));
        return matmul_block32<W>(ctx, w, path, xs, tiles, n_tokens, y);
      }
      break;
    case PrefillPath::matrix:
      return stream_file_rows<typename W::Block>(ctx, w, activations(), k.dot, k.dot_streams, y,
                                                 n_tokens);
    case PrefillPath::tile:
      return matmul_tiled(ctx, w, x, n_tokens, y, k.tile, k.lanes);
    case PrefillPath::tile_dots:
      return matmul_tile_dots<W>(ctx, w, activations(), n_tokens, y, k.tile_dots);
    case PrefillPath::dots:
      return matmul_by_dots(ctx, w, activations(), n_tokens, y, k.dot);
  }
  // prefill_path names a copy's path only for a type with that copy, and a block32 path
  // only for a 32-value type: a break above is a broken kernel table, not a fallback.
  fail("matmul: prefill path ", static_cast<int>(path), " has no kernel for ",
       ggml_type_name(W::type));
}

// Reference mode: each row dequantized once, dotted with every token in f32.
inline void matmul_f32_reference(Context& ctx, const WeightMatrix& w, const float* x,
                                 std::size_t n_tokens, float* y) {
  const std::size_t slots = static_cast<std::size_t>(ctx.threads()) + 1;
  float* rows = ctx.scratch_as<float>(Scratch::rows, slots * w.cols);
  const auto dot_f32 = ctx.kernels().of<GgmlType::F32>().dot;
  parallel_chunks(ctx, w.rows, 16, [&](std::size_t first, std::size_t last) {
    float* row = rows + thread_slot(ctx) * w.cols;
    for (std::size_t r = first; r < last; ++r) {
      dequantize_row(w.type, w.row(r), row, w.cols);
      for (std::size_t t = 0; t < n_tokens; ++t) {
        y[t * w.rows + r] = dot_f32(row, x + t * w.cols, w.cols);
      }
    }
  });
}

}  // namespace detail

// Whether matvec gives a token exactly the bits the tiles give it, so that OneToken::tiles
// may take the decode kernel for one token at no cost to batch invariance. Where there is
// a copy, decode reads it: true where prefill reads the sixteen-row copy too (AMX's tiles
// and matrix unit, whose tokens the decode kernel rounds alike, quant/rows16.hpp; the other
// x86 sets' prefill through the decode kernel itself), and on an eight-row copy where its
// decode kernel rounds as the kernel on packed tokens (WeightKernels::rows8_rounds_like_packed:
// Q4_K, Q5_K, Q6_K on AMX's matrix unit; the tokens-in-lanes kernels of the other AVX-512
// sets). On the file's rows, where the set's dot sums as its matrix kernel
// (WeightKernels::dot_rounds_like_matrix: Q2_K, Q3_K on AMX) or its tile_dots do
// (WeightKernels::dot_rounds_like_tile_dots). Both tested bit for bit in test_matmul.
// Elsewhere the two sum in different orders, and one token must run on the tiles.
inline bool matvec_rounds_like_tiles(Context& ctx, const WeightMatrix& w) {
  if (ctx.activation_precision == ActivationPrecision::f32) return false;
  bool same = false;
  visit_weight_type(w.type, [&]<class W>(W) {
    const WeightKernels<W>& k = ctx.kernels().of(W{});
    switch (detail::prefill_path<W>(k, w)) {
      case detail::PrefillPath::rows8_packed:
        same = k.rows8_rounds_like_packed;
        break;
      case detail::PrefillPath::rows16_packed:
      case detail::PrefillPath::rows16:  // the decode kernel itself, over the tokens
      case detail::PrefillPath::block32_copy:
        same = true;
        break;
      case detail::PrefillPath::matrix:
        same = w.rows8 == nullptr && k.dot_rounds_like_matrix;
        break;
      case detail::PrefillPath::tile_dots:
        same = w.rows8 == nullptr && k.dot_rounds_like_tile_dots;
        break;
      // The eight-row copy's multi-token kernel, the file rows' packed tiles and lane
      // tiles, and the plain dots each sum in an order of their own.
      case detail::PrefillPath::rows8:
      case detail::PrefillPath::block32_file_rows:
      case detail::PrefillPath::tile:
      case detail::PrefillPath::dots:
        same = false;
        break;
    }
  });
  return same;
}

// x: n_tokens x w.cols row-major; y: n_tokens x w.rows row-major.
inline void matmul(Context& ctx, const WeightMatrix& w, const float* x, std::size_t n_tokens,
                   float* y, OneToken one_token = OneToken::matvec) {
  detail::check_weight_matrix(w, "matmul");
  if (n_tokens == 0) return;
  if (n_tokens == 1 && (one_token == OneToken::matvec || matvec_rounds_like_tiles(ctx, w))) {
    matvec(ctx, w, x, y, one_token);
    return;
  }
  if (ctx.activation_precision == ActivationPrecision::f32) {
    detail::matmul_f32_reference(ctx, w, x, n_tokens, y);
    return;
  }
  visit_weight_type(w.type, [&]<class W>(W) { detail::matmul_of<W>(ctx, w, x, n_tokens, y); });
}

// matmul for matrices that read the same x (a block's q, k and v projections; its
// feed-forward's gate and up): ys[j] = x ws[j]^T, the same values as one matmul each.
// Where each takes the matrix unit (the K-quants and IQ4_XS on AMX, of any mix of types),
// or where they share a type and a block32 path (the 32-value types on AMX), x is
// quantized and packed once for all of them (up to kMaxSharedInput matrices; more take
// one matmul each). `after_each()` runs after each matrix (a long prefill polls its
// cancellation there).
template <class AfterEach>
void matmul_shared_input(Context& ctx, std::span<const WeightMatrix* const> ws, const float* x,
                         std::size_t n_tokens, std::span<float* const> ys, OneToken one_token,
                         const AfterEach& after_each) {
  if (ws.size() != ys.size()) {
    fail("matmul_shared_input: ", ws.size(), " matrices and ", ys.size(), " outputs");
  }
  const bool may_share = !ws.empty() && ws.size() <= kMaxSharedInput && n_tokens > 1 &&
                         ctx.activation_precision != ActivationPrecision::f32 &&
                         std::all_of(ws.begin(), ws.end(), [&](const WeightMatrix* w) {
                           return w->cols == ws[0]->cols && is_weight_type(w->type);
                         });
  // Each matrix's matrix-unit call (no allocation: a server's few-token steps come here
  // every block), and whether every one takes the matrix unit.
  std::array<detail::PackedTokensCall, kMaxSharedInput> calls{};
  bool all_matrix_unit = may_share;
  for (std::size_t j = 0; all_matrix_unit && j < ws.size(); ++j) {
    visit_weight_type(ws[j]->type, [&]<class W>(W) {
      const WeightKernels<W>& k = ctx.kernels().of(W{});
      calls[j] =
          detail::packed_tokens_call<W>(k, *ws[j], detail::prefill_path<W>(k, *ws[j]), n_tokens);
    });
    all_matrix_unit = calls[j].matrix != nullptr;
  }
  if (all_matrix_unit) {
    for (const WeightMatrix* w : ws) detail::check_weight_matrix(*w, "matmul");
    const TokenTiles act = detail::packed_token_tiles(ctx, x, ws[0]->cols, n_tokens);
    for (std::size_t j = 0; j < ws.size(); ++j) {
      detail::matmul_packed_tokens(ctx, *ws[j], act, ys[j], calls[j]);
      after_each();
    }
    return;
  }
  bool shared = false;
  if (may_share && std::all_of(ws.begin(), ws.end(),
                               [&](const WeightMatrix* w) { return w->type == ws[0]->type; })) {
    visit_weight_type(ws[0]->type, [&]<class W>(W) {
      if constexpr (W::values_per_block == 32) {
        const WeightKernels<W>& k = ctx.kernels().of(W{});
        const detail::PrefillPath path = detail::prefill_path<W>(k, *ws[0]);
        shared = detail::is_block32(path) &&
                 std::all_of(ws.begin(), ws.end(), [&](const WeightMatrix* w) {
                   return detail::prefill_path<W>(k, *w) == path;
                 });
        if (!shared) return;
        for (const WeightMatrix* w : ws) detail::check_weight_matrix(*w, "matmul");
        const auto [xs, tiles] = detail::block32_activations<W>(
            ctx, x, ws[0]->cols, n_tokens, detail::block32_tiled(path, n_tokens));
        for (std::size_t j = 0; j < ws.size(); ++j) {
          detail::matmul_block32<W>(ctx, *ws[j], path, xs, tiles, n_tokens, ys[j]);
          after_each();
        }
      }
    });
  }
  if (shared) return;
  for (std::size_t j = 0; j < ws.size(); ++j) {
    matmul(ctx, *ws[j], x, n_tokens, ys[j], one_token);
    after_each();
  }
}

}  // namespace smol
