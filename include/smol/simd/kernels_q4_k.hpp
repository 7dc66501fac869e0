// The kernel unit of Q4_K: which kernel each instruction set uses for its dot, its dot
// on lane-packed activations, its rows interleaved by eight, its prefill tiles and its
// matrix-unit prefill. The kernels themselves live with their instruction set's other
// kernels (x86_avx2*.hpp, x86_avx512*.hpp, x86_amx.hpp, neon.hpp), which share helpers.
#pragma once

#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_lanes.hpp"
#include "smol/simd/x86_avx2_rows8.hpp"
#include "smol/simd/x86_avx512.hpp"
#include "smol/simd/x86_avx512_rows8.hpp"
#include "smol/simd/x86_avx512_tiles.hpp"
#include "smol/simd/x86_avx512_token_lanes.hpp"

namespace smol {

template <>
struct KernelUnit<BlockWeight<BlockQ4K>> {
  template <class Arch>
  static WeightKernels<BlockWeight<BlockQ4K>> make() noexcept {
    WeightKernels<BlockWeight<BlockQ4K>> k;
    k.lanes = LaneSums::q4k_scaled_by_d;
    if constexpr (std::is_same_v<Arch, scalar_arch>) {
      k.dot = scalar::dot_q4k_q8k;
      k.rows8 = rows8_q4k_q8k_reference;
#if defined(SMOL_X86)
    } else if constexpr (std::is_same_v<Arch, avx2_arch>) {
      k.dot = simd::x86::dot_q4k_q8k<Arch>;
      k.dot_lanes = simd::x86::dot_q4k_lanes_256<Arch>;
      k.rows8 = simd::x86::rows8_q4k_q8k_256<Arch>;
      k.tile = simd::x86::tile_q4k_q8k_256<Arch>;
    } else if constexpr (is_avx512_v<Arch>) {
      if constexpr (has_vnni_v<Arch>) {
        k.dot = simd::x86::dot_q4k_like_512_vnni<Arch, simd::x86::Q4KChunks<Arch>>;
      } else {
        k.dot = simd::x86::dot_q4k_like_512<Arch, simd::x86::Q4KChunks<Arch>>;
      }
      k.dot_streams = true;
      k.rows8 = simd::x86::rows8_q4k_q8k_512<Arch>;
      k.tile = simd::x86::tile_q4k_q8k<Arch>;
      if constexpr (std::is_same_v<Arch, amx_arch>) {
        using simd::x86::amx_matrix_with_mins, simd::x86::expand_q4k_block;
        k.matrix = amx_matrix_with_mins<
            Arch, simd::x86::expand_file_row<Arch, BlockQ4K, expand_q4k_block<Arch>>>;
        k.packed_rows8 = amx_matrix_with_mins<
            Arch, simd::x86::expand_copy_row<Arch, BlockQ4KRows8,
                                             simd::x86::expand_q4k_copy_block<Arch>>>;
        k.rows8_rounds_like_packed = simd::x86::kRows8MatrixOrder<Arch>;
      } else if constexpr (has_vnni_v<Arch>) {
        // Prefill with the tokens in the lanes, with `rows8`'s bits (x86_avx512_token_lanes.hpp).
        // Without VNNI a dot takes three instructions there, and the eight-row kernel's
        // 4-bit dots keep pace (bench/HISTORY.md, "Q3_K, Q4_K and Q5_K with the tokens in
        // the lanes").
        k.packed_rows8 = simd::x86::token_lanes_512<Arch, BlockQ4KRows8>;
        k.rows8_rounds_like_packed = true;
      }
#endif
#if defined(SMOL_ARM64)
    } else if constexpr (std::is_same_v<Arch, neon_arch>) {
      k.dot = simd::neon::dot_q4k_q8k<Arch>;
#endif
    }
    return k;
  }
};

}  // namespace smol
