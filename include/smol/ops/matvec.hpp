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

inline void check_weight_matrix(const WeightMatrix& w, const char* op) {
  const auto info = ggml_type_info(static_cast<std::uint32_t>(w.type));
  if (!info || !is_weight_type(w.type)) {
    fail(op, ": weight '", w.name, "' has type ", info ? info->name : std::string_view("unknown"),
         ", which has no kernel (supported: ", weight_type_names(), ")");
  }
  if (w.cols % info->block_values != 0) {
    fail(op, ": weight '", w.name, "' rows of ", w.cols, " values are not whole ", info->name,
         " blocks of ", info->block_values);
  }
  if (w.row_bytes != ggml_row_bytes(w.type, w.cols)) {
    fail(op, ": weight '", w.name, "' has row_bytes ", w.row_bytes, ", expected ",
         ggml_row_bytes(w.type, w.cols), " for ", w.cols, " ", info->name, " values");
  }
  if (w.data == nullptr && w.rows > 0) fail(op, ": weight '", w.name, "' has no data");
  bool has_rows8_layout = false, has_rows16_layout = false;
  visit_weight_type(w.type, [&]<class W>(W) {
    has_rows8_layout = !std::is_void_v<typename Rows8Of<typename W::Block>::type>;
    has_rows16_layout = !std::is_void_v<typename Rows16Of<typename W::Block>::type>;
  });
  if (w.rows8 != nullptr && !has_rows16_layout &&
      (!has_rows8_layout || w.rows % kRowsPerGroup != 0)) {
    fail(op, ": weight '", w.name, "' has an interleaved copy, but ", info->name,
         " has no such layout or the rows are not a multiple of ", kRowsPerGroup);
  }
}

// Runs body(first_row, last_row) over [0, rows) in the context's arena, one contiguous
// chunk per thread; small matrices stay on the calling thread.
template <class Body>
void for_row_chunks(Context& ctx, std::size_t rows, std::size_t row_bytes, Body&& body) {
  constexpr std::size_t kMinChunkBytes = 64 * 1024;
  const std::size_t min_rows =
      std::max<std::size_t>(1, kMinChunkBytes / std::max<std::size_t>(row_bytes, 1));
  if (ctx.threads() == 1 || rows <= min_rows) {
    body(std::size_t{0}, rows);
    return;
  }
  ctx.arena().execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<std::size_t>(0, rows, min_rows),
        [&](const tbb::blocked_range<std::size_t>& r) { body(r.begin(), r.end()); },
        tbb::static_partitioner());
  });
}

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

// Asks for the row ~4 KB ahead of the one being dotted (into L2): without it the
// hardware prefetcher alone falls behind while the core is busy with the dot, and
// decode loses a large share of its bandwidth (bench/README.md, "Figures moved from code
// comments"). It looks past the end of the thread's chunk (up to the matrix end): the next
// chunk is likely this thread's or a neighbour's, and a wasted prefetch costs less than a
// cold start.
inline void prefetch_ahead(const WeightMatrix& w, std::size_t row) noexcept {
  constexpr std::size_t kAheadBytes = 4096;
  const std::size_t ahead = row + (kAheadBytes + w.row_bytes - 1) / w.row_bytes;
  if (ahead >= w.rows) return;
  const std::byte* p = w.row(ahead);
  for (std::size_t off = 0; off < w.row_bytes; off += 64) __builtin_prefetch(p + off, 0, 2);
}

