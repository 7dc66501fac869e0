// The kernel units of the 32-value block types Q4_0 and Q8_0, dotted with Q8_0
// activations: one 256-bit kernel serves every x86 set (a Q8_0 block is one ymm).
#pragma once

#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol {

template <>
struct KernelUnit<BlockWeight<BlockQ4_0>> {
  template <class Arch>
  static WeightKernels<BlockWeight<BlockQ4_0>> make() noexcept {
    WeightKernels<BlockWeight<BlockQ4_0>> k;
    if constexpr (std::is_same_v<Arch, scalar_arch>) {
      k.dot = scalar::dot_q4_0_q8_0;
#if defined(SMOL_X86)
    } else if constexpr (std::is_same_v<Arch, avx2_arch> || is_avx512_v<Arch>) {
      k.dot = simd::x86::dot_q4_0_q8_0<Arch>;
#endif
#if defined(SMOL_ARM64)
    } else if constexpr (std::is_same_v<Arch, neon_arch>) {
      k.dot = simd::neon::dot_q4_0_q8_0<Arch>;
#endif
    }
    return k;
  }
};

template <>
struct KernelUnit<BlockWeight<BlockQ8_0>> {
  template <class Arch>
  static WeightKernels<BlockWeight<BlockQ8_0>> make() noexcept {
    WeightKernels<BlockWeight<BlockQ8_0>> k;
    if constexpr (std::is_same_v<Arch, scalar_arch>) {
      k.dot = scalar::dot_q8_0_q8_0;
#if defined(SMOL_X86)
    } else if constexpr (std::is_same_v<Arch, avx2_arch> || is_avx512_v<Arch>) {
      k.dot = simd::x86::dot_q8_0_q8_0<Arch>;
#endif
#if defined(SMOL_ARM64)
    } else if constexpr (std::is_same_v<Arch, neon_arch>) {
      k.dot = simd::neon::dot_q8_0_q8_0<Arch>;
#endif
    }
    return k;
  }
};

}  // namespace smol
