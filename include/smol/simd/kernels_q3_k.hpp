// The kernel unit of Q3_K (quant/q3_k.hpp): which kernel each instruction set takes for its
// dot with Q8_K activations, its prefill and its copies. The kernels live with their set's
// (scalar_kernels.hpp, x86_q3_k.hpp, neon.hpp). Every kernel multiplies the unsigned level L = q +
// 4 (0..7: the two low bits, plus 4 where the hmask bit is set) and takes the offset back once per
// block from the activations' group sums: sum_j sc_j * (sum_l L_l y_l - 4 * bsum_j). The sums stay
// integer until one float multiply per block, so every set rounds only in its float accumulation.
// Prefill on x86: tiles of tokens on the Q8_K rows (tile_dots), each weight block unpacked once per
// tile, with the dot's bits; on AMX the matrix unit, on Q6_K's planes (expand_q3k_block). Decode
// and prefill on the AVX-512 sets but AMX read the eight-row copy (quant/rows8.hpp) instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/half.hpp"
#include "smol/quant/q3_k.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_rows8.hpp"
#include "smol/simd/x86_avx512_rows8.hpp"
#include "smol/simd/x86_avx512_token_lanes.hpp"
#include "smol/simd/x86_q3_k.hpp"

namespace smol {

template <>
struct KernelUnit<BlockWeight<BlockQ3K>> {
  using Table = WeightKernels<BlockWeight<BlockQ3K>>;
  static void scalar(Table& k) noexcept {
    k.dot = scalar::dot_q3k_q8k;
    k.rows8 = rows8_q3k_q8k_reference;  // the eight-row copy (quant/rows8.hpp)
  }
#if defined(SMOL_X86)
  template <class Arch>
  static void x86(Table& k) noexcept {
    using namespace simd::x86;
    k.dot = dot_q3k_q8k<Arch>;
    k.dot_streams = true;
    k.dot_rounds_like_tile_dots = true;  // the tiles do this dot's operations
    k.tile_dots = tile_dots_q3k<Arch>;
    // Decode and prefill on the eight-row copy (x86_avx2_rows8.hpp, x86_avx512_rows8.hpp;
    // AVX-512's prefill with the tokens in the lanes, x86_avx512_token_lanes.hpp, with
    // `rows8`'s bits) on every x86 set but AMX, whose matrix unit reads the file's rows
    // (expand_q3k_block) and whose batch-invariant decode takes the dot that rounds as it
    // does: without a kernel of its own for the copy, AMX keeps the file's rows
    // (model/model.hpp's rows8_types_without_kernels).
    if constexpr (std::is_same_v<Arch, avx2_arch>) {
      k.rows8 = rows8_two_bit_q8k_256<Arch, BlockQ3KRows8>;
    } else if constexpr (!std::is_same_v<Arch, amx_arch>) {
      k.rows8 = rows8_two_bit_q8k_512<Arch, BlockQ3KRows8>;
      k.packed_rows8 = token_lanes_512<Arch, BlockQ3KRows8>;
      k.rows8_rounds_like_packed = true;
    } else {
      k.dot_plain = k.dot;  // the VNNI sets' dot, for plain decode
      k.dot = dot_q3k_q8k_like_matrix<Arch>;
      k.dot_rounds_like_matrix = true;  // and no longer like tile_dots
      k.dot_rounds_like_tile_dots = false;
      k.matrix =
          amx_matrix_with_offset<Arch, expand_file_row<Arch, BlockQ3K, expand_q3k_block<Arch>>, 4>;
    }
  }
#endif
#if defined(SMOL_ARM64)
  template <class Arch>
  static void neon(Table& k) noexcept {
    k.dot = simd::neon::dot_q3k_q8k<Arch>;
  }
#endif
};

}  // namespace smol
