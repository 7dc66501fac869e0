// AVX-512 kernels on eight interleaved Q4_K, Q5_K, Q6_K, Q2_K or Q3_K rows (quant/rows8.hpp)
// times up to kRows8Tokens512 Q8_K tokens per pass: the decode matvec (one token) and prefill.
//
// One 64-byte load holds two neighbouring 4-byte groups (g, g + 1) of all eight rows.
// A vpermd, paid once per weight vector and shared by every token of the pass, puts
// them side by side, row r in lanes 2r (group g) and 2r + 1 (group g + 1); then one
// broadcast 8-byte load per token matches them (vpbroadcastq), and each vpdpbusd does
// 64 multiply-adds for eight rows. This is what makes prefill fast: the activations are
// read once per eight rows, instead of once per row as in the file-layout tiles
// (x86_avx512_tiles.hpp), whose speed was bounded by those loads.
//
// Exact integers, like the reference: each lane sums 16 products of one sub-block
// (16 x 15 x 128 < 2^15), so vpackssdw packs the sums of sub-blocks 2c and 2c + 1
// losslessly into words and one vpdpwssd applies both sub-block scales. Lane L = 4k + q
// of the int32 sums holds row 2k + (q & 1), values of sub-blocks with parity q >> 1 (the
// order vpackssdw leaves). Floats appear once per super-block; on AVX-512 and VNNI the two
// lanes of a row are added at the end, in floats; on AMX (kRows8MatrixOrder) they are
// added in integers per block and the min terms summed apart, the matrix unit's order.
// Intrinsics, because xsimd 8.1 has no u8 x s8 dot.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/quant/blocks.hpp"
#include "smol/quant/rows8.hpp"
#include "smol/simd/arch.hpp"
#include "smol/simd/x86_avx2_rows8.hpp"
#include "smol/simd/x86_avx512.hpp"
#include "smol/simd/x86_avx512_tiles.hpp"

