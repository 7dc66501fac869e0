// Rows interleaved by sixteen for the 32-value block types: block b of sixteen
// consecutive rows, laid side by side at load time (BlockQ4_1Rows16, BlockQ4_0Rows16,
// BlockIQ4NLRows16, BlockQ8_0Rows16, BlockQ5_0Rows16, BlockQ5_1Rows16, BlockMXFP4Rows16), and for
// IQ4_XS, whose
// 256-value super-block is eight such blocks under integer sub-block scales (BlockIQ4XSRows16). A
// type has such a copy when Rows16Of names one (the end of this header); what follows from
// that (which types, bytes, the repack of a group) is quant/interleaved_rows.hpp's, for both
// group sizes.
//
// Why: on the file's layout a decode dot on these types spends its instructions per row
// (gathering two blocks into one vector, a horizontal sum, a call), and a 576-wide row
// is only 18 blocks. With sixteen rows side by side, 32-bit lane r of a 512-bit vector
// belongs to row r: each 4-byte group of the activations is broadcast, one vpdpbusd
// serves sixteen rows, the rows' scales are one f16 vector, and the sixteen results
// leave as one store with no horizontal sum (the eight-row copy of the K-quants,
// rows8.hpp, works the same way; sixteen here because a 32-value block has no sub-block
// scales to shuffle, so a whole zmm of int32 lanes is filled by one block).
//
// The order is the AMX tile kernel's (x86_amx_blocks32.hpp): value quad q of row r at
// byte 64 q + 4 r, so the AMX prefill turns a block into its tile with one vector step per
// 64 bytes (Q8_0's sign bits flipped back, the nibbles split) and no scatter, and the
// copy has the file's size (IQ4_XS's 1.5 % more). Q4_1, Q4_0, IQ4_NL and IQ4_XS keep their nibbles
// packed (low nibbles of qs[c] are quad c, high nibbles quad c + 4). vpdpbusd takes one operand
// unsigned, so the weights are the unsigned one: Q4_0's nibble q as it is (its level is
// q - 8), IQ4_NL's and IQ4_XS's level looked up plus 128 (one byte shuffle per vector),
// Q8_0's quant plus 128 (its sign bit flipped); the decode kernels then subtract 8 or 128
// x the token block's quant sum (`rows16_token_terms` below), an exact integer step. Each row's
// float arithmetic is the tile kernel's per-token arithmetic (the references below), so
// a decode on the copy equals the prefill tiles' result for the same token bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/ggml_type.hpp"
#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/quant/mxfp4.hpp"
#include "smol/quant/weight_types.hpp"

