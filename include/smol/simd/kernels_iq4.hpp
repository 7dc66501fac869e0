// The kernel units of IQ4_NL and IQ4_XS (quant/iq4.hpp): their dots with their
// activations (Q8_0 for IQ4_NL, Q8_K for IQ4_XS) in every instruction set, and IQ4_NL's
// prefill tiles on x86: which kernel each set takes (the kernels: scalar_kernels.hpp,
// x86_iq4.hpp, neon.hpp). The 16 levels fit one 128-bit register, so 32 indices become
// their levels with one byte shuffle (vpshufb, tbl), and the block is then a Q8_0-like
// block of signed bytes: as in ggml, per block or super-block
//   IQ4_NL . Q8_0:  d_x d_y sum level * y
//   IQ4_XS . Q8_K:  d_x d_y sum_j s_j sum level * y     (s_j the sub-block scale - 32)
// with the sums exact in integers and floats once per block.
// Prefill: tiles of tokens on x86 (tile_dots_iq4nl on AVX-512, x86_avx2_blocks32.hpp's
// on AVX2, tile_dots_iq4xs in x86_iq4.hpp); NEON loops the dot. Both also have a sixteen-row copy
// (quant/rows16.hpp: made at load on AMX, whose prefill reads it too; IQ4_NL's is Q4_0's
// layout, IQ4_XS's eight of them with the sub-block scales unpacked), whose decode
// kernels look the levels up sixty-four at a time (x86_avx512_rows16.hpp). On AMX,
// IQ4_NL's prefill is a tile multiply per block (x86_amx_blocks32.hpp); IQ4_XS's is the
// matrix unit on two byte planes of its integer-scaled levels (expand_iq4xs_planes in x86_iq4.hpp),
// one float step per super-block, which its decode kernel on the copy takes too; on the
// other AVX-512 sets it has the tokens in the lanes on the copy, with the same steps
// (x86_avx512_token_lanes.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/half.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_amx_blocks32.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_blocks32.hpp"
#include "smol/simd/x86_avx512_pairs.hpp"
#include "smol/simd/x86_avx512_rows16.hpp"
#include "smol/simd/x86_avx512_token_lanes.hpp"
#include "smol/simd/x86_iq4.hpp"
#include "smol/simd/x86_legacy.hpp"

namespace smol {

template <>
struct KernelUnit<BlockWeight<BlockIQ4NL>> {
  using Table = WeightKernels<BlockWeight<BlockIQ4NL>>;
  static void scalar(Table& k) noexcept {
    k.dot = scalar::dot_iq4nl_q8_0;
    k.rows16 = rows16_iq4nl_reference;  // the sixteen-row copy (quant/rows16.hpp)
  }
#if defined(SMOL_X86)
  template <class Arch>
  static void x86(Table& k) noexcept {
    using namespace simd::x86;
    k.rows16_prefills = kRows16Prefills<Arch>;  // AMX: its tiles
    if constexpr (std::is_same_v<Arch, avx2_arch>) {
      k.dot = dot_iq4nl_q8_0<Arch>;
      k.rows16 = rows16_256<Arch, BlockIQ4NLRows16>;
      k.tile_dots = tile_dots_blocks32_entry<Arch, BlockIQ4NL, true, IQ4NLLevels<Arch>>;
    } else {
      // Two blocks per vector (x86_avx512_pairs.hpp), the copy's kernel x86_avx512_rows16.hpp.
      k.dot = dot_pairs_512_entry<Arch, BlockIQ4NL, IQ4NLLevels<Arch>, BlockQ8_0>;
      k.dot_streams = true;
      k.rows16 = rows16_512<Arch, BlockIQ4NLRows16>;
      if constexpr (std::is_same_v<Arch, amx_arch>) {  // x86_amx_blocks32.hpp
        k.tile_dots_rows16 = amx_tile_dots_nibbles_rows16<Arch, BlockIQ4NLRows16>;
        k.tile_dots_packed = amx_tile_dots_blocks32_entry<Arch, BlockIQ4NL, IQ4NLLevels<Arch>>;
      } else {
        k.tile_dots = tile_dots_iq4nl<Arch>;
      }
    }
  }
#endif
#if defined(SMOL_ARM64)
  template <class Arch>
  static void neon(Table& k) noexcept {
    k.dot = simd::neon::dot_iq4nl_q8_0<Arch>;
  }
#endif
};

template <>
struct KernelUnit<BlockWeight<BlockIQ4XS>> {
  using Table = WeightKernels<BlockWeight<BlockIQ4XS>>;
  static void scalar(Table& k) noexcept {
    k.dot = scalar::dot_iq4xs_q8k;
    k.rows16 = rows16_iq4xs_reference;  // the sixteen-row copy (quant/rows16.hpp)
  }
#if defined(SMOL_X86)
  template <class Arch>
  static void x86(Table& k) noexcept {
    using namespace simd::x86;
    k.rows16_prefills = kRows16Prefills<Arch>;  // AMX: its matrix unit
    k.tile_dots = tile_dots_iq4xs<Arch>;
    if constexpr (std::is_same_v<Arch, avx2_arch>) {
      k.dot = dot_iq4xs_q8k<Arch>;
      k.rows16 = rows16_256<Arch, BlockIQ4XSRows16>;
    } else {
      k.dot = dot_iq4xs_q8k<Arch, /*kStreams=*/true>;
      k.dot_streams = true;
      k.rows16 = rows16_512<Arch, BlockIQ4XSRows16>;  // x86_avx512_rows16.hpp
      if constexpr (std::is_same_v<Arch, amx_arch>) {
        // The matrix unit on two planes of the integer-scaled levels (x86_amx.hpp), from
        // the file's rows or the sixteen-row copy, whose decode kernel (rows16_512) sums
        // each super-block in integers as they do.
        k.matrix =
            amx_matrix_with_offset<Arch,
                                   expand_file_row<Arch, BlockIQ4XS, expand_iq4xs_block<Arch>>, 0>;
        k.packed_rows16 = amx_matrix_with_offset<
            Arch, expand_rows16_copy_row<Arch, BlockIQ4XSRows16, expand_iq4xs_copy_block<Arch>>, 0>;
      } else if constexpr (has_vnni_v<Arch>) {
        // The tokens in the lanes on the copy, with its decode kernel's bits
        // (x86_avx512_token_lanes.hpp); a few tokens take that kernel (kRows16FewTokens).
        // Only with VNNI: vpmaddubsw's pairs of a token's x + 128 and a level would saturate.
        k.packed_rows16 = token_lanes_512<Arch, BlockIQ4XSRows16>;
      }
    }
  }
#endif
#if defined(SMOL_ARM64)
  template <class Arch>
  static void neon(Table& k) noexcept {
    k.dot = simd::neon::dot_iq4xs_q8k<Arch>;
  }
#endif
};

}  // namespace smol