namespace smol::simd::x86 {

// Tokens per pass: the eight tokens' int32 sums, a chunk's eight unpacked weight vectors
// and its scales fill most of the 32 zmm registers (the float accumulators, touched once
// per block, may spill), and sixteen tokens per pass ran no faster (bench/HISTORY.md,
// "Figures moved from code comments").
inline constexpr std::size_t kRows8Tokens512 = 8;

// The row of lane L = 4k + q in the packed sums (see the top of this file), and its parity:
// rows8_lane_row and rows8_lane_parity (quant/rows8.hpp, where Q2_K's and Q3_K's copies
// store their sub-block bytes in this order).

// Index vectors for vpermd / vpermw, made at compile time.
template <class Index, std::size_t N, class F>
constexpr std::array<Index, N> index_table(F f) noexcept {
  std::array<Index, N> idx{};
  for (std::size_t i = 0; i < N; ++i) idx[i] = static_cast<Index>(f(static_cast<int>(i)));
  return idx;
}
template <class F>
constexpr auto lanes32(F f) noexcept {
  return index_table<std::int32_t, 16>(f);
}
template <class F>
constexpr auto words16(F f) noexcept {
  return index_table<std::int16_t, 32>(f);
}
template <class Arch, class Table>
inline __m512i load_index(const Table& table) noexcept {
  return _mm512_loadu_si512(table.data());
}

// Lane 2r + e <- lane 8e + r: groups g and g + 1 of row r side by side.
inline constexpr auto kPairRows = lanes32([](int l) { return 8 * (l % 2) + l / 2; });
inline constexpr auto kLaneRows = lanes32(rows8_lane_row);
// Scale words, from the 32 words of sub-blocks 4h .. 4h + 3 ([sub-block][row]): word
// 2L + e of chunk c is sub-block 2c + parity(L) of row(L); chunks 2h and 2h + 1 read
// the same source with these two tables.
inline constexpr auto kScalesEven =
    words16([](int word) { return 8 * rows8_lane_parity(word / 2) + rows8_lane_row(word / 2); });
inline constexpr auto kScalesOdd = words16(
    [](int word) { return 16 + 8 * rows8_lane_parity(word / 2) + rows8_lane_row(word / 2); });
// Min words from all 64 ([sub-block][row]): lane L of kMins01 pairs sub-blocks
// (4p, 4p + 1) of row(L), kMins23 (4p + 2, 4p + 3), p = parity(L).
inline constexpr auto kMins01 = words16([](int word) {
  return 8 * (4 * rows8_lane_parity(word / 2) + word % 2) + rows8_lane_row(word / 2);
});
inline constexpr auto kMins23 = words16([](int word) {
  return 8 * (4 * rows8_lane_parity(word / 2) + 2 + word % 2) + rows8_lane_row(word / 2);
});
// The token's sub-block sums as word pairs D0 = (S0, S1) .. D3 = (S6, S7), which
// vpackssdw leaves in dwords 0, 1, 4, 5; lane L takes D(2 parity) or D(2 parity + 1).
inline constexpr auto kSums01 = lanes32([](int l) { return 4 * rows8_lane_parity(l); });
inline constexpr auto kSums23 = lanes32([](int l) { return 4 * rows8_lane_parity(l) + 1; });
// Q6_K scale words, from the 64 sign-extended words of groups 8h .. 8h + 7
// ([group][row]): lane L of chunk (h, s) pairs group 8h + 2s + 4 parity(L) + pp of
// row(L) (both words), for the g-pairs p with p / 2 = pp; this table holds pp = s = 0,
// and 16 s + 8 pp is added.
inline constexpr auto kQ6Scales =
    words16([](int word) { return 32 * rows8_lane_parity(word / 2) + rows8_lane_row(word / 2); });
// The -32 offset, over the groups whose quants each lane sums (parity p: groups 8h + 4p ..
// 8h + 4p + 3 of either half h, as kQ6Scales scales them), so that a lane's integer is its
// own groups' whole sum, the one x86_avx512_token_lanes.hpp forms too: lane L of product m
// pairs groups 8h + 4 parity(L) + 2k + e (h = m / 2, k = m % 2, e = 0, 1) of row(L), from
// the 64 sign-extended words of groups 8h .. 8h + 7 (two vectors; this table holds k = 0,
// and 16 k is added); the activations' bsums pair (8h + 4 parity + 2k, + 1) is dword
// 4h + 2 parity + k of the 16 bsums (kQ6OffsetPairs + 4h + k).
inline constexpr auto kQ6OffsetScales = words16([](int word) {
  return 32 * rows8_lane_parity(word / 2) + 8 * (word % 2) + rows8_lane_row(word / 2);
});
inline constexpr auto kQ6OffsetPairs = lanes32([](int l) { return 2 * rows8_lane_parity(l); });
// Q2_K's and Q3_K's: lane L takes bsums pair parity(L) of those a term's index adds 2v to.
inline constexpr auto kParityPairSums = lanes32([](int l) { return rows8_lane_parity(l); });
// Q2_K and Q3_K scale words, from the 32 words of scales[v] (quant/rows8.hpp: word 2L' + e'
// is sub-block 4v + 2 parity(L') + e' of row(L')): at shift j of half h, lane L takes
// sub-block 8h + 2j + parity(L) of row(L), i.e. v = 2h + j / 2, the lane L' of its row with
// parity j % 2, and e' = parity(L), in both words. Even j here, odd j in the second table.
inline constexpr auto kTwoBitScalesEven = words16([](int word) {
  const int lane = word / 2;
  return 2 * (4 * (lane / 4) + (lane % 4) % 2) + rows8_lane_parity(lane);
});
inline constexpr auto kTwoBitScalesOdd = words16([](int word) {
  const int lane = word / 2;
  return 2 * (4 * (lane / 4) + (lane % 4) % 2 + 2) + rows8_lane_parity(lane);
});
// Row r = lanes 4 (r / 2) + r % 2 (sub-blocks 0, 2, 4, 6) and that + 2 (1, 3, 5, 7).
inline constexpr auto kRowFirst = lanes32([](int r) { return 4 * ((r % 8) / 2) + r % 2; });
inline constexpr auto kRowSecond = lanes32([](int r) { return 4 * ((r % 8) / 2) + r % 2 + 2; });

template <class Arch>
inline __m512i broadcast8(const std::int8_t* p) noexcept {
  std::int64_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi64(v);
}

// The eight rows' f16 factors (d or dmin) as floats, each in both lanes of its row in
// the packed sums.
template <class Arch>
inline __m512 rows8_lane_floats(const f16_bits* values, __m512i lane_rows) noexcept {
  const __m256 rows = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
  return _mm512_permutexvar_ps(lane_rows, _mm512_castps256_ps512(rows));
}

// Adds each row's two lanes and stores the eight rows of every token.
template <class Arch, std::size_t T>
inline void store_rows8_sums(const __m512 (&acc)[T], float* y, std::size_t y_stride) noexcept {
  const __m512i first = load_index<Arch>(kRowFirst);
  const __m512i second = load_index<Arch>(kRowSecond);
  for (std::size_t t = 0; t < T; ++t) {
    const __m512 rows =
        _mm512_add_ps(_mm512_permutexvar_ps(first, acc[t]), _mm512_permutexvar_ps(second, acc[t]));
    _mm256_storeu_ps(y + t * y_stride, _mm512_castps512_ps256(rows));
  }
}

// On AMX the kernels round as the matrix unit's prefill does (kMatrixOrder below): each
// row's two lanes then hold the same value, and the first is stored.
template <class Arch, std::size_t T>
inline void store_rows8_first_lanes(const __m512 (&acc)[T], float* y,
                                    std::size_t y_stride) noexcept {
  const __m512i first = load_index<Arch>(kRowFirst);
  for (std::size_t t = 0; t < T; ++t) {
    _mm256_storeu_ps(y + t * y_stride,
                     _mm512_castps512_ps256(_mm512_permutexvar_ps(first, acc[t])));
  }
}

// A row's whole integer sum in both its lanes: lanes 4k + q and 4k + (q ^ 2) hold its two
// parities.
template <class Arch>
inline __m512i rows8_whole_sums(__m512i sums) noexcept {
  return _mm512_add_epi32(sums, _mm512_shuffle_epi32(sums, static_cast<_MM_PERM_ENUM>(0x4E)));
}

// Whether a set's eight-row kernels take the float steps of its matrix-unit prefill on the
// same copy (amx_matrix_with_mins with PlanesHighLow, amx_matrix_with_offset<.., 32>):
// per block the row's whole integer sum times d, then one fma by the token's scale, and
// Q4_K's and Q5_K's min terms summed apart, sub-block by sub-block. Then one token decoded
// has the bits a prefill gives it (WeightKernels::rows8_rounds_like_packed), and the
// batch-invariant one-token steps (the server's engine, speculative decoding) take the
// decode kernel instead of the matrix unit for a single token.
template <class Arch>
inline constexpr bool kRows8MatrixOrder = std::is_same_v<Arch, amx_arch>;

// 64 bytes of eight rows, groups g and g + 1, with row r's two groups in lanes 2r, 2r + 1.
template <class Arch>
inline __m512i load_pair_rows(const void* p, __m512i pair_rows) noexcept {
  return _mm512_permutexvar_epi32(pair_rows, load512<Arch>(p));
}

// Decode streams the copy from memory: each chunk (Q4_K, Q5_K) or half (Q6_K) of a block
// asks for its share of the next block's lines. A block's 19-27 lines asked for at once,
// 4 KB ahead (stream_block_ahead, as the dots on the file's rows do), take most of the
// core's line-fill buffers together and the kernel's own loads wait behind them; a chunk
// at a time, one block ahead, keeps decode nearer its roofline (two blocks ahead less
// so). The same lines 8 KB further into L2 as well add a little more (16 KB alike).
// bench/HISTORY.md measures both ("the copies' next block a chunk at a time", "decode asks
// for its weights in two steps"). Through an integer address: past the copy's end those
// blocks lie outside it, and a prefetch there does not fault, but forming the pointer
// would be UB.
inline constexpr std::size_t kRows8L2Ahead = 8192;

template <class Rows8>
inline void prefetch_part_ahead(const Rows8* block, int part, int parts) noexcept {
  const std::size_t span = (sizeof(Rows8) + parts - 1) / parts;
  const std::uintptr_t from = reinterpret_cast<std::uintptr_t>(block) + sizeof(Rows8) +
                              static_cast<std::size_t>(part) * span;
  for (std::uintptr_t line = from & ~std::uintptr_t{63}; line < from + span; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(line + kRows8L2Ahead), _MM_HINT_T1);
  }
}

