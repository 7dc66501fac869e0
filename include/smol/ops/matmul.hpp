// matmul: Y = X W^T for a block of tokens (prefill). Compute-bound, so each weight
// block is loaded once and used for a tile of tokens: Q4_K / Q6_K go through the ISA's
// tile kernels on lane-packed activations (simd/q8k_lanes.hpp); other types, and ISAs
// without tiles, loop the dot kernels over cache-sized blocks of rows and tokens.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "smol/ops/context.hpp"
#include "smol/ops/matvec.hpp"
#include "smol/ops/weight_matrix.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/simd/q8k_lanes.hpp"

namespace smol {
namespace detail {

// Runs body(first, last) over [0, n) items in the context's arena, in chunks of at least
// `grain` items and about 8 per thread: prefill is compute-bound, so idle threads take
// over chunks (a static split would wait for a thread that shares its core).
template <class Body>
void parallel_chunks(Context& ctx, std::size_t n, std::size_t grain, Body&& body) {
  if (ctx.threads() == 1 || n <= grain) {
    body(std::size_t{0}, n);
    return;
  }
  const std::size_t chunk = std::max(grain, n / (8 * static_cast<std::size_t>(ctx.threads())));
  ctx.arena().execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<std::size_t>(0, n, chunk),
        [&](const tbb::blocked_range<std::size_t>& r) { body(r.begin(), r.end()); },
        tbb::simple_partitioner());
  });
}

// Tiled path. Rows are split over threads in chunks whose weights (~256 KB) stay in L2
// while every block of tokens passes; long rows are cut into segments so that one
// 16-token tile of activations (16 x 8 blocks x 384 B) stays in L1/L2 across the rows.
inline void matmul_tiled(Context& ctx, const WeightMatrix& w, const float* x, std::size_t n_tokens,
                         float* y, Kernels::TileFn tile, LaneSums kind) {
  const Kernels& k = ctx.kernels();
  const std::size_t nblocks = w.cols / QK_K;
  auto* q8 = ctx.scratch_as<BlockQ8K>(Scratch::activations, n_tokens * nblocks);
  auto* lanes = ctx.scratch_as<BlockQ8KLanes>(Scratch::packed_activations, n_tokens * nblocks);
  parallel_chunks(ctx, n_tokens, 8, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) {
      k.quantize_row_q8k(x + t * w.cols, q8 + t * nblocks, w.cols);
      if (kind == LaneSums::q4k_scaled_by_d) {
        pack_q8k_lanes<LaneSums::q4k_scaled_by_d>(q8 + t * nblocks, lanes + t * nblocks, nblocks);
      } else {
        pack_q8k_lanes<LaneSums::q6k_minus_32>(q8 + t * nblocks, lanes + t * nblocks, nblocks);
      }
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

// Matrix-unit path (AMX): tokens packed into 16-token tiles once, then each thread takes
// whole groups of 16 rows; the kernel expands a group's weights once for all tiles.
inline void matmul_matrix_unit(Context& ctx, const WeightMatrix& w, const float* x,
                               std::size_t n_tokens, float* y, Kernels::MatrixFn matrix) {
  const Kernels& k = ctx.kernels();
  const std::size_t nblocks = w.cols / QK_K;
  auto* q8 = ctx.scratch_as<BlockQ8K>(Scratch::activations, n_tokens * nblocks);
  auto* quants = ctx.scratch_as<std::int8_t>(Scratch::packed_activations,
                                             token_tiles_quant_bytes(n_tokens, nblocks));
  auto* scales = ctx.scratch_as<float>(
      Scratch::activation_scales,
      token_tiles_scale_count(n_tokens, nblocks) + token_tiles_sub_sum_count(n_tokens, nblocks));
  float* sub_sums = scales + token_tiles_scale_count(n_tokens, nblocks);
  clear_token_padding(n_tokens, nblocks, quants, scales, sub_sums);
  parallel_chunks(ctx, n_tokens, 8, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) {
      k.quantize_row_q8k(x + t * w.cols, q8 + t * nblocks, w.cols);
      pack_token_tile(q8 + t * nblocks, t, nblocks, quants, scales, sub_sums);
    }
  });
  const TokenTiles act{quants, scales, sub_sums, n_tokens, nblocks};
  const std::size_t per_thread = matrix_scratch_bytes(w.cols);
  std::byte* scratch = ctx.scratch(Scratch::rows, per_thread * (ctx.threads() + 1));
  const std::size_t groups = (w.rows + kTokenTile - 1) / kTokenTile;
  parallel_chunks(ctx, groups, 1, [&](std::size_t first, std::size_t last) {
    const std::size_t r0 = first * kTokenTile, r1 = std::min(last * kTokenTile, w.rows);
    matrix(w.row(r0), w.row_bytes, r1 - r0, act, y + r0, w.rows,
           scratch + thread_slot(ctx) * per_thread);
  });
}

