// 256-bit integer dot products for x86: the AVX2 kernels, reused by the AVX-512 sets
// for the small block types (a Q8_0 block is exactly one ymm).
//
// Hand-written intrinsics because the work is u8 x s8 multiply-adds (vpmaddubsw,
// vpdpbusd/vpdpwssd), which xsimd 8.1 does not offer. Each function is a template on
// the arch tag: the VNNI instantiation fuses madd+add into one vpdpwssd/vpdpbusd.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/float_kernels.hpp"
#include "smol/simd/kernels.hpp"

namespace smol::simd {

template <class Arch>
requires(!std::is_same_v<Arch, scalar_arch>) struct HalfLoads<Arch> {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  static batch f16(const f16_bits* p) noexcept {
    if constexpr (batch::size == 16) {
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    }
  }
  static batch bf16(const bf16_bits* p) noexcept {
    if constexpr (batch::size == 16) {
      const __m512i wide =
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
    } else {
      const __m256i wide =
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
  }
  static float f16_one(f16_bits h) noexcept { return _cvtsh_ss(h); }
};

template <class Arch>
requires(!std::is_same_v<Arch, scalar_arch>) struct BlockLoads<Arch> {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  // 16 signed bytes as floats times d: one zmm, or two ymm.
  static void widen16(__m128i q, float d, batch* out) noexcept {
    if constexpr (batch::size == 16) {
      out[0] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(d));
    } else {
      const __m256 vd = _mm256_set1_ps(d);
      out[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), vd);
      out[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), vd);
    }
  }
  static void q8_0(const BlockQ8_0& b, batch* out) noexcept {
    const float d = _cvtsh_ss(b.d);
    widen16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)), d, out);
    widen16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)), d,
            out + 16 / batch::size);
  }
  // Values 0-15 are the low nibbles of the 16 bytes, 16-31 the high ones, each minus 8.
  static void q4_0(const BlockQ4_0& b, batch* out) noexcept {
    const float d = _cvtsh_ss(b.d);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i nibble = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    widen16(_mm_sub_epi8(_mm_and_si128(packed, nibble), eight), d, out);
    widen16(_mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(packed, 4), nibble), eight), d,
            out + 16 / batch::size);
  }
};

namespace x86 {

template <class Arch>
inline float hsum(__m256 v) noexcept {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The sum of the eight int32 lanes (exact: the callers' sums stay far below 2^31).
template <class Arch>
inline std::int32_t hsum_epi32(__m256i v) noexcept {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// The leading two f16 fields of four consecutive blocks as floats: d, and the block's m
// or s where it has one (otherwise whatever two bytes follow d, left unused). Four 32-bit
// loads and one conversion, then two shuffles part the halves: converting each scale on
// its own (a 16-bit insert and a conversion) took a large share of a Q4_1 decode where
// 256-bit operations run as two halves (bench/HISTORY.md, "AVX2 only: AMD Zen 1 VM").
struct LeadingHalves4 {
  __m128 first, second;
};
template <class Arch, class Block>
inline LeadingHalves4 leading_halves4(const Block* blocks) noexcept {
  static_assert(offsetof(Block, d) == 0 && sizeof(Block) >= 4);
  std::int32_t w[4];
  for (std::size_t i = 0; i < 4; ++i) std::memcpy(&w[i], &blocks[i], sizeof(w[i]));
  const __m256 f = _mm256_cvtph_ps(_mm_setr_epi32(w[0], w[1], w[2], w[3]));
  const __m128 lo = _mm256_castps256_ps128(f), hi = _mm256_extractf128_ps(f, 1);
  return {_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)),
          _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))};
}

// How far ahead of the bytes a decode kernel reads it asks for the next ones: the
// hardware prefetcher alone falls behind a weight stream (without the requests the
// 32-value types' dots wait on their loads), and 8 to 16 KB ahead reads faster than 4 KB.
// Into L2 there, then into L1 kPrefetchNearBytes ahead: one step 8 KB ahead into L1 alone
// holds the core's line-fill buffers long before their bytes are due, and the two steps
// bring decode much nearer its roofline (the exact near and far distances matter little).
// bench/HISTORY.md measures it ("decode asks for its weights in two steps").
inline constexpr std::size_t kPrefetchAheadBytes = 8192;
inline constexpr std::size_t kPrefetchNearBytes = 1024;