// The permutes that bring Q4_K's and Q5_K's per-row factors, mins and the tokens' bsum
// pairs to the lanes of rows8_with_mins_tile_512's sums, loaded once per call.
template <class Arch>
struct WithMinsPermutes {
  __m512i lane_rows = load_index<Arch>(kLaneRows);
  __m512i mins01 = load_index<Arch>(kMins01), mins23 = load_index<Arch>(kMins23);
  __m512i sums01 = load_index<Arch>(kSums01), sums23 = load_index<Arch>(kSums23);
};

// The end of block `b` in rows8_with_mins_tile_512: each token's integer sums (isum) times
// d, less dmin x the min term, into its accumulator; in the matrix order (AMX) the min
// terms go to `mins` apart, rounded as the matrix unit's expansion rounds them.
template <class Arch, std::size_t T, class Rows8>
[[gnu::always_inline]] inline void finish_with_mins_block_512(const Rows8& wb, const BlockQ8K* x,
                                                              std::size_t x_stride, std::size_t b,
                                                              const WithMinsPermutes<Arch>& p,
                                                              const __m512i* isum, __m512* acc,
                                                              __m512* mins) noexcept {
  const __m512i min_lo =
      _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.mins[0])));
  const __m512i min_hi =
      _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.mins[4])));
  const __m512i m01 = _mm512_permutex2var_epi16(min_lo, p.mins01, min_hi);
  const __m512i m23 = _mm512_permutex2var_epi16(min_lo, p.mins23, min_hi);
  const __m512 d = rows8_lane_floats<Arch>(wb.d, p.lane_rows);
  const __m512 dmin = rows8_lane_floats<Arch>(wb.dmin, p.lane_rows);
  if constexpr (kRows8MatrixOrder<Arch>) {
    // dmin * m per sub-block and row, as the matrix unit's expansion rounds it.
    __m512 row_mins[8];
    for (int j = 0; j < 8; ++j) {
      const __m256 m = _mm256_cvtepi32_ps(
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb.mins[j]))));
      row_mins[j] =
          _mm512_mul_ps(dmin, _mm512_permutexvar_ps(p.lane_rows, _mm512_castps256_ps512(m)));
    }
    for (std::size_t t = 0; t < T; ++t) {
      const BlockQ8K& xb = x[t * x_stride + b];
      const __m512 whole = _mm512_cvtepi32_ps(rows8_whole_sums<Arch>(isum[t]));
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(whole, d), _mm512_set1_ps(xb.d), acc[t]);
      // The token's sub-block sums as its AMX token tile holds them: d * (two bsums).
      alignas(32) float sub[8];
      _mm256_store_ps(sub, _mm256_mul_ps(_mm256_set1_ps(xb.d),
                                         _mm256_cvtepi32_ps(_mm256_madd_epi16(
                                             load256<Arch>(xb.bsums), _mm256_set1_epi16(1)))));
      for (int j = 0; j < 8; ++j) {
        mins[t] = _mm512_fmadd_ps(row_mins[j], _mm512_set1_ps(sub[j]), mins[t]);
      }
    }
    return;
  }
  for (std::size_t t = 0; t < T; ++t) {
    const BlockQ8K& xb = x[t * x_stride + b];
    const __m256i s = _mm256_madd_epi16(load256<Arch>(xb.bsums), _mm256_set1_epi16(1));
    const __m512i pairs = _mm512_castsi256_si512(_mm256_packs_epi32(s, s));
    __m512i msum =
        madd16_acc512<Arch>(_mm512_setzero_si512(), m01, _mm512_permutexvar_epi32(p.sums01, pairs));
    msum = madd16_acc512<Arch>(msum, m23, _mm512_permutexvar_epi32(p.sums23, pairs));
    const __m512 row_sums = _mm512_fmsub_ps(d, _mm512_cvtepi32_ps(isum[t]),
                                            _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(msum)));
    acc[t] = _mm512_fmadd_ps(row_sums, _mm512_set1_ps(xb.d), acc[t]);
  }
}

