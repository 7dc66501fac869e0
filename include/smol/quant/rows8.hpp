// Rows interleaved by eight: super-block b of eight consecutive Q4_K, Q5_K, Q6_K, Q2_K or
// Q3_K rows, laid side by side at load time (BlockQ4KRows8, BlockQ5KRows8, BlockQ6KRows8,
// BlockQ2KRows8, BlockQ3KRows8). A type has such a copy when Rows8Of names one (the end of
// this header); what follows from that (which types, bytes, the repack of a group) is
// quant/interleaved_rows.hpp's, for both group sizes.
//
// Why: a decode dot on the file's layout spends most of its instructions on one row's
// bookkeeping (unpacking scales, shuffling them next to the values, summing a vector
// down to one float). With eight rows side by side, 32-bit lane r of every vector
// belongs to row r: the activations are broadcast four bytes at a time, each
// vpmaddubsw serves eight rows, the scales are plain bytes one shuffle away from their
// lanes, and the eight results come out as one vector with no horizontal sum. The
// price is a copy of the weights made when the model is loaded (RepackedWeights).
//
// Bit-exact: the same integers as the eight file blocks, rearranged; the repack
// functions and the reference dots below are tested against the file's blocks, and
// each reference rounds exactly like the scalar dot on the original rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/k_quant_scales.hpp"
#include "smol/quant/q2_k.hpp"
#include "smol/quant/q3_k.hpp"
#include "smol/quant/q5_k.hpp"
#include "smol/quant/weight_types.hpp"