// Asks for the `bytes` that lie kPrefetchAheadBytes past `p` into L2, and those
// kPrefetchNearBytes past it into L1 (a prefetch never faults, so past the end of a matrix
// is harmless).
template <class Arch>
inline void prefetch_ahead(const void* p, std::size_t bytes) noexcept {
  const char* far = static_cast<const char*>(p) + kPrefetchAheadBytes;
  const char* near = static_cast<const char*>(p) + kPrefetchNearBytes;
  for (std::size_t off = 0; off < bytes; off += 64) {
    _mm_prefetch(far + off, _MM_HINT_T1);
    _mm_prefetch(near + off, _MM_HINT_T0);
  }
}

// How a decode dot on the file's rows asks for its weights where it streams them itself
// (WeightKernels::dot_streams): each block's lines, kStreamAheadBytes ahead and into L2,
// as the dot reaches the block, and again kStreamNearBytes ahead into L1. matvec's
// alternative, a whole row's lines asked for at once before the row's dot, takes every
// line-fill buffer of the core together, and the dot's own loads then wait behind them;
// block by block keeps the stream nearer its roofline. Distances of 2 to 16 KB read alike;
// T0 instead of T1 was slower. The L1 step from L2 adds a little (2 KB ahead alike, the L2
// step 8 KB ahead no better). bench/HISTORY.md measures both ("Decode kernels that stream
// their own weights", "decode asks for its weights in two steps").
// Through an integer address: past a matrix's end that block lies outside it, and a
// prefetch there does not fault, but forming the pointer would be UB.
inline constexpr std::size_t kStreamAheadBytes = 4096;
inline constexpr std::size_t kStreamNearBytes = 1024;

template <class Arch, class Block>
inline void stream_blocks_ahead(const Block* first, std::size_t count) noexcept {
  const auto at = reinterpret_cast<std::uintptr_t>(first);
  for (std::uintptr_t line = 0; line < count * sizeof(Block); line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(at + kStreamAheadBytes + line), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(at + kStreamNearBytes + line), _MM_HINT_T0);
  }
}

template <class Arch, class Block>
inline void stream_block_ahead(const Block* block) noexcept {
  stream_blocks_ahead<Arch>(block, 1);
}

// Blocks per segment of a row of a 32-value type: the 256-bit prefill tiles
// (x86_avx2_blocks32.hpp) pack a token's activations this many blocks at a time, and
// scaled_block_sums sums in the same segments.
inline constexpr std::size_t kBlocks32Segment = 32;  // a multiple of 8