// Q4_K and Q5_K (Rows8 = BlockQ4KRows8 or BlockQ5KRows8). Q5_K's fifth bits come from
// qh, whose bytes lie as qs's do: bit 2c tops chunk c's low nibbles, 2c + 1 its high
// ones, each one test and one masked add of 16. Its quants reach 31, so a lane may sum
// only two vpdpbusd (8 x 31 x 128 < 2^15) before vpackssdw: two packs per chunk, the
// same scales for both.
template <class Arch, std::size_t T, class Rows8>
void rows8_with_mins_tile_512(const Rows8* w, std::size_t nblocks, const BlockQ8K* x,
                              std::size_t x_stride, float* y, std::size_t y_stride,
                              WeightsFrom from) noexcept {
  constexpr bool kFifthBit = std::is_same_v<Rows8, BlockQ5KRows8>;
  constexpr int kPairsPerPack = kFifthBit ? 2 : 4;
  const __m512i nibble = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
  const __m512i pair_rows = load_index<Arch>(kPairRows);
  const __m512i scales_even = load_index<Arch>(kScalesEven);
  const __m512i scales_odd = load_index<Arch>(kScalesOdd);
  const WithMinsPermutes<Arch> permutes;

  constexpr bool kMatrixOrder = kRows8MatrixOrder<Arch>;
  __m512 acc[T], mins[T];  // mins: the matrix order's min terms, apart
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (auto& m : mins) m = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const Rows8& wb = w[b];
    __m512i isum[T];
    for (auto& s : isum) s = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      if (from == WeightsFrom::memory) prefetch_part_ahead(&wb, c, 4);
      const __m512i scale_words = _mm512_cvtepu8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.scales[4 * (c / 2)])));
      const __m512i scales =
          _mm512_permutexvar_epi16(c % 2 == 0 ? scales_even : scales_odd, scale_words);
      __m512i lo[4], hi[4];
      for (int p = 0; p < 4; ++p) {
        const __m512i q = load_pair_rows<Arch>(wb.qs[c][2 * p], pair_rows);
        lo[p] = _mm512_and_si512(q, nibble);
        hi[p] = _mm512_and_si512(_mm512_srli_epi16(q, 4), nibble);
        if constexpr (kFifthBit) {
          const __m512i qh = load_pair_rows<Arch>(wb.qh[2 * p], pair_rows);
          const __m512i bit_lo = _mm512_set1_epi8(static_cast<char>(1 << (2 * c)));
          const __m512i bit_hi = _mm512_set1_epi8(static_cast<char>(2 << (2 * c)));
          lo[p] = _mm512_mask_add_epi8(lo[p], _mm512_test_epi8_mask(qh, bit_lo), lo[p], sixteen);
          hi[p] = _mm512_mask_add_epi8(hi[p], _mm512_test_epi8_mask(qh, bit_hi), hi[p], sixteen);
        }
      }
      for (std::size_t t = 0; t < T; ++t) {
        const std::int8_t* xq = x[t * x_stride + b].qs + 64 * c;
        for (int p0 = 0; p0 < 4; p0 += kPairsPerPack) {
          __m512i s_lo = _mm512_setzero_si512(), s_hi = _mm512_setzero_si512();
          for (int p = p0; p < p0 + kPairsPerPack; ++p) {
            s_lo = dot_u8s8<Arch>(s_lo, lo[p], broadcast8<Arch>(xq + 8 * p));
            s_hi = dot_u8s8<Arch>(s_hi, hi[p], broadcast8<Arch>(xq + 32 + 8 * p));
          }
          isum[t] = madd16_acc512<Arch>(isum[t], _mm512_packs_epi32(s_lo, s_hi), scales);
        }
      }
    }
    finish_with_mins_block_512<Arch, T>(wb, x, x_stride, b, permutes, isum, acc, mins);
  }
  if constexpr (kMatrixOrder) {
    for (std::size_t t = 0; t < T; ++t) acc[t] = _mm512_sub_ps(acc[t], mins[t]);
    store_rows8_first_lanes<Arch, T>(acc, y, y_stride);
  } else {
    store_rows8_sums<Arch, T>(acc, y, y_stride);
  }
}

