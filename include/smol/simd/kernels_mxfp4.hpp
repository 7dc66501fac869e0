// The kernel unit of MXFP4 (quant/mxfp4.hpp): its dot with Q8_0 activations in every
// instruction set (the kernels: scalar_kernels.hpp, x86_mxfp4.hpp, neon.hpp). Prefill
// takes the dot per token (matmul's path for a type without tiles); tiles and an
// interleaved copy, as IQ4_NL's, are for later.
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
    k.dot = simd::x86::dot_mxfp4_q8_0<Arch>;
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