// c + a * b, rounded once (the min terms past a segment's last whole eight blocks):
// written out, so that no compiler's choice to contract a * b + c or not parts the dot
// from the tiles.
inline float fmadd_ss(float a, float b, float c) noexcept {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

// The largest |level| a 32-value type's weight block puts on vpmaddubsw's unsigned side
// (Q4_0 and Q5_0 through the sign trick of dot_s8s8: |q - 8|, |q - 16|).
template <class Block>
inline constexpr int kBlocks32MaxLevel = 127;
template <>
inline constexpr int kBlocks32MaxLevel<BlockQ4_0> = 8;
template <>
inline constexpr int kBlocks32MaxLevel<BlockQ4_1> = 15;
template <>
inline constexpr int kBlocks32MaxLevel<BlockQ5_0> = 16;
template <>
inline constexpr int kBlocks32MaxLevel<BlockQ5_1> = 31;

// Whether four blocks' products are summed in int16 before they are widened (Q4_0, Q4_1,
// Q5_0, Q5_1; not Q8_0). Where vpmaddubsw and vpmaddwd both issue on one pipe (AMD Zen 1),
// widening each block's sums (vpmaddwd), converting them and scaling them is about half of
// a block's work; four blocks whose levels are at most 32 can share one of each, since four
// of vpmaddubsw's int16 pairs then stay below 2^15 (4 * 2 * 32 * 127 = 32512). Each
// block keeps an int32 lane of its own per 128-bit half (block 4k + j in lanes j and
// 4 + j), so every block is still scaled by its own d; bench/README.md measures the
// prefill gain ("Four blocks per widening (AVX2)"). With VNNI one vpdpbusd does the whole
// block.
template <class Arch, class Block>
inline constexpr bool kBlocks32Fours = !has_vnni_v<Arch> && kBlocks32MaxLevel<Block> <= 32;

// Transposes the 32-bit words of four vectors within each 128-bit half: word j of v[k]
// becomes word k of v[j]. Applied to four blocks, v[k] then holds the k-th word (four
// values) of each block, block j in word j.
inline void transpose_words4(__m256i v[4]) noexcept {
  const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpacklo_epi32(v[2], v[3]);
  const __m256i t2 = _mm256_unpackhi_epi32(v[0], v[1]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
  v[0] = _mm256_unpacklo_epi64(t0, t1);
  v[1] = _mm256_unpackhi_epi64(t0, t1);
  v[2] = _mm256_unpacklo_epi64(t2, t3);
  v[3] = _mm256_unpackhi_epi64(t2, t3);
}

// Four blocks' vpmaddubsw pairs (p[j] for block j) summed per block and half: int32 lane
// j = block j's first sixteen values, lane 4 + j its last sixteen. The decode dot's way;
// the tiles get the same sums from blocks transposed once per tile (transpose_words4).
template <class Arch>
inline __m256i four_block_sums(const __m256i p[4]) noexcept {
  const __m256i a =
      _mm256_add_epi16(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
  const __m256i b =
      _mm256_add_epi16(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
  return _mm256_madd_epi16(
      _mm256_add_epi16(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b)),
      _mm256_set1_epi16(1));
}

// sum_b d_x d_y sum(b), plus m_x s_y where the weight block has a min (Q4_1, Q5_1 with
// Q8_1): the dot of the 32-value types given each block's vpmaddubsw int16 pairs
// (`products(b)`). The float order is a token's in the 256-bit tiles
// (x86_avx2_blocks32.hpp), bit for bit, so that decode gives a token what a prefill or a
// speculative verification pass gives it (WeightKernels::dot_rounds_like_tile_dots): per
// segment of kBlocks32Segment blocks, one vector accumulates the scaled sums (four blocks
// at a time where kBlocks32Fours, each block in lanes of its own; otherwise and past the
// last whole four, block after block, in eight lanes of partial sums) and another the min
// terms of whole groups of eight blocks (block 8k + j in lane j); the horizontal sum of
// the two, plus the min terms of the last few blocks one by one, is added to the total.
// The scales are converted four blocks at a time (leading_halves4). One accumulator for
// the sums costs nothing measurable: the FMA chain hides under the blocks' loads and
// integer work, and two (even and odd blocks) decoded no faster (bench/HISTORY.md, "AVX2:
// decode dots in the tiles' order").
template <class Arch, class X, class Y, class BlockProducts>
inline float scaled_block_sums(const X* x, const Y* y, std::size_t nblocks,
                               BlockProducts products) noexcept {
  static_assert(!has_vnni_v<Arch>, "the 256-bit set without VNNI: vpmaddubsw's pairs");
  constexpr bool kMins = requires(const X& xb) {
    xb.m;
  };
  const auto widened = [&](std::size_t b) {
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(products(b), _mm256_set1_epi16(1)));
  };
  float total = 0.0f;
  for (std::size_t b0 = 0; b0 < nblocks; b0 += kBlocks32Segment) {
    const std::size_t end = std::min(nblocks, b0 + kBlocks32Segment);
    const std::size_t whole = b0 + (end - b0) / 8 * 8;  // the min terms' vector part
    __m256 acc = _mm256_setzero_ps();
    __m128 mins[2] = {_mm_setzero_ps(), _mm_setzero_ps()};  // lanes 0-3 and 4-7 of eight
    float tail = 0.0f;
    std::size_t b = b0;
    for (; b + 4 <= end; b += 4) {
      prefetch_ahead<Arch>(x + b, 4 * sizeof(X));
      const LeadingHalves4 xs = leading_halves4<Arch>(x + b), ys = leading_halves4<Arch>(y + b);
      const __m128 dd4 = _mm_mul_ps(xs.first, ys.first);
      if constexpr (kMins) {
        if (b < whole) {
          mins[(b - b0) / 4 % 2] = _mm_fmadd_ps(xs.second, ys.second, mins[(b - b0) / 4 % 2]);
        } else {
          for (std::size_t i = 0; i < 4; ++i) {
            tail = fmadd_ss(_cvtsh_ss(x[b + i].m), _cvtsh_ss(y[b + i].s), tail);
          }
        }
      }
      if constexpr (kBlocks32Fours<Arch, X>) {
        const __m256i p[4] = {products(b), products(b + 1), products(b + 2), products(b + 3)};
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(four_block_sums<Arch>(p)),
                              _mm256_set_m128(dd4, dd4), acc);
      } else {
        alignas(16) float dd[4];
        _mm_store_ps(dd, dd4);
        for (std::size_t i = 0; i < 4; ++i) {
          acc = _mm256_fmadd_ps(widened(b + i), _mm256_set1_ps(dd[i]), acc);
        }
      }
    }
    for (; b < end; ++b) {
      acc = _mm256_fmadd_ps(widened(b), _mm256_set1_ps(_cvtsh_ss(x[b].d) * _cvtsh_ss(y[b].d)), acc);
      if constexpr (kMins) tail = fmadd_ss(_cvtsh_ss(x[b].m), _cvtsh_ss(y[b].s), tail);
    }
    float segment;
    if constexpr (kMins) {
      segment = hsum<Arch>(_mm256_add_ps(acc, _mm256_set_m128(mins[1], mins[0]))) + tail;
    } else {
      segment = hsum<Arch>(acc);
    }
    total = b0 == 0 ? segment : total + segment;
  }
  return total;
}

// acc + sum of adjacent int16 pairs of a*b, in int32 lanes.
template <class Arch>
inline __m256i madd16_acc(__m256i acc, __m256i a, __m256i b) noexcept {
  if constexpr (has_vnni_v<Arch>) {
    return _mm256_dpwssd_epi32(acc, a, b);
  } else {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
  }
}

// Sum of groups of 4 products of unsigned bytes `u` (at most 128) and signed bytes `s`
// (|s| <= 127, so vpmaddubsw's int16 pairs cannot saturate: 2 * 128 * 127 < 2^15), in
// int32 lanes.
template <class Arch>
inline __m256i dot_u8s8(__m256i u, __m256i s) noexcept {
  if constexpr (has_vnni_v<Arch>) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
}

// Sum of groups of 4 products of signed bytes, in int32 lanes. u8 x s8 instructions
// need an unsigned side, so |a| times b with a's sign (inputs in -127..127).
template <class Arch>
inline __m256i dot_s8s8(__m256i a, __m256i b) noexcept {
  return dot_u8s8<Arch>(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

// vpmaddubsw's int16 pairs of signed bytes, as dot_s8s8 takes them: |a| times b with a's
// sign.
template <class Arch>
inline __m256i products_s8s8(__m256i a, __m256i b) noexcept {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

template <class Arch>
inline __m256i load256(const void* p) noexcept {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// A Q8_0 or Q4_0 block's 32 quantized values as signed bytes (Q4_0: values 0-15 are the
// low nibbles, 16-31 the high ones, each minus 8).
template <class Arch>
inline __m256i block_quants(const BlockQ8_0& block) noexcept {
  return load256<Arch>(block.qs);
}
template <class Arch>
inline __m256i block_quants(const BlockQ4_0& block) noexcept {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
}
// The same as a function object, for the kernels that take a block's levels.
template <class Arch>
struct BlockQuants {
  template <class Block>
  __m256i operator()(const Block& block) const noexcept {
    return block_quants<Arch>(block);
  }
};

// Q4_K's 12 packed scale bytes as 16: scales 0-7 in bytes 0-7, mins 0-7 in bytes 8-15
// (unpack_q4k_scales, four bytes per 32-bit lane). With u0, u1, u2 the packed words:
// [u0 & 0x3f.., (u2 & 0x0f..) | (u0 >> 2 & 0x30..), u1 & 0x3f.., (u2 >> 4 & 0x0f..) |
// (u1 >> 2 & 0x30..)]. Vector code, since moving four scalars into a vector costs more
// than the arithmetic. The 16-byte load ends inside qs, which follows the scales.
// Q5_K packs its scales the same way, so any such block is accepted.
template <class Arch, class Block>
inline __m128i q4k_scales_and_mins(const Block& block) noexcept {
  static_assert(offsetof(Block, scales) + 16 <= sizeof(Block));
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales));
  const __m128i u0u0u1u1 = _mm_shuffle_epi32(packed, _MM_SHUFFLE(1, 1, 0, 0));
  const __m128i u2 = _mm_shuffle_epi32(packed, _MM_SHUFFLE(2, 2, 2, 2));
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(u0u0u1u1, _mm_setr_epi32(0, 2, 0, 2)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x30303030, 0x3f3f3f3f, 0x30303030));
  const __m128i high = _mm_and_si128(_mm_srlv_epi32(u2, _mm_setr_epi32(0, 0, 0, 4)),
                                     _mm_setr_epi32(0, 0x0f0f0f0f, 0, 0x0f0f0f0f));
  return _mm_or_si128(low, high);
}

// Picks int16 element `lo` into every slot of the low 128-bit lane and `hi` into the high
// one, as a vpshufb control (both lanes must hold the same 8 int16 values).
inline constexpr std::int8_t kPickWord[8][2] = {{0, 1}, {2, 3},   {4, 5},   {6, 7},
                                                {8, 9}, {10, 11}, {12, 13}, {14, 15}};
template <class Arch>
inline __m256i pick_words(int lo, int hi) noexcept {
  const __m128i l = _mm_set1_epi16(static_cast<short>(kPickWord[lo][0] | (kPickWord[lo][1] << 8)));
  const __m128i h = _mm_set1_epi16(static_cast<short>(kPickWord[hi][0] | (kPickWord[hi][1] << 8)));
  return _mm256_set_m128i(h, l);
}

template <class Arch>
float dot_q4k_q8k(const BlockQ4K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  // Each min twice: once per bsum (group of 16) of its sub-block.
  const __m128i mins_per_group =
      _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  __m256i pick[8];
  for (int j = 0; j < 8; ++j) pick[j] = pick_words<Arch>(j, j);
  __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const float yd = y[b].d;
    const __m128i packed = q4k_scales_and_mins<Arch>(x[b]);
    // The 8 scales as int16, the same in both 128-bit lanes (for pick_words).
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(packed));
    const __m256i min_products = _mm256_madd_epi16(
        _mm256_cvtepu8_epi16(_mm_shuffle_epi8(packed, mins_per_group)), load256<Arch>(y[b].bsums));
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_products),
                              _mm256_set1_ps(_cvtsh_ss(x[b].dmin) * yd), acc_min);
    __m256i sumi = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256<Arch>(x[b].qs + 32 * c);
      const __m256i lo = _mm256_and_si256(q, nibble);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble);
      const __m256i p_lo = _mm256_maddubs_epi16(lo, load256<Arch>(y[b].qs + 64 * c));
      const __m256i p_hi = _mm256_maddubs_epi16(hi, load256<Arch>(y[b].qs + 64 * c + 32));
      sumi = madd16_acc<Arch>(sumi, p_lo, _mm256_shuffle_epi8(sc16, pick[2 * c]));
      sumi = madd16_acc<Arch>(sumi, p_hi, _mm256_shuffle_epi8(sc16, pick[2 * c + 1]));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(_cvtsh_ss(x[b].d) * yd), acc);
  }
  return hsum<Arch>(acc) - hsum<Arch>(acc_min);
}

