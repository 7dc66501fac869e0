// AVX2 kernels on eight interleaved Q4_K, Q5_K, Q6_K, Q2_K or Q3_K rows (quant/rows8.hpp)
// times up to kRows8Tokens Q8_K tokens at a time: the decode matvec (one token) and prefill.
//
// Lane r of every vector is row r. Per 4-byte group of a chunk, one load serves eight
// rows; the token's matching 4 activation bytes are broadcast to all lanes. vpmaddubsw
// products are summed in int16 as far as they cannot overflow (Q4_K: the eight of a
// sub-block, 8 x 2 x 15 x 128 < 2^15; Q5_K: half of one, 4 x 2 x 31 x 128 < 2^15; Q6_K:
// pairs, 2 x 2 x 63 x 128 < 2^15) before one
// vpmaddwd with the rows' scales, so the integers stay exact until one float multiply
// per super-block, and the eight row results leave as one vector.
// Intrinsics, because xsimd 8.1 has no u8 x s8 dot.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/quant/blocks.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/simd/x86_avx2.hpp"

namespace smol::simd::x86 {

// Tokens per pass: four int16 pairs of accumulators fill 8 of the 16 ymm registers
// (the int32 sums spill, but they are touched once per 64 values).
inline constexpr std::size_t kRows8Tokens = 4;
inline constexpr std::size_t kRows8TokensQ6K = 4;

template <class Arch>
inline __m256i broadcast4(const std::int8_t* p) noexcept {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// int16 pairs (s[2c], s[2c + 1]) of the token's sub-block sums, one per chunk c, each in
// every lane: the activation side of the Q4_K min term.
template <class Arch>
inline void sub_block_sum_pairs(const BlockQ8K& x, __m256i pairs[4]) noexcept {
  const __m256i sums = _mm256_madd_epi16(load256<Arch>(x.bsums), _mm256_set1_epi16(1));
  // 128-bit halves: [s0 s1 s2 s3 s0 s1 s2 s3 | s4 s5 s6 s7 s4 s5 s6 s7] as int16.
  const __m256i packed = _mm256_packs_epi32(sums, sums);
  pairs[0] = _mm256_permutevar8x32_epi32(packed, _mm256_set1_epi32(0));
  pairs[1] = _mm256_permutevar8x32_epi32(packed, _mm256_set1_epi32(1));
  pairs[2] = _mm256_permutevar8x32_epi32(packed, _mm256_set1_epi32(4));
  pairs[3] = _mm256_permutevar8x32_epi32(packed, _mm256_set1_epi32(5));
}

// A vpshufb control making lane r (r = 0..7) of a row of 16 bytes broadcast to both
// 128-bit halves into two words: bytes `first` + r and `second` + r, zero-extended, or
// placed in the words' high bytes (for an arithmetic shift to sign-extend them).
template <class Arch>
inline __m256i word_picker(int first, int second, bool into_high_byte) noexcept {
  alignas(32) std::int8_t control[32];
  for (int r = 0; r < 8; ++r) {  // each half indexes its own copy of the 16 bytes
    const int high = into_high_byte ? 1 : 0;
    control[4 * r + 1 - high] = -1;
    control[4 * r + high] = static_cast<std::int8_t>(first + r);
    control[4 * r + 3 - high] = -1;
    control[4 * r + 2 + high] = static_cast<std::int8_t>(second + r);
  }
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(control));
}

// An empty asm that claims to rewrite `sum`: GCC otherwise reassociates a chain of
// integer adds into a tree, computing every product first and spilling them to the
// stack (with two tokens, 65 stack accesses per super-block). Pinning the running sum
// keeps one register per accumulator, and Q4_K prefill runs markedly faster. Decode (one
// token) is left to the compiler, whose early loads read a little faster there
// (bench/HISTORY.md, "Figures moved from code comments").
// (The register type is a template parameter so that clang checks the 256-bit operand
// only where it is instantiated, under AVX2 flags; checked at definition, it refused to
// compile any translation unit without them.)
template <class Arch, class Register>
inline void accumulate_in_place(Register& sum) noexcept {
  asm("" : "+x"(sum));
}

// Q4_K and Q5_K (Rows8 = BlockQ4KRows8 or BlockQ5KRows8). Q5_K's fifth bits come from
// qh, whose bytes lie as qs's do: bit 2c tops chunk c's low nibbles, 2c + 1 its high ones.
template <class Arch, std::size_t T, class Rows8>
void rows8_with_mins_tile_256(const Rows8* w, std::size_t nblocks, const BlockQ8K* x,
                              std::size_t x_stride, float* y, std::size_t y_stride) noexcept {
  constexpr bool kFifthBit = std::is_same_v<Rows8, BlockQ5KRows8>;
  constexpr int kGroupsPerMadd = kFifthBit ? 4 : 8;
  const __m256i nibble = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  // scale_lo: both words of lane r = byte r (sub-block 2c), scale_hi: byte 8 + r (2c + 1);
  // min_pair: (byte r, byte 8 + r), matching sub_block_sum_pairs.
  const __m256i scale_lo = word_picker<Arch>(0, 0, false);
  const __m256i scale_hi = word_picker<Arch>(8, 8, false);
  const __m256i min_pair = word_picker<Arch>(0, 8, false);
  __m256 acc[T];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const Rows8& wb = w[b];
    // Ask for the bytes 8 KB ahead (they may lie in the next group, which is
    // contiguous), as the hardware prefetcher alone falls behind (8 to 16 KB ahead reads
    // faster than 4 KB). Unlike AVX-512, every pass asks, streamed or not: from L2 into
    // L1 it still pays, a little (bench/HISTORY.md, "Figures moved from code comments").
    prefetch_ahead<Arch>(&wb, sizeof wb);
    __m256i isum[T], msum[T];
    for (std::size_t t = 0; t < T; ++t) isum[t] = msum[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i scales = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.scales[2 * c])));
      const __m256i s_lo = _mm256_shuffle_epi8(scales, scale_lo);
      const __m256i s_hi = _mm256_shuffle_epi8(scales, scale_hi);
      for (int g0 = 0; g0 < 8; g0 += kGroupsPerMadd) {
        __m256i lo16[T], hi16[T];
        for (std::size_t t = 0; t < T; ++t) lo16[t] = hi16[t] = _mm256_setzero_si256();
        for (int g = g0; g < g0 + kGroupsPerMadd; ++g) {
          const __m256i q = load256<Arch>(wb.qs[c][g]);
          __m256i lo = _mm256_and_si256(q, nibble);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble);
          if constexpr (kFifthBit) {
            // Bits 2c and 2c + 1 of each byte down to bits 0 and 1 (a 16-bit shift: the
            // high byte's bits that enter the low byte's top are masked off below).
            const __m256i bits =
                _mm256_srl_epi16(load256<Arch>(wb.qh[g]), _mm_cvtsi32_si128(2 * c));
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(bits, 4), bit4));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(bits, 3), bit4));
          }
          for (std::size_t t = 0; t < T; ++t) {
            const std::int8_t* xq = x[t * x_stride + b].qs + 64 * c + 4 * g;
            lo16[t] = _mm256_add_epi16(lo16[t], _mm256_maddubs_epi16(lo, broadcast4<Arch>(xq)));
            hi16[t] =
                _mm256_add_epi16(hi16[t], _mm256_maddubs_epi16(hi, broadcast4<Arch>(xq + 32)));
            if constexpr (T > 1) {
              accumulate_in_place<Arch>(lo16[t]);
              accumulate_in_place<Arch>(hi16[t]);
            }
          }
        }
        for (std::size_t t = 0; t < T; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(lo16[t], s_lo),
                                                               _mm256_madd_epi16(hi16[t], s_hi)));
        }
      }
    }
    for (std::size_t t = 0; t < T; ++t) {
      __m256i pairs[4];
      sub_block_sum_pairs<Arch>(x[t * x_stride + b], pairs);
      for (int c = 0; c < 4; ++c) {
        const __m256i mins = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.mins[2 * c])));
        msum[t] = _mm256_add_epi32(
            msum[t], _mm256_madd_epi16(_mm256_shuffle_epi8(mins, min_pair), pairs[c]));
      }
    }
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d)));
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.dmin)));
    for (std::size_t t = 0; t < T; ++t) {
      const __m256 xd = _mm256_set1_ps(x[t * x_stride + b].d);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, xd), _mm256_cvtepi32_ps(msum[t]), acc[t]);
    }
  }
  for (std::size_t t = 0; t < T; ++t) _mm256_storeu_ps(y + t * y_stride, acc[t]);
}