// Runs run(first, last) over [0, items) items of `item_bytes` weight bytes each. The
// items are handed out in chunks from a shared counter rather than one static
// chunk per thread: on shared cores a descheduled or slow thread then delays the
// matvec by one chunk, not by its whole share, at the cost of one atomic increment
// per chunk.
template <class Run>
void for_each_streamed_chunk(Context& ctx, std::size_t items, std::size_t item_bytes, Run run) {
  // Chunks as large as a balanced split allows: each chunk restarts the prefetch
  // stream, and a decode matvec streams markedly faster in 1 MB chunks than in 64 KB ones
  // (bench/README.md, "Figures moved from code comments"). At least two chunks per
  // thread, so that a descheduled thread holds up the rest by half its share at worst;
  // never below 64 KB nor above 1 MB.
  const std::size_t threads = static_cast<std::size_t>(ctx.threads());
  const std::size_t total_bytes = items * std::max<std::size_t>(item_bytes, 1);
  const std::size_t chunk_bytes =
      std::clamp<std::size_t>(total_bytes / (2 * threads), 64 * 1024, 1024 * 1024);
  const std::size_t chunk_items =
      std::max<std::size_t>(1, chunk_bytes / std::max<std::size_t>(item_bytes, 1));
  const std::size_t chunks = (items + chunk_items - 1) / chunk_items;
  if (threads == 1 || chunks < 2) {
    run(std::size_t{0}, items);
    return;
  }
  std::atomic<std::size_t> next{0};
  ctx.arena().execute([&] {
    tbb::parallel_for(
        std::size_t{0}, std::min(threads, chunks),
        [&](std::size_t) {
          for (std::size_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
            run(c * chunk_items, std::min(items, (c + 1) * chunk_items));
          }
        },
        tbb::static_partitioner());
  });
}

// The decode loops below take `n_tokens` tokens at once where matmul sends a few
// (matmul's few-token paths: a server's step of a few sequences, a speculative
// verification), each block of weights streamed from memory once for all of them; token
// t's results land at y + t * w.rows.

// Repacked rows (WeightMatrix::rows8): eight rows per kernel call, groups streamed like
// rows.
template <class Rows8>
void matvec_rows8(Context& ctx, const WeightMatrix& w, const BlockQ8K* xq, Rows8Fn<Rows8> kernel,
                  float* y, std::size_t n_tokens = 1) {
  const std::size_t nblocks = w.cols / QK_K;
  const auto* groups = reinterpret_cast<const Rows8*>(w.rows8);
  for_each_streamed_chunk(ctx, w.rows / kRowsPerGroup, nblocks * sizeof(Rows8),
                          [&](std::size_t first, std::size_t last) {
                            for (std::size_t g = first; g < last; ++g) {
                              kernel(groups + g * nblocks, nblocks, xq, nblocks, n_tokens,
                                     y + g * kRowsPerGroup, w.rows, WeightsFrom::memory);
                            }
                          });
}

// The tokens' terms for a sixteen-row copy's kernels (quant/rows16.hpp's
// rows16_token_terms: the blocks' factors as floats, and the offset sums where the copy
// holds levels plus an offset), made once for all the groups, one per token block.
template <class Rows16, class Act>
const Rows16Terms<Rows16>* rows16_terms(Context& ctx, const Act* xq, std::size_t nblocks,
                                        std::size_t n_tokens = 1) {
  auto* terms = ctx.scratch_as<Rows16Terms<Rows16>>(Scratch::token_terms, n_tokens * nblocks);
  rows16_token_terms(xq, n_tokens * nblocks, Rows16::kOffset, terms);
  return terms;
}

// The sixteen-row copy of a 32-value type or IQ4_XS (WeightMatrix::rows8 holds it):
// sixteen rows per kernel call, the last group's padding rows not written.
template <class Rows16, class Act, class Kernel>
void matvec_rows16(Context& ctx, const WeightMatrix& w, const Act* xq, Kernel kernel, float* y,
                   std::size_t n_tokens = 1) {
  const std::size_t nblocks = w.cols / ggml_type_info(w.type).block_values;
  const auto* groups = reinterpret_cast<const Rows16*>(w.rows8);
  const auto* terms = rows16_terms<Rows16>(ctx, xq, nblocks, n_tokens);
  for_each_streamed_chunk(ctx, (w.rows + kRows16 - 1) / kRows16, nblocks * sizeof(Rows16),
                          [&](std::size_t first, std::size_t last) {
                            for (std::size_t g = first; g < last; ++g) {
                              kernel(groups + g * nblocks, nblocks, w.rows - g * kRows16, xq,
                                     nblocks, n_tokens, terms, y + g * kRows16, w.rows);
                            }
                          });
}