// Q6_K's quants 0..63 from 64 bytes of the copy's ql (chunk 2h + s) and the matching 64 of
// qh, in either kernel's lane order (the same dword permute on both, or none): bits 2s,
// 2s + 1 of qh top the low nibbles (lo), bits 2s + 4, 2s + 5 the high ones (hi).
template <class Arch>
inline void q6k_copy_quants(__m512i ql, __m512i qh, int s, __m512i& lo, __m512i& hi) noexcept {
  const __m512i low4 = _mm512_set1_epi8(0x0F), top2 = _mm512_set1_epi8(0x30);
  const __m512i lo_top = s == 0 ? _mm512_slli_epi16(qh, 4) : _mm512_slli_epi16(qh, 2);
  const __m512i hi_top = s == 0 ? qh : _mm512_srli_epi16(qh, 2);
  lo = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(lo_top, top2));
  hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                       _mm512_and_si512(hi_top, top2));
}

// The scale words of Q6_K's -32 offset term in rows8_q6k_tile_512, for one block of the
// copy: [2 h + k] against the token's bsum pairs as that kernel takes them.
template <class Arch>
[[gnu::always_inline]] inline void q6k_offset_words(const BlockQ6KRows8& wb, __m512i offset_scales,
                                                    __m512i* offset_words) noexcept {
  for (int h = 0; h < 2; ++h) {
    const __m512i groups_lo = _mm512_cvtepi8_epi16(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.scales[8 * h])));
    const __m512i groups_hi = _mm512_cvtepi8_epi16(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.scales[8 * h + 4])));
    for (int k = 0; k < 2; ++k) {
      const __m512i index = _mm512_add_epi16(offset_scales, _mm512_set1_epi16(16 * k));
      offset_words[2 * h + k] = _mm512_permutex2var_epi16(groups_lo, index, groups_hi);
    }
  }
}

// Q6_K: quants 0..63, so a lane may sum only one vpdpbusd (4 x 63 x 128 < 2^15) before
// vpackssdw; the low and high nibbles of a g-pair (quarters s and s + 2 of a half) are
// packed together, their groups' scales applied by one vpdpwssd. The -32 offset of every
// quant is 32 x sum over groups of scale x bsum, four vpdpwssd per token and block.
template <class Arch, std::size_t T>
void rows8_q6k_tile_512(const BlockQ6KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                        std::size_t x_stride, float* y, std::size_t y_stride,
                        WeightsFrom from) noexcept {
  const __m512i pair_rows = load_index<Arch>(kPairRows);
  const __m512i lane_rows = load_index<Arch>(kLaneRows);
  const __m512i scale_index = load_index<Arch>(kQ6Scales);
  const __m512i offset_scales = load_index<Arch>(kQ6OffsetScales);
  const __m512i offset_pairs = load_index<Arch>(kQ6OffsetPairs);

  __m512 acc[T];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const BlockQ6KRows8& wb = w[b];
    __m512i isum[T];
    for (auto& s : isum) s = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      if (from == WeightsFrom::memory) prefetch_part_ahead(&wb, h, 2);
      const __m512i groups_lo = _mm512_cvtepi8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.scales[8 * h])));
      const __m512i groups_hi = _mm512_cvtepi8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.scales[8 * h + 4])));
      // Unrolled so that s is a constant in each copy (the shifts below depend on it).
