// Attention over one block of cached positions for all query heads of one KV head.
//
// Decode attention is a stream over the KV cache, so each K and V row is read once
// for the whole group of query heads that shares it. The layouts are
// quant/kv_layout.hpp's. Float keys are tiled (kKeyTile positions, dimension-major
// inside a tile): a tile row is kKeyTile positions of one dimension, so the scores of
// a tile are FMAs of that row with a broadcast query element, positions in lanes, with
// no horizontal add per position. Quantized keys (q8_0, q4_0) are block rows, stored
// rotated: the group's queries are turned the same way and quantized to Q8_0 once per
// token, and each score is an integer dot per block (score_rows_q8_0 in
// simd/kernels_q8_0.hpp; llama.cpp's flash attention does the same).
// Values are rows of head_dim by position: the weighted sum is FMAs of a row with a
// broadcast weight, dimensions in lanes; a quantized row's blocks are widened and scaled
// in registers (BlockLoads), never as a dequantized copy of the cache; the weighted sum of rotated
// values is turned back by the caller (ops/attention.hpp), once per query head. Both loops read
// memory in order. The key and the value type are run-time choices taken once per block
// (visit_kv_type).
//
// attend_block writes, per query head j of the group, the block's max score
// (out[j]), sum of exp(score - max) (out[group + j]) and the exp-weighted sum of
// values, un-normalised (out[2 * group + j * head_dim ...]): a partial softmax that
// ops/attention.hpp merges exactly across blocks.
#pragma once

// GCC 12 warns inside its own avx512fintrin.h wherever those intrinsics are inlined
// (GCC bug 105593, see kernels_impl.hpp); the state where a template is defined
// is what counts, and these may be included before kernels_impl.hpp opens its own.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/quant/kv_layout.hpp"
#include "smol/quant/quantize.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/float_kernels.hpp"
#include "smol/simd/kernels_q8_0.hpp"

