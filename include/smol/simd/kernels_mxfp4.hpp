// The kernel unit of MXFP4 (quant/mxfp4.hpp): its dot with Q8_0 activations in every
// instruction set (the kernels: scalar_kernels.hpp, x86_mxfp4.hpp, neon.hpp), and on x86
// prefill tiles of tokens on the file's rows (the 32-value types' 256-bit tiles,
// x86_avx2_blocks32.hpp); NEON loops the dot.
//
// On x86 a model reads the sixteen-row copy instead (quant/rows16.hpp's BlockMXFP4Rows16,
// made at load): decode and prefill both through its kernel (x86_avx512_rows16.hpp), four
// tokens per pass over a group. One row at a time on the file's layout, a decode dot was
// held to about 12 GB/s a thread by its per-row steps (a 2880-wide row is 90 blocks: a
// horizontal sum and a call per row); sixteen rows in the lanes of one vector take the
// E8M0 scales with one widening shift and leave with one store. AMX has no tile kernel
// for the copy yet, so its prefill takes the same kernel (rows16_prefills), which keeps a
// token's prefill and decode bits alike there too.
#pragma once

#include <type_traits>

#include "smol/quant/mxfp4.hpp"
#include "smol/quant/rows16.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/x86_avx512_rows16.hpp"
#include "smol/simd/x86_mxfp4.hpp"

namespace smol {

template <>
struct KernelUnit<BlockWeight<BlockMXFP4>> {
  using Table = WeightKernels<BlockWeight<BlockMXFP4>>;
  static void scalar(Table& k) noexcept {
    k.dot = scalar::dot_mxfp4_q8_0;
    k.rows16 = rows16_mxfp4_reference;  // the sixteen-row copy (quant/rows16.hpp)
  }
#if defined(SMOL_X86)
  template <class Arch>
  static void x86(Table& k) noexcept {
    using namespace simd::x86;
    k.dot = dot_mxfp4_q8_0<Arch>;
    k.tile_dots = tile_dots_blocks32_entry<Arch, BlockMXFP4, true, Mxfp4Values<Arch>>;
    k.rows16_prefills = true;  // on AMX too (above)
    if constexpr (std::is_same_v<Arch, avx2_arch>) {
      k.rows16 = rows16_256<Arch, BlockMXFP4Rows16>;
    } else {
      k.rows16 = rows16_512<Arch, BlockMXFP4Rows16>;
    }
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