namespace smol {

inline constexpr std::size_t kRows16 = 16;

struct alignas(64) BlockQ4_1Rows16 {
  // qs[c][r][e] = byte 4 c + e of row r's qs: low nibbles are values 4 c + e, high
  // nibbles values 16 + 4 c + e.
  std::uint8_t qs[4][kRows16][4];
  f16_bits d[kRows16];
  f16_bits m[kRows16];
  // What a stored quant exceeds its level by (none: Q4_1's min is its own term).
  static constexpr std::int32_t kOffset = 0;
  static constexpr std::size_t kSubBlocks = 1;  // 32-value blocks per group block
};
static_assert(sizeof(BlockQ4_1Rows16) == kRows16 * sizeof(BlockQ4_1) &&
              offsetof(BlockQ4_1Rows16, d) == 256);

// Q4_0: Q4_1's nibble order without the min; a nibble q is the level q - 8. 16 x 18 bytes
// is 288, so 32-byte alignment (as Q8_0's below).
struct alignas(32) BlockQ4_0Rows16 {
  std::uint8_t qs[4][kRows16][4];
  f16_bits d[kRows16];
  static constexpr std::int32_t kOffset = 8;
  static constexpr std::size_t kSubBlocks = 1;
};
static_assert(sizeof(BlockQ4_0Rows16) == kRows16 * sizeof(BlockQ4_0) &&
              offsetof(BlockQ4_0Rows16, d) == 256);

// IQ4_NL: Q4_0's layout, but a nibble is an index into kIq4nlValues (quant/iq4.hpp). The
// kernels turn sixty-four nibbles into levels with one byte shuffle, plus 128 for vpdpbusd's
// unsigned operand (the levels span -127..113, so level + 128 is a byte).
struct alignas(32) BlockIQ4NLRows16 {
  std::uint8_t qs[4][kRows16][4];
  f16_bits d[kRows16];
  // What the kernels' unsigned operand (the level plus 128) exceeds the level by.
  static constexpr std::int32_t kOffset = 128;
  static constexpr std::size_t kSubBlocks = 1;
};
static_assert(sizeof(BlockIQ4NLRows16) == kRows16 * sizeof(BlockIQ4NL) &&
              offsetof(BlockIQ4NLRows16, d) == 256);

// MXFP4: IQ4_NL's nibble layout, each nibble a code into kMxfp4Values (quant/mxfp4.hpp: the
// doubled E2M1 values, -12..12, plus 128 for vpdpbusd's unsigned operand), and each row's
// E8M0 byte in place of an f16 d: the copy has the file's size (16 x 17 bytes), so only
// 16-byte alignment (a 64-byte load straddles two lines, which costs decode less than 18 %
// more bytes per token would). The kernels widen the sixteen E8M0 bytes to their halved
// scales (e8m0_half) with a shift per lane.
struct alignas(16) BlockMXFP4Rows16 {
  std::uint8_t qs[4][kRows16][4];
  std::uint8_t e[kRows16];  // E8M0 of row r
  static constexpr std::int32_t kOffset = 128;
  static constexpr std::size_t kSubBlocks = 1;
};
static_assert(sizeof(BlockMXFP4Rows16) == kRows16 * sizeof(BlockMXFP4) &&
              offsetof(BlockMXFP4Rows16, e) == 256);

// Row r's factor in a group's block: its f16 d, or MXFP4's halved E8M0 scale (exact in
// float either way).
template <class Group>
inline float rows16_row_scale(const Group& w, std::size_t r) noexcept {
  if constexpr (std::is_same_v<Group, BlockMXFP4Rows16>) {
    return e8m0_half(w.e[r]);
  } else {
    return f16_to_f32(w.d[r]);
  }
}

// IQ4_XS: a super-block of 256 values, whose eight 32-value sub-blocks each lie as
// IQ4_NL's copy (qs[j]), with the rows' d and the sub-block scales s_j - 32 unpacked to
// bytes (a kernel takes sixteen rows' scales with one load instead of two shifts and a
// merge per row): 2208 bytes for sixteen rows' 2176, 1.5 % more.
struct alignas(32) BlockIQ4XSRows16 {
  std::uint8_t qs[8][4][kRows16][4];
  f16_bits d[kRows16];
  std::int8_t scales[8][kRows16];  // s_j - 32 of row r: scales[j][r]
  static constexpr std::int32_t kOffset = 128;
  static constexpr std::size_t kSubBlocks = 8;
};
static_assert(sizeof(BlockIQ4XSRows16) == 2208 && offsetof(BlockIQ4XSRows16, d) == 2048);

// Q5_0 and Q5_1: Q4_0's and Q4_1's nibble order, and each row's 32 fifth bits (qh) in
// the order the kernels take them: byte e of qh[r] holds, in bit c, the fifth bit of value
// 4 c + e, and in bit 4 + c that of value 16 + 4 c + e. For quad c of the low nibbles
// (values 4 c + e, byte e of a 32-bit lane) a shift of each lane left by 4 - c brings bit
// c of every byte to bit 4, and for the high nibbles a shift right by c brings bit 4 + c
// there, with no byte's bits crossing into another's bit 4: one shift and one masked OR
// per 64 values turn the nibbles into the 5-bit quants, the unsigned operand of vpdpbusd.
// The copy has the file's size (16 x 22 and 16 x 24 bytes). Q5_0's quant q is the level
// q - 16 (kOffset, as Q4_0's 8); Q5_1's min is a term of its own, as Q4_1's.
struct alignas(32) BlockQ5_0Rows16 {
  std::uint8_t qs[4][kRows16][4];
  std::uint8_t qh[kRows16][4];
  f16_bits d[kRows16];
  static constexpr std::int32_t kOffset = 16;
  static constexpr std::size_t kSubBlocks = 1;
};
static_assert(sizeof(BlockQ5_0Rows16) == kRows16 * sizeof(BlockQ5_0) &&
              offsetof(BlockQ5_0Rows16, qh) == 256 && offsetof(BlockQ5_0Rows16, d) == 320);

struct alignas(64) BlockQ5_1Rows16 {
  std::uint8_t qs[4][kRows16][4];
  std::uint8_t qh[kRows16][4];
  f16_bits d[kRows16];
  f16_bits m[kRows16];
  static constexpr std::int32_t kOffset = 0;
  static constexpr std::size_t kSubBlocks = 1;
};
static_assert(sizeof(BlockQ5_1Rows16) == kRows16 * sizeof(BlockQ5_1) &&
              offsetof(BlockQ5_1Rows16, qh) == 256 && offsetof(BlockQ5_1Rows16, d) == 320);

// Whether a copy's quants carry a fifth bit (qh).
template <class Group>
inline constexpr bool kFifthBits =
    std::is_same_v<Group, BlockQ5_0Rows16> || std::is_same_v<Group, BlockQ5_1Rows16>;

// A row's 32 fifth bits (ggml's qh, bit i for value i) in the copy's order (above).
inline void q5_fifth_bits_rows16(const std::uint8_t qh[4], std::uint8_t out[4]) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  for (std::size_t e = 0; e < 4; ++e) {
    std::uint32_t byte = 0;
    for (std::size_t c = 0; c < 4; ++c) {
      byte |= ((bits >> (4 * c + e)) & 1u) << c;
      byte |= ((bits >> (16 + 4 * c + e)) & 1u) << (4 + c);
    }
    out[e] = static_cast<std::uint8_t>(byte);
  }
}