#pragma GCC unroll 2
      for (int s = 0; s < 2; ++s) {
        __m512i scales[2];
        for (int pp = 0; pp < 2; ++pp) {
          const __m512i index =
              _mm512_add_epi16(scale_index, _mm512_set1_epi16(static_cast<short>(16 * s + 8 * pp)));
          scales[pp] = _mm512_permutex2var_epi16(groups_lo, index, groups_hi);
        }
        __m512i lo[4], hi[4];
        for (int p = 0; p < 4; ++p) {
          q6k_copy_quants<Arch>(load_pair_rows<Arch>(wb.ql[2 * h + s][2 * p], pair_rows),
                                load_pair_rows<Arch>(wb.qh[h][2 * p], pair_rows), s, lo[p], hi[p]);
        }
        for (std::size_t t = 0; t < T; ++t) {
          const std::int8_t* xq = x[t * x_stride + b].qs + 128 * h + 32 * s;
          for (int p = 0; p < 4; ++p) {
            const __m512i a =
                dot_u8s8<Arch>(_mm512_setzero_si512(), lo[p], broadcast8<Arch>(xq + 8 * p));
            const __m512i c =
                dot_u8s8<Arch>(_mm512_setzero_si512(), hi[p], broadcast8<Arch>(xq + 64 + 8 * p));
            isum[t] = madd16_acc512<Arch>(isum[t], _mm512_packs_epi32(a, c), scales[p / 2]);
          }
        }
      }
    }
    __m512i offset_words[4];
    q6k_offset_words<Arch>(wb, offset_scales, offset_words);
    const __m512 d = rows8_lane_floats<Arch>(wb.d, lane_rows);
    for (std::size_t t = 0; t < T; ++t) {
      const BlockQ8K& xb = x[t * x_stride + b];
      const __m512i bsums = _mm512_castsi256_si512(load256<Arch>(xb.bsums));
      __m512i offset = _mm512_setzero_si512();
      for (int m = 0; m < 4; ++m) {
        const __m512i sums = _mm512_permutexvar_epi32(
            _mm512_add_epi32(offset_pairs, _mm512_set1_epi32(4 * (m / 2) + m % 2)), bsums);
        offset = madd16_acc512<Arch>(offset, offset_words[m], sums);
      }
      const __m512i sumi = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(offset, 5));
      if constexpr (kRows8MatrixOrder<Arch>) {
        const __m512 whole = _mm512_cvtepi32_ps(rows8_whole_sums<Arch>(sumi));
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(whole, d), _mm512_set1_ps(xb.d), acc[t]);
      } else {
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(xb.d)), _mm512_cvtepi32_ps(sumi),
                                 acc[t]);
      }
    }
  }
  if constexpr (kRows8MatrixOrder<Arch>) {
    store_rows8_first_lanes<Arch, T>(acc, y, y_stride);
  } else {
    store_rows8_sums<Arch, T>(acc, y, y_stride);
  }
}

// The end of block `b` in rows8_two_bit_tile_512: per sub-block byte x bsum (Q2_K's mins,
// the high nibbles of `sub`; Q3_K's scales, for its -4 offset), then each token's integer
// sums (isum), its two lanes per row added, in one float step into its accumulator.
template <class Arch>
struct TwoBitPermutes {
  __m512i lane_rows = load_index<Arch>(kLaneRows);
  __m512i pair_sums = load_index<Arch>(kParityPairSums);  // lane L: bsum pair parity(L)
};
template <class Arch, std::size_t T, class Rows8>
[[gnu::always_inline]] inline void finish_two_bit_block_512(const Rows8& wb, const BlockQ8K* x,
                                                            std::size_t x_stride, std::size_t b,
                                                            const TwoBitPermutes<Arch>& permutes,
                                                            const __m512i* sub, const __m512i* isum,
                                                            __m512* acc) noexcept {
  constexpr bool kThirdBit = std::is_same_v<Rows8, BlockQ3KRows8>;
  __m512i terms[4];
  for (int v = 0; v < 4; ++v) terms[v] = kThirdBit ? sub[v] : _mm512_srli_epi16(sub[v], 4);
  const __m512 d = rows8_lane_floats<Arch>(wb.d, permutes.lane_rows);
  [[maybe_unused]] __m512 dmin = _mm512_setzero_ps();
  if constexpr (!kThirdBit) dmin = rows8_lane_floats<Arch>(wb.dmin, permutes.lane_rows);
  for (std::size_t t = 0; t < T; ++t) {
    const BlockQ8K& xb = x[t * x_stride + b];
    const __m512i bsums = _mm512_castsi256_si512(load256<Arch>(xb.bsums));
    __m512i term_sums = _mm512_setzero_si512();
    for (int v = 0; v < 4; ++v) {
      const __m512i sums = _mm512_permutexvar_epi32(
          _mm512_add_epi32(permutes.pair_sums, _mm512_set1_epi32(2 * v)), bsums);
      term_sums = madd16_acc512<Arch>(term_sums, terms[v], sums);
    }
    if constexpr (kThirdBit) {
      const __m512i sumi = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(term_sums, 2));
      const __m512 whole = _mm512_cvtepi32_ps(rows8_whole_sums<Arch>(sumi));
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(xb.d)), whole, acc[t]);
    } else {
      const __m512 products = _mm512_cvtepi32_ps(rows8_whole_sums<Arch>(isum[t]));
      const __m512 mins = _mm512_cvtepi32_ps(rows8_whole_sums<Arch>(term_sums));
      acc[t] = _mm512_fmadd_ps(_mm512_fmsub_ps(d, products, _mm512_mul_ps(dmin, mins)),
                               _mm512_set1_ps(xb.d), acc[t]);
    }
  }
}