namespace smol {

inline constexpr std::size_t kRowsPerGroup = 8;

// The order of the 32-bit lanes in which the 512-bit kernels pack the int32 sums of two
// sub-blocks of eight rows into words (vpackssdw, simd/x86_avx512_rows8.hpp): lane L =
// 4k + q belongs to row 2k + q % 2 and holds its sub-block of parity q / 2. Q2_K's and
// Q3_K's copies store their sub-block bytes in this order, so that a kernel finds each
// lane's scale with one word permute.
constexpr int rows8_lane_row(int lane) noexcept {
  return 2 * (lane / 4) + (lane % 4) % 2;
}
constexpr int rows8_lane_parity(int lane) noexcept {
  return (lane % 4) / 2;
}

// Where a kernel call finds its weights. From memory (decode, and the first token block
// of a prefill over a chunk of groups), the vector kernels ask for the bytes ahead, as
// the hardware prefetcher alone falls behind: without it, AVX-512's eight decode tokens
// per step took well over twice the time of one. From cache (prefill's later token
// blocks), AVX-512 skips the prefetch, which there only takes load slots; AVX2's tiles
// gain from it even then and always ask (bench/HISTORY.md, "Figures moved from code
// comments").
enum class WeightsFrom { memory, cache };

struct alignas(32) BlockQ4KRows8 {
  using FileBlock = BlockQ4K;
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

// Q5_K: Q4_K's copy plus the fifth bits, qh regrouped by 4 across the rows as qs is,
// so that the qh bytes of values 4g + e (g < 8) of every chunk sit where that chunk's qs
// bytes do: bit 2c of qh[g][r][e] tops the low nibble of qs[c][g][r][e], bit 2c + 1 the
// high nibble. 1440 bytes per group against the file's 1408 (unpacked scales).
struct alignas(32) BlockQ5KRows8 {
  using FileBlock = BlockQ5K;
  std::uint8_t qs[4][8][kRowsPerGroup][4];  // as BlockQ4KRows8's
  std::uint8_t qh[8][kRowsPerGroup][4];     // byte 4 * g + e of row r's qh
  std::uint8_t scales[8][kRowsPerGroup];
  std::uint8_t mins[8][kRowsPerGroup];
  f16_bits d[kRowsPerGroup];
  f16_bits dmin[kRowsPerGroup];
};
static_assert(sizeof(BlockQ5KRows8) == 1440 && offsetof(BlockQ5KRows8, qh) == 1024 &&
              offsetof(BlockQ5KRows8, scales) == 1280 && offsetof(BlockQ5KRows8, d) == 1408);

// Interleaves rows [8 * group, 8 * group + 8) of a Q4_K or Q5_K matrix whose rows hold
// `nblocks` blocks and lie `row_bytes` apart: out[b] is super-block b of the group. The
// two share the scales, mins, factors and qs; Q5_K's copy adds the qh bytes.
template <class Group>
void repack_with_mins_rows8(const std::byte* first_row, std::size_t row_bytes, std::size_t nblocks,
                            Group* out) noexcept {
  using Block = typename Group::FileBlock;
  for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
    const auto* row = reinterpret_cast<const Block*>(first_row + r * row_bytes);
    for (std::size_t b = 0; b < nblocks; ++b) {
      Group& o = out[b];
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
      if constexpr (std::is_same_v<Block, BlockQ5K>) {
        for (std::size_t i = 0; i < QK_K / 8; i += 4) {
          std::memcpy(o.qh[i / 4][r], row[b].qh + i, 4);
        }
      }
    }
  }
}

// Row r's block back out of a group's block: the inverse of repack_with_mins_rows8 (a
// kernel that reads the copy where it would read the file, AMX's prefill expansion,
// takes it).
template <class Group>
requires std::is_same_v<Group, BlockQ4KRows8> || std::is_same_v<Group, BlockQ5KRows8>
typename Group::FileBlock file_block_of(const Group& group, std::size_t r) noexcept {
  typename Group::FileBlock x;
  std::uint8_t scales[8], mins[8];
  for (std::size_t j = 0; j < 8; ++j) {
    scales[j] = group.scales[j][r];
    mins[j] = group.mins[j][r];
  }
  pack_q4k_scales(scales, mins, x.scales);
  x.d = group.d[r];
  x.dmin = group.dmin[r];
  for (std::size_t i = 0; i < QK_K / 2; i += 4) {
    std::memcpy(x.qs + i, group.qs[i / 32][(i % 32) / 4][r], 4);
  }
  if constexpr (std::is_same_v<Group, BlockQ5KRows8>) {
    for (std::size_t i = 0; i < QK_K / 8; i += 4) std::memcpy(x.qh + i, group.qh[i / 4][r], 4);
  }
  return x;
}

// The quant of value i (0..31) of sub-block j of row r in a Q4_K or Q5_K group's block.
inline int rows8_quant(const BlockQ4KRows8& w, std::size_t r, std::size_t j,
                       std::size_t i) noexcept {
  return (w.qs[j / 2][i / 4][r][i % 4] >> (4 * (j % 2))) & 0xF;
}
inline int rows8_quant(const BlockQ5KRows8& w, std::size_t r, std::size_t j,
                       std::size_t i) noexcept {
  const int low4 = (w.qs[j / 2][i / 4][r][i % 4] >> (4 * (j % 2))) & 0xF;
  return low4 | (((w.qh[i / 4][r][i % 4] >> j) & 1) << 4);
}

// Scalar reference of the types with sub-block mins (Q4_K, Q5_K): y[t * y_stride + r] =
// row r . token t, for `n_tokens` tokens whose Q8_K rows lie `x_stride` blocks apart.
// Rounds exactly like the scalar dot_q4k_q8k / dot_q5k_q8k on the original rows, so the
// two agree bit for bit.
template <class Rows8>
void rows8_with_mins_reference(const Rows8* w, std::size_t nblocks, const BlockQ8K* x,
                               std::size_t x_stride, std::size_t n_tokens, float* y,
                               std::size_t y_stride, WeightsFrom /*unused*/) noexcept {
  for (std::size_t t = 0; t < n_tokens; ++t) {
    const BlockQ8K* xt = x + t * x_stride;
    for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
      float sum = 0.0f;
      for (std::size_t b = 0; b < nblocks; ++b) {
        std::int32_t sumi = 0, summ = 0;
        for (std::size_t j = 0; j < 8; ++j) {
          std::int32_t s = 0;
          for (std::size_t i = 0; i < 32; ++i) {
            s += rows8_quant(w[b], r, j, i) * xt[b].qs[32 * j + i];
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
inline constexpr auto rows8_q4k_q8k_reference = rows8_with_mins_reference<BlockQ4KRows8>;
inline constexpr auto rows8_q5k_q8k_reference = rows8_with_mins_reference<BlockQ5KRows8>;

// Q6_K: ql and qh keep their bytes, regrouped by 4 across the rows like Q4_K's qs.
// Chunk c = 2h + s of ql: low nibbles are values 128h + 32s + 4g + e, high nibbles 64
// more; their top two bits are bits 2s and 4 + 2s of the matching qh byte.
struct alignas(16) BlockQ6KRows8 {
  std::uint8_t ql[4][8][kRowsPerGroup][4];  // byte 32 * c + 4 * g + e of row r's ql
  std::uint8_t qh[2][8][kRowsPerGroup][4];  // byte 32 * h + 4 * g + e of row r's qh
  std::int8_t scales[16][kRowsPerGroup];    // [group of 16][row]
  f16_bits d[kRowsPerGroup];
};
static_assert(sizeof(BlockQ6KRows8) == 8 * sizeof(BlockQ6K) &&
              offsetof(BlockQ6KRows8, scales) == 1536 && offsetof(BlockQ6KRows8, d) == 1664);

inline void repack_q6k_rows8(const std::byte* first_row, std::size_t row_bytes, std::size_t nblocks,
                             BlockQ6KRows8* out) noexcept {
  for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
    const auto* row = reinterpret_cast<const BlockQ6K*>(first_row + r * row_bytes);
    for (std::size_t b = 0; b < nblocks; ++b) {
      BlockQ6KRows8& o = out[b];
      for (std::size_t i = 0; i < QK_K / 2; i += 4) {
        std::memcpy(o.ql[i / 32][(i % 32) / 4][r], row[b].ql + i, 4);
      }
      for (std::size_t i = 0; i < QK_K / 4; i += 4) {
        std::memcpy(o.qh[i / 32][(i % 32) / 4][r], row[b].qh + i, 4);
      }
      for (std::size_t g = 0; g < 16; ++g) o.scales[g][r] = row[b].scales[g];
      o.d[r] = row[b].d;
    }
  }
}

// The inverse of repack_q6k_rows8 for row r's block.
inline BlockQ6K file_block_of(const BlockQ6KRows8& group, std::size_t r) noexcept {
  BlockQ6K x;
  for (std::size_t i = 0; i < QK_K / 2; i += 4) {
    std::memcpy(x.ql + i, group.ql[i / 32][(i % 32) / 4][r], 4);
  }
  for (std::size_t i = 0; i < QK_K / 4; i += 4) {
    std::memcpy(x.qh + i, group.qh[i / 32][(i % 32) / 4][r], 4);
  }
  for (std::size_t g = 0; g < 16; ++g) x.scales[g] = group.scales[g][r];
  x.d = group.d[r];
  return x;
}

// The 6-bit quant of value i (0..255) of row r, 0..63.
inline int rows8_q6k_quant(const BlockQ6KRows8& w, std::size_t r, std::size_t i) noexcept {
  const std::size_t h = i / 128, v = i % 128, quarter = v / 32, l = v % 32;
  const std::size_t c = 2 * h + quarter % 2;
  const std::uint8_t low = w.ql[c][l / 4][r][l % 4];
  const int low4 = quarter < 2 ? (low & 0xF) : (low >> 4);
  const int high2 = (w.qh[h][l / 4][r][l % 4] >> (2 * quarter)) & 3;
  return low4 | (high2 << 4);
}

// Scalar reference, as rows8_q4k_q8k_reference; rounds like the scalar dot_q6k_q8k.
inline void rows8_q6k_q8k_reference(const BlockQ6KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                                    std::size_t x_stride, std::size_t n_tokens, float* y,
                                    std::size_t y_stride, WeightsFrom /*unused*/) noexcept {
  for (std::size_t t = 0; t < n_tokens; ++t) {
    const BlockQ8K* xt = x + t * x_stride;
    for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
      float sum = 0.0f;
      for (std::size_t b = 0; b < nblocks; ++b) {
        std::int32_t sumi = 0;
        for (std::size_t g = 0; g < 16; ++g) {
          std::int32_t s = 0;
          for (std::size_t i = 16 * g; i < 16 * g + 16; ++i) {
            s += (rows8_q6k_quant(w[b], r, i) - 32) * xt[b].qs[i];
          }
          sumi += w[b].scales[g][r] * s;
        }
        sum += f16_to_f32(w[b].d[r]) * xt[b].d * static_cast<float>(sumi);
      }
      y[t * y_stride + r] = sum;
    }
  }
}

// Q2_K and Q3_K: 2-bit quants (qs), regrouped by 4 across the rows as Q4_K's are:
// qs[h][g][r][e] = byte 32 h + 4 g + e of row r's qs, whose bits 2 j, 2 j + 1 hold value
// 128 h + 32 j + 4 g + e (j < 4). One 64-byte load at qs[h][2 p] so holds values 8 p ..
// 8 p + 7 of every 32 for all eight rows, at each of the four shifts (sub-block 8 h + 2 j +
// p / 2 at shift j). Q3_K's third bits lie as its qs: hmask[g][r][e] = byte 4 g + e of row
// r's hmask, whose bit 4 h + j tops that same value. Each row's sixteen sub-block bytes
// (Q2_K: the file's byte, the scale in its low nibble and the min in its high one; Q3_K:
// the scale, -32..31, unpacked) lie in the order of the kernels' lanes: scales[v][L][e] is
// sub-block 4 v + 2 rows8_lane_parity(L) + e of row rows8_lane_row(L), L < 16, so that
// the word pairs of scales[v] meet the activations' bsum pairs lane by lane (the min and
// offset terms) and a word permute gives each lane its sub-block's scale (the products).
// Q2_K's copy has the file's size; Q3_K's 3.6 % more (912 bytes for eight rows' 880: the
// scales unpacked, as Q4_K's are).
struct alignas(32) BlockQ2KRows8 {
  using FileBlock = BlockQ2K;
  std::uint8_t qs[2][8][kRowsPerGroup][4];
  std::uint8_t scales[4][16][2];  // the file's scale-and-min bytes, in lane order
  f16_bits d[kRowsPerGroup];
  f16_bits dmin[kRowsPerGroup];
};
static_assert(sizeof(BlockQ2KRows8) == kRowsPerGroup * sizeof(BlockQ2K) &&
              offsetof(BlockQ2KRows8, scales) == 512 && offsetof(BlockQ2KRows8, d) == 640);

struct alignas(16) BlockQ3KRows8 {
  using FileBlock = BlockQ3K;
  std::uint8_t qs[2][8][kRowsPerGroup][4];
  std::uint8_t hmask[8][kRowsPerGroup][4];
  std::int8_t scales[4][16][2];  // -32..31, in lane order
  f16_bits d[kRowsPerGroup];
};
static_assert(sizeof(BlockQ3KRows8) == 912 && offsetof(BlockQ3KRows8, hmask) == 512 &&
              offsetof(BlockQ3KRows8, scales) == 768 && offsetof(BlockQ3KRows8, d) == 896);

// Where sub-block j of row r lies in a Q2_K or Q3_K copy's scales[v][lane][e].
struct Rows8SubBlockSlot {
  std::size_t v, lane, e;
};
constexpr Rows8SubBlockSlot rows8_sub_block_slot(std::size_t r, std::size_t j) noexcept {
  const std::size_t parity = (j % 4) / 2;
  return {j / 4, 4 * (r / 2) + r % 2 + 2 * parity, j % 2};
}

// Interleaves rows [8 * group, 8 * group + 8) of a Q2_K or Q3_K matrix (as
// repack_with_mins_rows8).
template <class Group>
requires std::is_same_v<Group, BlockQ2KRows8> || std::is_same_v<Group, BlockQ3KRows8>
void repack_two_bit_rows8(const std::byte* first_row, std::size_t row_bytes, std::size_t nblocks,
                          Group* out) noexcept {
  constexpr bool kThirdBit = std::is_same_v<Group, BlockQ3KRows8>;
  using Block = typename Group::FileBlock;
  for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
    const auto* row = reinterpret_cast<const Block*>(first_row + r * row_bytes);
    for (std::size_t b = 0; b < nblocks; ++b) {
      const Block& in = row[b];
      Group& o = out[b];
      for (std::size_t i = 0; i < QK_K / 4; i += 4) {
        std::memcpy(o.qs[i / 32][(i % 32) / 4][r], in.qs + i, 4);
      }
      o.d[r] = in.d;
      if constexpr (kThirdBit) {
        for (std::size_t i = 0; i < QK_K / 8; i += 4) {
          std::memcpy(o.hmask[i / 4][r], in.hmask + i, 4);
        }
        std::int8_t scales[16];
        unpack_q3k_scales(in.scales, scales);
        for (std::size_t j = 0; j < 16; ++j) {
          const Rows8SubBlockSlot s = rows8_sub_block_slot(r, j);
          o.scales[s.v][s.lane][s.e] = scales[j];
        }
      } else {
        for (std::size_t j = 0; j < 16; ++j) {
          const Rows8SubBlockSlot s = rows8_sub_block_slot(r, j);
          o.scales[s.v][s.lane][s.e] = in.scales[j];
        }
        o.dmin[r] = in.dmin;
      }
    }
  }
}

// Sub-block j's byte of row r in a Q2_K or Q3_K group's block (Q2_K: scale | min << 4;
// Q3_K: the scale).
template <class Group>
inline auto rows8_sub_block_byte(const Group& w, std::size_t r, std::size_t j) noexcept {
  const Rows8SubBlockSlot s = rows8_sub_block_slot(r, j);
  return w.scales[s.v][s.lane][s.e];
}

// The quant of value i (0..255) of row r: Q2_K's 0..3, Q3_K's -4..3 (as q2k_quant and
// q3k_quant on the file's block).
inline int rows8_low2(const std::uint8_t (&qs)[2][8][kRowsPerGroup][4], std::size_t r,
                      std::size_t i) noexcept {
  const std::size_t l = i % 32;
  return (qs[i / 128][l / 4][r][l % 4] >> (2 * ((i % 128) / 32))) & 3;
}
inline int rows8_quant(const BlockQ2KRows8& w, std::size_t r, std::size_t i) noexcept {
  return rows8_low2(w.qs, r, i);
}
inline int rows8_quant(const BlockQ3KRows8& w, std::size_t r, std::size_t i) noexcept {
  const std::size_t l = i % 32;
  const int high = (w.hmask[l / 4][r][l % 4] >> (i / 32)) & 1;
  return rows8_low2(w.qs, r, i) - (high ? 0 : 4);
}

// Scalar references, as rows8_q4k_q8k_reference; they round exactly like the scalar
// dot_q2k_q8k and dot_q3k_q8k (simd/kernels_q2_k.hpp, kernels_q3_k.hpp) on the file's rows.
inline void rows8_q2k_q8k_reference(const BlockQ2KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                                    std::size_t x_stride, std::size_t n_tokens, float* y,
                                    std::size_t y_stride, WeightsFrom /*unused*/) noexcept {
  for (std::size_t t = 0; t < n_tokens; ++t) {
    const BlockQ8K* xt = x + t * x_stride;
    for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
      float sum = 0.0f;
      for (std::size_t b = 0; b < nblocks; ++b) {
        std::int32_t sumi = 0, summ = 0;
        for (std::size_t j = 0; j < 16; ++j) {
          std::int32_t s = 0;
          for (std::size_t l = 16 * j; l < 16 * j + 16; ++l) {
            s += rows8_quant(w[b], r, l) * xt[b].qs[l];
          }
          const std::uint8_t byte = rows8_sub_block_byte(w[b], r, j);
          sumi += (byte & 0xF) * s;
          summ += (byte >> 4) * xt[b].bsums[j];
        }
        sum += f16_to_f32(w[b].d[r]) * xt[b].d * static_cast<float>(sumi) -
               f16_to_f32(w[b].dmin[r]) * xt[b].d * static_cast<float>(summ);
      }
      y[t * y_stride + r] = sum;
    }
  }
}

inline void rows8_q3k_q8k_reference(const BlockQ3KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                                    std::size_t x_stride, std::size_t n_tokens, float* y,
                                    std::size_t y_stride, WeightsFrom /*unused*/) noexcept {
  for (std::size_t t = 0; t < n_tokens; ++t) {
    const BlockQ8K* xt = x + t * x_stride;
    for (std::size_t r = 0; r < kRowsPerGroup; ++r) {
      float sum = 0.0f;
      for (std::size_t b = 0; b < nblocks; ++b) {
        std::int32_t sumi = 0;
        for (std::size_t j = 0; j < 16; ++j) {
          std::int32_t s = 0;
          for (std::size_t l = 16 * j; l < 16 * j + 16; ++l) {
            s += rows8_quant(w[b], r, l) * xt[b].qs[l];
          }
          sumi += rows8_sub_block_byte(w[b], r, j) * s;
        }
        sum += f16_to_f32(w[b].d[r]) * xt[b].d * static_cast<float>(sumi);
      }
      y[t * y_stride + r] = sum;
    }
  }
}

// The interleaved layout of a block type, or void where there is none.
template <class Block>
struct Rows8Of : std::type_identity<void> {};
template <>
struct Rows8Of<BlockQ4K> : std::type_identity<BlockQ4KRows8> {};
template <>
struct Rows8Of<BlockQ5K> : std::type_identity<BlockQ5KRows8> {};
template <>
struct Rows8Of<BlockQ6K> : std::type_identity<BlockQ6KRows8> {};
template <>
struct Rows8Of<BlockQ2K> : std::type_identity<BlockQ2KRows8> {};
template <>
struct Rows8Of<BlockQ3K> : std::type_identity<BlockQ3KRows8> {};

// Interleaves eight rows of `nblocks` blocks into their groups.
template <class Block>
inline void repack_rows8(const std::byte* first_row, std::size_t row_bytes, std::size_t nblocks,
                         typename Rows8Of<Block>::type* out) noexcept {
  if constexpr (std::is_same_v<Block, BlockQ4K> || std::is_same_v<Block, BlockQ5K>) {
    repack_with_mins_rows8(first_row, row_bytes, nblocks, out);
  } else if constexpr (std::is_same_v<Block, BlockQ6K>) {
    repack_q6k_rows8(first_row, row_bytes, nblocks, out);
  } else {
    repack_two_bit_rows8(first_row, row_bytes, nblocks, out);
  }
}

}  // namespace smol
