// The steps the 256-bit Q2_K and Q5_K kernels share, written once. Both are K-quants with
// a scale and a min per sub-block: once a block is unpacked into eight vectors of unsigned
// quants in value order, each with its sub-blocks' scales as int16, and its mins as int16
// matched with the activations' sixteen bsums, the dot is the same integers and the same
// float steps, whatever the type: sum_j sc_j * S_j times d * y_d, less sum_j m_j * bsum_j
// times dmin * y_d, the two kept in separate accumulators until the end. Each unit writes
// only its unpacking (kernels_q2_k.hpp, kernels_q5_k.hpp).
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>

#include "smol/quant/blocks.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol::simd::x86 {

// A K-quant block unpacked for the 256-bit kernels.
template <class Arch>
struct KQuantUnpacked {
  __m256i quants[8];  // 32 unsigned quants per vector, in value order
  __m256i scales[8];  // each vector's sub-block scales, as int16 in the matching pairs
  __m256i mins;       // the sub-blocks' mins as int16, one per activation bsum
  float d, dmin;
};

// sum_j sc_j * sum_l q_l y_l of an unpacked block and one activation block, in int32
// lanes. Quants below 32 and activations within |127| keep a vpmaddubsw pair sum below
// 2^13, so the int16 products never saturate.
template <class Arch>
inline __m256i k_quant_sums(const KQuantUnpacked<Arch>& u, const BlockQ8K& y) noexcept {
  __m256i sumi = _mm256_setzero_si256();
  for (int v = 0; v < 8; ++v) {
    const __m256i p = _mm256_maddubs_epi16(u.quants[v], load256<Arch>(y.qs + 32 * v));
    sumi = madd16_acc<Arch>(sumi, p, u.scales[v]);
  }
  return sumi;
}

// One block's two float steps for one token: the scaled sums into acc, the min term
// (sum_j m_j * bsum_j) into acc_min, subtracted at the end.
template <class Arch>
inline void k_quant_accumulate(const KQuantUnpacked<Arch>& u, const BlockQ8K& y, __m256& acc,
                               __m256& acc_min) noexcept {
  const __m256i min_products = _mm256_madd_epi16(u.mins, load256<Arch>(y.bsums));
  acc_min =
      _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_products), _mm256_set1_ps(u.dmin * y.d), acc_min);
  acc =
      _mm256_fmadd_ps(_mm256_cvtepi32_ps(k_quant_sums<Arch>(u, y)), _mm256_set1_ps(u.d * y.d), acc);
}

// The dot of a row of `Block`s, unpacked by `Unpack(block, unpacked)`. kStreams: decode asks
// for each block's lines ahead itself (stream_block_ahead; WeightKernels::dot_streams).
template <class Arch, class Block, auto Unpack, bool kStreams>
float dot_k_quant_q8k(const Block* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    if constexpr (kStreams) stream_block_ahead<Arch>(x + b);
    KQuantUnpacked<Arch> u;
    Unpack(x[b], u);
    k_quant_accumulate<Arch>(u, y[b], acc, acc_min);
  }
  return hsum<Arch>(acc) - hsum<Arch>(acc_min);
}

// Prefill (WeightKernels::tile_dots, through tile_loop.hpp's run_tiles): one row times T
// tokens, each block unpacked once for all T. Each token's accumulators see exactly
// dot_k_quant_q8k's operations in its order, so a tile gives every token that dot's bits,
// whatever the tile size.
template <class Arch, std::size_t T, class Block, auto Unpack>
struct KQuantRowTile {
  static void run(const Block* row, const BlockQ8K* act, std::size_t act_stride,
                  std::size_t nblocks, float* out) noexcept {
    __m256 acc[T], acc_min[T];
    for (std::size_t t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
    for (std::size_t b = 0; b < nblocks; ++b) {
      KQuantUnpacked<Arch> u;
      Unpack(row[b], u);
      for (std::size_t t = 0; t < T; ++t) {
        k_quant_accumulate<Arch>(u, act[t * act_stride + b], acc[t], acc_min[t]);
      }
    }
    for (std::size_t t = 0; t < T; ++t) out[t] = hsum<Arch>(acc[t]) - hsum<Arch>(acc_min[t]);
  }
};

}  // namespace smol::simd::x86
#endif  // SMOL_X86
