// The kernel units of Q4_1, Q5_0 and Q5_1 (quant/legacy_blocks.hpp): their dots with
// their activations in every instruction set: which kernel each set takes (the kernels:
// scalar_kernels.hpp, x86_legacy.hpp, neon.hpp). One kernel template per
// instruction set serves the three types; only the unpacking of a block's 32 quants
// differs. As in ggml, per block with q the block's quants and y the activation's:
//   Q5_0 . Q8_0:        d_x d_y sum (q - 16) y
//   Q4_1, Q5_1 . Q8_1:  d_x d_y sum q y  +  m_x s_y     (s_y = d_y sum y, from the block)
// The sum is exact in integers; floats appear once per block.
// On x86 each type has a sixteen-row copy (quant/rows16.hpp, made by --repack auto), which
// decode reads with the kernels of x86_avx512_rows16.hpp and prefill too (AMX: tiles of
// tokens on the copy; elsewhere its decode kernel over the tokens). On the file's rows
// (--repack off, NEON): prefill on tiles of tokens on x86 (every type on AVX2,
// x86_avx2_blocks32.hpp; the types with a min on AVX-512, tile_dots_legacy in x86_legacy.hpp; AMX's
// tiles); Q5_0 on AVX-512 and NEON loop the dot over cache-sized blocks, and matvec
// streams the rows with its prefetch (ops/matvec.hpp), as for Q4_0.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/half.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_amx_blocks32.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_blocks32.hpp"
#include "smol/simd/x86_avx512_pairs.hpp"
#include "smol/simd/x86_avx512_rows16.hpp"
#include "smol/simd/x86_legacy.hpp"

namespace smol {

// The sixteen-row copy's scalar reference (quant/rows16.hpp), the type's rows16 on the
// sets without a kernel of their own.
template <class Block>
inline constexpr auto kLegacyRows16Reference = [] {
  if constexpr (std::is_same_v<Block, BlockQ4_1>) {
    return rows16_q4_1_reference;
  } else if constexpr (std::is_same_v<Block, BlockQ5_0>) {
    return rows16_q5_0_reference;
  } else {
    return rows16_q5_1_reference;
  }
}();

// The three units differ only in their block type.
template <class Block>
struct LegacyKernelUnit {
  using Table = WeightKernels<BlockWeight<Block>>;
  using Rows16 = typename Rows16Of<Block>::type;
  static void scalar(Table& k) noexcept {
    k.dot = scalar::dot_legacy<Block>;
    k.rows16 = kLegacyRows16Reference<Block>;
  }
#if defined(SMOL_X86)
  template <class Arch>
  static void x86(Table& k) noexcept {
    using namespace simd::x86;
    k.rows16_prefills = kRows16Prefills<Arch>;
    if constexpr (std::is_same_v<Arch, avx2_arch>) {
      k.dot = dot_legacy<Arch, Block>;
      k.rows16 = rows16_256<Arch, Rows16>;
      k.tile_dots = tile_dots_blocks32_entry<Arch, Block, !kHasMin<Block>, LegacyLevels<Arch>>;
      k.dot_rounds_like_tile_dots = true;  // dot_legacy sums as the tile does
    } else {
      k.dot = dot_pairs_512_entry<Arch, Block, LegacyLevels<Arch>, LegacyActivation<Block>>;
      k.dot_streams = true;
      k.rows16 = rows16_512<Arch, Rows16>;
      if constexpr (std::is_same_v<Arch, amx_arch>) {
        k.tile_dots_packed = amx_tile_dots_blocks32_entry<Arch, Block, LegacyLevels<Arch>>;
        k.tile_dots_rows16 = amx_tile_dots_nibbles_rows16<Arch, Rows16>;
      } else if constexpr (kHasMin<Block>) {
        k.tile_dots = tile_dots_legacy<Arch, Block>;
      }
    }
  }
#endif
#if defined(SMOL_ARM64)
  template <class Arch>
  static void neon(Table& k) noexcept {
    k.dot = simd::neon::dot_legacy<Arch, Block>;
  }
#endif
};

template <>
struct KernelUnit<BlockWeight<BlockQ4_1>> : LegacyKernelUnit<BlockQ4_1> {};
template <>
struct KernelUnit<BlockWeight<BlockQ5_0>> : LegacyKernelUnit<BlockQ5_0> {};
template <>
struct KernelUnit<BlockWeight<BlockQ5_1>> : LegacyKernelUnit<BlockQ5_1> {};

}  // namespace smol
