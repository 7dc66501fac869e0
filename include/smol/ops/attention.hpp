// Causal multi-head attention with grouped KV heads (GQA), reading K and V straight
// from a cache.
//
// Layout contract with the caller: queries are `n_tokens` rows of n_head * head_dim
// floats. Per KV head, keys are stored in tiles of kKeyTile positions, dimension-major
// inside a tile (smol::key_offset), and values as rows of head_dim by position; see
// simd/attention_kernels.hpp for why. The block kernel comes from the context's
// kernel table, so it runs vectorised even though this header is compiled for the
// baseline ISA.
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

#include "smol/core/half.hpp"
#include "smol/ops/context.hpp"
#include "smol/simd/attention_kernels.hpp"

namespace smol {

// ---- K/V element types: f32 (exact) or f16 (half the memory) ---------------------

inline void store_kv(const float* in, float* out, std::size_t n) noexcept {
  std::memcpy(out, in, n * sizeof(float));
}
inline void store_kv(const float* in, f16_bits* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = f32_to_f16(in[i]);
}

// Writes the key of position `pos` (head_dim floats) into one KV head's tiled keys.
template <class Element>
void store_key(const float* in, Element* keys, std::size_t pos, std::size_t head_dim) noexcept {
  for (std::size_t d = 0; d < head_dim; ++d) {
    store_kv(in + d, keys + key_offset(pos, d, head_dim), 1);
  }
}

template <class Element>
struct KvHeads {
  // Keys of KV head g: keys + g * key_head_stride, position p and dimension d at
  // key_offset(p, d, head_dim); the stride is a multiple of kKeyTile * head_dim.
  const Element* keys = nullptr;
  std::size_t key_head_stride = 0;
  // Value of KV head g at position p: values + g * value_head_stride + p * head_dim.
  const Element* values = nullptr;
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

// The context's block kernel for a K/V element type.
template <class Element>
auto block_kernel(const Context& ctx) noexcept {
  if constexpr (std::is_same_v<Element, float>) {
    return ctx.kernels().attend_block_f32;
  } else {
    return ctx.kernels().attend_block_f16;
  }
}

// The contiguous cache seen block by block, the interface attention_rows reads (the
// paged pool, model/kv_pool.hpp, offers the same).
template <class Element>
struct ContiguousKv {
  KvHeads<Element> heads;
  std::size_t head_dim = 0;
  const Element* keys(std::size_t g, std::size_t block) const noexcept {
    return heads.keys + g * heads.key_head_stride + block * kAttentionBlock * head_dim;
  }
  const Element* values(std::size_t g, std::size_t block) const noexcept {
    return heads.values + g * heads.value_head_stride + block * kAttentionBlock * head_dim;
  }
};

// Attention for n_tokens query rows, each with its own K/V: token t attends to
// positions [0, rows.visible(t)) of rows.kv(t), a view with keys(g, block) and
// values(g, block) pointing at one block of kAttentionBlock positions of KV head g.
// A token's result depends only on its query, its view and its visible count (the
// blocks and their merge order follow from those), never on the other rows: the same
// sequence gives the same bits alone or in any batch.
template <class Element, class Rows>
void attention_rows(Context& ctx, const AttentionShape& shape, const float* q, std::size_t n_tokens,
                    const Rows& rows, float* out) {
  static_assert(kAttentionBlock % kKeyTile == 0, "blocks must start on a key tile");
  const std::size_t dim = shape.head_dim;
  const std::size_t group = shape.n_head / shape.n_head_kv;
  const std::size_t row_stride = shape.n_head * dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  const auto attend = block_kernel<Element>(ctx);

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
      }
    });
  });
}

// Consecutive tokens of one sequence in the contiguous cache.
template <class Element>
struct ConsecutiveRows {
  ContiguousKv<Element> view;
  std::size_t first_position = 0;
  std::size_t visible(std::size_t t) const noexcept { return first_position + t + 1; }
  const ContiguousKv<Element>& kv(std::size_t) const noexcept { return view; }
};

}  // namespace detail

// Attention for `n_tokens` consecutive query tokens; token t sits at position
// first_position + t and attends to positions [0, first_position + t], whose K/V rows
// must already be in `kv`. Scale 1/sqrt(head_dim). `q` and `out` are n_tokens rows
// of n_head * head_dim floats. n_head must be a multiple of n_head_kv.
template <class Element>
void attention(Context& ctx, const AttentionShape& shape, const float* q, std::size_t n_tokens,
               std::size_t first_position, const KvHeads<Element>& kv, float* out) {
  const detail::ConsecutiveRows<Element> rows{{kv, shape.head_dim}, first_position};
  detail::attention_rows<Element>(ctx, shape, q, n_tokens, rows, out);
}

}  // namespace smol
