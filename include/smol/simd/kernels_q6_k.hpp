// The kernel unit of Q6_K: which kernel each instruction set uses for its dot, its rows
// interleaved by eight, its prefill tiles and its matrix-unit prefill. The kernels themselves live
// with their instruction set's other kernels (x86_avx2*.hpp, x86_avx512*.hpp, x86_amx.hpp,
// neon.hpp), which share helpers.
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
struct KernelUnit<BlockWeight<BlockQ6K>> {
  using Table = WeightKernels<BlockWeight<BlockQ6K>>;
  static void scalar(Table& k) noexcept {
    k.dot = scalar::dot_q6k_q8k;
    k.rows8 = rows8_q6k_q8k_reference;
  }
#if defined(SMOL_X86)
  template <class Arch>
  static void x86(Table& k) noexcept {
    using namespace simd::x86;
    k.lanes = LaneSums::q6k_minus_32;  // what dot_lanes and tile expect
    if constexpr (std::is_same_v<Arch, avx2_arch>) {
      k.dot = dot_q6k_q8k<Arch>;
      k.rows8 = rows8_q6k_q8k_256<Arch>;
      k.tile = tile_q6k_q8k_256<Arch>;
    } else {
      if constexpr (has_vnni_v<Arch>) {
        k.dot = dot_q6k_q8k_512_vnni<Arch>;
      } else {
        k.dot = dot_q6k_q8k_512<Arch>;
      }
      k.dot_streams = true;
      k.rows8 = rows8_q6k_q8k_512<Arch>;
      k.tile = tile_q6k_q8k<Arch>;
      if constexpr (std::is_same_v<Arch, amx_arch>) {
        k.matrix =
            amx_matrix_with_offset<Arch, expand_file_row<Arch, BlockQ6K, expand_q6k_block<Arch>>,
                                   32>;
        k.packed_rows8 = amx_matrix_with_offset<
            Arch, expand_copy_row<Arch, BlockQ6KRows8, expand_q6k_copy_block<Arch>>, 32>;
        k.rows8_rounds_like_packed = kRows8MatrixOrder<Arch>;
      } else {
        // Prefill with the tokens in the lanes, with `rows8`'s bits (x86_avx512_token_lanes.hpp).
        k.packed_rows8 = token_lanes_512<Arch, BlockQ6KRows8>;
        k.rows8_rounds_like_packed = true;
      }
    }
  }
#endif
#if defined(SMOL_ARM64)
  template <class Arch>
  static void neon(Table& k) noexcept {
    k.dot = simd::neon::dot_q6k_q8k<Arch>;
  }
#endif
};

}  // namespace smol
