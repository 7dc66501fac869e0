// The kernel units of Q4_1, Q5_0 and Q5_1 (quant/legacy_blocks.hpp): their dots with
// their activations in every instruction set, all here. One kernel template per
// instruction set serves the three types; only the unpacking of a block's 32 quants
// differs. As in ggml, per block with q the block's quants and y the activation's:
//   Q5_0 . Q8_0:        d_x d_y sum (q - 16) y
//   Q4_1, Q5_1 . Q8_1:  d_x d_y sum q y  +  m_x s_y     (s_y = d_y sum y, from the block)
// The sum is exact in integers; floats appear once per block.
// No interleaved copy or prefill tiles: matmul loops the dot over cache-sized blocks, and
// matvec streams the rows with its prefetch (ops/matvec.hpp), as for Q4_0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/half.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol {

// Whether a block type's values carry a min (value = d * q + m) rather than an offset:
// those are dotted with Q8_1 blocks, whose s carries the min term.
template <class Block>
inline constexpr bool kHasMin = !std::is_same_v<Block, BlockQ5_0>;

template <class Block>
using LegacyActivation = typename BlockTraits<Block>::Activation;

namespace scalar {

// Value j's integer level: q for the types with a min, q - 16 for Q5_0.
inline int legacy_level(const BlockQ4_1& b, std::size_t j) noexcept {
  return legacy_low4(b, j);
}
inline int legacy_level(const BlockQ5_0& b, std::size_t j) noexcept {
  return legacy_q5_quant(b, j) - 16;
}
inline int legacy_level(const BlockQ5_1& b, std::size_t j) noexcept {
  return legacy_q5_quant(b, j);
}

template <class Block>
float dot_legacy(const Block* x, const LegacyActivation<Block>* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::int32_t sumi = 0;
    for (std::size_t j = 0; j < 32; ++j) sumi += legacy_level(x[b], j) * y[b].qs[j];
    sum += f16_to_f32(x[b].d) * f16_to_f32(y[b].d) * static_cast<float>(sumi);
    if constexpr (kHasMin<Block>) sum += f16_to_f32(x[b].m) * f16_to_f32(y[b].s);
  }
  return sum;
}

}  // namespace scalar

#if defined(SMOL_X86)
namespace simd::x86 {

// 0x10 in byte j where bit j of the 32-bit word qh is set, else 0: the fifth bits in
// place. Each byte takes qh byte j / 8 (vpshufb stays within 128-bit lanes, and both
// lanes hold the whole word), then a compare keeps bit j % 8.
template <class Arch>
inline __m256i fifth_bits(const std::uint8_t qh[4]) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                          _mm256_set1_epi8(0x10));
}

// The 32 low 4-bit quants of a block in value order (low nibbles, then high ones).
template <class Arch, class Block>
inline __m256i low_nibbles(const Block& block) noexcept {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// A block's 32 levels as bytes: unsigned q (0..31) for the types with a min, signed q - 16
// for Q5_0.
template <class Arch>
inline __m256i legacy_levels(const BlockQ4_1& b) noexcept {
  return low_nibbles<Arch>(b);
}
template <class Arch>
inline __m256i legacy_levels(const BlockQ5_0& b) noexcept {
  return _mm256_sub_epi8(_mm256_or_si256(low_nibbles<Arch>(b), fifth_bits<Arch>(b.qh)),
                         _mm256_set1_epi8(16));
}
template <class Arch>
inline __m256i legacy_levels(const BlockQ5_1& b) noexcept {
  return _mm256_or_si256(low_nibbles<Arch>(b), fifth_bits<Arch>(b.qh));
}

// 256-bit, for every x86 set (a block is one ymm; the VNNI sets use vpdpbusd). Levels
// reach 31 and activations |127|, so vpmaddubsw's pairs stay below 2^13.
template <class Arch, class Block>
float dot_legacy(const Block* x, const LegacyActivation<Block>* y, std::size_t nblocks) noexcept {
  __m256 acc = _mm256_setzero_ps();
  float sum_min = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    const __m256i yq = load256<Arch>(y[b].qs);
    const __m256i levels = legacy_levels<Arch>(x[b]);
    __m256i sumi;
    if constexpr (kHasMin<Block>) {
      sumi = dot_u8s8<Arch>(levels, yq);  // unsigned levels
    } else {
      sumi = dot_s8s8<Arch>(levels, yq);
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi),
                          _mm256_set1_ps(_cvtsh_ss(x[b].d) * _cvtsh_ss(y[b].d)), acc);
    if constexpr (kHasMin<Block>) sum_min += _cvtsh_ss(x[b].m) * _cvtsh_ss(y[b].s);
  }
  return hsum<Arch>(acc) + sum_min;
}

}  // namespace simd::x86
#endif  // SMOL_X86