// 32-byte alignment only: 16 x 34 bytes is 544, and padding to a multiple of 64 would add
// 6 % to every token's read (half the blocks' 64-byte loads then straddle two lines).
struct alignas(32) BlockQ8_0Rows16 {
  // qs[q][r][e] = quant 4 q + e of row r, plus 128 (the sign bit flipped).
  std::uint8_t qs[8][kRows16][4];
  f16_bits d[kRows16];
  static constexpr std::int32_t kOffset = 128;
  static constexpr std::size_t kSubBlocks = 1;
};
static_assert(sizeof(BlockQ8_0Rows16) == kRows16 * sizeof(BlockQ8_0) &&
              offsetof(BlockQ8_0Rows16, d) == 512);

// Interleaves `n_rows` (1 to 16) rows of `nblocks` Q4_1, Q4_0, IQ4_NL, Q5_0, Q5_1 or MXFP4
// blocks, `row_bytes` apart, into out[0 .. nblocks); rows past n_rows are zeros (d = m = 0;
// MXFP4's codes 0, the value 0), so their results are 0.
template <class Block, class Group>
inline void repack_nibble_rows16(const std::byte* first_row, std::size_t row_bytes,
                                 std::size_t n_rows, std::size_t nblocks, Group* out) noexcept {
  std::memset(static_cast<void*>(out), 0, nblocks * sizeof(Group));
  for (std::size_t r = 0; r < std::min(n_rows, kRows16); ++r) {
    const auto* row = reinterpret_cast<const Block*>(first_row + r * row_bytes);
    for (std::size_t b = 0; b < nblocks; ++b) {
      for (std::size_t c = 0; c < 4; ++c) std::memcpy(out[b].qs[c][r], row[b].qs + 4 * c, 4);
      if constexpr (requires { row[b].e; }) {
        out[b].e[r] = row[b].e;
      } else {
        out[b].d[r] = row[b].d;
      }
      if constexpr (requires { row[b].m; }) out[b].m[r] = row[b].m;
      if constexpr (requires { row[b].qh; }) q5_fifth_bits_rows16(row[b].qh, out[b].qh[r]);
    }
  }
}
inline constexpr auto repack_q4_1_rows16 = repack_nibble_rows16<BlockQ4_1, BlockQ4_1Rows16>;
inline constexpr auto repack_q4_0_rows16 = repack_nibble_rows16<BlockQ4_0, BlockQ4_0Rows16>;
inline constexpr auto repack_iq4nl_rows16 = repack_nibble_rows16<BlockIQ4NL, BlockIQ4NLRows16>;
inline constexpr auto repack_q5_0_rows16 = repack_nibble_rows16<BlockQ5_0, BlockQ5_0Rows16>;
inline constexpr auto repack_q5_1_rows16 = repack_nibble_rows16<BlockQ5_1, BlockQ5_1Rows16>;
inline constexpr auto repack_mxfp4_rows16 = repack_nibble_rows16<BlockMXFP4, BlockMXFP4Rows16>;

