// The kernel unit of MXFP4 (quant/mxfp4.hpp): its dot with Q8_0 activations in every
// instruction set (the kernels: scalar_kernels.hpp, x86_mxfp4.hpp, neon.hpp), and on x86
// prefill tiles of tokens (the 32-value types' 256-bit tiles, x86_avx2_blocks32.hpp);
// NEON loops the dot. An interleaved copy, as IQ4_NL's, is for later.
#pragma once

#include "smol/quant/mxfp4.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/x86_mxfp4.hpp"

namespace smol {

template <>
struct KernelUnit<BlockWeight<BlockMXFP4>> {
  using Table = WeightKernels<BlockWeight<BlockMXFP4>>;
  static void scalar(Table& k) noexcept { k.dot = scalar::dot_mxfp4_q8_0; }
#if defined(SMOL_X86)
  template <class Arch>
  static void x86(Table& k) noexcept {
    using namespace simd::x86;
    k.dot = dot_mxfp4_q8_0<Arch>;
    k.tile_dots = tile_dots_blocks32_entry<Arch, BlockMXFP4, true, Mxfp4Values<Arch>>;
  }
#endif
#if defined(SMOL_ARM64)
  template <class Arch>
  static void neon(Table& k) noexcept {
    k.dot = simd::neon::dot_mxfp4_q8_0<Arch>;
  }
#endif
};

}  // namespace smol