template <class Arch>
inline __m256i signed_words(__m256i bytes16, __m256i control) noexcept {
  return _mm256_srai_epi16(_mm256_shuffle_epi8(bytes16, control), 8);
}

template <class Arch>
inline __m256i broadcast16(const void* p) noexcept {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p)));
}

// The 8 scale bytes of one group (one per row) as sign-extended words, both words of
// lane r holding row r's.
template <class Arch>
inline __m256i group_scales(const std::int8_t* scales, __m256i same_byte_twice) noexcept {
  std::int64_t bytes;
  std::memcpy(&bytes, scales, sizeof bytes);
  return signed_words<Arch>(_mm256_set1_epi64x(bytes), same_byte_twice);
}

template <class Arch, std::size_t T>
void rows8_q6k_tile_256(const BlockQ6KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                        std::size_t x_stride, float* y, std::size_t y_stride) noexcept {
  const __m256i low4 = _mm256_set1_epi8(0x0F), top2 = _mm256_set1_epi8(0x30);
  const __m256i same_byte_twice = word_picker<Arch>(0, 0, true);
  // From 16 scale bytes (groups G and G + 1 of 8 rows): (s[G], s[G + 1]) per lane.
  const __m256i group_pair = word_picker<Arch>(0, 8, true);
  __m256 acc[T];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const BlockQ6KRows8& wb = w[b];
    prefetch_ahead<Arch>(&wb, sizeof wb);
    __m256i isum[T];
    for (auto& s : isum) s = _mm256_setzero_si256();
    // Half h of the block: ql chunks 2h (s = 0) and 2h + 1 (s = 1) share qh bytes; the
    // four values of a byte position are (s, nibble n) = value 128h + 32s + 64n + l,
    // in group 8h + 2s + 4n + l / 16.
    for (int h = 0; h < 2; ++h) {
      for (int quarter = 0; quarter < 2; ++quarter) {  // g in [4 quarter, 4 quarter + 4)
        // Unrolled so that s is a constant in each copy: otherwise GCC branches on s
        // around every shift below, and decode from L2 runs markedly slower that way.
#pragma GCC unroll 2
        for (int s = 0; s < 2; ++s) {
          const std::int8_t* group = wb.scales[8 * h + 2 * s + quarter];
          const __m256i scale[2] = {group_scales<Arch>(group, same_byte_twice),
                                    group_scales<Arch>(group + 4 * kRowsPerGroup, same_byte_twice)};
          for (int g = 4 * quarter; g < 4 * quarter + 4; g += 2) {
            __m256i v[2][2];  // [n][g + k]
            for (int k = 0; k < 2; ++k) {
              const __m256i qh = load256<Arch>(wb.qh[h][g + k]);
              const __m256i ql = load256<Arch>(wb.ql[2 * h + s][g + k]);
              const __m256i lo_top = s == 0 ? _mm256_slli_epi16(qh, 4) : _mm256_slli_epi16(qh, 2);
              const __m256i hi_top = s == 0 ? qh : _mm256_srli_epi16(qh, 2);
              v[0][k] = _mm256_or_si256(_mm256_and_si256(ql, low4), _mm256_and_si256(lo_top, top2));
              v[1][k] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), low4),
                                        _mm256_and_si256(hi_top, top2));
            }
            for (std::size_t t = 0; t < T; ++t) {
              const std::int8_t* xq = x[t * x_stride + b].qs + 128 * h + 32 * s + 4 * g;
              for (int n = 0; n < 2; ++n) {
                const std::int8_t* xv = xq + 64 * n;
                const __m256i pair =
                    _mm256_add_epi16(_mm256_maddubs_epi16(v[n][0], broadcast4<Arch>(xv)),
                                     _mm256_maddubs_epi16(v[n][1], broadcast4<Arch>(xv + 4)));
                isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pair, scale[n]));
              }
            }
          }
        }
      }
    }
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d)));
    for (std::size_t t = 0; t < T; ++t) {
      // The -32 offset of every quant: 32 * sum over groups of scale * bsum.
      const BlockQ8K& xb = x[t * x_stride + b];
      __m256i offset = _mm256_setzero_si256();
      for (int group = 0; group < 16; group += 2) {
        std::int32_t sums;
        std::memcpy(&sums, xb.bsums + group, sizeof sums);
        offset = _mm256_add_epi32(
            offset,
            _mm256_madd_epi16(signed_words<Arch>(broadcast16<Arch>(wb.scales[group]), group_pair),
                              _mm256_set1_epi32(sums)));
      }
      const __m256i sumi = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(offset, 5));
      acc[t] =
          _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(xb.d)), _mm256_cvtepi32_ps(sumi), acc[t]);
    }
  }
  for (std::size_t t = 0; t < T; ++t) _mm256_storeu_ps(y + t * y_stride, acc[t]);
}

