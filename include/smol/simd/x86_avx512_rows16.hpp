// AVX-512 and AVX2 decode kernels on sixteen interleaved Q4_1 rows (quant/rows16.hpp) times one
// Q8_1 token.
//
// Lane r of every vector is row r: a 64-byte load of qs[c] holds quad c (low nibbles)
// and quad c + 4 (high nibbles) of all sixteen rows, the token's matching 4 bytes are
// broadcast, and one u8 x s8 dot (vpdpbusd; on AVX-512 without VNNI, vpmaddubsw and
// vpmaddwd, whose 16-bit pair sums stay below 2 x 15 x 128) adds them to each row's
// int32 sum. Eight such dots make a block, exact integers like the reference.
//
// The floats are then those of the AMX tile kernel (x86_amx_blocks32.hpp) for one
// token, step for step: v = float(isum) * wd, acc = fma(v, yd, acc), acc = fma(wm, ys,
// acc), blocks in order, one accumulator per row. So on AMX a decode on the copy gives
// the prefill tiles' result bit for bit (tested). Intrinsics, because xsimd 8.1 has no
// u8 x s8 dot.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/half.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/quant/rows16.hpp"
#include "smol/simd/arch.hpp"

namespace smol::simd::x86 {

// acc + the sums of four u8 x s8 products per 32-bit lane.
template <class Arch>
inline __m512i dot4_u8s8_512(__m512i acc, __m512i u, __m512i s) noexcept {
  if constexpr (has_vnni_v<Arch>) {
    return _mm512_dpbusd_epi32(acc, u, s);
  } else {
    const __m512i pairs = _mm512_maddubs_epi16(u, s);  // |pair| <= 2 x 15 x 128: no saturation
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
  }
}

// Decode streams the copy from memory: asks for the group four ahead of `group` (320
// bytes, five lines). Through an integer address, since near the copy's end that group
// lies past it: a prefetch there does not fault, but forming the pointer would be UB.
inline void prefetch_group_ahead(const BlockQ4_1Rows16* group) noexcept {
  const std::uintptr_t ahead =
      reinterpret_cast<std::uintptr_t>(group) + 4 * sizeof(BlockQ4_1Rows16);
  for (std::uintptr_t line = 0; line < sizeof(BlockQ4_1Rows16); line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(ahead + line), _MM_HINT_T0);
  }
}

template <class Arch>
void rows16_q4_1_q8_1_512(const BlockQ4_1Rows16* w, std::size_t nblocks, std::size_t n_rows,
                          const BlockQ8_1* x, float* y) noexcept {
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 acc = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const BlockQ4_1Rows16& blk = w[b];
    prefetch_group_ahead(w + b);
    std::int32_t quads[8];
    std::memcpy(quads, x[b].qs, sizeof(quads));
    __m512i isum = _mm512_setzero_si512();
    for (std::size_t c = 0; c < 4; ++c) {
      const __m512i v = _mm512_load_si512(blk.qs[c]);
      isum = dot4_u8s8_512<Arch>(isum, _mm512_and_si512(v, low), _mm512_set1_epi32(quads[c]));
      isum = dot4_u8s8_512<Arch>(isum, _mm512_and_si512(_mm512_srli_epi16(v, 4), low),
                                 _mm512_set1_epi32(quads[c + 4]));
    }
    const __m512 wd = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk.d)));
    const __m512 wm = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk.m)));
    const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(isum), wd);
    acc = _mm512_fmadd_ps(v, _mm512_set1_ps(f16_to_f32(x[b].d)), acc);
    acc = _mm512_fmadd_ps(wm, _mm512_set1_ps(f16_to_f32(x[b].s)), acc);
  }
  const std::size_t nr = n_rows < kRows16 ? n_rows : kRows16;
  _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << nr) - 1), acc);
}

// AVX2: the same steps on two 256-bit halves, rows 0-7 and rows 8-15 of each 64-byte
// quad vector (vpmaddubsw and vpmaddwd for the u8 x s8 dot, exact as above).
template <class Arch>
void rows16_q4_1_q8_1_256(const BlockQ4_1Rows16* w, std::size_t nblocks, std::size_t n_rows,
                          const BlockQ8_1* x, float* y) noexcept {
  const __m256i low = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (std::size_t b = 0; b < nblocks; ++b) {
    const BlockQ4_1Rows16& blk = w[b];
    prefetch_group_ahead(w + b);
    std::int32_t quads[8];
    std::memcpy(quads, x[b].qs, sizeof(quads));
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (std::size_t c = 0; c < 4; ++c) {
      const __m256i xl = _mm256_set1_epi32(quads[c]), xh = _mm256_set1_epi32(quads[c + 4]);
      for (std::size_t h = 0; h < 2; ++h) {
        const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk.qs[c][8 * h]));
        const __m256i lo = _mm256_and_si256(v, low);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
        isum[h] = _mm256_add_epi32(isum[h], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), ones));
        isum[h] = _mm256_add_epi32(isum[h], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), ones));
      }
    }
    const __m256 yd = _mm256_set1_ps(f16_to_f32(x[b].d)), ys = _mm256_set1_ps(f16_to_f32(x[b].s));
    for (std::size_t h = 0; h < 2; ++h) {
      const __m256 wd =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(blk.d + 8 * h)));
      const __m256 wm =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(blk.m + 8 * h)));
      const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(isum[h]), wd);
      acc[h] = _mm256_fmadd_ps(v, yd, acc[h]);
      acc[h] = _mm256_fmadd_ps(wm, ys, acc[h]);
    }
  }
  alignas(32) float out[kRows16];
  _mm256_store_ps(out, acc[0]);
  _mm256_store_ps(out + 8, acc[1]);
  std::memcpy(y, out, (n_rows < kRows16 ? n_rows : kRows16) * sizeof(float));
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