#if defined(__aarch64__)
namespace simd::neon {

// 0x10 in byte j where bit j of the 32-bit word qh is set, else 0, for values 0-15
// (out[0]) and 16-31 (out[1]): each byte takes qh byte j / 8, then a test keeps bit j % 8.
template <class Arch>
inline void fifth_bits(const std::uint8_t qh[4], uint8x16_t out[2]) noexcept {
  static constexpr std::uint8_t kByteOf[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                                  {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}};
  static constexpr std::uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128,
                                            1, 2, 4, 8, 16, 32, 64, 128};
  std::uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const uint8x16_t table = vcombine_u8(vcreate_u8(bits), vdup_n_u8(0));
  const uint8x16_t bit = vld1q_u8(kBit), sixteen = vdupq_n_u8(0x10);
  for (int half = 0; half < 2; ++half) {
    const uint8x16_t spread = vqtbl1q_u8(table, vld1q_u8(kByteOf[half]));
    out[half] = vandq_u8(vtstq_u8(spread, bit), sixteen);
  }
}

// A block's 32 levels as two vectors of bytes, as in the x86 kernel.
template <class Arch, class Block>
inline void legacy_levels(const Block& b, int8x16_t out[2]) noexcept {
  const uint8x16_t raw = vld1q_u8(b.qs);
  uint8x16_t q[2] = {vandq_u8(raw, vdupq_n_u8(0x0F)), vshrq_n_u8(raw, 4)};
  if constexpr (!std::is_same_v<Block, BlockQ4_1>) {
    uint8x16_t high[2];
    fifth_bits<Arch>(b.qh, high);
    q[0] = vorrq_u8(q[0], high[0]);
    q[1] = vorrq_u8(q[1], high[1]);
  }
  for (int half = 0; half < 2; ++half) {
    out[half] = vreinterpretq_s8_u8(q[half]);
    if constexpr (!kHasMin<Block>) out[half] = vsubq_s8(out[half], vdupq_n_s8(16));
  }
}

template <class Arch, class Block>
float dot_legacy(const Block* x, const LegacyActivation<Block>* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    int8x16_t levels[2];
    legacy_levels<Arch>(x[b], levels);
    const std::int32_t sumi =
        dot16<Arch>(levels[0], vld1q_s8(y[b].qs)) + dot16<Arch>(levels[1], vld1q_s8(y[b].qs + 16));
    sum += HalfLoads<Arch>::f16_one(x[b].d) * HalfLoads<Arch>::f16_one(y[b].d) *
           static_cast<float>(sumi);
    if constexpr (kHasMin<Block>) {
      sum += HalfLoads<Arch>::f16_one(x[b].m) * HalfLoads<Arch>::f16_one(y[b].s);
    }
  }
  return sum;
}

}  // namespace simd::neon
#endif  // __aarch64__

// The three units differ only in their block type.
template <class Block>
struct LegacyKernelUnit {
  template <class Arch>
  static WeightKernels<BlockWeight<Block>> make() noexcept {
    WeightKernels<BlockWeight<Block>> k;
    if constexpr (std::is_same_v<Arch, scalar_arch>) {
      k.dot = scalar::dot_legacy<Block>;
#if defined(SMOL_X86)
    } else if constexpr (std::is_same_v<Arch, avx2_arch> || is_avx512_v<Arch>) {
      k.dot = simd::x86::dot_legacy<Arch, Block>;
#endif
#if defined(__aarch64__)
    } else if constexpr (std::is_same_v<Arch, neon_arch>) {
      k.dot = simd::neon::dot_legacy<Arch, Block>;
#endif
    }
    return k;
  }
};

template <>
struct KernelUnit<BlockWeight<BlockQ4_1>> : LegacyKernelUnit<BlockQ4_1> {};
template <>
struct KernelUnit<BlockWeight<BlockQ5_0>> : LegacyKernelUnit<BlockQ5_0> {};
template <>
struct KernelUnit<BlockWeight<BlockQ5_1>> : LegacyKernelUnit<BlockQ5_1> {};

}  // namespace smol