// Q2_K and Q3_K (Rows8 = BlockQ2KRows8 or BlockQ3KRows8): each 64-byte load of qs holds
// values 8p .. 8p + 7 of every 32 for the eight rows (row r in lanes 2r, 2r + 1 after the
// pair permute), and its four shifts give the quants of four sub-block pairs: at shift j
// of half h, loads p = 0, 1 are sub-block 8h + 2j, loads 2, 3 sub-block 8h + 2j + 1, each
// pair summed by two vpdpbusd (Q3_K's levels q + 4 reach 7: 8 x 7 x 128 < 2^15), packed
// into words and scaled by one vpdpwssd, as Q4_K's sub-blocks 2c and 2c + 1. The min term
// (Q2_K) and the -4 offset (Q3_K's level is q + 4, the hmask bit adding 4) are sum over
// sub-blocks of byte x bsum: the copy's sub-block words against the activations' bsum
// pairs, four vpdpwssd per token and block. A row's two lanes are added in integers per
// block, then one float step (Q2_K: d x products - dmin x mins), so the one float order
// does not depend on the token count.
template <class Arch, std::size_t T, class Rows8>
void rows8_two_bit_tile_512(const Rows8* w, std::size_t nblocks, const BlockQ8K* x,
                            std::size_t x_stride, float* y, std::size_t y_stride,
                            WeightsFrom from) noexcept {
  constexpr bool kThirdBit = std::is_same_v<Rows8, BlockQ3KRows8>;
  const __m512i three = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
  const __m512i low4 = _mm512_set1_epi16(0x0F);
  const __m512i pair_rows = load_index<Arch>(kPairRows);
  const __m512i scales_even = load_index<Arch>(kTwoBitScalesEven);
  const __m512i scales_odd = load_index<Arch>(kTwoBitScalesOdd);
  const TwoBitPermutes<Arch> permutes;

  __m512 acc[T];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const Rows8& wb = w[b];
    __m512i sub[4];  // sub-block bytes as words (quant/rows8.hpp's lane order)
    for (int v = 0; v < 4; ++v) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb.scales[v]));
      sub[v] = kThirdBit ? _mm512_cvtepi8_epi16(bytes) : _mm512_cvtepu8_epi16(bytes);
    }
    __m512i isum[T];
    for (auto& s : isum) s = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      if (from == WeightsFrom::memory) prefetch_part_ahead(&wb, h, 2);
      __m512i q[4], high[4];
      for (int p = 0; p < 4; ++p) {
        q[p] = load_pair_rows<Arch>(wb.qs[h][2 * p], pair_rows);
        if constexpr (kThirdBit) high[p] = load_pair_rows<Arch>(wb.hmask[2 * p], pair_rows);
      }
      // Unrolled so that each shift is a constant.
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        __m512i scales =
            _mm512_permutexvar_epi16(j % 2 == 0 ? scales_even : scales_odd, sub[2 * h + j / 2]);
        if constexpr (!kThirdBit) scales = _mm512_and_si512(scales, low4);
        __m512i level[4];
        for (int p = 0; p < 4; ++p) {
          level[p] = _mm512_and_si512(_mm512_srli_epi16(q[p], 2 * j), three);
          if constexpr (kThirdBit) {
            const __m512i bit = _mm512_set1_epi8(static_cast<char>(1 << (4 * h + j)));
            level[p] =
                _mm512_mask_add_epi8(level[p], _mm512_test_epi8_mask(high[p], bit), level[p], four);
          }
        }
        for (std::size_t t = 0; t < T; ++t) {
          const std::int8_t* xq = x[t * x_stride + b].qs + 128 * h + 32 * j;
          __m512i first = dot_u8s8<Arch>(_mm512_setzero_si512(), level[0], broadcast8<Arch>(xq));
          first = dot_u8s8<Arch>(first, level[1], broadcast8<Arch>(xq + 8));
          __m512i second =
              dot_u8s8<Arch>(_mm512_setzero_si512(), level[2], broadcast8<Arch>(xq + 16));
          second = dot_u8s8<Arch>(second, level[3], broadcast8<Arch>(xq + 24));
          isum[t] = madd16_acc512<Arch>(isum[t], _mm512_packs_epi32(first, second), scales);
        }
      }
    }
    finish_two_bit_block_512<Arch, T>(wb, x, x_stride, b, permutes, sub, isum, acc);
  }
  store_rows8_first_lanes<Arch, T>(acc, y, y_stride);
}