template <class Arch>
float dot_q6k_q8k(const BlockQ6K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i m03 = _mm256_set1_epi8(0x03), m0c = _mm256_set1_epi8(0x0C);
  const __m256i m30 = _mm256_set1_epi8(0x30), mc0 = _mm256_set1_epi8(static_cast<char>(0xC0));
  __m256i pick[4];
  for (int k = 0; k < 4; ++k) pick[k] = pick_words<Arch>(2 * k, 2 * k + 1);
  __m256 acc = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales));
    // The -32 offset: 32 * sum_g scale_g * bsum_g, subtracted in integers.
    const __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), load256<Arch>(y[b].bsums));
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i sc16 =
          _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h == 0 ? sc8 : _mm_srli_si128(sc8, 8)));
      const __m256i ql0 = load256<Arch>(x[b].ql + 64 * h);
      const __m256i ql1 = load256<Arch>(x[b].ql + 64 * h + 32);
      const __m256i qh = load256<Arch>(x[b].qh + 32 * h);
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, nibble),
                          _mm256_slli_epi16(_mm256_and_si256(qh, m03), 4)),
          _mm256_or_si256(_mm256_and_si256(ql1, nibble),
                          _mm256_slli_epi16(_mm256_and_si256(qh, m0c), 2)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), nibble),
                          _mm256_and_si256(qh, m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), nibble),
                          _mm256_srli_epi16(_mm256_and_si256(qh, mc0), 2)),
      };
      for (int k = 0; k < 4; ++k) {
        const __m256i p = _mm256_maddubs_epi16(q[k], load256<Arch>(y[b].qs + 128 * h + 32 * k));
        sumi = madd16_acc<Arch>(sumi, p, _mm256_shuffle_epi8(sc16, pick[k]));
      }
    }
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offset, 5));
    acc =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(_cvtsh_ss(x[b].d) * y[b].d), acc);
  }
  return hsum<Arch>(acc);
}

