// BlockQ8KLanes: Q8_K activations reordered for the prefill tile kernels.
//
// A tile kernel multiplies four 64-byte weight vectors per super-block with vpdpbusd
// into ONE int32 accumulator. That only works if each 32-bit lane sees values of a
// single scale group in all four vectors, so the weights are shuffled in registers into
// such an order and the activations are stored in the same order, once per token
// (amortised over every weight row). Each weight type shuffles differently, hence one
// permutation per type. `lane_sums` are the sums of the 16 quants each lane sees: they
// carry the Q4_K min term and the Q6_K -32 offset.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "smol/quant/blocks.hpp"

namespace smol {

struct alignas(64) BlockQ8KLanes {
  std::int8_t qs[QK_K];  // qs[64 * c + 4 * lane + e]: vector c, 32-bit lane, byte e
  union {
    float d_lane_sums[16];          // Q4_K: d * (sum of the lane's quants), for the min term
    std::int32_t minus32_sums[16];  // Q6_K: -32 * (sum of the lane's quants), the offset
  };
  std::int16_t bsums[QK_K / 16];  // BlockQ8K::bsums, unchanged (natural groups of 16)
  float d;
};
static_assert(sizeof(BlockQ8KLanes) == 384);

// kLanePermutationQ4K[p] = index in the Q8_K block of the value stored at qs[p].
// Vector c lane l holds 4 values of sub-block 2 * ((l % 8) / 2) + l / 8.
inline constexpr std::array<std::uint8_t, QK_K> kLanePermutationQ4K = [] {
  std::array<std::uint8_t, QK_K> perm{};
  for (std::size_t c = 0; c < 4; ++c) {
    for (std::size_t b = 0; b < 64; ++b) {
      const std::size_t sub = 2 * ((b % 32) / 8) + b / 32;
      perm[64 * c + b] = static_cast<std::uint8_t>(32 * sub + 8 * c + b % 8);
    }
  }
  return perm;
}();

// Q6_K: vector c lane l holds 4 values of group (of 16) 4 * (l % 4) + l / 4.
inline constexpr std::array<std::uint8_t, QK_K> kLanePermutationQ6K = [] {
  std::array<std::uint8_t, QK_K> perm{};
  for (std::size_t c = 0; c < 4; ++c) {
    for (std::size_t l = 0; l < 16; ++l) {
      for (std::size_t e = 0; e < 4; ++e) {
        const std::size_t group = 4 * (l % 4) + l / 4;
        perm[64 * c + 4 * l + e] = static_cast<std::uint8_t>(16 * group + 4 * c + e);
      }
    }
  }
  return perm;
}();

enum class LaneSums { q4k_scaled_by_d, q6k_minus_32 };

// Reorders one row of Q8_K blocks (`nblocks` of them) into the lane layout.
template <LaneSums kind>
void pack_q8k_lanes(const BlockQ8K* in, BlockQ8KLanes* out, std::size_t nblocks) noexcept {
  const auto& perm = kind == LaneSums::q4k_scaled_by_d ? kLanePermutationQ4K : kLanePermutationQ6K;
  for (std::size_t b = 0; b < nblocks; ++b) {
    int sums[16] = {};
    for (std::size_t p = 0; p < QK_K; ++p) {
      out[b].qs[p] = in[b].qs[perm[p]];
      sums[(p % 64) / 4] += out[b].qs[p];
    }
    out[b].d = in[b].d;
    std::copy(std::begin(in[b].bsums), std::end(in[b].bsums), std::begin(out[b].bsums));
    for (std::size_t l = 0; l < 16; ++l) {
      if constexpr (kind == LaneSums::q4k_scaled_by_d) {
        out[b].d_lane_sums[l] = in[b].d * static_cast<float>(sums[l]);
      } else {
        out[b].minus32_sums[l] = -32 * sums[l];
      }
    }
  }
}

// The same, with the kind chosen at run time (a kernel table entry says which).
inline void pack_q8k_lanes(LaneSums kind, const BlockQ8K* in, BlockQ8KLanes* out,
                           std::size_t nblocks) noexcept {
  if (kind == LaneSums::q4k_scaled_by_d) {
    pack_q8k_lanes<LaneSums::q4k_scaled_by_d>(in, out, nblocks);
  } else {
    pack_q8k_lanes<LaneSums::q6k_minus_32>(in, out, nblocks);
  }
}

}  // namespace smol
