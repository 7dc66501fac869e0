// Causal multi-head attention with grouped KV heads (GQA), reading K and V straight
// from a cache.
//
// Layout contract with the caller: queries are `n_tokens` rows of n_head * head_dim
// floats; per KV head, keys and values lie in quant/kv_layout.hpp's layout for their
// types (see simd/attention_kernels.hpp for why). The block kernel comes from the
// context's kernel table, so it runs vectorised even though this header is compiled
// for the baseline ISA.
//
// Query head h reads KV head h / (n_head / n_head_kv); the query heads of a group
// are processed together, so each K row and V row is fetched once per group, and the
// consecutive tokens of a prefill in tiles of kQueryTile, so each block is fetched once
// per tile (flash attention's schedule, over the cache's blocks). Work is split over
// (tile, KV head) and over blocks of positions: each block yields a partial softmax
// (max, sum, weighted values) and the blocks are merged exactly, so one decode token
// at depth 4096 still keeps every core busy.
#pragma once

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "smol/ops/context.hpp"
#include "smol/quant/kv_layout.hpp"
#include "smol/simd/attention_kernels.hpp"

namespace smol {

// Where one block's K/V of every KV head lies: the layouts are quant/kv_layout.hpp's.
struct KvHeads {
  KvTypes types{};
  // Keys of KV head g: a region starting at keys + g * key_head_stride (bytes), a
  // multiple of kKeyTile rows of kv_row_bytes(types.key, head_dim).
  const std::byte* keys = nullptr;
  std::size_t key_head_stride = 0;
  // Values of KV head g: rows of kv_row_bytes(types.value, head_dim) from
  // values + g * value_head_stride.
  const std::byte* values = nullptr;
  std::size_t value_head_stride = 0;
  // A ring (model/kv_cache.hpp's sliding-window blocks): the regions hold ring_blocks
  // blocks of kAttentionBlock positions, position p's in block (p / kAttentionBlock) %
  // ring_blocks. 0: the regions hold every position.
  std::size_t ring_blocks = 0;
};

struct AttentionShape {
  std::size_t n_head = 0;
  std::size_t n_head_kv = 0;
  std::size_t head_dim = 0;
  float scale = 0.0f;  // of the scores; 0: 1/sqrt(head_dim)
  // Attention sinks (GPT-OSS), n_head values or null: query head h's softmax counts
  // exp(sinks[h]) in its denominator, as a score whose value vector is zero (ggml's
  // soft_max with sinks), so a head may attend to nothing.
  const float* sinks = nullptr;
};

namespace detail {

// Positions per block of the split softmax: large enough that a block's work
// (2 * 256 rows of head_dim) dwarfs the task overhead; a multiple of kKeyTile.
inline constexpr std::size_t kAttentionBlock = 256;
// Query heads per KV head whose block scores fit on the stack (SmolLM3 has 4).
inline constexpr std::size_t kMaxGroupOnStack = 8;

// The contiguous cache seen block by block, the interface attention_rows reads (the
// paged pool, model/kv_pool.hpp, offers the same): types(), keys(g, block) and
// values(g, block).
struct ContiguousKv {
  KvHeads heads;
  std::size_t key_block_bytes = 0;    // kAttentionBlock rows of keys
  std::size_t value_block_bytes = 0;  // ... and of values
  ContiguousKv(const KvHeads& h, std::size_t head_dim)
      : heads(h),
        key_block_bytes(kAttentionBlock * kv_row_bytes(h.types.key, head_dim)),
        value_block_bytes(kAttentionBlock * kv_row_bytes(h.types.value, head_dim)) {}
  KvTypes types() const noexcept { return heads.types; }
  const std::byte* keys(std::size_t g, std::size_t block) const noexcept {
    return heads.keys + g * heads.key_head_stride + slot(block) * key_block_bytes;
  }
  const std::byte* values(std::size_t g, std::size_t block) const noexcept {
    return heads.values + g * heads.value_head_stride + slot(block) * value_block_bytes;
  }
  // Where block `block` lies: in a ring, its place modulo the ring's blocks (the window
  // never reaches back further than the ring holds; model/kv_cache.hpp sizes it).
  std::size_t slot(std::size_t block) const noexcept {
    return heads.ring_blocks != 0 ? block % heads.ring_blocks : block;
  }
};

// Query tokens per tile: consecutive tokens of one sequence that attend together, so
// the blocks all of them see whole are read once for the tile rather than once per
// token (the tile's query rows go to the block kernel as one group). Prefill at depth
// then streams each K/V block from memory once per 16 tokens.
inline constexpr std::size_t kQueryTile = 16;

inline std::size_t blocks_of(std::size_t visible) noexcept {
  return (visible + kAttentionBlock - 1) / kAttentionBlock;
}

// What every (tile, KV head) task of one attention_rows call reads.
template <class Rows>
struct AttentionCall {
  const float* q;
  const Rows& rows;
  float* out;
  std::size_t window;
  std::size_t dim, group, row_stride;
  std::size_t partial_size;  // one token's record for one block: group * (dim + 2)
  float scale;
  const float* sinks;  // AttentionShape::sinks
  void (*attend)(const AttendBlock&);
  std::size_t value_rotation_block;  // of a quantized value cache's rows; 0: none

