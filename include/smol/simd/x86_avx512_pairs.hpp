// AVX-512 decode dots of the 32-value block types (Q4_0, Q8_0, Q4_1, Q5_0, Q5_1): two
// blocks per 64-byte vector, and each block's scales converted eight blocks at a time.
//
// Why: the 256-bit dot does one block per step, and per block it converts four f16
// scales one by one, broadcasts their product and adds the min term in a serial scalar
// sum. On a small model that sits in the cache (SmolLM2-135M: 98 MB), decode is bound by
// those instructions, not by memory. Here the scales of eight blocks are gathered (each
// block starts with its f16 d, and for the types with a min the f16 m right after it;
// Q8_1 activations likewise with d and s), converted in one instruction per field, and
// multiplied as vectors; the min terms accumulate in a vector of their own; each pair
// of blocks takes one vpdpbusd (two vpmaddubsw/vpmaddwd without VNNI) and one fma
// whose scale vector is a permute of the eight products. Two accumulators keep the fma
// chain from setting the pace.
//
// The dot streams its weights (stream_blocks_ahead, WeightKernels::dot_streams): each group
// of eight blocks' lines 4 KB ahead into L2. Without it, on the types that decode from
// the file's rows (Q5_0, Q5_1, IQ4_NL), matvec's row-at-once prefetch held the 3B IQ4_NL
// decode at half its roofline.
//
// Per block the same integers as the scalar dot; the floats are summed in another order
// (lanes, then a horizontal sum), so results agree with the scalar reference to
// rounding, as the 256-bit kernels' do.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "smol/quant/blocks.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol::simd::x86 {

// Per 32-bit lane, the sum of 4 products u8 x s8 (u at most 128, |s| at most 127).
template <class Arch>
inline __m512i dot_u8s8_512(__m512i u, __m512i s) noexcept {
  if constexpr (has_vnni_v<Arch>) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
  } else {
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
  }
}

// Per 32-bit lane, the sum of 4 products of signed bytes: |a| times b with a's sign
// (AVX-512 has no vpsignb; a zero a gives a zero product either way).
template <class Arch>
inline __m512i dot_s8s8_512(__m512i a, __m512i b) noexcept {
  const __m512i b_signed =
      _mm512_mask_sub_epi8(b, _mm512_movepi8_mask(a), _mm512_setzero_si512(), b);
  return dot_u8s8_512<Arch>(_mm512_abs_epi8(a), b_signed);
}

// The 32-bit words at the start of `count` (at most 8) consecutive blocks, the lanes past
// `count` zero: a block's f16 d, and the f16 after it (m for Q4_1/Q5_1, s for Q8_1).
template <class Arch, class Block>
inline __m256i gather_block_heads(const Block* blocks, std::size_t count) noexcept {
  const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                             _mm256_set1_epi32(static_cast<int>(sizeof(Block))));
  const auto* base = reinterpret_cast<const int*>(blocks);
  if (count >= 8) return _mm256_i32gather_epi32(base, offsets, 1);
  const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), base, offsets, live, 1);
}

// The f16 in the low (first) or high (second) half of each 32-bit lane, as floats.
template <class Arch>
inline __m256 first_halves(__m256i words) noexcept {
  return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(words));
}
template <class Arch>
inline __m256 second_halves(__m256i words) noexcept {
  return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(words, 16)));
}

// Lanes 0-7 lane 2p of `v`, lanes 8-15 lane 2p + 1: the scales of pair p of eight blocks.
template <class Arch>
inline __m512 pair_scales(__m256 v, std::size_t p) noexcept {
  const int lo = static_cast<int>(2 * p), hi = lo + 1;
  return _mm512_permutexvar_ps(
      _mm512_setr_epi32(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi),
      _mm512_castps256_ps512(v));
}

// x . y over `nblocks` blocks. `levels(block)` gives a block's 32 integer levels as bytes
// in value order (as the 256-bit kernels unpack them): unsigned when the type has a min
// (dotted with Q8_1, whose s carries the min term), signed otherwise (with Q8_0).
template <class Arch, class Block, class Activation, class Levels>
float dot_pairs_512(const Block* x, const Activation* y, std::size_t nblocks,
                    Levels levels) noexcept {
  constexpr bool kMin = std::is_same_v<Activation, BlockQ8_1>;
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  __m256 acc_min = _mm256_setzero_ps();
  // Blocks [b, b + count), count <= 8; inlined with count = 8 for every whole group.
  const auto group = [&](std::size_t b, std::size_t count) __attribute__((always_inline)) {
    stream_blocks_ahead<Arch>(x + b, count);  // WeightKernels::dot_streams
    const __m256i x_heads = gather_block_heads<Arch>(x + b, count);
    const __m256i y_heads = gather_block_heads<Arch>(y + b, count);
    const __m256 d = _mm256_mul_ps(first_halves<Arch>(x_heads), first_halves<Arch>(y_heads));
    if constexpr (kMin) {
      acc_min =
          _mm256_fmadd_ps(second_halves<Arch>(x_heads), second_halves<Arch>(y_heads), acc_min);
    }
    for (std::size_t p = 0; 2 * p < count; ++p) {
      const std::size_t i = b + 2 * p;
      const bool both = 2 * p + 1 < count;
      const __m512i lv = _mm512_inserti64x4(_mm512_castsi256_si512(levels(x[i])),
                                            both ? levels(x[i + 1]) : _mm256_setzero_si256(), 1);
      const __m512i yq =
          _mm512_inserti64x4(_mm512_castsi256_si512(load256<Arch>(y[i].qs)),
                             both ? load256<Arch>(y[i + 1].qs) : _mm256_setzero_si256(), 1);
      const __m512i sumi = kMin ? dot_u8s8_512<Arch>(lv, yq) : dot_s8s8_512<Arch>(lv, yq);
      acc[p % 2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), pair_scales<Arch>(d, p), acc[p % 2]);
    }
  };
  std::size_t b = 0;
  for (; b + 8 <= nblocks; b += 8) group(b, 8);
  if (b < nblocks) group(b, nblocks - b);
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
  if constexpr (kMin) sum += hsum<Arch>(acc_min);
  return sum;
}

// dot_pairs_512 as a WeightKernels::dot entry, with a default-made `Levels`.
template <class Arch, class Block, class Levels, class Activation>
float dot_pairs_512_entry(const Block* x, const Activation* y, std::size_t nblocks) noexcept {
  return dot_pairs_512<Arch>(x, y, nblocks, Levels{});
}

}  // namespace smol::simd::x86
#endif  // SMOL_X86