// A vpshufb control giving 32-bit lane r of a Q2_K or Q3_K copy's scales[v] (32 bytes in
// the 512-bit kernels' lane order, which keeps rows 0-3 in the first 16 bytes and rows 4-7
// in the second, so an in-lane shuffle reaches them) two words: row r's bytes of sub-blocks
// 4 v + first and 4 v + second (first, second < 4), zero-extended, or in the words' high
// bytes for an arithmetic shift to sign-extend them.
template <class Arch>
inline __m256i sub_block_picker(int first, int second, bool into_high_byte) noexcept {
  alignas(32) std::int8_t control[32];
  const int high = into_high_byte ? 1 : 0;
  for (int r = 0; r < 8; ++r) {
    const int j[2] = {first, second};
    for (int k = 0; k < 2; ++k) {
      const Rows8SubBlockSlot s = rows8_sub_block_slot(r, j[k]);
      const int byte = static_cast<int>(2 * s.lane + s.e) - 16 * (r / 4);  // within the half
      control[4 * r + 2 * k + high] = static_cast<std::int8_t>(byte);
      control[4 * r + 2 * k + 1 - high] = -1;
    }
  }
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(control));
}

// The end of block `b` in rows8_two_bit_tile_256: the per-sub-block byte x bsum terms
// (Q2_K's mins, the high nibbles; Q3_K's scales, for its -4 offset) made once for the
// block, then each token's integer sums (isum) scaled into its accumulator.
template <class Arch, std::size_t T, class Rows8>
[[gnu::always_inline]] inline void finish_two_bit_block_256(const Rows8& wb, const BlockQ8K* x,
                                                            std::size_t x_stride, std::size_t b,
                                                            const __m256i* pair_pickers,
                                                            const __m256i* isum,
                                                            __m256* acc) noexcept {
  constexpr bool kThirdBit = std::is_same_v<Rows8, BlockQ3KRows8>;
  __m256i terms[8];  // [2 v + parity]: sub-blocks 4 v + 2 parity and + 1
  for (int v = 0; v < 4; ++v) {
    const __m256i bytes = load256<Arch>(wb.scales[v]);
    for (int parity = 0; parity < 2; ++parity) {
      const __m256i picked = _mm256_shuffle_epi8(bytes, pair_pickers[parity]);
      terms[2 * v + parity] =
          kThirdBit ? _mm256_srai_epi16(picked, 8) : _mm256_srli_epi16(picked, 4);
    }
  }
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.d)));
  [[maybe_unused]] __m256 dmin = _mm256_setzero_ps();
  if constexpr (!kThirdBit) {
    dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb.dmin)));
  }
  for (std::size_t t = 0; t < T; ++t) {
    const BlockQ8K& xb = x[t * x_stride + b];
    __m256i term_sums = _mm256_setzero_si256();
    for (int pair = 0; pair < 8; ++pair) {
      std::int32_t sums;
      std::memcpy(&sums, xb.bsums + 2 * pair, sizeof sums);
      term_sums =
          _mm256_add_epi32(term_sums, _mm256_madd_epi16(terms[pair], _mm256_set1_epi32(sums)));
    }
    const __m256 xd = _mm256_set1_ps(xb.d);
    if constexpr (kThirdBit) {
      const __m256i sumi = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(term_sums, 2));
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(sumi), acc[t]);
    } else {
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, xd), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, xd), _mm256_cvtepi32_ps(term_sums), acc[t]);
    }
  }
}

