// MXFP4's x86 kernels (quant/mxfp4.hpp; kernels_mxfp4.hpp says which set takes which; the
// scalar reference is scalar_kernels.hpp's dot_mxfp4_q8_0). A block's 16 doubled E2M1
// values fit one 128-bit register, so its 32 codes become their values with one byte
// shuffle, as IQ4_NL's indices become levels (x86_iq4.hpp), and the block is then a
// Q8_0-like block of signed bytes: d_y e8m0_half(e) sum value * y, the sum exact in
// integers (|value| <= 12), one float step per block. Prefill: the 32-value types' tiles
// of tokens (x86_avx2_blocks32.hpp), each block's values made once for a tile, on every
// set.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smol/quant/blocks.hpp"
#include "smol/quant/mxfp4.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_blocks32.hpp"
#include "smol/simd/x86_legacy.hpp"

#if defined(SMOL_X86)
namespace smol::simd::x86 {

// The largest |value| on vpmaddubsw's unsigned side: four blocks sum in int16 on AVX2.
template <>
inline constexpr int kBlocks32MaxLevel<BlockMXFP4> = 12;

// The 16 values in both 128-bit lanes (vpshufb looks up within each lane).
template <class Arch>
inline __m256i mxfp4_table() noexcept {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values)));
}

// 256-bit, for every x86 set (a block is one ymm; the VNNI sets use vpdpbusd).
template <class Arch>
float dot_mxfp4_q8_0(const BlockMXFP4* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  const __m256i table = mxfp4_table<Arch>();
  __m256 acc = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const __m256i values = _mm256_shuffle_epi8(table, low_nibbles<Arch>(x[b]));
    const __m256i sumi = dot_s8s8<Arch>(values, load256<Arch>(y[b].qs));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi),
                          _mm256_set1_ps(_cvtsh_ss(y[b].d) * e8m0_half(x[b].e)), acc);
  }
  return hsum<Arch>(acc);
}

// A block's 32 values as signed bytes, for the prefill tiles (tile_dots_blocks32).
template <class Arch>
struct Mxfp4Values {
  __m256i operator()(const BlockMXFP4& b) const noexcept {
    return _mm256_shuffle_epi8(mxfp4_table<Arch>(), low_nibbles<Arch>(b));
  }
};

}  // namespace smol::simd::x86
#endif  // SMOL_X86
