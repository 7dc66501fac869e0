// BlockQ4KRows8: super-block b of eight consecutive Q4_K rows, interleaved at load time.
//
// Why: a decode dot on the file's layout spends most of its instructions on one row's
// bookkeeping (unpacking the 6-bit scales, shuffling them next to the values, summing
// a vector down to one float). With eight rows side by side, 32-bit lane r of every
// vector belongs to row r: the activations are broadcast four bytes at a time, each
// vpmaddubsw serves eight rows, the scales are plain bytes one shuffle away from their
// lanes, and the eight results come out as one vector with no horizontal sum. The
// price is a copy of the Q4_K weights made when the model is loaded (Model's
// `repack` option); the mmap path stays the default.
//
// Bit-exact: the same integers as the eight BlockQ4K, rearranged; repack_q4k_rows8
// and the reference dot below are tested against the file's blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"

namespace smol {

inline constexpr std::size_t kRowsPerGroup = 8;

struct alignas(32) BlockQ4KRows8 {
  // qs[c][g][r][e] = byte 32 * c + 4 * g + e of row r's qs: low nibbles are values
  // 64 * c + 4 * g + e (sub-block 2c), high nibbles 32 more (sub-block 2c + 1).
  std::uint8_t qs[4][8][kRowsPerGroup][4];
  std::uint8_t scales[8][kRowsPerGroup];  // [sub-block][row], unpacked 6-bit
  std::uint8_t mins[8][kRowsPerGroup];
  f16_bits d[kRowsPerGroup];
  f16_bits dmin[kRowsPerGroup];
};
static_assert(sizeof(BlockQ4KRows8) == 1184 && offsetof(BlockQ4KRows8, scales) == 1024 &&
              offsetof(BlockQ4KRows8, d) == 1152);

// Interleaves rows [8 * group, 8 * group + 8) of a Q4_K matrix whose rows hold `nblocks`
// blocks and lie `row_bytes` apart: out[b] is super-block b of the group.
inline void repack_q4k_rows8(const std::byte* first_row, std::size_t row_bytes, std::size_t nblocks,
                             BlockQ4KRows8* out) noexcept {
  for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
    const auto* row = reinterpret_cast<const BlockQ4K*>(first_row + r * row_bytes);
    for (std::size_t b = 0; b < nblocks; ++b) {
      BlockQ4KRows8& o = out[b];
      std::uint8_t scales[8], mins[8];
      unpack_q4k_scales(row[b].scales, scales, mins);
      for (std::size_t j = 0; j < 8; ++j) {
        o.scales[j][r] = scales[j];
        o.mins[j][r] = mins[j];
      }
      o.d[r] = row[b].d;
      o.dmin[r] = row[b].dmin;
      for (std::size_t i = 0; i < QK_K / 2; i += 4) {
        std::memcpy(o.qs[i / 32][(i % 32) / 4][r], row[b].qs + i, 4);
      }
    }
  }
}

// Scalar reference: y[t * y_stride + r] = row r . token t, for `n_tokens` tokens whose
// Q8_K rows lie `x_stride` blocks apart. Rounds exactly like the scalar dot_q4k_q8k
// on the original rows, so the two agree bit for bit.
inline void rows8_q4k_q8k_reference(const BlockQ4KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                                    std::size_t x_stride, std::size_t n_tokens, float* y,
                                    std::size_t y_stride) noexcept {
  for (std::size_t t = 0; t < n_tokens; ++t) {
    const BlockQ8K* xt = x + t * x_stride;
    for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
      float sum = 0.0f;
      for (std::size_t b = 0; b < nblocks; ++b) {
        std::int32_t sumi = 0, summ = 0;
        for (std::size_t j = 0; j < 8; ++j) {
          const std::size_t c = j / 2;
          const int shift = (j % 2) * 4;
          std::int32_t s = 0;
          for (std::size_t i = 0; i < 32; ++i) {
            s += ((w[b].qs[c][i / 4][r][i % 4] >> shift) & 0xF) * xt[b].qs[32 * j + i];
          }
          sumi += w[b].scales[j][r] * s;
          summ += w[b].mins[j][r] * (xt[b].bsums[2 * j] + xt[b].bsums[2 * j + 1]);
        }
        sum += f16_to_f32(w[b].d[r]) * xt[b].d * static_cast<float>(sumi) -
               f16_to_f32(w[b].dmin[r]) * xt[b].d * static_cast<float>(summ);
      }
      y[t * y_stride + r] = sum;
    }
  }
}

}  // namespace smol