  // The first position token t sees.
  std::size_t window_start(std::size_t t) const {
    const std::size_t visible = rows.visible(t);
    return window != 0 && visible > window ? visible - window : 0;
  }
};

// One block's partial softmax for one query head: its max score, the sum of its
// exponentials, and the values they weight, summed.
struct BlockPartial {
  float max, sum;
  const float* weighted;
};

// Tokens [t0, t0 + n) of one tile against KV head g. Blocks [0, shared) are whole for
// every token of the tile: one kernel call each, with the tile's n * group query rows.
// The rest are each token's own: from the block its window starts in (first_block) or
// from `shared`. A tile shares blocks only while no window has moved off position 0 (its
// last token's is the latest). attend_blocks() writes every block's partial softmax,
// merge() turns each token's partials into its output rows.
template <class Rows>
class TileAttention {
 public:
  TileAttention(const AttentionCall<Rows>& call, std::size_t t0, std::size_t n, std::size_t g)
      : c_(call),
        t0_(t0),
        n_(n),
        g_(g),
        kv_(&call.rows.kv(t0)),
        shared_(n > 1 && call.window_start(t0 + n - 1) == 0
                    ? call.rows.visible(t0) / kAttentionBlock
                    : 0),
        quantized_keys_(kv_is_quantized(kv_->types().key)),
        row_blocks_(call.dim / 32) {
    const std::size_t dim = c_.dim, group = c_.group;
    tile_queries_.resize(n > 1 ? n * group * dim : 0);
    for (std::size_t i = 0; i < n && n > 1; ++i) {
      const float* from = query(i);
      std::copy(from, from + group * dim, tile_queries_.begin() + i * group * dim);
    }
    // A quantized key cache is dotted with the queries in Q8_0: made once here for
    // every block, token i's rows at i * group.
    query_blocks_.resize(quantized_keys_ ? n * group * row_blocks_ : 0);
    for (std::size_t i = 0; i < n && quantized_keys_; ++i) {
      simd::quantize_queries_for(kv_->types().key, query(i), group, dim,
                                 query_blocks_.data() + i * group * row_blocks_);
    }
    shared_partials_.resize(shared_ * n * c_.partial_size);
    own_start_.assign(n + 1, 0);  // token i's own blocks, in order
    for (std::size_t i = 0; i < n; ++i) {
      own_start_[i + 1] = own_start_[i] + blocks_of(visible(i)) - first_block(i);
    }
    own_partials_.resize(own_start_[n] * c_.partial_size);
  }

  // Job j < shared: shared block j; then each token's own blocks.
  void attend_blocks() {
    const std::size_t n_jobs = shared_ + own_start_[n_];
    if (n_jobs == 1) {
      attend_job(0);
    } else {
      tbb::parallel_for(std::size_t{0}, n_jobs, [this](std::size_t j) { attend_job(j); });
    }
  }

  void merge() {
    for (std::size_t i = 0; i < n_; ++i) merge_token(i);
  }

 private:
  const float* query(std::size_t i) const {
    return c_.q + (t0_ + i) * c_.row_stride + g_ * c_.group * c_.dim;
  }
  std::size_t visible(std::size_t i) const { return c_.rows.visible(t0_ + i); }
  std::size_t first_block(std::size_t i) const {
    return std::max(shared_, c_.window_start(t0_ + i) / kAttentionBlock);
  }

