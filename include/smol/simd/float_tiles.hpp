// Prefill tiles of float rows (WeightKernels::tile_dots for F32, F16 and BF16): a few rows
// by a few tokens in registers, each widened weight batch multiplied into every token of
// the tile and each activation batch into every row. One dot per row and token (the `dots`
// path) loads both for every multiply and widens each row once per token: on a BGE-base
// F16 file those dots were 74 % of an embedding pass (bench/HISTORY.md, "F16 prefill
// tiles"). Written here over xsimd rather than taken from Eigen: the rows are f16 or bf16
// in the file, widened in registers as they are read, where Eigen's GEMM would need a
// widened copy of every matrix.
//
// Each (row, token) sum runs over the row in one order, one accumulator and then the
// tail, whatever the tile's shape, so a token's bits depend neither on the number of
// tokens nor on the rows beside it (WeightKernels::tile_dots's contract). They are not
// `dot`'s bits (four accumulators): one token takes these tiles where a batch-invariant
// path asks for them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/float_kernels.hpp"

namespace smol::simd {

// A float row's values as batches and one by one, per type (by its GgmlType: f16_bits and
// bf16_bits are both 16-bit integers).
template <class Arch, GgmlType Type>
struct FloatRowLoads {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  using Element = std::conditional_t<Type == GgmlType::F32, float, std::uint16_t>;
  static batch load(const Element* p) noexcept {
    if constexpr (Type == GgmlType::F32) {
      return batch::load_unaligned(p);
    } else if constexpr (Type == GgmlType::F16) {
      return HalfLoads<Arch>::f16(p);
    } else {
      static_assert(Type == GgmlType::BF16);
      return HalfLoads<Arch>::bf16(p);
    }
  }
  static float one(Element v) noexcept {
    if constexpr (Type == GgmlType::F32) {
      return v;
    } else if constexpr (Type == GgmlType::F16) {
      return HalfLoads<Arch>::f16_one(v);
    } else {
      return bf16_one<Arch>(v);
    }
  }
};

// The tile's shape: R x T accumulators, T activation batches and a weight batch must fit
// in the vector registers (16 on AVX2, 32 on AVX-512 and AArch64).
template <class Arch>
inline constexpr std::size_t kFloatTileSide = std::is_same_v<Arch, avx2_arch> ? 3 : 4;

// Rows [0, R) of `w` (`row_bytes` apart) times tokens [0, T) of `x` (`x_stride` floats
// apart), n values each: y[t * y_stride + r].
template <class Arch, GgmlType Type, std::size_t R, std::size_t T, bool kPrefetch>
void float_tile(const std::byte* w, std::size_t row_bytes, const float* x, std::size_t x_stride,
                std::size_t n, float* y, std::size_t y_stride) noexcept {
  using Loads = FloatRowLoads<Arch, Type>;
  using batch = typename Loads::batch;
  using Element = typename Loads::Element;
  constexpr std::size_t width = batch::size;
  const Element* rows[R];
  for (std::size_t r = 0; r < R; ++r) rows[r] = reinterpret_cast<const Element*>(w + r * row_bytes);
  batch acc[R][T];
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t t = 0; t < T; ++t) acc[r][t] = batch(0.0f);
  }
  // The small loops unrolled, so that the accumulators stay in registers whatever the
  // compiler's unrolling heuristics.
  std::size_t i = 0;
  for (; i + width <= n; i += width) {
    batch xs[T];
#pragma GCC unroll 8
    for (std::size_t t = 0; t < T; ++t) xs[t] = batch::load_unaligned(x + t * x_stride + i);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      // The first token tile reads the rows from memory: it asks for the same place of
      // the row R rows on (the next row tile's), in step with this one, as R short rows
      // read side by side are too short for the hardware prefetchers (one token took
      // the tiles at two thirds of matvec's bandwidth; bench/HISTORY.md, "F16 prefill
      // tiles"). Later token tiles find the rows in L2.
      if constexpr (kPrefetch) {
        __builtin_prefetch(reinterpret_cast<const char*>(rows[r] + i) + R * row_bytes, 0, 2);
      }
      const batch wv = Loads::load(rows[r] + i);
#pragma GCC unroll 8
      for (std::size_t t = 0; t < T; ++t) acc[r][t] = xsimd::fma(wv, xs[t], acc[r][t]);
    }
  }
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t t = 0; t < T; ++t) {
      float sum = xsimd::hadd(acc[r][t]);
      for (std::size_t j = i; j < n; ++j) sum += Loads::one(rows[r][j]) * x[t * x_stride + j];
      y[t * y_stride + r] = sum;
    }
  }
}

// float_tile for nr <= R rows and tn <= T tokens, the shape chosen at compile time.
template <class Arch, GgmlType Type, std::size_t R, std::size_t T, bool kPrefetch>
void float_tile_up_to(std::size_t nr, std::size_t tn, const std::byte* w, std::size_t row_bytes,
                      const float* x, std::size_t x_stride, std::size_t n, float* y,
                      std::size_t y_stride) noexcept {
  if constexpr (R > 1) {
    if (nr < R) {
      return float_tile_up_to<Arch, Type, R - 1, T, kPrefetch>(nr, tn, w, row_bytes, x, x_stride, n,
                                                               y, y_stride);
    }
  }
  if constexpr (T > 1) {
    if (tn < T) {
      return float_tile_up_to<Arch, Type, R, T - 1, kPrefetch>(nr, tn, w, row_bytes, x, x_stride, n,
                                                               y, y_stride);
    }
  }
  float_tile<Arch, Type, R, T, kPrefetch>(w, row_bytes, x, x_stride, n, y, y_stride);
}

// WeightKernels::tile_dots for a float type: tokens in tiles outside, rows inside, so a
// tile's activations stay in L1 while the thread's rows (a few dozen, in L2) pass.
template <class Arch, GgmlType Type>
void tile_dots_float(const std::byte* w, std::size_t row_bytes, std::size_t n_rows, const float* x,
                     std::size_t x_stride, std::size_t n, std::size_t n_tokens, float* y,
                     std::size_t y_stride) noexcept {
  constexpr std::size_t side = kFloatTileSide<Arch>;
  for (std::size_t t0 = 0; t0 < n_tokens; t0 += side) {
    const std::size_t tn = std::min(side, n_tokens - t0);
    for (std::size_t r0 = 0; r0 < n_rows; r0 += side) {
      // Only the first token tile asks for rows ahead, and not past the thread's rows.
      const std::size_t nr = std::min(side, n_rows - r0);
      const std::byte* rows = w + r0 * row_bytes;
      float* out = y + t0 * y_stride + r0;
      if (t0 == 0 && r0 + side < n_rows) {
        float_tile_up_to<Arch, Type, side, side, true>(nr, tn, rows, row_bytes, x + t0 * x_stride,
                                                       x_stride, n, out, y_stride);
      } else {
        float_tile_up_to<Arch, Type, side, side, false>(nr, tn, rows, row_bytes, x + t0 * x_stride,
                                                        x_stride, n, out, y_stride);
      }
    }
  }
}

}  // namespace smol::simd
