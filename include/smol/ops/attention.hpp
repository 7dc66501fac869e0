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
// are processed together, so each K row and V row is fetched once per group. Work is
// split over (token, KV head) and over blocks of positions: each block yields a
// partial softmax (max, sum, weighted values) and the blocks are merged exactly, so
// one decode token at depth 4096 still keeps every core busy.
#pragma once

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
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
};

struct AttentionShape {
  std::size_t n_head = 0;
  std::size_t n_head_kv = 0;
  std::size_t head_dim = 0;
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
    return heads.keys + g * heads.key_head_stride + block * key_block_bytes;
  }
  const std::byte* values(std::size_t g, std::size_t block) const noexcept {
    return heads.values + g * heads.value_head_stride + block * value_block_bytes;
  }
};

// Attention for n_tokens query rows, each with its own K/V: token t attends to
// positions [0, rows.visible(t)) of rows.kv(t), a view with keys(g, block) and
// values(g, block) pointing at one block of kAttentionBlock positions of KV head g.
// A token's result depends only on its query, its view and its visible count (the
// blocks and their merge order follow from those), never on the other rows: the same
// sequence gives the same bits alone or in any batch.
template <class Rows>
void attention_rows(Context& ctx, const AttentionShape& shape, const float* q, std::size_t n_tokens,
                    const Rows& rows, float* out) {
  static_assert(kAttentionBlock % kKeyTile == 0, "blocks must start on a key tile");
  const std::size_t dim = shape.head_dim;
  const std::size_t group = shape.n_head / shape.n_head_kv;
  const std::size_t row_stride = shape.n_head * dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  if (n_tokens == 0) return;
  const auto attend = ctx.kernels().attend_block;
  const std::size_t value_rotation_block = value_rotation(rows.kv(0).types().value, dim);

  ctx.arena().execute([&] {
    tbb::parallel_for(std::size_t{0}, n_tokens * shape.n_head_kv, [&](std::size_t task) {
      const std::size_t t = task / shape.n_head_kv;
      const std::size_t g = task % shape.n_head_kv;
      const std::size_t visible = rows.visible(t);
      const auto& kv = rows.kv(t);
      const std::size_t n_blocks = (visible + kAttentionBlock - 1) / kAttentionBlock;
      const float* queries = q + t * row_stride + g * group * dim;

      // Per block and query head: max, sum, then `dim` weighted values.
      const std::size_t partial_size = group * (dim + 2);
      std::vector<float> partials(n_blocks * partial_size);
      const auto run_block = [&](std::size_t b) {
        const std::size_t begin = b * kAttentionBlock;
        const std::size_t end = std::min(visible, begin + kAttentionBlock);
        alignas(64) float scores[kAttentionBlock * kMaxGroupOnStack];
        std::vector<float> heap_scores(group > kMaxGroupOnStack ? group * kAttentionBlock : 0);
        attend({.queries = queries,
                .group = group,
                .head_dim = dim,
                .types = kv.types(),
                .keys = kv.keys(g, b),
                .values = kv.values(g, b),
                .count = end - begin,
                .scale = scale,
                .scores = heap_scores.empty() ? scores : heap_scores.data(),
                .out = partials.data() + b * partial_size});
      };
      if (n_blocks == 1) {
        run_block(0);
      } else {
        tbb::parallel_for(std::size_t{0}, n_blocks, run_block);
      }

      for (std::size_t j = 0; j < group; ++j) {
        float global_max = -std::numeric_limits<float>::infinity();
        for (std::size_t b = 0; b < n_blocks; ++b) {
          global_max = std::max(global_max, partials[b * partial_size + j]);
        }
        float* result = out + t * row_stride + (g * group + j) * dim;
        std::fill(result, result + dim, 0.0f);
        double total = 0.0;
        for (std::size_t b = 0; b < n_blocks; ++b) {
          const float* partial = partials.data() + b * partial_size;
          const float rescale = std::exp(partial[j] - global_max);
          total += static_cast<double>(partial[group + j]) * rescale;
          const float* weighted = partial + 2 * group + j * dim;
          for (std::size_t d = 0; d < dim; ++d) result[d] += rescale * weighted[d];
        }
        const float inverse = static_cast<float>(1.0 / total);
        for (std::size_t d = 0; d < dim; ++d) result[d] *= inverse;
        // A quantized value cache holds rotated rows (quant/kv_layout.hpp): their
        // weighted sum is turned back, H being its own inverse.
        if (value_rotation_block != 0) hadamard_rotate(result, dim, value_rotation_block);
      }
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
// first_position + t and attends to positions [0, first_position + t], whose K/V rows
// must already be in `kv`. Scale 1/sqrt(head_dim). `q` and `out` are n_tokens rows
// of n_head * head_dim floats. n_head must be a multiple of n_head_kv.
inline void attention(Context& ctx, const AttentionShape& shape, const float* q,
                      std::size_t n_tokens, std::size_t first_position, const KvHeads& kv,
                      float* out) {
  const detail::ConsecutiveRows rows{detail::ContiguousKv(kv, shape.head_dim), first_position};
  detail::attention_rows(ctx, shape, q, n_tokens, rows, out);
}

}  // namespace smol