// WeightKernels::rows8 of Q4_K, Q5_K, Q6_K, Q2_K and Q3_K: every token, eight at a time, the
// rest in halving tiles. Only the first pass can meet the weights in memory; the later passes
// reread them from cache.
template <class Arch, template <class, std::size_t> class Tile, class Rows8>
void rows8_tiles_512(const Rows8* w, std::size_t nblocks, const BlockQ8K* x, std::size_t x_stride,
                     std::size_t n_tokens, float* y, std::size_t y_stride,
                     WeightsFrom from) noexcept {
  static_assert(kRows8Tokens512 == 8);
  std::size_t t = 0;
  const auto pass = [&]<std::size_t T>(std::integral_constant<std::size_t, T>) {
    Tile<Arch, T>::run(w, nblocks, x + t * x_stride, x_stride, y + t * y_stride, y_stride,
                       t == 0 ? from : WeightsFrom::cache);
    t += T;
  };
  while (t + 8 <= n_tokens) pass(std::integral_constant<std::size_t, 8>{});
  if (t + 4 <= n_tokens) pass(std::integral_constant<std::size_t, 4>{});
  if (t + 2 <= n_tokens) pass(std::integral_constant<std::size_t, 2>{});
  if (t < n_tokens) pass(std::integral_constant<std::size_t, 1>{});
}

template <class Arch, std::size_t T>
struct Rows8Q4KTile512 {
  static void run(const BlockQ4KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                  std::size_t x_stride, float* y, std::size_t y_stride, WeightsFrom from) noexcept {
    rows8_with_mins_tile_512<Arch, T>(w, nblocks, x, x_stride, y, y_stride, from);
  }
};
template <class Arch, std::size_t T>
struct Rows8Q5KTile512 {
  static void run(const BlockQ5KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                  std::size_t x_stride, float* y, std::size_t y_stride, WeightsFrom from) noexcept {
    rows8_with_mins_tile_512<Arch, T>(w, nblocks, x, x_stride, y, y_stride, from);
  }
};
template <class Arch, std::size_t T>
struct Rows8Q6KTile512 {
  static void run(const BlockQ6KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                  std::size_t x_stride, float* y, std::size_t y_stride, WeightsFrom from) noexcept {
    rows8_q6k_tile_512<Arch, T>(w, nblocks, x, x_stride, y, y_stride, from);
  }
};

// Q2_K's and Q3_K's (one kernel, the copy's type picks the third bit).
template <class Arch, std::size_t T>
struct Rows8TwoBitTile512 {
  template <class Rows8>
  static void run(const Rows8* w, std::size_t nblocks, const BlockQ8K* x, std::size_t x_stride,
                  float* y, std::size_t y_stride, WeightsFrom from) noexcept {
    rows8_two_bit_tile_512<Arch, T>(w, nblocks, x, x_stride, y, y_stride, from);
  }
};

template <class Arch>
void rows8_q4k_q8k_512(const BlockQ4KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                       std::size_t x_stride, std::size_t n_tokens, float* y, std::size_t y_stride,
                       WeightsFrom from) noexcept {
  rows8_tiles_512<Arch, Rows8Q4KTile512>(w, nblocks, x, x_stride, n_tokens, y, y_stride, from);
}

template <class Arch>
void rows8_q5k_q8k_512(const BlockQ5KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                       std::size_t x_stride, std::size_t n_tokens, float* y, std::size_t y_stride,
                       WeightsFrom from) noexcept {
  rows8_tiles_512<Arch, Rows8Q5KTile512>(w, nblocks, x, x_stride, n_tokens, y, y_stride, from);
}

template <class Arch>
void rows8_q6k_q8k_512(const BlockQ6KRows8* w, std::size_t nblocks, const BlockQ8K* x,
                       std::size_t x_stride, std::size_t n_tokens, float* y, std::size_t y_stride,
                       WeightsFrom from) noexcept {
  rows8_tiles_512<Arch, Rows8Q6KTile512>(w, nblocks, x, x_stride, n_tokens, y, y_stride, from);
}

// Rows8 = BlockQ2KRows8 or BlockQ3KRows8.
template <class Arch, class Rows8>
void rows8_two_bit_q8k_512(const Rows8* w, std::size_t nblocks, const BlockQ8K* x,
                           std::size_t x_stride, std::size_t n_tokens, float* y,
                           std::size_t y_stride, WeightsFrom from) noexcept {
  rows8_tiles_512<Arch, Rows8TwoBitTile512>(w, nblocks, x, x_stride, n_tokens, y, y_stride, from);
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