// The same for IQ4_XS: sub-block j's nibbles as IQ4_NL's, its scale unpacked.
inline void repack_iq4xs_rows16(const std::byte* first_row, std::size_t row_bytes,
                                std::size_t n_rows, std::size_t nblocks,
                                BlockIQ4XSRows16* out) noexcept {
  std::memset(static_cast<void*>(out), 0, nblocks * sizeof(BlockIQ4XSRows16));
  for (std::size_t r = 0; r < std::min(n_rows, kRows16); ++r) {
    const auto* row = reinterpret_cast<const BlockIQ4XS*>(first_row + r * row_bytes);
    for (std::size_t b = 0; b < nblocks; ++b) {
      for (std::size_t j = 0; j < 8; ++j) {
        for (std::size_t c = 0; c < 4; ++c) {
          std::memcpy(out[b].qs[j][c][r], row[b].qs + 16 * j + 4 * c, 4);
        }
        out[b].scales[j][r] = static_cast<std::int8_t>(iq4xs_scale(row[b], j));
      }
      out[b].d[r] = row[b].d;
    }
  }
}

// The same for Q8_0: every quant stored plus 128.
inline void repack_q8_0_rows16(const std::byte* first_row, std::size_t row_bytes,
                               std::size_t n_rows, std::size_t nblocks,
                               BlockQ8_0Rows16* out) noexcept {
  std::memset(static_cast<void*>(out), 0, nblocks * sizeof(BlockQ8_0Rows16));
  for (std::size_t r = 0; r < kRows16; ++r) {
    if (r >= n_rows) {  // a padding row: quants 0 (stored 128), d = 0
      for (std::size_t b = 0; b < nblocks; ++b) {
        for (auto& quad : out[b].qs) std::memset(quad[r], 0x80, 4);
      }
      continue;
    }
    const auto* row = reinterpret_cast<const BlockQ8_0*>(first_row + r * row_bytes);
    for (std::size_t b = 0; b < nblocks; ++b) {
      for (std::size_t i = 0; i < 32; ++i) {
        out[b].qs[i / 4][r][i % 4] = static_cast<std::uint8_t>(row[b].qs[i]) ^ 0x80;
      }
      out[b].d[r] = row[b].d;
    }
  }
}

// The 4-bit quant of value i (0..31) of row r (Q4_0: its level is this minus 8; IQ4_NL:
// kIq4nlValues of it; MXFP4: kMxfp4Values of it).
template <class Group>
inline int rows16_nibble(const Group& w, std::size_t r, std::size_t i) noexcept {
  const std::uint8_t byte = w.qs[(i % 16) / 4][r][i % 4];
  return i < 16 ? (byte & 0xF) : (byte >> 4);
}
// The 4-bit index of value i (0..31) of sub-block j of row r in an IQ4_XS group.
inline int rows16_iq4xs_nibble(const BlockIQ4XSRows16& w, std::size_t j, std::size_t r,
                               std::size_t i) noexcept {
  const std::uint8_t byte = w.qs[j][(i % 16) / 4][r][i % 4];
  return i < 16 ? (byte & 0xF) : (byte >> 4);
}
inline int rows16_q4_1_quant(const BlockQ4_1Rows16& w, std::size_t r, std::size_t i) noexcept {
  return rows16_nibble(w, r, i);
}
// The 5-bit quant (0..31) of value i of row r in a Q5_0 or Q5_1 group.
template <class Group>
requires kFifthBits<Group>
inline int rows16_q5_quant(const Group& w, std::size_t r, std::size_t i) noexcept {
  const std::size_t j = i % 16;
  const int fifth = (w.qh[r][j % 4] >> (i < 16 ? j / 4 : 4 + j / 4)) & 1;
  return rows16_nibble(w, r, i) | fifth << 4;
}