// Q2_K and Q3_K (Rows8 = BlockQ2KRows8 or BlockQ3KRows8), lane r = row r as above. A load
// of qs[h][g] holds four bytes of every row; at shift j they are values 128 h + 32 j + 4 g
// .. + 3, of sub-block 8 h + 2 j + g / 4. A sub-block's four vpmaddubsw add in int16 (Q3_K's
// levels q + 4 reach 7: 4 x 2 x 7 x 128 < 2^15), then one vpmaddwd with its scale in both
// words of every lane. The min term (Q2_K) and the -4 offset (Q3_K, whose level is q + 4,
// the hmask bit adding 4) are sums over sub-blocks of byte x bsum: word pairs of two
// sub-blocks against the token's bsum pairs, made once per block and read by every token.
template <class Arch, std::size_t T, class Rows8>
void rows8_two_bit_tile_256(const Rows8* w, std::size_t nblocks, const BlockQ8K* x,
                            std::size_t x_stride, float* y, std::size_t y_stride) noexcept {
  constexpr bool kThirdBit = std::is_same_v<Rows8, BlockQ3KRows8>;
  const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  // [i]: sub-block 4 v + i's byte in both words; pairs [parity]: sub-blocks 4 v + 2 parity, + 1.
  const __m256i scale_pickers[4] = {
      sub_block_picker<Arch>(0, 0, kThirdBit), sub_block_picker<Arch>(1, 1, kThirdBit),
      sub_block_picker<Arch>(2, 2, kThirdBit), sub_block_picker<Arch>(3, 3, kThirdBit)};
  const __m256i pair_pickers[2] = {sub_block_picker<Arch>(0, 1, kThirdBit),
                                   sub_block_picker<Arch>(2, 3, kThirdBit)};
  __m256 acc[T];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const Rows8& wb = w[b];
    prefetch_ahead<Arch>(&wb, sizeof wb);
    __m256i isum[T];
    for (auto& s : isum) s = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      // Unrolled so that each shift is a constant.
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        // Sub-blocks 8 h + 2 j + k = 4 v + 2 (j % 2) + k.
        const __m256i bytes = load256<Arch>(wb.scales[2 * h + j / 2]);
        for (int k = 0; k < 2; ++k) {
          const int sub = 2 * (j % 2) + k;
          const __m256i picked = _mm256_shuffle_epi8(bytes, scale_pickers[sub]);
          const __m256i scale = kThirdBit ? _mm256_srai_epi16(picked, 8)
                                          : _mm256_and_si256(picked, _mm256_set1_epi16(0x0F));
          __m256i part[T];
          for (auto& s : part) s = _mm256_setzero_si256();
          for (int g = 4 * k; g < 4 * k + 4; ++g) {
            __m256i level =
                _mm256_and_si256(_mm256_srli_epi16(load256<Arch>(wb.qs[h][g]), 2 * j), three);
            if constexpr (kThirdBit) {
              // Bit 4 h + j of each byte down to bit 0 (a 16-bit shift: the high byte's bits
              // that enter the low byte's top are masked off), then up to 4.
              const __m256i bit =
                  _mm256_and_si256(_mm256_srli_epi16(load256<Arch>(wb.hmask[g]), 4 * h + j), one);
              level = _mm256_or_si256(level, _mm256_slli_epi16(bit, 2));
            }
            for (std::size_t t = 0; t < T; ++t) {
              const std::int8_t* xq = x[t * x_stride + b].qs + 128 * h + 32 * j + 4 * g;
              part[t] =
                  _mm256_add_epi16(part[t], _mm256_maddubs_epi16(level, broadcast4<Arch>(xq)));
              if constexpr (T > 1) accumulate_in_place<Arch>(part[t]);
            }
          }
          for (std::size_t t = 0; t < T; ++t) {
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(part[t], scale));
          }
        }
      }
    }
    finish_two_bit_block_256<Arch, T>(wb, x, x_stride, b, pair_pickers, isum, acc);
  }
  for (std::size_t t = 0; t < T; ++t) _mm256_storeu_ps(y + t * y_stride, acc[t]);
}

