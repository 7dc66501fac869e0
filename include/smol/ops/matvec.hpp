// matvec: y = W x for one token (decode). Memory-bound: W streams from the mmap once,
// so x is quantized once and the threads take contiguous chunks of rows, big enough for
// the hardware prefetchers, from a shared counter.
#pragma once

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <span>
#include <type_traits>

#include "smol/core/error.hpp"
#include "smol/core/ggml_type.hpp"
#include "smol/ops/context.hpp"
#include "smol/ops/weight_matrix.hpp"
#include "smol/ops/weight_rows.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/quant/rows16.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/quant/weight_types.hpp"
#include "smol/simd/q8k_lanes.hpp"

namespace smol {

// The most matrices one matvec_shared_input call takes (q, k and v).
inline constexpr std::size_t kMaxSharedInput = 4;

// What matmul does with a single token: the decode kernels (matvec, the fastest for
// one token), or the same tile kernels as for a block, whose per-token float order is
// the same at any n, so a token's result never depends on how many share its batch.
// matvec itself takes it too: with `tiles` (where matvec_rounds_like_tiles said matvec
// gives the tiles' bits) it must keep to them, and never takes WeightKernels::dot_plain.
enum class OneToken { matvec, tiles };

namespace detail {

// The dot a one-token step on the file's rows takes: the set's faster dot for plain
// decode where it has one and no batch invariance is asked (WeightKernels::dot_plain),
// else `dot`.
template <class W>
auto decode_dot(const WeightKernels<W>& k, OneToken one_token) noexcept {
  return one_token == OneToken::matvec && k.dot_plain != nullptr ? k.dot_plain : k.dot;
}

// Decode for weights of type W: the interleaved copy where the model made one, else the
// dot on lane-packed activations where the set has it, else the plain dot (decode_dot).
template <class W>
void matvec_of(Context& ctx, const WeightMatrix& w, const float* x, float* y, OneToken one_token) {
  const WeightKernels<W>& k = ctx.kernels().of(W{});
  const auto* xq = activations_for<W>(ctx, x, w.cols, 1);
  using Rows8 = typename WeightKernels<W>::Rows8;
  if constexpr (!std::is_void_v<Rows8>) {
    if (w.rows8 != nullptr) return stream_rows8<Rows8>(ctx, w, xq, k.rows8, y);
  }
  using Rows16 = typename WeightKernels<W>::Rows16;
  if constexpr (!std::is_void_v<Rows16>) {
    if (w.rows8 != nullptr) return stream_rows16<Rows16>(ctx, w, xq, k.rows16, y);
  }
  if constexpr (std::is_same_v<typename W::Activation, BlockQ8K>) {
    if (k.dot_lanes != nullptr) {
      const std::size_t nblocks = w.cols / QK_K;
      auto* lanes = ctx.scratch_as<BlockQ8KLanes>(Scratch::packed_activations, nblocks);
      pack_q8k_lanes(k.lanes, xq, lanes, nblocks);
      return stream_file_rows<typename W::Block>(ctx, w, lanes, k.dot_lanes, false, y);
    }
  }
  stream_file_rows<typename W::Block>(ctx, w, xq, decode_dot(k, one_token), k.dot_streams, y);
}

// This thread's index in the context's arena, or threads() outside it (only one chunk
// runs outside the arena), so per-thread scratch needs threads() + 1 slots.
inline std::size_t thread_slot(Context& ctx) noexcept {
  const int slot = tbb::this_task_arena::current_thread_index();
  return slot >= 0 && slot < ctx.threads() ? static_cast<std::size_t>(slot)
                                           : static_cast<std::size_t>(ctx.threads());
}

// matvec_of for several matrices of type W and one width sharing the input x: x is
// quantized once, and the rows of all of them (or their groups of eight, where every
// one has an interleaved copy) are streamed in one pass over the threads. Each row gets
// the kernel call that matvec_of makes for it, so every value is the same.
template <class W>
void matvec_shared_input_of(Context& ctx, std::span<const WeightMatrix* const> ws, const float* x,
                            std::span<float* const> ys, OneToken one_token) {
  const WeightKernels<W>& k = ctx.kernels().of(W{});
  const WeightMatrix& first = *ws[0];
  const auto* xq = activations_for<W>(ctx, x, first.cols, 1);
  // Items are rows, or groups of eight rows; job j owns items [starts[j], starts[j + 1]).
  std::size_t starts[kMaxSharedInput + 1] = {0};
  const auto each_item = [&](std::size_t items_per_matrix_row, std::size_t item_bytes,
                             auto run_items) {
    for (std::size_t j = 0; j < ws.size(); ++j) {
      starts[j + 1] = starts[j] + ws[j]->rows / items_per_matrix_row;
    }
    for_each_streamed_chunk(ctx, starts[ws.size()], item_bytes,
                            [&](std::size_t begin, std::size_t end) {
                              for (std::size_t j = 0; j < ws.size(); ++j) {
                                const std::size_t lo = std::max(begin, starts[j]);
                                const std::size_t hi = std::min(end, starts[j + 1]);
                                if (lo < hi) run_items(j, lo - starts[j], hi - starts[j]);
                              }
                            });
  };
  using Rows8 = typename WeightKernels<W>::Rows8;
  if constexpr (!std::is_void_v<Rows8>) {
    if (std::all_of(ws.begin(), ws.end(), [](const WeightMatrix* w) { return w->rows8; })) {
      const std::size_t nblocks = first.cols / QK_K;
      return each_item(kRowsPerGroup, nblocks * sizeof(Rows8),
                       [&](std::size_t j, std::size_t g0, std::size_t g1) {
                         const auto* groups = reinterpret_cast<const Rows8*>(ws[j]->rows8);
                         for (std::size_t g = g0; g < g1; ++g) {
                           k.rows8(groups + g * nblocks, nblocks, xq, nblocks, 1,
                                   ys[j] + g * kRowsPerGroup, 0, WeightsFrom::memory);
                         }
                       });
    }
  }
  using Rows16 = typename WeightKernels<W>::Rows16;
  if constexpr (!std::is_void_v<Rows16>) {
    if (std::all_of(ws.begin(), ws.end(), [](const WeightMatrix* w) { return w->rows8; })) {
      const std::size_t nblocks = first.cols / W::values_per_block;
      const auto* terms = rows16_terms<Rows16>(ctx, xq, nblocks);
      // Items are groups of sixteen rows; a matrix's last group may be partial.
      for (std::size_t j = 0; j < ws.size(); ++j) {
        starts[j + 1] = starts[j] + (ws[j]->rows + kRows16 - 1) / kRows16;
      }
      return for_each_streamed_chunk(
          ctx, starts[ws.size()], nblocks * sizeof(Rows16),
          [&](std::size_t begin, std::size_t end) {
            for (std::size_t j = 0; j < ws.size(); ++j) {
              const auto* groups = reinterpret_cast<const Rows16*>(ws[j]->rows8);
              const std::size_t lo = std::max(begin, starts[j]), hi = std::min(end, starts[j + 1]);
              for (std::size_t item = lo; item < hi; ++item) {
                const std::size_t g = item - starts[j];
                k.rows16(groups + g * nblocks, nblocks, ws[j]->rows - g * kRows16, xq, nblocks, 1,
                         terms, ys[j] + g * kRows16, 0);
              }
            }
          });
    }
  }
  const std::size_t nblocks = first.cols / W::values_per_block;
  const auto rows = [&](const auto* act, auto dot, bool dot_streams) {
    each_item(1, first.row_bytes, [&](std::size_t j, std::size_t r0, std::size_t r1) {
      const WeightMatrix& w = *ws[j];
      for (std::size_t r = r0; r < r1; ++r) {
        if (!dot_streams) prefetch_ahead(w, r);
        ys[j][r] = dot(reinterpret_cast<const typename W::Block*>(w.row(r)), act, nblocks);
      }
    });
  };
  if constexpr (std::is_same_v<typename W::Activation, BlockQ8K>) {
    if (k.dot_lanes != nullptr) {
      auto* lanes = ctx.scratch_as<BlockQ8KLanes>(Scratch::packed_activations, nblocks);
      pack_q8k_lanes(k.lanes, xq, lanes, nblocks);
      return rows(lanes, k.dot_lanes, false);
    }
  }
  rows(xq, decode_dot(k, one_token), k.dot_streams);
}

// Reference mode: dequantize each row, then an f32 dot.
inline void matvec_f32_reference(Context& ctx, const WeightMatrix& w, const float* x, float* y) {
  const std::size_t slots = static_cast<std::size_t>(ctx.threads()) + 1;
  float* rows = ctx.scratch_as<float>(Scratch::rows, slots * w.cols);
  const auto dot_f32 = ctx.kernels().of<GgmlType::F32>().dot;
  for_row_chunks(ctx, w.rows, w.row_bytes, [&](std::size_t first, std::size_t last) {
    float* row = rows + detail::thread_slot(ctx) * w.cols;
    for (std::size_t r = first; r < last; ++r) {
      dequantize_row(w.type, w.row(r), row, w.cols);
      y[r] = dot_f32(row, x, w.cols);
    }
  });
}

}  // namespace detail

// y[w.rows] = W x, with x holding w.cols values.
inline void matvec(Context& ctx, const WeightMatrix& w, const float* x, float* y,
                   OneToken one_token = OneToken::matvec) {
  detail::check_weight_matrix(w, "matvec");
  if (ctx.activation_precision == ActivationPrecision::f32) {
    detail::matvec_f32_reference(ctx, w, x, y);
    return;
  }
  visit_weight_type(w.type, [&]<class W>(W) { detail::matvec_of<W>(ctx, w, x, y, one_token); });
}

// ys[j][ws[j]->rows] = W_j x for matrices that read the same input (a block's q, k and v
// projections; its feed-forward's gate and up): the same values as one matvec per
// matrix. When they share a type and width, x is quantized once and all their rows go
// through one pass over the threads: on a small model, whose matrices take microseconds,
// the hand-off to the threads is a large part of each matvec.
inline void matvec_shared_input(Context& ctx, std::span<const WeightMatrix* const> ws,
                                const float* x, std::span<float* const> ys,
                                OneToken one_token = OneToken::matvec) {
  if (ws.size() != ys.size() || ws.size() > kMaxSharedInput) {
    fail("matvec_shared_input: ", ws.size(), " matrices and ", ys.size(), " outputs (at most ",
         kMaxSharedInput, ")");
  }
  const bool fused = !ws.empty() && ctx.activation_precision != ActivationPrecision::f32 &&
                     std::all_of(ws.begin(), ws.end(), [&](const WeightMatrix* w) {
                       return w->type == ws[0]->type && w->cols == ws[0]->cols &&
                              (w->rows8 == nullptr) == (ws[0]->rows8 == nullptr);
                     });
  if (!fused) {
    for (std::size_t j = 0; j < ws.size(); ++j) matvec(ctx, *ws[j], x, ys[j], one_token);
    return;
  }
  for (const WeightMatrix* w : ws) detail::check_weight_matrix(*w, "matvec");
  visit_weight_type(ws[0]->type, [&]<class W>(W) {
    detail::matvec_shared_input_of<W>(ctx, ws, x, ys, one_token);
  });
}

}  // namespace smol