// The 8-bit quant of value i (0..31) of row r.
inline int rows16_q8_0_quant(const BlockQ8_0Rows16& w, std::size_t r, std::size_t i) noexcept {
  return static_cast<std::int8_t>(w.qs[i / 4][r][i % 4] ^ 0x80);
}

// What the sixteen-row kernels take of each token block besides its quants, made once per
// matvec or matmul call (rows16_token_terms below), since every group of sixteen rows needs
// the same:
// - the block's factors as floats: Q8_0's and Q8_1's f16 d and Q8_1's s, converted exactly
//   (f16 to f32 rounds nothing, so no result moves). The kernels converted them again in
//   every group, three instructions per token and block (a 16-bit insert, the conversion,
//   a broadcast); taken once per call, a 512-token matmul over Q4_1 or Q8_0 runs a little
//   faster (bench/README.md, "Every file type on a Zen 4 VM (BASELINES.md's kind)");
// - for the copies whose unsigned operands exceed their levels by Group::kOffset (Q8_0's
//   and IQ4_NL's 128, Q4_0's 8, Q5_0's 16), that offset times the token's quant sum of
//   each 32 values: what it adds to every row's integer sum of those values, for the
//   kernels to take off.
template <std::size_t Units>
struct Rows16TokenTerms {
  float d = 0.0f;
  float s = 0.0f;                   // Q8_1's s (d x its quant sum); 0 for the other tokens
  std::int32_t offset[Units] = {};  // per 32 values; 0 where the copy has no offset
};
// A copy's terms (one offset per 32-value unit of its blocks); void, a type without a copy.
template <class Group>
struct Rows16TermsOf {
  using type = Rows16TokenTerms<Group::kSubBlocks>;
};
template <>
struct Rows16TermsOf<void> {
  using type = Rows16TokenTerms<1>;
};
template <class Group>
using Rows16Terms = typename Rows16TermsOf<Group>::type;

// terms[b] for token blocks x[0 .. count) (a token's blocks, then the next token's).
inline void rows16_token_terms(const BlockQ8_1* x, std::size_t count, std::int32_t /*offset*/,
                               Rows16TokenTerms<1>* terms) noexcept {
  for (std::size_t b = 0; b < count; ++b) terms[b] = {f16_to_f32(x[b].d), f16_to_f32(x[b].s), {0}};
}
inline void rows16_token_terms(const BlockQ8_0* x, std::size_t count, std::int32_t offset,
                               Rows16TokenTerms<1>* terms) noexcept {
  for (std::size_t b = 0; b < count; ++b) {
    std::int32_t sum = 0;
    for (std::int8_t q : x[b].qs) sum += q;
    terms[b] = {f16_to_f32(x[b].d), 0.0f, {offset * sum}};
  }
}
// Q8_K tokens (IQ4_XS): d is a float already; offset[j] for quants 32 j .. 32 j + 31, from
// the block's sums of 16.
inline void rows16_token_terms(const BlockQ8K* x, std::size_t count, std::int32_t offset,
                               Rows16TokenTerms<8>* terms) noexcept {
  for (std::size_t b = 0; b < count; ++b) {
    terms[b].d = x[b].d;
    terms[b].s = 0.0f;
    for (std::size_t j = 0; j < 8; ++j) {
      terms[b].offset[j] = offset * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
    }
  }
}