template <class Arch>
float dot_q8_0_q8_0(const BlockQ8_0* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  return scaled_block_sums<Arch>(x, y, nblocks, [&](std::size_t b) {
    return products_s8s8<Arch>(load256<Arch>(x[b].qs), load256<Arch>(y[b].qs));
  });
}

template <class Arch>
float dot_q4_0_q8_0(const BlockQ4_0* x, const BlockQ8_0* y, std::size_t nblocks) noexcept {
  return scaled_block_sums<Arch>(x, y, nblocks, [&](std::size_t b) {
    return products_s8s8<Arch>(block_quants<Arch>(x[b]), load256<Arch>(y[b].qs));
  });
}

// Q8_0 / Q8_1 activation quantizers, bit for bit the scalar ones (scalar::quantize_row_q8_0,
// quant/legacy_blocks.hpp's quantize_row_q8_1): the same max |x|, d = amax / 127 and
// id = 1 / d in scalar floats, q = x * id rounded half away from zero (trunc, then one
// more step where the exact fraction is at least 0.5), s = f16(d * sum q). The f16s by
// F16C (vcvtss2sh, to nearest even, as f32_to_f16; written out, a conversion cost as much
// as the rest of a block).
template <class Arch>
inline __m256i quantize_block_q8(const float* x, float& d_out) noexcept {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float d = _mm_cvtss_f32(m4) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  d_out = d;
  const __m256 idv = _mm256_set1_ps(id), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  __m256i q[4];
  for (int i = 0; i < 4; ++i) {
    const __m256 p = _mm256_mul_ps(v[i], idv);
    const __m256 t = _mm256_round_ps(p, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(p, t));
    const __m256 step = _mm256_or_ps(_mm256_and_ps(sign, p), one);  // +-1 with p's sign
    const __m256 r = _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, half, _CMP_GE_OQ), step));
    q[i] = _mm256_cvtps_epi32(r);
  }
  const __m256i lo = _mm256_packs_epi32(q[0], q[1]), hi = _mm256_packs_epi32(q[2], q[3]);
  const __m256i bytes = _mm256_packs_epi16(lo, hi);
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// f32 to f16, to nearest even, as ggml's GGML_FP32_TO_FP16 on F16C. Not _cvtss_sh: clang
// 14's macro for it builds a C compound literal, an error in C++ under -Wpedantic -Werror.
template <class Arch>
inline f16_bits to_f16(float value) noexcept {
  return static_cast<f16_bits>(
      _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(value), _MM_FROUND_TO_NEAREST_INT), 0));
}

template <class Arch>
void quantize_row_q8_0(const float* x, BlockQ8_0* out, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n / 32; ++b) {
    float d;
    const __m256i q = quantize_block_q8<Arch>(x + 32 * b, d);
    out[b].d = to_f16<Arch>(d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), q);
  }
}

template <class Arch>
void quantize_row_q8_1(const float* x, BlockQ8_1* out, std::size_t n) noexcept {
  for (std::size_t b = 0; b < n / 32; ++b) {
    float d;
    const __m256i q = quantize_block_q8<Arch>(x + 32 * b, d);
    out[b].d = to_f16<Arch>(d);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), q);
    const __m256i sums =
        _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
    out[b].s = to_f16<Arch>(static_cast<float>(_mm_cvtsi128_si32(s4)) * d);
  }
}

}  // namespace x86

}  // namespace smol::simd

#endif  // SMOL_X86
