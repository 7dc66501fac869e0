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
    bits = sign | 0x7f800000u | mantissa << 13;  // inf or NaN
  } else {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  return std::bit_cast<float>(bits);
}

// Round to nearest, ties to even, as the F16C instruction vcvtps2ph does.
constexpr f16_bits f32_to_f16(float value) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN (keep NaN quiet)
    return static_cast<f16_bits>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | (abs >> 13) : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<f16_bits>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    if (abs < 0x33000000u) return static_cast<f16_bits>(sign);
    const std::uint32_t shift = 113 - (abs >> 23) + 13;  // 113 = 127 - 14
    const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;
    return static_cast<f16_bits>(sign | half);
  }
  std::uint32_t half = ((abs - 0x38000000u) >> 13);  // rebias exponent 127 -> 15
  const std::uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
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
