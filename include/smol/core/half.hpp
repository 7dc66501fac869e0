// IEEE half (f16) and bfloat16 conversions, scalar and bit-exact.
//
// ggml stores block scales as f16; these are the reference conversions that the
// SIMD paths (F16C, AVX-512) must agree with. Written out rather than taken from
// a library because Eigen::half drags Eigen into the lowest layer and C++23's
// std::float16_t is not available in GCC 12.
#pragma once

#include <bit>
#include <cstdint>

namespace smol {

using f16_bits = std::uint16_t;
using bf16_bits = std::uint16_t;

constexpr float f16_to_f32(f16_bits h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        mantissa <<= 1;
      } while ((mantissa & 0x400u) == 0);
      bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (mantissa & 0x3ffu) << 13;
    }
  } else if (exponent == 0x1f) {
    // inf, or a NaN made quiet, as vcvtph2ps makes it
    bits = sign | 0x7f800000u | (mantissa != 0 ? 0x400000u : 0u) | mantissa << 13;
  } else {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  return std::bit_cast<float>(bits);
}

// Round to nearest, ties to even, as the F16C instruction vcvtps2ph does (a NaN stays a
// NaN of the same sign, made quiet, its payload's top bits kept): test_quant_blocks
// holds the two to each other. Each case is computed and one selected, rather than
// branched to: the KV cache converts every key and value through this, and the
// selections run it more than twice as fast as nested branches (bench/HISTORY.md, "The KV
// rows' f16 conversion").
constexpr f16_bits f32_to_f16(float value) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  // A normal half: the exponent rebiased (127 -> 15), the 13 bits dropped rounded to
  // nearest, ties to the even neighbour; a carry out of the mantissa rounds the exponent
  // up, to infinity from just below 65520.
  const std::uint32_t normal = (abs - 0x38000000u + 0xfffu + ((abs >> 13) & 1u)) >> 13;
  // Below 2^-14 a subnormal half or zero: adding 0.5 puts the half's last place (2^-24)
  // at the float's, so the float addition rounds as the half must.
  const std::uint32_t subnormal =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(abs) + 0.5f) - 0x3f000000u;
  std::uint32_t half = abs < 0x38800000u ? subnormal : normal;
  half = abs >= 0x477ff000u ? 0x7c00u : half;                          // overflow
  half = abs > 0x7f800000u ? 0x7e00u | ((abs >> 13) & 0x3ffu) : half;  // NaN
  return static_cast<f16_bits>(sign | half);
}

constexpr float bf16_to_f32(bf16_bits h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

// Round to nearest even; NaN stays NaN.
constexpr bf16_bits f32_to_bf16(float value) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_bits>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<bf16_bits>(x >> 16);
}

}  // namespace smol