// WeightKernels::rows8 of Q4_K, Q5_K and Q6_K: every token, kRows8Tokens at a time, the
// rest one by one. The tiles prefetch on every pass (see above), so `from` goes unused.
template <class Arch, class Rows8>
void rows8_with_mins_256(const Rows8* w, std::size_t nblocks, const BlockQ8K* x,
                         std::size_t x_stride, std::size_t n_tokens, float* y, std::size_t y_stride,
                         WeightsFrom /*from*/) noexcept {
  std::size_t t = 0;
  for (; t + kRows8Tokens <= n_tokens; t += kRows8Tokens) {
    rows8_with_mins_tile_256<Arch, kRows8Tokens>(w, nblocks, x + t * x_stride, x_stride,
                                                 y + t * y_stride, y_stride);
  }
  for (; t < n_tokens; ++t) {
    rows8_with_mins_tile_256<Arch, 1>(w, nblocks, x + t * x_stride, x_stride, y + t * y_stride,
                                      y_stride);
  }
}

template <class Arch>
void rows8_q4k_q8k_256(const BlockQ4KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                       std::size_t x_stride, std::size_t n_tokens, float* y, std::size_t y_stride,
                       WeightsFrom from) noexcept {
  rows8_with_mins_256<Arch>(w, nblocks, x, x_stride, n_tokens, y, y_stride, from);
}