// The file's rows, one dot per row and token, streaming with prefetch (the dot's own
// where `dot_streams`, WeightKernels::dot_streams).
template <class Block, class Act, class Dot>
void matvec_blocks(Context& ctx, const WeightMatrix& w, const Act* xq, Dot dot, bool dot_streams,
                   float* y, std::size_t n_tokens = 1) {
  const std::size_t nblocks = w.cols / ggml_type_info(w.type).block_values;
  for_each_streamed_chunk(ctx, w.rows, w.row_bytes, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      if (!dot_streams) prefetch_ahead(w, r);
      const auto* row = reinterpret_cast<const Block*>(w.row(r));
      for (std::size_t t = 0; t < n_tokens; ++t) {
        y[t * w.rows + r] = dot(row, xq + t * nblocks, nblocks);
      }
    }
  });
}

// The activations in the form W's kernels take: `n_tokens` rows of `cols` floats
// quantized to Q8_K, Q8_0 or Q8_1 blocks in the context's scratch, or `x` itself for float
// weights. `then(t, blocks)` runs on each token's blocks as soon as they are made, on the
// thread that made them (prefill's repacking of them into tiles).
struct NothingMore {
  void operator()(std::size_t, const void*) const noexcept {}
};

template <class W, class Then = NothingMore>
const typename W::Activation* activations_for(Context& ctx, const float* x, std::size_t cols,
                                              std::size_t n_tokens, Then then = {}) {
  using Act = typename W::Activation;
  if constexpr (std::is_same_v<Act, float>) {
    return x;
  } else {
    constexpr std::size_t block_values = BlockTraits<Act>::values;
    const std::size_t nblocks = cols / block_values;
    auto* xq = ctx.scratch_as<Act>(Scratch::activations, n_tokens * nblocks);
    const Kernels& k = ctx.kernels();
    auto quantize_token = [&](std::size_t t) {
      if constexpr (std::is_same_v<Act, BlockQ8K>) {
        k.quantize_row_q8k(x + t * cols, xq + t * nblocks, cols);
      } else if constexpr (std::is_same_v<Act, BlockQ8_1>) {
        k.quantize_row_q8_1(x + t * cols, xq + t * nblocks, cols);
      } else {
        static_assert(std::is_same_v<Act, BlockQ8_0>);
        k.quantize_row_q8_0(x + t * cols, xq + t * nblocks, cols);
      }
    };
    parallel_chunks(ctx, n_tokens, 8, [&](std::size_t first, std::size_t last) {
      for (std::size_t t = first; t < last; ++t) {
        quantize_token(t);
        then(t, xq + t * nblocks);
      }
    });
    return xq;
  }
}

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
    if (w.rows8 != nullptr) return matvec_rows8<Rows8>(ctx, w, xq, k.rows8, y);
  }
  using Rows16 = typename WeightKernels<W>::Rows16;
  if constexpr (!std::is_void_v<Rows16>) {
    if (w.rows8 != nullptr) return matvec_rows16<Rows16>(ctx, w, xq, k.rows16, y);
  }
  if constexpr (std::is_same_v<typename W::Activation, BlockQ8K>) {
    if (k.dot_lanes != nullptr) {
      const std::size_t nblocks = w.cols / QK_K;
      auto* lanes = ctx.scratch_as<BlockQ8KLanes>(Scratch::packed_activations, nblocks);
      pack_q8k_lanes(k.lanes, xq, lanes, nblocks);
      return matvec_blocks<typename W::Block>(ctx, w, lanes, k.dot_lanes, false, y);
    }
  }
  matvec_blocks<typename W::Block>(ctx, w, xq, decode_dot(k, one_token), k.dot_streams, y);
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
