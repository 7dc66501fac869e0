// The loops over a weight matrix's rows that decode (ops/matvec.hpp) and prefill's few-token
// passes (ops/matmul.hpp) share: the threads' chunks, the prefetch ahead, the activations
// quantized once for all rows, and one loop per layout of the rows (the eight-row copy,
// the sixteen-row copy, the file's rows), each streaming every block of weights from
// memory once for all the tokens it is given.
#pragma once

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string_view>
#include <type_traits>

#include "smol/core/error.hpp"
#include "smol/core/ggml_type.hpp"
#include "smol/ops/context.hpp"
#include "smol/ops/weight_matrix.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/interleaved_rows.hpp"
#include "smol/quant/weight_types.hpp"

namespace smol::detail {

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
  if (w.rows8 != nullptr && !has_interleaved_copy(w.type)) {
    fail(op, ": weight '", w.name, "' has an interleaved copy, but ", info->name,
         " has no such layout");
  }
  if (w.rows8 != nullptr && !can_interleave(w.type, w.rows)) {
    fail(op, ": weight '", w.name, "' has an interleaved copy, but its ", w.rows,
         " rows are not whole groups of ", interleaved_group_rows(w.type));
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
// decode loses a large share of its bandwidth (bench/HISTORY.md, "Figures moved from code
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
  // (bench/HISTORY.md, "Figures moved from code comments"). At least two chunks per
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
void stream_rows8(Context& ctx, const WeightMatrix& w, const BlockQ8K* xq, Rows8Fn<Rows8> kernel,
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
void stream_rows16(Context& ctx, const WeightMatrix& w, const Act* xq, Kernel kernel, float* y,
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
void stream_file_rows(Context& ctx, const WeightMatrix& w, const Act* xq, Dot dot, bool dot_streams,
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

}  // namespace smol::detail