  void attend_job(std::size_t j) {
    if (j < shared_) {
      attend(tile_queries_.data(), 0, n_ * c_.group, j, 0, kAttentionBlock,
             shared_partials_.data() + j * n_ * c_.partial_size);
      return;
    }
    const std::size_t own = j - shared_;
    const std::size_t i = static_cast<std::size_t>(
        std::upper_bound(own_start_.begin(), own_start_.end(), own) - own_start_.begin() - 1);
    const std::size_t b = first_block(i) + own - own_start_[i];
    const std::size_t count = std::min(visible(i), (b + 1) * kAttentionBlock) - b * kAttentionBlock;
    const std::size_t start = c_.window_start(t0_ + i);
    const std::size_t first = start > b * kAttentionBlock ? start - b * kAttentionBlock : 0;
    attend(query(i), i * c_.group, c_.group, b, first, count,
           own_partials_.data() + own * c_.partial_size);
  }

  // The block kernel on block b for n_rows query rows (the first of them row first_row
  // of the tile's quantized queries), its partial softmax to `partial`.
  void attend(const float* queries, std::size_t first_row, std::size_t n_rows, std::size_t b,
              std::size_t first, std::size_t count, float* partial) const {
    alignas(64) float scores[kAttentionBlock * kMaxGroupOnStack];
    std::vector<float> heap(n_rows > kMaxGroupOnStack ? n_rows * kAttentionBlock : 0);
    c_.attend({.queries = queries,
               .group = n_rows,
               .head_dim = c_.dim,
               .types = kv_->types(),
               .keys = kv_->keys(g_, b),
               .values = kv_->values(g_, b),
               .count = count,
               .first = first,
               .scale = c_.scale,
               .scores = heap.empty() ? scores : heap.data(),
               .out = partial,
               .query_blocks =
                   quantized_keys_ ? query_blocks_.data() + first_row * row_blocks_ : nullptr});
  }

  // Query head j's partial of token i in block b. A shared record holds n * group rows
  // (maxima, sums, weighted values); an own record group rows.
  BlockPartial partial_of(std::size_t i, std::size_t b, std::size_t j) const {
    const std::size_t group = c_.group, dim = c_.dim;
    if (b < shared_) {
      const float* record = shared_partials_.data() + b * n_ * c_.partial_size;
      const std::size_t r = i * group + j, rows_in = n_ * group;
      return {record[r], record[rows_in + r], record + 2 * rows_in + r * dim};
    }
    const float* record =
        own_partials_.data() + (own_start_[i] + b - first_block(i)) * c_.partial_size;
    return {record[j], record[group + j], record + 2 * group + j * dim};
  }

  // Merges token i's blocks in block order: the shared ones, else from where its window
  // starts, then its own. A head's sink joins as one more score with a zero value.
  void merge_token(std::size_t i) const {
    const std::size_t dim = c_.dim;
    const std::size_t n_blocks = blocks_of(visible(i));
    const std::size_t from = shared_ > 0 ? 0 : first_block(i);
    for (std::size_t j = 0; j < c_.group; ++j) {
      const std::size_t head = g_ * c_.group + j;
      float global_max = -std::numeric_limits<float>::infinity();
      for (std::size_t b = from; b < n_blocks; ++b) {
        global_max = std::max(global_max, partial_of(i, b, j).max);
      }
      if (c_.sinks != nullptr) global_max = std::max(global_max, c_.sinks[head]);
      float* result = c_.out + (t0_ + i) * c_.row_stride + head * dim;
      std::fill(result, result + dim, 0.0f);
      double total = c_.sinks != nullptr ? std::exp(c_.sinks[head] - global_max) : 0.0;
      for (std::size_t b = from; b < n_blocks; ++b) {
        const BlockPartial part = partial_of(i, b, j);
        const float rescale = std::exp(part.max - global_max);
        total += static_cast<double>(part.sum) * rescale;
        for (std::size_t d = 0; d < dim; ++d) result[d] += rescale * part.weighted[d];
      }
      const float inverse = static_cast<float>(1.0 / total);
      for (std::size_t d = 0; d < dim; ++d) result[d] *= inverse;
      // A quantized value cache holds rotated rows (quant/kv_layout.hpp): their
      // weighted sum is turned back, H being its own inverse.
      if (c_.value_rotation_block != 0) hadamard_rotate(result, dim, c_.value_rotation_block);
    }
  }

