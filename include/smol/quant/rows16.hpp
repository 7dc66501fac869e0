// Rows interleaved by sixteen for the 32-value block types: block b of sixteen
// consecutive Q4_1 rows, laid side by side at load time (BlockQ4_1Rows16).
//
// Why: on the file's layout a decode dot on Q4_1 spends its instructions per row
// (gathering two blocks into one vector, a horizontal sum, a call), and a 576-wide row
// is only 18 blocks. With sixteen rows side by side, 32-bit lane r of a 512-bit vector
// belongs to row r: each 4-byte group of the activations is broadcast, one vpdpbusd
// serves sixteen rows, the rows' d and m are one f16 vector each, and the sixteen
// results leave as one store with no horizontal sum (the eight-row copy of the K-quants,
// rows8.hpp, works the same way; sixteen here because a 32-value block has no sub-block
// scales to shuffle, so a whole zmm of int32 lanes is filled by one block).
//
// The order is the AMX tile kernel's (x86_amx_blocks32.hpp): value quad q of row r at
// byte 64 q + 4 r, kept as packed nibbles (the low nibbles of qs[c] are quad c, the high
// nibbles quad c + 4), so the copy has the file's size. Each row's float arithmetic is
// also the tile kernel's per-token arithmetic (rows16_q4_1_reference below), so a
// decode on the copy equals the prefill tiles' result for the same token bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/half.hpp"
#include "smol/quant/legacy_blocks.hpp"

namespace smol {

inline constexpr std::size_t kRows16 = 16;

struct alignas(64) BlockQ4_1Rows16 {
  // qs[c][r][e] = byte 4 c + e of row r's qs: low nibbles are values 4 c + e, high
  // nibbles values 16 + 4 c + e.
  std::uint8_t qs[4][kRows16][4];
  f16_bits d[kRows16];
  f16_bits m[kRows16];
};
static_assert(sizeof(BlockQ4_1Rows16) == kRows16 * sizeof(BlockQ4_1) &&
              offsetof(BlockQ4_1Rows16, d) == 256);

// Interleaves `n_rows` (1 to 16) rows of `nblocks` Q4_1 blocks, `row_bytes` apart, into
// out[0 .. nblocks); rows past n_rows are zeros (d = m = 0), so their results are 0.
inline void repack_q4_1_rows16(const std::byte* first_row, std::size_t row_bytes,
                               std::size_t n_rows, std::size_t nblocks,
                               BlockQ4_1Rows16* out) noexcept {
  std::memset(static_cast<void*>(out), 0, nblocks * sizeof(BlockQ4_1Rows16));
  for (std::size_t r = 0; r < std::min(n_rows, kRows16); ++r) {
    const auto* row = reinterpret_cast<const BlockQ4_1*>(first_row + r * row_bytes);
    for (std::size_t b = 0; b < nblocks; ++b) {
      for (std::size_t c = 0; c < 4; ++c) std::memcpy(out[b].qs[c][r], row[b].qs + 4 * c, 4);
      out[b].d[r] = row[b].d;
      out[b].m[r] = row[b].m;
    }
  }
}

// The 4-bit quant of value i (0..31) of row r.
inline int rows16_q4_1_quant(const BlockQ4_1Rows16& w, std::size_t r, std::size_t i) noexcept {
  const std::uint8_t byte = w.qs[(i % 16) / 4][r][i % 4];
  return i < 16 ? (byte & 0xF) : (byte >> 4);
}

// Bytes of the interleaved copy of a rows x cols Q4_1 matrix: the last group is padded
// to sixteen rows.
inline std::size_t rows16_bytes(std::size_t rows, std::size_t cols) noexcept {
  return (rows + kRows16 - 1) / kRows16 * (cols / 32) * sizeof(BlockQ4_1Rows16);
}

// Interleaves group g (rows [16g, 16g + 16), fewer in a partial last group) of a Q4_1
// matrix of `n_rows` rows starting at `rows`, `row_bytes` apart, into the copy starting
// at `copy` (rows16_bytes(n_rows, cols) bytes); groups are independent.
inline void repack_rows16_group(const std::byte* rows, std::size_t row_bytes, std::size_t n_rows,
                                std::size_t cols, std::size_t g, std::byte* copy) noexcept {
  const std::size_t nblocks = cols / 32;
  repack_q4_1_rows16(rows + g * kRows16 * row_bytes, row_bytes, n_rows - g * kRows16, nblocks,
                     reinterpret_cast<BlockQ4_1Rows16*>(copy) + g * nblocks);
}

// Scalar reference: y[r] = row r . x for r < n_rows (n_rows <= 16), over `nblocks`
// blocks. Per block, in block order and with one accumulator per row, exactly the AMX
// tile kernel's float steps: v = float(isum) * wd; acc = fma(v, yd, acc);
// acc = fma(wm, ys, acc). std::fma keeps the compiler from contracting differently.
inline void rows16_q4_1_reference(const BlockQ4_1Rows16* w, std::size_t nblocks, std::size_t n_rows,
                                  const BlockQ8_1* x, float* y) noexcept {
  for (std::size_t r = 0; r < std::min(n_rows, kRows16); ++r) {
    float acc = 0.0f;
    for (std::size_t b = 0; b < nblocks; ++b) {
      std::int32_t isum = 0;
      for (std::size_t i = 0; i < 32; ++i) isum += rows16_q4_1_quant(w[b], r, i) * x[b].qs[i];
      const float v = static_cast<float>(isum) * f16_to_f32(w[b].d[r]);
      acc = std::fma(v, f16_to_f32(x[b].d), acc);
      acc = std::fma(f16_to_f32(w[b].m[r]), f16_to_f32(x[b].s), acc);
    }
    y[r] = acc;
  }
}

// The sixteen-row layout of a block type, or void where there is none.
template <class Block>
struct Rows16Of {
  using type = void;
};
template <>
struct Rows16Of<BlockQ4_1> {
  using type = BlockQ4_1Rows16;
};

}  // namespace smol