// Repacked rows (WeightMatrix::rows8): threads take chunks of 8-row groups (~256 KB of
// weights, which stay in L2); each group passes over a block of tokens whose Q8_K rows
// (16 x up to 43 blocks x 292 B) stay in L2 too.
template <class Rows8>
void matmul_rows8(Context& ctx, const WeightMatrix& w, const float* x, std::size_t n_tokens,
                  Kernels::Rows8Fn<Rows8> kernel, float* y) {
  const Kernels& k = ctx.kernels();
  const auto* rows8 = reinterpret_cast<const Rows8*>(w.rows8);
  const std::size_t nblocks = w.cols / QK_K, groups = w.rows / kRowsPerGroup;
  auto* q8 = ctx.scratch_as<BlockQ8K>(Scratch::activations, n_tokens * nblocks);
  parallel_chunks(ctx, n_tokens, 8, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) {
      k.quantize_row_q8k(x + t * w.cols, q8 + t * nblocks, w.cols);
    }
  });
  constexpr std::size_t kTokenBlock = 16;
  const std::size_t chunk_groups = std::max<std::size_t>(1, 256 * 1024 / (nblocks * sizeof(Rows8)));
  parallel_chunks(ctx, groups, chunk_groups, [&](std::size_t first, std::size_t last) {
    for (std::size_t g0 = first; g0 < last; g0 += chunk_groups) {
      const std::size_t g1 = std::min(g0 + chunk_groups, last);
      for (std::size_t t0 = 0; t0 < n_tokens; t0 += kTokenBlock) {
        const std::size_t nt = std::min(kTokenBlock, n_tokens - t0);
        for (std::size_t g = g0; g < g1; ++g) {
          kernel(rows8 + g * nblocks, nblocks, q8 + t0 * nblocks, nblocks, nt,
                 y + t0 * w.rows + g * kRowsPerGroup, w.rows);
        }
      }
    }
  });
}

// Any type through its dot kernel, in blocks of rows x tokens that fit in cache.
template <class Dot>
void matmul_by_dots(Context& ctx, const WeightMatrix& w, const std::byte* xs,
                    std::size_t x_row_bytes, std::size_t n_tokens, float* y, Dot dot) {
  constexpr std::size_t kTokenBlock = 16;
  const std::size_t chunk_rows = std::clamp<std::size_t>(64 * 1024 / w.row_bytes, 4, 256);
  parallel_chunks(ctx, w.rows, chunk_rows, [&](std::size_t first, std::size_t last) {
    for (std::size_t r0 = first; r0 < last; r0 += chunk_rows) {
      const std::size_t r1 = std::min(r0 + chunk_rows, last);
      for (std::size_t t0 = 0; t0 < n_tokens; t0 += kTokenBlock) {
        const std::size_t t1 = std::min(t0 + kTokenBlock, n_tokens);
        for (std::size_t r = r0; r < r1; ++r) {
          for (std::size_t t = t0; t < t1; ++t) {
            y[t * w.rows + r] = dot(w.row(r), xs + t * x_row_bytes);
          }
        }
      }
    }
  });
}

template <class Block, class Act, class Quantize, class Dot>
void matmul_quantized(Context& ctx, const WeightMatrix& w, const float* x, std::size_t n_tokens,
                      float* y, Quantize quantize, Dot dot) {
  const std::size_t nblocks = w.cols / BlockTraits<Block>::values;
  auto* xq = ctx.scratch_as<Act>(Scratch::activations, n_tokens * nblocks);
  parallel_chunks(ctx, n_tokens, 8, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) quantize(x + t * w.cols, xq + t * nblocks, w.cols);
  });
  matmul_by_dots(ctx, w, reinterpret_cast<const std::byte*>(xq), nblocks * sizeof(Act), n_tokens, y,
                 [&](const std::byte* row, const std::byte* act) {
                   return dot(reinterpret_cast<const Block*>(row),
                              reinterpret_cast<const Act*>(act), nblocks);
                 });
}

