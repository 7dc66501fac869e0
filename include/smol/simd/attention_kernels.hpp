// Attention over one block of cached positions for all query heads of one KV head.
//
// Decode attention is a stream over the KV cache, so each K and V row is read once
// for the whole group of query heads that shares it. Keys are stored in tiles of
// kKeyTile positions, dimension-major inside a tile (key (p, d) at
// key_offset(p, d, head_dim)): a tile row is kKeyTile positions of one dimension,
// so the scores of a tile are FMAs of that row with a broadcast query element,
// positions in lanes, with no horizontal add per position. Values are plain rows of
// head_dim by position: the weighted sum is FMAs of a row with a broadcast weight,
// dimensions in lanes. Both loops are transpose-free and read memory in order.
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
#include "smol/simd/arch.hpp"
#include "smol/simd/float_kernels.hpp"

namespace smol {

// Positions per key tile; also the alignment of a block's first position.
inline constexpr std::size_t kKeyTile = 16;

// Element offset of key (position p, dimension d) inside one KV head's keys.
constexpr std::size_t key_offset(std::size_t p, std::size_t d, std::size_t head_dim) noexcept {
  return (p / kKeyTile) * kKeyTile * head_dim + d * kKeyTile + p % kKeyTile;
}

// Arguments of one block. `keys` points at the tile holding the block's first
// position (a multiple of kKeyTile), `values` at its row; `count` positions are
// visible. `scores` is scratch of group * round_up(count, kKeyTile) floats.
template <class Element>
struct AttendBlock {
  const float* queries = nullptr;  // group rows of head_dim
  std::size_t group = 0;
  std::size_t head_dim = 0;
  const Element* keys = nullptr;
  const Element* values = nullptr;
  std::size_t count = 0;
  float scale = 1.0f;
  float* scores = nullptr;
  float* out = nullptr;  // group maxima, group sums, group * head_dim weighted values
};

namespace simd {

inline float element_to_float(float x) noexcept {
  return x;
}
inline float element_to_float(f16_bits x) noexcept {
  return f16_to_f32(x);
}

inline std::size_t score_stride(std::size_t count) noexcept {
  return (count + kKeyTile - 1) / kKeyTile * kKeyTile;
}

// The reference: plain loops, std::exp, the same order of operations per value where
// it is cheap to keep (scores = dot * scale, exp(score - max)).
template <class Element>
void attend_block_reference(const AttendBlock<Element>& a) noexcept {
  const std::size_t dim = a.head_dim, count = a.count, stride = score_stride(count);
  for (std::size_t j = 0; j < a.group; ++j) {
    float* s = a.scores + j * stride;
    const float* q = a.queries + j * dim;
    float m = -std::numeric_limits<float>::infinity();
    for (std::size_t p = 0; p < count; ++p) {
      float dot = 0.0f;
      for (std::size_t d = 0; d < dim; ++d) {
        dot += element_to_float(a.keys[key_offset(p, d, dim)]) * q[d];
      }
      s[p] = dot * a.scale;
      m = std::max(m, s[p]);
    }
    float total = 0.0f;
    for (std::size_t p = 0; p < count; ++p) total += (s[p] = std::exp(s[p] - m));
    a.out[j] = m;
    a.out[a.group + j] = total;
    float* weighted = a.out + 2 * a.group + j * dim;
    std::fill(weighted, weighted + dim, 0.0f);
    for (std::size_t p = 0; p < count; ++p) {
      for (std::size_t d = 0; d < dim; ++d) {
        weighted[d] += s[p] * element_to_float(a.values[p * dim + d]);
      }
    }
  }
}

template <class Arch>
auto load_floats(const float* p) noexcept {
  return xsimd::batch<float, xsimd_arch_t<Arch>>::load_unaligned(p);
}
template <class Arch>
auto load_floats(const f16_bits* p) noexcept {
  return HalfLoads<Arch>::f16(p);
}

// Scores of NH heads (starting at `q`) for NT consecutive tiles starting at `keys`:
// scores[j * stride + tile * kKeyTile + lane]. NT * NH * lanes-per-tile accumulators.
template <class Arch, std::size_t NH, std::size_t NT, class Element>
void tile_scores(const float* q, std::size_t dim, const Element* keys, float scale, float* scores,
                 std::size_t stride) noexcept {
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
        k[t][l] = load_floats<Arch>(keys + t * tile_elements + d * kKeyTile + l * W);
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

// weighted[j][c0 ..] += sum_p w[j][p] * V[p][c0 ..] for NH heads and NB batches of
// dimensions: NH * NB accumulators, each V row segment widened once.
template <class Arch, std::size_t NH, std::size_t NB, class Element>
void weighted_values(const float* w, std::size_t stride, const Element* values, std::size_t dim,
                     std::size_t count, std::size_t c0, float* weighted) noexcept {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  constexpr std::size_t W = batch::size;
  batch acc[NH][NB];
  for (auto& h : acc) {
    for (auto& b : h) b = batch(0.0f);
  }
  // Rows ahead (8 KB for SmolLM3's f16 rows; see tile_scores): on a Zen 5, 8 rows
  // (2 KB) read the cache at 0.45-0.51 of the memory read with one thread and 0.66 with
  // two; 32 rows at 0.60 and 0.80 (bench_forward, depths 4096 and 16384).
  constexpr std::size_t kAhead = 32;
  for (std::size_t p = 0; p < count; ++p) {
    for (std::size_t b = 0; b < NB * W * sizeof(Element); b += 64) {
      __builtin_prefetch(reinterpret_cast<const char*>(values + (p + kAhead) * dim + c0) + b);
    }
    batch v[NB];
    for (std::size_t b = 0; b < NB; ++b) v[b] = load_floats<Arch>(values + p * dim + c0 + b * W);
    for (std::size_t j = 0; j < NH; ++j) {
      const batch wj(w[j * stride + p]);
      for (std::size_t b = 0; b < NB; ++b) acc[j][b] = xsimd::fma(v[b], wj, acc[j][b]);
    }
  }
  for (std::size_t j = 0; j < NH; ++j) {
    for (std::size_t b = 0; b < NB; ++b) acc[j][b].store_unaligned(weighted + j * dim + c0 + b * W);
  }
}

// One chunk of NH query heads (NH <= 4 keeps the accumulators in registers).
template <class Arch, std::size_t NH, class Element>
void attend_heads(const AttendBlock<Element>& a, std::size_t j0) noexcept {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  constexpr std::size_t W = batch::size;
  const std::size_t dim = a.head_dim, count = a.count, stride = score_stride(count);
  const std::size_t n_tiles = stride / kKeyTile;
  const float* q = a.queries + j0 * dim;
  float* scores = a.scores + j0 * stride;
  // Two tiles at a time give NH * 2 independent FMA chains, enough to hide latency.
  std::size_t t = 0;
  for (; t + 2 <= n_tiles; t += 2) {
    tile_scores<Arch, NH, 2>(q, dim, a.keys + t * kKeyTile * dim, a.scale, scores + t * kKeyTile,
                             stride);
  }
  if (t < n_tiles) {
    tile_scores<Arch, NH, 1>(q, dim, a.keys + t * kKeyTile * dim, a.scale, scores + t * kKeyTile,
                             stride);
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
  std::size_t c0 = 0;
  for (; c0 + 4 * W <= dim; c0 += 4 * W) {
    weighted_values<Arch, NH, 4>(scores, stride, a.values, dim, count, c0, weighted);
  }
  for (; c0 + W <= dim; c0 += W) {
    weighted_values<Arch, NH, 1>(scores, stride, a.values, dim, count, c0, weighted);
  }
  for (; c0 < dim; ++c0) {  // head sizes that are not a multiple of the vector width
    for (std::size_t j = 0; j < NH; ++j) {
      float sum = 0.0f;
      for (std::size_t p = 0; p < count; ++p) {
        sum += scores[j * stride + p] * element_to_float(a.values[p * dim + c0]);
      }
      weighted[j * dim + c0] = sum;
    }
  }
}

template <class Arch, class Element>
void attend_block(const AttendBlock<Element>& a) noexcept {
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