  const AttentionCall<Rows>& c_;
  std::size_t t0_, n_, g_;
  const std::remove_reference_t<decltype(std::declval<const Rows&>().kv(0))>* kv_;
  std::size_t shared_;
  bool quantized_keys_;
  std::size_t row_blocks_;
  std::vector<float> tile_queries_;
  std::vector<BlockQ8_0> query_blocks_;
  std::vector<float> shared_partials_, own_partials_;
  std::vector<std::size_t> own_start_;
};

// Tiles: runs of up to kQueryTile tokens with the same view and consecutive positions
// (or, without a causal mask, the same visible positions); the starts of each, then
// n_tokens.
template <class Rows>
std::vector<std::size_t> query_tiles(const Rows& rows, std::size_t n_tokens) {
  std::vector<std::size_t> tile_start;
  for (std::size_t t = 0; t < n_tokens; ++t) {
    const bool continues =
        !tile_start.empty() && t - tile_start.back() < kQueryTile &&
        &rows.kv(t) == &rows.kv(t - 1) &&
        (rows.visible(t) == rows.visible(t - 1) + 1 || rows.visible(t) == rows.visible(t - 1));
    if (!continues) tile_start.push_back(t);
  }
  tile_start.push_back(n_tokens);
  return tile_start;
}

// Attention for n_tokens query rows, each with its own K/V: token t attends to
// positions [0, rows.visible(t)) of rows.kv(t), a view with types(), keys(g, block) and
// values(g, block) pointing at one block of kAttentionBlock positions of KV head g.
// With a `window` (sliding-window attention; 0: none), only the last `window` of them:
// blocks wholly before it are skipped, and the block it starts in masks what precedes.
// A token's result depends only on its query, its view and its visible count (the
// blocks, their counts and their merge order follow from those; the block kernel
// computes each query row on its own, whatever rows share the call), never on the
// other rows or on the tiles: the same sequence gives the same bits alone or in any
// batch.
template <class Rows>
void attention_rows(Context& ctx, const AttentionShape& shape, const float* q, std::size_t n_tokens,
                    const Rows& rows, float* out, std::size_t window = 0) {
  static_assert(kAttentionBlock % kKeyTile == 0, "blocks must start on a key tile");
  if (n_tokens == 0) return;
  const std::size_t dim = shape.head_dim;
  const std::size_t group = shape.n_head / shape.n_head_kv;
  const AttentionCall<Rows> call{
      .q = q,
      .rows = rows,
      .out = out,
      .window = window,
      .dim = dim,
      .group = group,
      .row_stride = shape.n_head * dim,
      .partial_size = group * (dim + 2),
      .scale = shape.scale != 0.0f ? shape.scale : 1.0f / std::sqrt(static_cast<float>(dim)),
      .sinks = shape.sinks,
      .attend = ctx.kernels().attend_block,
      .value_rotation_block = value_rotation(rows.kv(0).types().value, dim)};
  const std::vector<std::size_t> tile_start = query_tiles(rows, n_tokens);
  const std::size_t n_tiles = tile_start.size() - 1;
  ctx.arena().execute([&] {
    tbb::parallel_for(std::size_t{0}, n_tiles * shape.n_head_kv, [&](std::size_t task) {
      const std::size_t tile = task / shape.n_head_kv;
      TileAttention<Rows> attention(call, tile_start[tile], tile_start[tile + 1] - tile_start[tile],
                                    task % shape.n_head_kv);
      attention.attend_blocks();
      attention.merge();
    });
  });
}

// Consecutive tokens of one sequence in the contiguous cache.
struct ConsecutiveRows {
  ContiguousKv view;
  std::size_t first_position = 0;
  std::size_t visible(std::size_t t) const noexcept { return first_position + t + 1; }
  const ContiguousKv& kv(std::size_t) const noexcept { return view; }
};

}  // namespace detail

// Attention for `n_tokens` consecutive query tokens; token t sits at position
// first_position + t and attends to positions [0, first_position + t] (with a
// `window`, the last `window` of them), whose K/V rows must already be in `kv`. Scale
// shape.scale, by default 1/sqrt(head_dim). `q` and `out` are n_tokens rows of n_head * head_dim
// floats. n_head must be a multiple of n_head_kv.
inline void attention(Context& ctx, const AttentionShape& shape, const float* q,
                      std::size_t n_tokens, std::size_t first_position, const KvHeads& kv,
                      float* out, std::size_t window = 0) {
  const detail::ConsecutiveRows rows{detail::ContiguousKv(kv, shape.head_dim), first_position};
  detail::attention_rows(ctx, shape, q, n_tokens, rows, out, window);
}

}  // namespace smol
