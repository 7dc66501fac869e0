// The Q8_0 and Q8_1 activation quantizers in AVX-512, sixteen blocks of 32 values at a
// time, bit for bit the scalar ones (scalar::quantize_row_q8_0, quant/legacy_blocks.hpp's
// quantize_row_q8_1) as the 256-bit ones in x86_avx2.hpp are.
//
// Why sixteen at once: one block at a time, each block reduces its 32 values' max |x| to
// one float, divides twice in scalar code (d = amax / 127, id = 1 / d) and, for Q8_1,
// reduces its quants' sum; that was a visible share of a SmolLM2 prefill on AMX
// (bench/HISTORY.md, "Figures moved from code comments"). Sixteen blocks' maxima
// (and sums) reduce together, one 16-wide tree for all of them, and the divisions and f16
// conversions are one vector each. max and integer addition are exact in any order, so the
// tree gives the scalar loop's values.
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

// Lane b of the result = `combine` over all sixteen lanes of v[b] (the lanes are moved as
// 32-bit patterns, so integers reduce too, with a `combine` that casts). Four levels:
// 256-bit halves, 128-bit quarters, then pairs and single lanes within each 128-bit lane;
// after them lane 4k + m holds v[4m + k], which the last permute puts in order.
template <class Combine>
inline __m512 reduce_sixteen(const __m512 (&v)[16], Combine combine) noexcept {
  __m512 halves[8], quarters[4], pairs[2];
  for (int i = 0; i < 8; ++i) {
    const __m512 a = v[2 * i], b = v[2 * i + 1];
    halves[i] = combine(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                        _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int i = 0; i < 4; ++i) {
    const __m512 a = halves[2 * i], b = halves[2 * i + 1];
    quarters[i] = combine(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  for (int i = 0; i < 2; ++i) {
    const __m512 a = quarters[2 * i], b = quarters[2 * i + 1];
    pairs[i] = combine(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  const __m512 all = combine(_mm512_shuffle_ps(pairs[0], pairs[1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(pairs[0], pairs[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, all);
}

// Sixteen blocks from x[0 .. 512) into out[0 .. 16): Q8_0, or Q8_1 with its s.
template <class Arch, class Block>
inline void quantize_sixteen_blocks_q8(const float* x, Block* out) noexcept {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  __m512 amax[16];
  for (int b = 0; b < 16; ++b) {
    amax[b] = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + 32 * b)),
                            _mm512_andnot_ps(sign, _mm512_loadu_ps(x + 32 * b + 16)));
  }
  const __m512 max = reduce_sixteen(amax, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); });
  const __m512 d = _mm512_div_ps(max, _mm512_set1_ps(127.0f));
  const __mmask16 nonzero = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_OQ);
  alignas(64) float id[16];
  _mm512_store_ps(id, _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), d));
  alignas(32) f16_bits d16[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(d16),
                     _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT));

  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  [[maybe_unused]] __m512 sums[16];  // Q8_1: the quants' int32 sums, as float bit patterns
  for (int b = 0; b < 16; ++b) {
    const __m512 scale = _mm512_set1_ps(id[b]);
    __m512i q[2];
    for (int h = 0; h < 2; ++h) {
      // round half away from zero, as the 256-bit quantizer: trunc, then one more step
      // where the exact fraction is at least 0.5
      const __m512 p = _mm512_mul_ps(_mm512_loadu_ps(x + 32 * b + 16 * h), scale);
      const __m512 t = _mm512_roundscale_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m512 frac = _mm512_andnot_ps(sign, _mm512_sub_ps(p, t));
      const __m512 step = _mm512_or_ps(_mm512_and_ps(sign, p), one);  // +-1 with p's sign
      const __mmask16 up = _mm512_cmp_ps_mask(frac, half, _CMP_GE_OQ);
      q[h] = _mm512_cvtps_epi32(_mm512_mask_add_ps(t, up, t, step));
    }
    out[b].d = d16[b];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs), _mm512_cvtsepi32_epi8(q[0]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].qs + 16), _mm512_cvtsepi32_epi8(q[1]));
    if constexpr (std::is_same_v<Block, BlockQ8_1>) {
      sums[b] = _mm512_castsi512_ps(_mm512_add_epi32(q[0], q[1]));
    }
  }
  if constexpr (std::is_same_v<Block, BlockQ8_1>) {
    const __m512i sum = _mm512_castps_si512(reduce_sixteen(sums, [](__m512 a, __m512 b) {
      return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
    }));
    alignas(32) f16_bits s16[16];
    _mm256_store_si256(
        reinterpret_cast<__m256i*>(s16),
        _mm512_cvtps_ph(_mm512_mul_ps(_mm512_cvtepi32_ps(sum), d), _MM_FROUND_TO_NEAREST_INT));
    for (int b = 0; b < 16; ++b) out[b].s = s16[b];
  }
}

// A row of n values (a multiple of 32) into Q8_0 or Q8_1 blocks: sixteen blocks at a
// time, the rest one at a time by the 256-bit quantizer.
template <class Arch, class Block>
void quantize_row_q8_512(const float* x, Block* out, std::size_t n) noexcept {
  const std::size_t whole = n / 32 / 16 * 16;
  for (std::size_t b = 0; b < whole; b += 16) quantize_sixteen_blocks_q8<Arch>(x + 32 * b, out + b);
  if constexpr (std::is_same_v<Block, BlockQ8_1>) {
    quantize_row_q8_1<Arch>(x + 32 * whole, out + whole, n - 32 * whole);
  } else {
    quantize_row_q8_0<Arch>(x + 32 * whole, out + whole, n - 32 * whole);
  }
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
