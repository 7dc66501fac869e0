// The kernel unit of Q5_K (quant/q5_k.hpp): which kernel each instruction set takes for its
// dot with Q8_K activations, its prefill and its copies. The kernels live with their set's
// (scalar_kernels.hpp, x86_q5_k.hpp, neon.hpp). Q5_K is Q4_K plus a fifth bit per value, so each
// kernel is its Q4_K sibling with the bit from qh added to the nibble before the multiply; the min
// term is Q4_K's. Prefill on x86: tiles of tokens on the Q8_K rows (tile_dots), each weight block
// unpacked once per tile, with the dot's bits (as Q3_K's). On AMX, prefill on the matrix unit as
// Q4_K's (x86_amx.hpp): s*q is at most 63 * 31 = 1953, so Q4_K's two byte planes 32 h + l hold it
// with h <= 61. Dots on the file's rows on the AVX-512 sets: Q4_K's 512-bit dots (x86_avx512.hpp)
// with the fifth bit added by chunk (Q5KChunks). Where the model makes the eight-row copy
// (quant/rows8.hpp, every x86 set), decode and the batched steps read it through Q4_K's interleaved
// kernels with the fifth bit (x86_avx2_rows8.hpp, x86_avx512_rows8.hpp), and so does prefill, AMX's
// matrix unit through the file's block taken back out of the copy.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/q5_k.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_rows8.hpp"
#include "smol/simd/x86_avx512.hpp"
#include "smol/simd/x86_avx512_rows8.hpp"
#include "smol/simd/x86_avx512_token_lanes.hpp"
#include "smol/simd/x86_k_quant_sums.hpp"
#include "smol/simd/x86_q5_k.hpp"

namespace smol {

template <>
struct KernelUnit<BlockWeight<BlockQ5K>> {
  using Table = WeightKernels<BlockWeight<BlockQ5K>>;
  static void scalar(Table& k) noexcept {
    k.dot = scalar::dot_q5k_q8k;
    k.rows8 = rows8_q5k_q8k_reference;
  }
#if defined(SMOL_X86)
  template <class Arch>
  static void x86(Table& k) noexcept {
    using namespace simd::x86;
    k.tile_dots = tile_dots_q5k<Arch>;
    if constexpr (std::is_same_v<Arch, avx2_arch>) {
      k.dot = dot_k_quant_q8k<Arch, BlockQ5K, unpack_q5k<Arch>, /*kStreams=*/false>;
      k.dot_rounds_like_tile_dots = true;  // Q5KRowTile does this dot's operations
      k.rows8 = rows8_q5k_q8k_256<Arch>;
    } else {
      if constexpr (has_vnni_v<Arch>) {
        k.dot = dot_q4k_like_512_vnni<Arch, Q5KChunks<Arch>>;
      } else {
        k.dot = dot_q4k_like_512<Arch, Q5KChunks<Arch>>;
      }
      k.dot_streams = true;
      k.rows8 = rows8_q5k_q8k_512<Arch>;
      if constexpr (std::is_same_v<Arch, amx_arch>) {
        k.matrix =
            amx_matrix_with_mins<Arch, expand_file_row<Arch, BlockQ5K, expand_q5k_block<Arch>>>;
        k.packed_rows8 =
            amx_matrix_with_mins<Arch,
                                 expand_copy_row<Arch, BlockQ5KRows8, expand_q5k_copy_block<Arch>>>;
        k.rows8_rounds_like_packed = kRows8MatrixOrder<Arch>;
      } else {
        // Prefill with the tokens in the lanes, with `rows8`'s bits (x86_avx512_token_lanes.hpp).
        k.packed_rows8 = token_lanes_512<Arch, BlockQ5KRows8>;
        k.rows8_rounds_like_packed = true;
      }
    }
  }
#endif
#if defined(SMOL_ARM64)
  template <class Arch>
  static void neon(Table& k) noexcept {
    k.dot = simd::neon::dot_q5k_q8k<Arch>;
  }
#endif
};

}  // namespace smol