namespace smol {

// Arguments of one block. `keys` and `values` point at the region row of the block's
// first position (a multiple of kKeyTile) in their types' layouts; positions [first,
// count) are visible (first > 0 where a sliding window starts inside the block: the
// positions before it get no weight). `scores` is scratch of group *
// round_up(count, kKeyTile) floats.
struct AttendBlock {
  const float* queries = nullptr;  // group rows of head_dim
  std::size_t group = 0;
  std::size_t head_dim = 0;
  KvTypes types{};
  const std::byte* keys = nullptr;
  const std::byte* values = nullptr;
  std::size_t count = 0;
  std::size_t first = 0;  // < count
  float scale = 1.0f;
  float* scores = nullptr;
  float* out = nullptr;  // group maxima, group sums, group * head_dim weighted values
  // With a quantized key type: the queries as its keys are dotted with, group rows of
  // head_dim / 32 blocks (simd::quantize_queries_for), made once per token by the
  // caller rather than once per block; nullptr: the kernel makes them.
  const BlockQ8_0* query_blocks = nullptr;
};

namespace simd {

inline std::size_t score_stride(std::size_t count) noexcept {
  return (count + kKeyTile - 1) / kKeyTile * kKeyTile;
}

// Value i of a float row (quantized rows go through dequantize_block).
template <KvType T>
float kv_value(const KvElement<T>* row, std::size_t i) noexcept {
  static_assert(!kv_is_quantized_v<T>);
  if constexpr (T == KvType::f32) {
    return row[i];
  } else if constexpr (T == KvType::f16) {
    return f16_to_f32(row[i]);
  } else {
    return bf16_to_f32(row[i]);
  }
}

template <KvType T>
const KvElement<T>* region_row(const std::byte* region, std::size_t p, std::size_t dim) noexcept {
  return reinterpret_cast<const KvElement<T>*>(region + p * kv_row_bytes(T, dim));
}

// The queries of `n` heads as Q8_0 rows, what a quantized key cache of type K is dotted
// with: turned as its keys were (quant/kv_layout.hpp), then quantized.
template <KvType K>
void quantize_queries(const float* q, std::size_t n, std::size_t dim, BlockQ8_0* out) noexcept {
  const std::size_t rotation = key_rotation(K, dim);
  float rotated[kMaxQuantizedHeadDim];
  for (std::size_t j = 0; j < n; ++j) {
    const float* row = q + j * dim;
    if (rotation != 0) {
      std::copy(row, row + dim, rotated);
      hadamard_rotate(rotated, dim, rotation);
      row = rotated;
    }
    for (std::size_t b = 0; b < dim / 32; ++b) quantize_block(row + 32 * b, out[j * dim / 32 + b]);
  }
}

// The same for a run-time key type (nothing to do for a float one).
inline void quantize_queries_for(KvType key, const float* q, std::size_t n, std::size_t dim,
                                 BlockQ8_0* out) noexcept {
  visit_kv_type(key, [&](auto tag) {
    constexpr KvType K = decltype(tag)::value;
    if constexpr (kv_is_quantized_v<K>) quantize_queries<K>(q, n, dim, out);
  });
}

// The reference: plain loops, std::exp, the same order of operations per value where
// it is cheap to keep (scores = dot * scale, exp(score - max)). Quantized keys are
// dotted with the Q8_0 query by the scalar integer dot, as the vector sets do.
template <KvType K, KvType V>
void attend_block_reference_as(const AttendBlock& a) noexcept {
  const std::size_t dim = a.head_dim, count = a.count, stride = score_stride(count);
  BlockQ8_0 quantized[kMaxQuantizedHeadDim / 32];
  for (std::size_t j = 0; j < a.group; ++j) {
    float* s = a.scores + j * stride;
    const float* q = a.queries + j * dim;
    const BlockQ8_0* query_blocks = quantized;
    if constexpr (kv_is_quantized_v<K>) {
      if (a.query_blocks != nullptr) {
        query_blocks = a.query_blocks + j * (dim / 32);
      } else {
        quantize_queries<K>(q, 1, dim, quantized);
      }
    }
    float m = -std::numeric_limits<float>::infinity();
    for (std::size_t p = 0; p < count; ++p) {
      float dot = 0.0f;
      if constexpr (kv_is_quantized_v<K>) {
        dot = q8_0_activation_dot<scalar_arch, KvElement<K>>()(region_row<K>(a.keys, p, dim),
                                                               query_blocks, dim / 32);
      } else {
        const auto* keys = reinterpret_cast<const KvElement<K>*>(a.keys);
        for (std::size_t d = 0; d < dim; ++d) {
          dot += kv_value<K>(keys + key_offset(p, d, dim), 0) * q[d];
        }
      }
      s[p] = p < a.first ? -std::numeric_limits<float>::infinity() : dot * a.scale;
      m = std::max(m, s[p]);
    }
    float total = 0.0f;
    for (std::size_t p = 0; p < count; ++p) total += (s[p] = std::exp(s[p] - m));
    a.out[j] = m;
    a.out[a.group + j] = total;
    float* weighted = a.out + 2 * a.group + j * dim;
    std::fill(weighted, weighted + dim, 0.0f);
    for (std::size_t p = 0; p < count; ++p) {
      const KvElement<V>* row = region_row<V>(a.values, p, dim);
      if constexpr (kv_is_quantized_v<V>) {
        float values[kMaxQuantizedHeadDim];
        for (std::size_t b = 0; b < dim / 32; ++b) dequantize_block(row[b], values + 32 * b);
        for (std::size_t d = 0; d < dim; ++d) weighted[d] += s[p] * values[d];
      } else {
        for (std::size_t d = 0; d < dim; ++d) weighted[d] += s[p] * kv_value<V>(row, d);
      }
    }
  }
}

inline void attend_block_reference(const AttendBlock& a) noexcept {
  visit_kv_type(a.types.key, [&](auto k) {
    visit_kv_type(a.types.value, [&](auto v) {
      attend_block_reference_as<decltype(k)::value, decltype(v)::value>(a);
    });
  });
}

template <class Arch, KvType T>
auto load_floats(const KvElement<T>* p) noexcept {
  if constexpr (T == KvType::f32) {
    return xsimd::batch<float, xsimd_arch_t<Arch>>::load_unaligned(p);
  } else if constexpr (T == KvType::f16) {
    return HalfLoads<Arch>::f16(p);
  } else {
    static_assert(T == KvType::bf16);
    return HalfLoads<Arch>::bf16(p);
  }
}

// Scores of NH heads (starting at `q`) for NT consecutive float key tiles starting at
// `keys`: scores[j * stride + tile * kKeyTile + lane]. NT * NH * lanes-per-tile
// accumulators.
template <class Arch, std::size_t NH, std::size_t NT, KvType T>
void tile_scores(const float* q, std::size_t dim, const KvElement<T>* keys, float scale,
                 float* scores, std::size_t stride) noexcept {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  constexpr std::size_t W = batch::size;
  static_assert(kKeyTile % W == 0);
  constexpr std::size_t L = kKeyTile / W;  // batches per tile row
  const std::size_t tile_elements = kKeyTile * dim;
  batch acc[NT][NH][L];
  for (auto& t : acc) {
    for (auto& h : t) {
      for (auto& l : h) l = batch(0.0f);
    }
  }
  for (std::size_t d = 0; d < dim; ++d) {
    // One thread streams from DRAM faster when the next tiles are requested ahead of
    // the hardware prefetcher, which restarts at every 4 KiB page.
    for (std::size_t t = 0; t < NT; ++t) {
      __builtin_prefetch(keys + (NT + t) * tile_elements + d * kKeyTile);
    }
    batch k[NT][L];
    for (std::size_t t = 0; t < NT; ++t) {
      for (std::size_t l = 0; l < L; ++l) {
        k[t][l] = load_floats<Arch, T>(keys + t * tile_elements + d * kKeyTile + l * W);
      }
    }
    for (std::size_t j = 0; j < NH; ++j) {
      const batch qj(q[j * dim + d]);
      for (std::size_t t = 0; t < NT; ++t) {
        for (std::size_t l = 0; l < L; ++l) acc[t][j][l] = xsimd::fma(k[t][l], qj, acc[t][j][l]);
      }
    }
  }
  const batch vscale(scale);
  for (std::size_t t = 0; t < NT; ++t) {
    for (std::size_t j = 0; j < NH; ++j) {
      for (std::size_t l = 0; l < L; ++l) {
        (acc[t][j][l] * vscale).store_unaligned(scores + j * stride + t * kKeyTile + l * W);
      }
    }
  }
}

// The scores of NH heads over the block's positions, for the key type K; `query_blocks`
// are the NH heads' quantized queries when the caller made them.
template <class Arch, std::size_t NH, KvType K>
void block_scores(const AttendBlock& a, const float* q, const BlockQ8_0* query_blocks,
                  float* scores) noexcept {
  const std::size_t dim = a.head_dim, stride = score_stride(a.count);
  if constexpr (kv_is_quantized_v<K>) {
    // Q8_0 queries (once per token when the caller made them, else here); then one
    // integer block dot per position and head.
    BlockQ8_0 quantized[NH * (kMaxQuantizedHeadDim / 32)];
    const std::size_t nb = dim / 32;
    if (query_blocks == nullptr) {
      quantize_queries<K>(q, NH, dim, quantized);
      query_blocks = quantized;
    }
    score_rows_q8_0<Arch, NH>(region_row<K>(a.keys, 0, dim), a.count, query_blocks, nb, a.scale,
                              scores, stride);
  } else {
    // Two tiles at a time give NH * 2 independent FMA chains, enough to hide latency.
    const auto* keys = reinterpret_cast<const KvElement<K>*>(a.keys);
    const std::size_t n_tiles = stride / kKeyTile;
    std::size_t t = 0;
    for (; t + 2 <= n_tiles; t += 2) {
      tile_scores<Arch, NH, 2, K>(q, dim, keys + t * kKeyTile * dim, a.scale, scores + t * kKeyTile,
                                  stride);
    }
    if (t < n_tiles) {
      tile_scores<Arch, NH, 1, K>(q, dim, keys + t * kKeyTile * dim, a.scale, scores + t * kKeyTile,
                                  stride);
    }
  }
}

// weighted[j][c0 ..] += sum_p w[j][p] * V[p][c0 ..] for NH heads and NB batches of
// dimensions of float rows: NH * NB accumulators, each V row segment widened once.
template <class Arch, std::size_t NH, std::size_t NB, KvType T>
void weighted_values(const float* w, std::size_t stride, const KvElement<T>* values,
                     std::size_t dim, std::size_t count, std::size_t c0, float* weighted) noexcept {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  constexpr std::size_t W = batch::size;
  batch acc[NH][NB];
  for (auto& h : acc) {
    for (auto& b : h) b = batch(0.0f);
  }
  // Rows ahead (8 KB for SmolLM3's f16 rows; see tile_scores): 32 rows read the cache
  // much nearer the memory read's pace than 8 rows (2 KB), with one thread or two
  // (bench_forward at depth; bench/HISTORY.md, "Figures moved from code comments").
  constexpr std::size_t kAhead = 32;
  for (std::size_t p = 0; p < count; ++p) {
    for (std::size_t b = 0; b < NB * W * sizeof(KvElement<T>); b += 64) {
      __builtin_prefetch(reinterpret_cast<const char*>(values + (p + kAhead) * dim + c0) + b);
    }
    batch v[NB];
    for (std::size_t b = 0; b < NB; ++b) {
      v[b] = load_floats<Arch, T>(values + p * dim + c0 + b * W);
    }
    for (std::size_t j = 0; j < NH; ++j) {
      const batch wj(w[j * stride + p]);
      for (std::size_t b = 0; b < NB; ++b) acc[j][b] = xsimd::fma(v[b], wj, acc[j][b]);
    }
  }
  for (std::size_t j = 0; j < NH; ++j) {
    for (std::size_t b = 0; b < NB; ++b) acc[j][b].store_unaligned(weighted + j * dim + c0 + b * W);
  }
}

// Vector registers of the instruction set: AVX2 has 16, AVX-512 and NEON 32.
template <class Arch>
inline constexpr std::size_t kVectorRegisters =
    xsimd::batch<float, xsimd_arch_t<Arch>>::size == 8 ? 16 : 32;

// The same for quantized rows, NBLK block columns (32 dimensions each, from `block`) at
// a time: each block is widened and scaled in registers (BlockLoads), so the weighted
// sum uses the very floats dequantize_block gives.
template <class Arch, std::size_t NH, std::size_t NBLK, KvType T>
void weighted_blocks(const float* w, std::size_t stride, const std::byte* values, std::size_t dim,
                     std::size_t count, std::size_t block, float* weighted) noexcept {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  constexpr std::size_t W = batch::size;
  constexpr std::size_t NB = NBLK * 32 / W;  // batches per position
  static_assert(32 % W == 0);
  batch acc[NH][NB];
  for (auto& h : acc) {
    for (auto& b : h) b = batch(0.0f);
  }
  const std::size_t row_bytes = kv_row_bytes(T, dim);
  // Rows ahead: the columns of a row are read in separate passes, so each pass brings
  // its own lines in (the block's first and last byte). 48 rows (6.5 KB of SmolLM3's
  // q8_0 rows) read a deep cache a little faster than 16, and 96 no faster than 48
  // (bench/HISTORY.md, "Figures moved from code comments").
  constexpr std::size_t kAhead = 48;
  for (std::size_t p = 0; p < count; ++p) {
    const KvElement<T>* blocks = region_row<T>(values, p, dim) + block;
    const char* next = reinterpret_cast<const char*>(blocks) + kAhead * row_bytes;
    __builtin_prefetch(next);
    __builtin_prefetch(next + NBLK * sizeof(KvElement<T>) - 1);
    batch v[NB];
    for (std::size_t c = 0; c < NBLK; ++c) {
      if constexpr (T == KvType::q8_0) {
        BlockLoads<Arch>::q8_0(blocks[c], v + c * (32 / W));
      } else {
        static_assert(T == KvType::q4_0);
        BlockLoads<Arch>::q4_0(blocks[c], v + c * (32 / W));
      }
    }
    for (std::size_t j = 0; j < NH; ++j) {
      const batch wj(w[j * stride + p]);
      for (std::size_t i = 0; i < NB; ++i) acc[j][i] = xsimd::fma(v[i], wj, acc[j][i]);
    }
  }
  for (std::size_t j = 0; j < NH; ++j) {
    for (std::size_t i = 0; i < NB; ++i) {
      acc[j][i].store_unaligned(weighted + j * dim + 32 * block + i * W);
    }
  }
}

// All block columns of quantized values for NH heads, in passes whose accumulators
// (heads x batches) take at most half the vector registers: two heads of one block per
// pass with AVX2 and NEON's narrow vectors, four heads of two blocks with AVX-512.
template <class Arch, std::size_t NH, KvType T>
void weighted_block_columns(const float* w, std::size_t stride, const std::byte* values,
                            std::size_t dim, std::size_t count, float* weighted) noexcept {
  constexpr std::size_t W = xsimd::batch<float, xsimd_arch_t<Arch>>::size;
  constexpr std::size_t kAccumulators = kVectorRegisters<Arch> / 2;
  constexpr std::size_t kBlockBatches = 32 / W;
  constexpr std::size_t HP = std::max<std::size_t>(1, std::min(NH, kAccumulators / kBlockBatches));
  if constexpr (HP < NH) {
    // Heads in passes of HP (the last may be fewer).
    weighted_block_columns<Arch, HP, T>(w, stride, values, dim, count, weighted);
    weighted_block_columns<Arch, NH - HP, T>(w + HP * stride, stride, values, dim, count,
                                             weighted + HP * dim);
  } else {
    constexpr std::size_t NBLK = std::max<std::size_t>(1, kAccumulators / (NH * kBlockBatches));
    const std::size_t blocks = dim / 32;
    std::size_t b = 0;
    if constexpr (NBLK >= 2) {
      for (; b + 2 <= blocks; b += 2) {
        weighted_blocks<Arch, NH, 2, T>(w, stride, values, dim, count, b, weighted);
      }
    }
    for (; b < blocks; ++b)
      weighted_blocks<Arch, NH, 1, T>(w, stride, values, dim, count, b, weighted);
  }
}

// The un-normalised weighted values of NH heads, for the value type V.
template <class Arch, std::size_t NH, KvType V>
void block_values(const AttendBlock& a, const float* scores, float* weighted) noexcept {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  constexpr std::size_t W = batch::size;
  const std::size_t dim = a.head_dim, count = a.count, stride = score_stride(count);
  if constexpr (kv_is_quantized_v<V>) {
    weighted_block_columns<Arch, NH, V>(scores, stride, a.values, dim, count, weighted);
  } else {
    const auto* values = reinterpret_cast<const KvElement<V>*>(a.values);
    std::size_t c0 = 0;
    for (; c0 + 4 * W <= dim; c0 += 4 * W) {
      weighted_values<Arch, NH, 4, V>(scores, stride, values, dim, count, c0, weighted);
    }
    for (; c0 + W <= dim; c0 += W) {
      weighted_values<Arch, NH, 1, V>(scores, stride, values, dim, count, c0, weighted);
    }
    for (; c0 < dim; ++c0) {  // head sizes that are not a multiple of the vector width
      for (std::size_t j = 0; j < NH; ++j) {
        float sum = 0.0f;
        for (std::size_t p = 0; p < count; ++p) {
          sum += scores[j * stride + p] * kv_value<V>(values + p * dim, c0);
        }
        weighted[j * dim + c0] = sum;
      }
    }
  }
}

// One chunk of NH query heads (NH <= 4 keeps the accumulators in registers).
template <class Arch, std::size_t NH>
void attend_heads(const AttendBlock& a, std::size_t j0) noexcept {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  constexpr std::size_t W = batch::size;
  const std::size_t dim = a.head_dim, count = a.count, stride = score_stride(count);
  const float* q = a.queries + j0 * dim;
  float* scores = a.scores + j0 * stride;
  const BlockQ8_0* query_blocks =
      a.query_blocks != nullptr ? a.query_blocks + j0 * (dim / 32) : nullptr;
  visit_kv_type(a.types.key, [&](auto k) {
    block_scores<Arch, NH, decltype(k)::value>(a, q, query_blocks, scores);
  });
  // Outside the window: a score of -inf, whose exp below is exactly 0.
  for (std::size_t j = 0; j < NH; ++j) {
    std::fill(scores + j * stride, scores + j * stride + a.first,
              -std::numeric_limits<float>::infinity());
  }

  // Softmax numerators. The tail lanes of the last tile (positions past `count`, whose
  // key slots may hold anything) are left out of the max and the sum and zeroed.
  const std::size_t full = count / W * W;
  for (std::size_t j = 0; j < NH; ++j) {
    float* s = scores + j * stride;
    batch vmax(-std::numeric_limits<float>::infinity());
    for (std::size_t p = 0; p < full; p += W) vmax = xsimd::max(vmax, batch::load_unaligned(s + p));
    alignas(64) float lanes[W];
    vmax.store_aligned(lanes);
    float m = lanes[0];
    for (const float lane : lanes) m = std::max(m, lane);
    for (std::size_t p = full; p < count; ++p) m = std::max(m, s[p]);
    const batch vm(m);
    batch vsum(0.0f);
    for (std::size_t p = 0; p < full; p += W) {
      const batch e = xsimd::exp(batch::load_unaligned(s + p) - vm);
      e.store_unaligned(s + p);
      vsum += e;
    }
    float total = xsimd::hadd(vsum);
    for (std::size_t p = full; p < count; ++p) total += (s[p] = std::exp(s[p] - m));
    a.out[j0 + j] = m;
    a.out[a.group + j0 + j] = total;
  }

  float* weighted = a.out + 2 * a.group + j0 * dim;
  visit_kv_type(a.types.value,
                [&](auto v) { block_values<Arch, NH, decltype(v)::value>(a, scores, weighted); });
}

template <class Arch>
void attend_block(const AttendBlock& a) noexcept {
  std::size_t j = 0;
  for (; j + 4 <= a.group; j += 4) attend_heads<Arch, 4>(a, j);
  switch (a.group - j) {
    case 3:
      return attend_heads<Arch, 3>(a, j);
    case 2:
      return attend_heads<Arch, 2>(a, j);
    case 1:
      return attend_heads<Arch, 1>(a, j);
    default:
      return;
  }
}

}  // namespace simd
}  // namespace smol

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