// Scalar references: y[t * y_stride + r] = row r . token t for r < n_rows (n_rows <= 16),
// tokens `x_stride` blocks apart, over `nblocks` blocks. Per block, in block order and
// with one accumulator per row and token, exactly the AMX tile kernel's float steps:
// v = float(isum) * wd; acc = fma(v, yd, acc). Q4_1's min terms have an accumulator of
// their own, mins = fma(wm, ys, mins), added at the end (as ggml's x86 dots keep theirs):
// the AMX kernel sums them apart from its tile loop, where each vector step costs three
// times what it costs alone. std::fma keeps the compiler from contracting differently. The integer
// sums are taken from the quants directly, the factors from the token blocks (the kernels
// take both from the terms, unused here).
// Q5_1 the same, its quants five bits.
template <class Group>
inline void rows16_min_reference(const Group* w, std::size_t nblocks, std::size_t n_rows,
                                 const BlockQ8_1* x, std::size_t x_stride, std::size_t n_tokens,
                                 const Rows16TokenTerms<1>* /*terms*/, float* y,
                                 std::size_t y_stride) noexcept {
  const auto quant = [&](const Group& blk, std::size_t r, std::size_t i) {
    if constexpr (kFifthBits<Group>) {
      return rows16_q5_quant(blk, r, i);
    } else {
      return rows16_q4_1_quant(blk, r, i);
    }
  };
  for (std::size_t t = 0; t < n_tokens; ++t) {
    const BlockQ8_1* xt = x + t * x_stride;
    for (std::size_t r = 0; r < std::min(n_rows, kRows16); ++r) {
      float acc = 0.0f, mins = 0.0f;
      for (std::size_t b = 0; b < nblocks; ++b) {
        std::int32_t isum = 0;
        for (std::size_t i = 0; i < 32; ++i) isum += quant(w[b], r, i) * xt[b].qs[i];
        const float v = static_cast<float>(isum) * f16_to_f32(w[b].d[r]);
        acc = std::fma(v, f16_to_f32(xt[b].d), acc);
        mins = std::fma(f16_to_f32(w[b].m[r]), f16_to_f32(xt[b].s), mins);
      }
      y[t * y_stride + r] = acc + mins;
    }
  }
}
inline constexpr auto rows16_q4_1_reference = rows16_min_reference<BlockQ4_1Rows16>;
inline constexpr auto rows16_q5_1_reference = rows16_min_reference<BlockQ5_1Rows16>;

// Q8_0, Q4_0, IQ4_NL, Q5_0 and MXFP4 (no min), their levels taken from the quants directly (the
// kernels reach the same sums through the terms' offsets, unused here). MXFP4's scale is a
// power of two, so float(isum) * wd rounds nothing, and then one fma by the token's d: not
// the order of the file rows' dot (d_y times the scale, then times the sum, then added),
// which a model reads only where it has no copy.
template <class Group>
inline void rows16_no_min_reference(const Group* w, std::size_t nblocks, std::size_t n_rows,
                                    const BlockQ8_0* x, std::size_t x_stride, std::size_t n_tokens,
                                    const Rows16TokenTerms<1>* /*terms*/, float* y,
                                    std::size_t y_stride) noexcept {
  const auto level = [&](const Group& blk, std::size_t r, std::size_t i) {
    if constexpr (std::is_same_v<Group, BlockQ8_0Rows16>) {
      return rows16_q8_0_quant(blk, r, i);
    } else if constexpr (std::is_same_v<Group, BlockIQ4NLRows16>) {
      return static_cast<int>(kIq4nlValues[rows16_nibble(blk, r, i)]);
    } else if constexpr (std::is_same_v<Group, BlockQ5_0Rows16>) {
      return rows16_q5_quant(blk, r, i) - 16;
    } else if constexpr (std::is_same_v<Group, BlockMXFP4Rows16>) {
      return static_cast<int>(kMxfp4Values[rows16_nibble(blk, r, i)]);
    } else {
      return rows16_nibble(blk, r, i) - 8;
    }
  };
  for (std::size_t t = 0; t < n_tokens; ++t) {
    const BlockQ8_0* xt = x + t * x_stride;
    for (std::size_t r = 0; r < std::min(n_rows, kRows16); ++r) {
      float acc = 0.0f;
      for (std::size_t b = 0; b < nblocks; ++b) {
        std::int32_t isum = 0;
        for (std::size_t i = 0; i < 32; ++i) isum += level(w[b], r, i) * xt[b].qs[i];
        const float v = static_cast<float>(isum) * rows16_row_scale(w[b], r);
        acc = std::fma(v, f16_to_f32(xt[b].d), acc);
      }
      y[t * y_stride + r] = acc;
    }
  }
}
inline constexpr auto rows16_q8_0_reference = rows16_no_min_reference<BlockQ8_0Rows16>;
inline constexpr auto rows16_q4_0_reference = rows16_no_min_reference<BlockQ4_0Rows16>;
inline constexpr auto rows16_iq4nl_reference = rows16_no_min_reference<BlockIQ4NLRows16>;
inline constexpr auto rows16_q5_0_reference = rows16_no_min_reference<BlockQ5_0Rows16>;
inline constexpr auto rows16_mxfp4_reference = rows16_no_min_reference<BlockMXFP4Rows16>;