template <class Element, class Dot>
void matmul_float(Context& ctx, const WeightMatrix& w, const float* x, std::size_t n_tokens,
                  float* y, Dot dot) {
  matmul_by_dots(ctx, w, reinterpret_cast<const std::byte*>(x), w.cols * sizeof(float), n_tokens, y,
                 [&](const std::byte* row, const std::byte* act) {
                   return dot(reinterpret_cast<const Element*>(row),
                              reinterpret_cast<const float*>(act), w.cols);
                 });
}

// Reference mode: each row dequantized once, dotted with every token in f32.
inline void matmul_f32_reference(Context& ctx, const WeightMatrix& w, const float* x,
                                 std::size_t n_tokens, float* y) {
  const std::size_t slots = static_cast<std::size_t>(ctx.threads()) + 1;
  float* rows = ctx.scratch_as<float>(Scratch::rows, slots * w.cols);
  const auto dot_f32 = ctx.kernels().dot_f32;
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

// What matmul does with a single token: the decode kernels (matvec, the fastest for
// one token), or the same tile kernels as for a block, whose per-token float order is
// the same at any n, so a token's result never depends on how many share its batch.
enum class OneToken { matvec, tiles };

// x: n_tokens x w.cols row-major; y: n_tokens x w.rows row-major.
inline void matmul(Context& ctx, const WeightMatrix& w, const float* x, std::size_t n_tokens,
                   float* y, OneToken one_token = OneToken::matvec) {
  detail::check_weight_matrix(w, "matmul");
  if (n_tokens == 0) return;
  if (n_tokens == 1 && one_token == OneToken::matvec) {  // matmul(n = 1) equals matvec exactly
    matvec(ctx, w, x, y);
    return;
  }
  if (ctx.activation_precision == ActivationPrecision::f32) {
    detail::matmul_f32_reference(ctx, w, x, n_tokens, y);
    return;
  }
  const Kernels& k = ctx.kernels();
  switch (w.type) {
    case GgmlType::Q4_K:
      if (w.rows8 != nullptr) {
        detail::matmul_rows8<BlockQ4KRows8>(ctx, w, x, n_tokens, k.rows8_q4k_q8k, y);
      } else if (k.matrix_q4k_q8k) {
        detail::matmul_matrix_unit(ctx, w, x, n_tokens, y, k.matrix_q4k_q8k);
      } else if (k.tile_q4k_q8k) {
        detail::matmul_tiled(ctx, w, x, n_tokens, y, k.tile_q4k_q8k, LaneSums::q4k_scaled_by_d);
      } else {
        detail::matmul_quantized<BlockQ4K, BlockQ8K>(ctx, w, x, n_tokens, y, k.quantize_row_q8k,
                                                     k.dot_q4k_q8k);
      }
      return;
    case GgmlType::Q6_K:
      if (w.rows8 != nullptr) {
        detail::matmul_rows8<BlockQ6KRows8>(ctx, w, x, n_tokens, k.rows8_q6k_q8k, y);
      } else if (k.matrix_q6k_q8k) {
        detail::matmul_matrix_unit(ctx, w, x, n_tokens, y, k.matrix_q6k_q8k);
      } else if (k.tile_q6k_q8k) {
        detail::matmul_tiled(ctx, w, x, n_tokens, y, k.tile_q6k_q8k, LaneSums::q6k_minus_32);
      } else {
        detail::matmul_quantized<BlockQ6K, BlockQ8K>(ctx, w, x, n_tokens, y, k.quantize_row_q8k,
                                                     k.dot_q6k_q8k);
      }
      return;
    case GgmlType::Q8_0:
      detail::matmul_quantized<BlockQ8_0, BlockQ8_0>(ctx, w, x, n_tokens, y, k.quantize_row_q8_0,
                                                     k.dot_q8_0_q8_0);
      return;
    case GgmlType::Q4_0:
      detail::matmul_quantized<BlockQ4_0, BlockQ8_0>(ctx, w, x, n_tokens, y, k.quantize_row_q8_0,
                                                     k.dot_q4_0_q8_0);
      return;
    case GgmlType::F32:
      detail::matmul_float<float>(ctx, w, x, n_tokens, y, k.dot_f32);
      return;
    case GgmlType::F16:
      detail::matmul_float<f16_bits>(ctx, w, x, n_tokens, y, k.dot_f16_f32);
      return;
    case GgmlType::BF16:
      detail::matmul_float<bf16_bits>(ctx, w, x, n_tokens, y, k.dot_bf16_f32);
      return;
    default:
      break;  // rejected by check_weight_matrix
  }
}

}  // namespace smol
