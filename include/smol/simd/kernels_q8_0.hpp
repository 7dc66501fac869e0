// The kernel units of the 32-value block types Q4_0 and Q8_0, dotted with Q8_0
// activations: one 256-bit kernel serves every x86 set (a Q8_0 block is one ymm). Both
// also have the sixteen-row copy (quant/rows16.hpp): decode kernels on it in every x86
// set (simd/x86_avx512_rows16.hpp) and, on AMX, the prefill tiles that read it.
#pragma once

#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/scalar_kernels.hpp"
#include "smol/simd/x86_amx_blocks32.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_blocks32.hpp"
#include "smol/simd/x86_avx512_pairs.hpp"
#include "smol/simd/x86_avx512_rows16.hpp"
#include "smol/simd/x86_key_scores.hpp"

namespace smol {

// The Q8_0-activation dot of a 32-value block type in one instruction set: the weight
// kernels below use it, and so does attention over a q8_0 or q4_0 key cache
// (simd/attention_kernels.hpp).
template <class Arch, class Block>
constexpr auto q8_0_activation_dot() noexcept {
  static_assert(std::is_same_v<Block, BlockQ4_0> || std::is_same_v<Block, BlockQ8_0>);
  constexpr bool q4 = std::is_same_v<Block, BlockQ4_0>;
  if constexpr (std::is_same_v<Arch, scalar_arch>) {
    if constexpr (q4)
      return scalar::dot_q4_0_q8_0;
    else
      return scalar::dot_q8_0_q8_0;
#if defined(SMOL_X86)
  } else if constexpr (is_avx512_v<Arch>) {
    return simd::x86::dot_pairs_512_entry<Arch, Block, simd::x86::BlockQuants<Arch>, BlockQ8_0>;
  } else if constexpr (std::is_same_v<Arch, avx2_arch>) {
    if constexpr (q4)
      return simd::x86::dot_q4_0_q8_0<Arch>;
    else
      return simd::x86::dot_q8_0_q8_0<Arch>;
#endif
#if defined(SMOL_ARM64)
  } else if constexpr (std::is_same_v<Arch, neon_arch>) {
    if constexpr (q4)
      return simd::neon::dot_q4_0_q8_0<Arch>;
    else
      return simd::neon::dot_q8_0_q8_0<Arch>;
#endif
  } else {
    static_assert(sizeof(Arch) == 0, "no Q8_0 dot for this instruction set");
  }
}

// scores[j * stride + p] = scale * (key row p . query row j) for `count` contiguous rows
// of nblocks Q8_0 or Q4_0 blocks and NH Q8_0 query rows lying nblocks apart: the scores
// of attention over a quantized key cache (simd/attention_kernels.hpp). On x86
// (simd/x86_key_scores.hpp), AVX-512 VNNI puts sixteen rows in each vector; otherwise
// each key block's |k| and sign is made once for the group, two blocks per vector on
// AVX-512 where the row has whole pairs, else one. NEON and the scalar set take one
// row at a time.
template <class Arch, std::size_t NH, class Block>
void score_rows_q8_0(const Block* keys, std::size_t count, const BlockQ8_0* queries,
                     std::size_t nblocks, float scale, float* scores, std::size_t stride) noexcept {
  static_assert(NH >= 1 && NH <= 4);
#if defined(SMOL_X86)
  if constexpr (has_vnni_v<Arch>) {
    return simd::x86::score_positions_q8_0_512<Arch, NH>(keys, count, queries, nblocks, scale,
                                                         scores, stride);
  }
  if constexpr (is_avx512_v<Arch>) {
    if (nblocks % 2 == 0) {
      return simd::x86::score_rows_q8_0_512<Arch, NH>(keys, count, queries, nblocks, scale, scores,
                                                      stride);
    }
  }
  if constexpr (std::is_same_v<Arch, avx2_arch> || is_avx512_v<Arch>) {
    return simd::x86::score_rows_q8_0_256<Arch, NH>(keys, count, queries, nblocks, scale, scores,
                                                    stride);
  }
#endif
  constexpr auto dot = q8_0_activation_dot<Arch, Block>();
  for (std::size_t p = 0; p < count; ++p) {
    const Block* row = keys + p * nblocks;
    __builtin_prefetch(row + 8 * nblocks);
    __builtin_prefetch(reinterpret_cast<const char*>(row + 8 * nblocks) + 64);
    for (std::size_t j = 0; j < NH; ++j) {
      scores[j * stride + p] = dot(row, queries + j * nblocks, nblocks) * scale;
    }
  }
}

// Q4_0 and Q8_0: the dot in every set, the sixteen-row copy (quant/rows16.hpp) on x86,
// and prefill tiles on AVX2 (simd/x86_avx2_blocks32.hpp) and AMX (simd/x86_amx_blocks32.hpp).
template <class Block>
struct Q8_0ActivationKernelUnit {
  using Table = WeightKernels<BlockWeight<Block>>;
  using Rows16 = typename Rows16Of<Block>::type;
  static void scalar(Table& k) noexcept {
    k.dot = q8_0_activation_dot<scalar_arch, Block>();
    k.rows16 = rows16_no_min_reference<Rows16>;
  }
#if defined(SMOL_X86)
  template <class Arch>
  static void x86(Table& k) noexcept {
    using namespace simd::x86;
    k.dot = q8_0_activation_dot<Arch, Block>();
    k.dot_streams = is_avx512_v<Arch>;  // dot_pairs_512
    k.rows16_prefills = kRows16Prefills<Arch>;
    if constexpr (std::is_same_v<Arch, avx2_arch>) {
      k.rows16 = rows16_256<Arch, Rows16>;
      k.tile_dots = tile_dots_blocks32_entry<Arch, Block, true, BlockQuants<Arch>>;
      k.dot_rounds_like_tile_dots = true;  // dot_q8_0_q8_0 / dot_q4_0_q8_0 sum as the tile
    } else {
      k.rows16 = rows16_512<Arch, Rows16>;
      if constexpr (std::is_same_v<Arch, amx_arch>) {
        k.tile_dots_packed = amx_tile_dots_blocks32_entry<Arch, Block, BlockQuants<Arch>>;
        if constexpr (std::is_same_v<Block, BlockQ8_0>) {
          k.tile_dots_rows16 = amx_tile_dots_q8_0_rows16<Arch>;
        } else {
          k.tile_dots_rows16 = amx_tile_dots_nibbles_rows16<Arch, Rows16>;
        }
      }
    }
  }
#endif
#if defined(SMOL_ARM64)
  template <class Arch>
  static void neon(Table& k) noexcept {
    k.dot = q8_0_activation_dot<Arch, Block>();
  }
#endif
};

template <>
struct KernelUnit<BlockWeight<BlockQ4_0>> : Q8_0ActivationKernelUnit<BlockQ4_0> {};
template <>
struct KernelUnit<BlockWeight<BlockQ8_0>> : Q8_0ActivationKernelUnit<BlockQ8_0> {};

}  // namespace smol