template <class Arch>
void rows8_q5k_q8k_256(const BlockQ5KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                       std::size_t x_stride, std::size_t n_tokens, float* y, std::size_t y_stride,
                       WeightsFrom from) noexcept {
  rows8_with_mins_256<Arch>(w, nblocks, x, x_stride, n_tokens, y, y_stride, from);
}

template <class Arch>
void rows8_q6k_q8k_256(const BlockQ6KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                       std::size_t x_stride, std::size_t n_tokens, float* y, std::size_t y_stride,
                       WeightsFrom /*from*/) noexcept {
  std::size_t t = 0;
  for (; t + kRows8TokensQ6K <= n_tokens; t += kRows8TokensQ6K) {
    rows8_q6k_tile_256<Arch, kRows8TokensQ6K>(w, nblocks, x + t * x_stride, x_stride,
                                              y + t * y_stride, y_stride);
  }
  for (; t < n_tokens; ++t) {
    rows8_q6k_tile_256<Arch, 1>(w, nblocks, x + t * x_stride, x_stride, y + t * y_stride, y_stride);
  }
}

// WeightKernels::rows8 of Q2_K and Q3_K, tiled as Q4_K's.
template <class Arch, class Rows8>
void rows8_two_bit_q8k_256(const Rows8* w, std::size_t nblocks, const BlockQ8K* x,
                           std::size_t x_stride, std::size_t n_tokens, float* y,
                           std::size_t y_stride, WeightsFrom /*from*/) noexcept {
  std::size_t t = 0;
  for (; t + kRows8Tokens <= n_tokens; t += kRows8Tokens) {
    rows8_two_bit_tile_256<Arch, kRows8Tokens>(w, nblocks, x + t * x_stride, x_stride,
                                               y + t * y_stride, y_stride);
  }
  for (; t < n_tokens; ++t) {
    rows8_two_bit_tile_256<Arch, 1>(w, nblocks, x + t * x_stride, x_stride, y + t * y_stride,
                                    y_stride);
  }
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