// IQ4_XS: each 32-value sub-block's integer sum times its scale s_j - 32, summed in
// integers over the super-block (|sum| <= 8 x 32 x 32 x 127 x 127 < 2^31), then floats
// once per super-block: the sum times the row's d, one fma by the Q8_K token's d. The
// AMX prefill's order on the same copy (amx_matrix_with_offset<.., 0> on two byte
// planes of (s_j - 32) x level), so a token decoded has the bits a prefill gives it.
inline void rows16_iq4xs_reference(const BlockIQ4XSRows16* w, std::size_t nblocks,
                                   std::size_t n_rows, const BlockQ8K* x, std::size_t x_stride,
                                   std::size_t n_tokens, const Rows16TokenTerms<8>* /*terms*/,
                                   float* y, std::size_t y_stride) noexcept {
  for (std::size_t t = 0; t < n_tokens; ++t) {
    const BlockQ8K* xt = x + t * x_stride;
    for (std::size_t r = 0; r < std::min(n_rows, kRows16); ++r) {
      float acc = 0.0f;
      for (std::size_t b = 0; b < nblocks; ++b) {
        std::int32_t block_sum = 0;
        for (std::size_t j = 0; j < 8; ++j) {
          std::int32_t isum = 0;
          for (std::size_t i = 0; i < 32; ++i) {
            isum += kIq4nlValues[rows16_iq4xs_nibble(w[b], j, r, i)] * xt[b].qs[32 * j + i];
          }
          block_sum += w[b].scales[j][r] * isum;
        }
        acc = std::fma(static_cast<float>(block_sum) * f16_to_f32(w[b].d[r]), xt[b].d, acc);
      }
      y[t * y_stride + r] = acc;
    }
  }
}

// The sixteen-row layout of a block type, or void where there is none: the one place
// that says which types have the copy. A new one is a group struct above, its repack
// (repack_rows16 below) and its row here.
template <class Block>
struct Rows16Of : std::type_identity<void> {};
template <>
struct Rows16Of<BlockQ4_1> : std::type_identity<BlockQ4_1Rows16> {};
template <>
struct Rows16Of<BlockQ8_0> : std::type_identity<BlockQ8_0Rows16> {};
template <>
struct Rows16Of<BlockQ4_0> : std::type_identity<BlockQ4_0Rows16> {};
template <>
struct Rows16Of<BlockIQ4NL> : std::type_identity<BlockIQ4NLRows16> {};
template <>
struct Rows16Of<BlockIQ4XS> : std::type_identity<BlockIQ4XSRows16> {};
template <>
struct Rows16Of<BlockQ5_0> : std::type_identity<BlockQ5_0Rows16> {};
template <>
struct Rows16Of<BlockQ5_1> : std::type_identity<BlockQ5_1Rows16> {};
template <>
struct Rows16Of<BlockMXFP4> : std::type_identity<BlockMXFP4Rows16> {};

// Interleaves `n_rows` rows of `nblocks` blocks into their sixteen-row groups.
template <class Block>
inline void repack_rows16(const std::byte* first_row, std::size_t row_bytes, std::size_t n_rows,
                          std::size_t nblocks, typename Rows16Of<Block>::type* out) noexcept {
  if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    repack_q8_0_rows16(first_row, row_bytes, n_rows, nblocks, out);
  } else if constexpr (std::is_same_v<Block, BlockIQ4XS>) {
    repack_iq4xs_rows16(first_row, row_bytes, n_rows, nblocks, out);
  } else {
    repack_nibble_rows16<Block>(first_row, row_bytes, n_rows, nblocks, out);
  }
}

}  // namespace smol
