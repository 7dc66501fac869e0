// The kernel unit of Q2_K (quant/q2_k.hpp): which kernel each instruction set takes for its
// dot with Q8_K activations, its prefill and its copies. The kernels live with their set's
// (scalar_kernels.hpp, x86_q2_k.hpp, neon.hpp). Q2_K's sub-blocks are the activations' groups of
// 16, so the min term is sum_j m_j * bsum_j, as Q4_K's is per pair of groups; the quants sit in the
// bytes as Q3_K's low bits do (kernels_q3_k.hpp). The sums stay integer until one float
// multiply per block and term. Prefill on x86: tiles of tokens on the Q8_K rows
// (tile_dots), each weight block unpacked once per tile, with the dot's bits; on AMX the
// matrix unit, with the planes s*q and m (expand_q2k_block). Decode and prefill on the
// AVX-512 sets but AMX read the eight-row copy (quant/rows8.hpp) instead.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/q2_k.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_rows8.hpp"
#include "smol/simd/x86_avx512_rows8.hpp"
#include "smol/simd/x86_k_quant_sums.hpp"
#include "smol/simd/x86_q2_k.hpp"

namespace smol {

template <>
struct KernelUnit<BlockWeight<BlockQ2K>> {
  using Table = WeightKernels<BlockWeight<BlockQ2K>>;
  static void scalar(Table& k) noexcept {
    k.dot = scalar::dot_q2k_q8k;
    k.rows8 = rows8_q2k_q8k_reference;  // the eight-row copy (quant/rows8.hpp)
  }
#if defined(SMOL_X86)
  // 256-bit dots and tiles for every x86 set (the VNNI sets fuse each madd+add into one
  // vpdpwssd). Decode asks for each block's lines ahead itself: on AVX2 too, where it
  // decodes faster than with matvec's requests a row ahead (bench/HISTORY.md, "decode asks
  // for its weights in two steps").
  template <class Arch>
  static void x86(Table& k) noexcept {
    using namespace simd::x86;
    k.dot = dot_k_quant_q8k<Arch, BlockQ2K, unpack_q2k<Arch>, /*kStreams=*/true>;
    k.dot_streams = true;
    k.dot_rounds_like_tile_dots = true;  // the tiles do this dot's operations
    k.tile_dots = tile_dots_q2k<Arch>;
    // Decode and prefill on the eight-row copy (x86_avx2_rows8.hpp, x86_avx512_rows8.hpp)
    // on every x86 set but AMX, whose matrix unit reads the file's rows (expand_q2k_block)
    // and whose batch-invariant decode takes the dot that rounds as it does: without a
    // kernel of its own for the copy, AMX keeps the file's rows (model/model.hpp's
    // rows8_types_without_kernels).
    if constexpr (std::is_same_v<Arch, avx2_arch>) {
      k.rows8 = rows8_two_bit_q8k_256<Arch, BlockQ2KRows8>;
    } else if constexpr (!std::is_same_v<Arch, amx_arch>) {
      k.rows8 = rows8_two_bit_q8k_512<Arch, BlockQ2KRows8>;
    } else {
      k.dot_plain = k.dot;  // the VNNI sets' dot, for plain decode
      k.dot = dot_q2k_q8k_like_matrix<Arch>;
      k.dot_rounds_like_matrix = true;  // and no longer like tile_dots
      k.dot_rounds_like_tile_dots = false;
      k.matrix = amx_matrix_with_mins<Arch, expand_file_row<Arch, BlockQ2K, expand_q2k_block<Arch>>,
                                      PlanesProductAndMin<Arch>>;
    }
  }
#endif
#if defined(SMOL_ARM64)
  template <class Arch>
  static void neon(Table& k) noexcept {
    k.dot = simd::neon::dot_q2k_q8k<Arch>;
  }
#endif
};

}  // namespace smol
