// AVX-512 and AVX2 kernels on sixteen interleaved rows (quant/rows16.hpp) times a few
// tokens: Q4_1 and Q5_1 rows times Q8_1 tokens, Q4_0, IQ4_NL, Q8_0, Q5_0 and MXFP4 rows times
// Q8_0 tokens, IQ4_XS rows (eight 32-value sub-blocks a group block, each a unit as the others'
// block) times Q8_K tokens. Decode (one token); on AMX the passes of a few tokens (speculative
// verification, small batches), where AMX's tiles cost more than they save; on the other
// sets every prefill on the copy (kRows16Prefills).
//
// Lane r of every vector is row r: a 64-byte load of qs[c] holds quad c (Q4_1: low
// nibbles, and quad c + 4 in the high ones) of all sixteen rows, the token's matching 4
// bytes are broadcast, and one u8 x s8 dot (vpdpbusd; on AVX-512 without VNNI, vpmaddubsw
// and vpmaddwd, whose 16-bit pair sums stay below 2 x 31 x 128 for Q4_1 and Q5) adds them to
// each row's int32 sum. Eight such dots make a block, exact integers like the reference.
// With several tokens, a block's weights are loaded and unpacked once for all of them.
//
// The floats are then those of the AMX tile kernel (x86_amx_blocks32.hpp) for each
// token, step for step: v = float(isum) * wd, acc = fma(v, yd, acc), acc = fma(wm, ys,
// acc) (Q4_1), blocks in order, one accumulator per row and token. So on AMX the copy
// gives a token the prefill tiles' result bit for bit, however many tokens share the
// call (tested). Intrinsics, because xsimd 8.1 has no u8 x s8 dot.
//
// Q8_0's copy holds each quant plus 128, and IQ4_NL's and MXFP4's nibbles become their levels
// plus 128 (one byte shuffle of a 16-entry table). With VNNI these bytes are vpdpbusd's unsigned
// operand as they are, and each block's int32 sums start from minus the token's offset
// sum, so they end exact. Without VNNI, vpmaddubsw would saturate on 255 x 127 pairs: the
// kernels flip the bytes back to the signed levels and move each weight's sign onto the
// token's byte (|w| x sign(w) y, pairs within 2 x 128 x 127), the other exact way to the
// same sums.
#pragma once

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/quant/mxfp4.hpp"
#include "smol/quant/rows16.hpp"
#include "smol/simd/arch.hpp"

namespace smol::simd::x86 {

// Whether a set's prefill on a sixteen-row copy runs the copy's own kernel over the tokens
// (WeightKernels::rows16_prefills): every x86 set but AMX, whose tiles or matrix unit read
// the copy. Four tokens per pass over a group (half a group on AVX2) that stays in L1 beat
// the tiles over the file's rows there, and decode reads the same copy (bench/HISTORY.md,
// "The AVX-512 sets prefill on the sixteen-row copies").
template <class Arch>
inline constexpr bool kRows16Prefills = !std::is_same_v<Arch, amx_arch>;

// acc + the sums of four u8 x s8 products per 32-bit lane.
template <class Arch>
inline __m512i dot4_u8s8_512(__m512i acc, __m512i u, __m512i s) noexcept {
  if constexpr (has_vnni_v<Arch>) {
    return _mm512_dpbusd_epi32(acc, u, s);
  } else {
    const __m512i pairs = _mm512_maddubs_epi16(u, s);  // |pair| <= 2 x 31 x 128: no saturation
    return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
  }
}

// Decode streams the copy from memory in two steps: each group's lines into L2 about 8 KB
// ahead (_MM_HINT_T1), then into L1 four groups ahead (288-544 bytes, five to nine lines,
// for the 32-value types). Through integer addresses, since near the copy's end those
// groups lie past it: a prefetch there does not fault, but forming the pointer would be UB.
// The L1 step alone left a core's read short of memory's pace, and the L1 step farther
// ahead alone helped the small model but cost the large one (its requests hold the
// line-fill buffers); both steps beat either (bench/HISTORY.md, "decode asks for its
// weights in two steps").
//
// IQ4_XS's group (2208 bytes, 35 lines) is asked for one unit (an eighth) at a time, a
// group ahead: 35 requests at once would take every line-fill buffer of the core, and the
// kernel's own loads would wait behind them (as matvec's row-at-once prefetch did). The
// whole group four ahead kept decode well short of its roofline; a unit one group ahead
// reads nearest it (two groups ahead or half a group less so), and an L2 step added
// nothing (bench/HISTORY.md, "IQ4_NL and IQ4_XS on sixteen-row copies").
inline constexpr std::size_t kRows16L2Ahead = 8192;

template <class Group>
inline void prefetch_unit_ahead(const Group* group, std::size_t unit) noexcept {
  const auto at = reinterpret_cast<std::uintptr_t>(group);
  if constexpr (Group::kSubBlocks == 1) {
    constexpr std::size_t kL2 = kRows16L2Ahead / sizeof(Group) * sizeof(Group);
    for (std::uintptr_t line = 0; line < sizeof(Group); line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(at + kL2 + line), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(at + 4 * sizeof(Group) + line), _MM_HINT_T0);
    }
  } else {
    constexpr std::size_t kSpan = (sizeof(Group) + Group::kSubBlocks - 1) / Group::kSubBlocks;
    const std::uintptr_t from = at + sizeof(Group) + unit * kSpan;
    for (std::uintptr_t line = from & ~std::uintptr_t{63}; line < from + kSpan; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
    }
  }
}

// What a group type's token is and how its sums finish: Q4_1 rows take Q8_1 tokens and
// add the min term; Q8_0 rows take Q8_0 tokens and start each sum at minus the offset.
template <class Group>
struct Rows16Traits;
template <>
struct Rows16Traits<BlockQ4_1Rows16> {
  using Token = BlockQ8_1;
  static constexpr bool kMin = true, kOffset = false;
};
template <>
struct Rows16Traits<BlockQ8_0Rows16> {
  using Token = BlockQ8_0;
  static constexpr bool kMin = false, kOffset = true;
};
template <>
struct Rows16Traits<BlockQ4_0Rows16> {
  using Token = BlockQ8_0;
  static constexpr bool kMin = false, kOffset = true;
};
template <>
struct Rows16Traits<BlockIQ4NLRows16> {
  using Token = BlockQ8_0;
  static constexpr bool kMin = false, kOffset = true;
};
template <>
struct Rows16Traits<BlockIQ4XSRows16> {
  using Token = BlockQ8K;
  static constexpr bool kMin = false, kOffset = true;
};
template <>
struct Rows16Traits<BlockQ5_0Rows16> {
  using Token = BlockQ8_0;
  static constexpr bool kMin = false, kOffset = true;
};
template <>
struct Rows16Traits<BlockQ5_1Rows16> {
  using Token = BlockQ8_1;
  static constexpr bool kMin = true, kOffset = false;
};
template <>
struct Rows16Traits<BlockMXFP4Rows16> {
  using Token = BlockQ8_0;
  static constexpr bool kMin = false, kOffset = true;
};

// Whether a copy's unsigned operands are its levels plus 128 (Q8_0's, IQ4_NL's, MXFP4's): too wide
// for vpmaddubsw's pairs, so without VNNI the kernels move the signs instead.
template <class Group>
inline constexpr bool kLevelsPlus128 = Group::kOffset == 128;

// Whether a kernel of set Arch starts each block's sums at minus the token's offset:
// every copy with an offset, except those of levels plus 128 without VNNI, whose
// sign-moving dot gives the levels' sums directly.
template <class Arch, class Group>
inline constexpr bool kSubtractsOffset = Rows16Traits<Group>::kOffset &&
                                         (has_vnni_v<Arch> || !kLevelsPlus128<Group>);

// A nibble type's sixteen levels (kIq4nlValues, kMxfp4Values) plus 128 (the sign bit
// flipped), in every 128-bit lane: a byte shuffle by the nibbles gives vpdpbusd's unsigned
// operand.
template <class Arch>
inline __m512i levels_plus128_512(const std::int8_t (&values)[16]) noexcept {
  const __m128i levels = _mm_loadu_si128(reinterpret_cast<const __m128i*>(values));
  return _mm512_broadcast_i32x4(_mm_xor_si128(levels, _mm_set1_epi8(static_cast<char>(0x80))));
}

// The sixteen rows' factors of a group's block as floats: the f16 d converted, or MXFP4's
// E8M0 bytes as e8m0_half's bits (2^(e - 128): (e - 1) << 23, and below e = 2 the
// subnormals 2^21 << e), both exact.
template <class Arch, class Group>
inline __m512 row_scales_512(const Group& blk) noexcept {
  if constexpr (std::is_same_v<Group, BlockMXFP4Rows16>) {
    const __m512i e =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.e)));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, subnormal));
  } else {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.d)));
  }
}
// Rows 8h to 8h + 7 of them.
template <class Arch, class Group>
inline __m256 row_scales_256(const Group& blk, std::size_t h) noexcept {
  if constexpr (std::is_same_v<Group, BlockMXFP4Rows16>) {
    const __m256i e =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.e + 8 * h)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.d + 8 * h)));
  }
}

// A block's eight quad vectors (quad c of all sixteen rows) as vpdpbusd's unsigned
// operand: Q4_1's and Q4_0's nibbles split, IQ4_NL's and MXFP4's split and looked up, Q8_0's stored
// bytes (quants plus 128) as they are.
template <class Arch, class Group>
requires std::is_same_v<Group, BlockQ4_1Rows16> || std::is_same_v<Group, BlockQ4_0Rows16>
inline void unsigned_quads(const Group& blk, std::size_t /*unit*/, __m512i q[8]) noexcept {
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (std::size_t c = 0; c < 4; ++c) {
    const __m512i v = _mm512_loadu_si512(blk.qs[c]);  // Q4_0's groups: 32-byte aligned
    q[c] = _mm512_and_si512(v, low);
    q[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
  }
}
template <class Arch>
inline void looked_up_unsigned_quads(const std::uint8_t (*qs)[kRows16][4],
                                     const std::int8_t (&values)[16], __m512i q[8]) noexcept {
  const __m512i low = _mm512_set1_epi8(0x0F), table = levels_plus128_512<Arch>(values);
  for (std::size_t c = 0; c < 4; ++c) {
    const __m512i v = _mm512_loadu_si512(qs[c]);  // 32- or 16-byte aligned
    q[c] = _mm512_shuffle_epi8(table, _mm512_and_si512(v, low));
    q[c + 4] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
  }
}
template <class Arch>
inline void unsigned_quads(const BlockIQ4NLRows16& blk, std::size_t /*unit*/,
                           __m512i q[8]) noexcept {
  looked_up_unsigned_quads<Arch>(blk.qs, kIq4nlValues, q);
}
template <class Arch>
inline void unsigned_quads(const BlockIQ4XSRows16& blk, std::size_t unit, __m512i q[8]) noexcept {
  looked_up_unsigned_quads<Arch>(blk.qs[unit], kIq4nlValues, q);
}
template <class Arch>
inline void unsigned_quads(const BlockMXFP4Rows16& blk, std::size_t /*unit*/,
                           __m512i q[8]) noexcept {
  looked_up_unsigned_quads<Arch>(blk.qs, kMxfp4Values, q);
}
template <class Arch>
inline void unsigned_quads(const BlockQ8_0Rows16& blk, std::size_t /*unit*/,
                           __m512i q[8]) noexcept {
  for (std::size_t c = 0; c < 8; ++c) q[c] = _mm512_loadu_si512(blk.qs[c]);
}
// Q5_0's and Q5_1's: the nibbles with each row's fifth bits shifted to bit 4 (their order
// in qh makes that one lane shift per quad, quant/rows16.hpp) and merged by one ternary
// logic step, a | (b & 0x10).
template <class Arch, class Group>
requires kFifthBits<Group>
inline void unsigned_quads(const Group& blk, std::size_t /*unit*/, __m512i q[8]) noexcept {
  const __m512i low = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  const __m512i qh = _mm512_loadu_si512(blk.qh);
  for (std::size_t c = 0; c < 4; ++c) {
    const __m512i v = _mm512_loadu_si512(blk.qs[c]);
    const auto shift = static_cast<int>(c);
    q[c] = _mm512_ternarylogic_epi32(
        _mm512_and_si512(v, low), _mm512_sllv_epi32(qh, _mm512_set1_epi32(4 - shift)), bit4, 0xF8);
    q[c + 4] =
        _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(v, 4), low),
                                  _mm512_srlv_epi32(qh, _mm512_set1_epi32(shift)), bit4, 0xF8);
  }
}

// Whether a group's units are summed in integers over its block before any float step:
// IQ4_XS's eight sub-blocks times their integer scales (quant/rows16.hpp's reference).
template <class Group>
inline constexpr bool kSumsWholeBlock = Group::kSubBlocks > 1;

// The sixteen rows' integer scales of unit `unit` (IQ4_XS's s_j - 32) as int32.
template <class Arch>
inline __m512i unit_int_scales_512(const BlockIQ4XSRows16& blk, std::size_t unit) noexcept {
  return _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(blk.scales[unit])));
}

// Quad c of a token's 32 quants in every lane: a broadcast straight from memory (one load,
// no shuffle; through a 32-bit register it would cost a shuffle-port step per dot).
template <class Arch>
inline __m512i token_quad(const std::int8_t* qs, std::size_t c) noexcept {
  return _mm512_broadcastd_epi32(_mm_loadu_si32(qs + 4 * c));
}

// One token's products of quad c, q[c] times the token's bytes 4c .. 4c + 3, added to `sum`.
template <class Arch, class Group>
inline __m512i add_quad_512(__m512i sum, __m512i q, const std::int8_t* token_qs,
                            std::size_t c) noexcept {
  const __m512i xq = token_quad<Arch>(token_qs, c);
  if constexpr (kLevelsPlus128<Group> && !has_vnni_v<Arch>) {
    // Without VNNI: |w| x (y with w's sign), pairs within 2 x 128 x 127 (see above).
    const __m512i wq = _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
    const __m512i signed_x =
        _mm512_mask_sub_epi8(xq, _mm512_movepi8_mask(wq), _mm512_setzero_si512(), xq);
    return _mm512_add_epi32(sum,
                            _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(wq), signed_x),
                                              _mm512_set1_epi16(1)));
  } else {
    return dot4_u8s8_512<Arch>(sum, q, xq);
  }
}

// Partial sums per token in block_sums_512 with VNNI: vpdpbusd's result reaches the next
// dot on the same sum four cycles later, and the unit takes one dot a cycle, so four sums
// must be in flight at once. One token's eight dots on one sum wait on each other, and the
// dots of four tokens written token after token leave the core's scheduler to find the
// other sums 8 to 24 dots ahead. Quad after quad, as below, the dots of four tokens
// overlap, and passes of a few tokens and whole prefills both take less time
// (bench/README.md, "Every file type on a Zen 4 VM (BASELINES.md's kind)", measures it).
template <std::size_t T>
inline constexpr std::size_t kPartialSums = T >= 4 ? 1 : (T == 1 ? 4 : 2);

// One token's exact int32 sums of a block for the sixteen rows, from `start`: quad after
// quad on one sum, which suits the sets without VNNI, whose quads' sums end in an add of
// one cycle's latency (the quad-major order of the VNNI kernels ran slower there; the
// same section of bench/README.md measures it).
template <class Arch, class Group>
inline __m512i block_sums_512(const __m512i q[8], const std::int8_t* token_qs,
                              __m512i start) noexcept {
  __m512i isum = start;
  for (std::size_t c = 0; c < 8; ++c) isum = add_quad_512<Arch, Group>(isum, q[c], token_qs, c);
  return isum;
}

// With VNNI, T tokens' sums of a block at once, each from its start: quad after quad, so
// that consecutive dots add to different sums (kPartialSums; integers, so the order of
// the additions changes no bit).
template <class Arch, class Group, std::size_t T>
requires has_vnni_v<Arch>
inline void block_sums_512(const __m512i q[8], const std::int8_t* const (&token_qs)[T],
                           __m512i (&isum)[T]) noexcept {
  constexpr std::size_t kParts = kPartialSums<T>;
  __m512i part[T][kParts];
  for (std::size_t t = 0; t < T; ++t) {
    part[t][0] = isum[t];
    for (std::size_t k = 1; k < kParts; ++k) part[t][k] = _mm512_setzero_si512();
  }
#pragma GCC unroll 8
  for (std::size_t c = 0; c < 8; ++c) {
#pragma GCC unroll 4
    for (std::size_t t = 0; t < T; ++t) {
      __m512i& sum = part[t][c % kParts];
      sum = add_quad_512<Arch, Group>(sum, q[c], token_qs[t], c);
    }
  }
  for (std::size_t t = 0; t < T; ++t) {
    isum[t] = part[t][0];
    for (std::size_t k = 1; k < kParts; ++k) isum[t] = _mm512_add_epi32(isum[t], part[t][k]);
  }
}

// T tokens (x[t * x_stride], their terms as far apart) times one group:
// each unit's weights are loaded and unpacked once for all T, and each token keeps its own
// accumulator, so a token's floats are the same for any T.
template <class Arch, std::size_t T, class Group>
inline void rows16_tokens_512(const Group* w, std::size_t nblocks, __mmask16 rows,
                              const typename Rows16Traits<Group>::Token* x, std::size_t x_stride,
                              const Rows16Terms<Group>* terms, float* y,
                              std::size_t y_stride) noexcept {
  using Traits = Rows16Traits<Group>;
  constexpr std::size_t kUnits = Group::kSubBlocks;
  __m512 acc[T], mins[T];  // the min terms apart (quant/rows16.hpp's references)
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (auto& m : mins) m = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const Group& blk = w[b];
    const __m512 d = row_scales_512<Arch>(blk);
    [[maybe_unused]] __m512 wm = _mm512_setzero_ps();
    if constexpr (Traits::kMin) {
      wm = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk.m)));
    }
    [[maybe_unused]] __m512i whole[T];  // kSumsWholeBlock: the block's integer sums
    if constexpr (kSumsWholeBlock<Group>) {
      for (auto& s : whole) s = _mm512_setzero_si512();
    }
    for (std::size_t u = 0; u < kUnits; ++u) {
      prefetch_unit_ahead(w + b, u);
      __m512i q[8];
      unsigned_quads<Arch>(blk, u, q);
      [[maybe_unused]] __m512i scales;
      if constexpr (kSumsWholeBlock<Group>) scales = unit_int_scales_512<Arch>(blk, u);
      // Token t's float steps on its integer sums.
      const auto finish = [&](std::size_t t, __m512i isum) {
        const auto& at = terms[t * x_stride + b];
        if constexpr (kSumsWholeBlock<Group>) {
          whole[t] = _mm512_add_epi32(whole[t], _mm512_mullo_epi32(isum, scales));
        } else {
          const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(isum), d);
          acc[t] = _mm512_fmadd_ps(v, _mm512_set1_ps(at.d), acc[t]);
        }
        if constexpr (Traits::kMin) mins[t] = _mm512_fmadd_ps(wm, _mm512_set1_ps(at.s), mins[t]);
      };
      const auto start = [&](std::size_t t) {
        if constexpr (kSubtractsOffset<Arch, Group>) {
          return _mm512_set1_epi32(-terms[t * x_stride + b].offset[u]);
        } else {
          return _mm512_setzero_si512();
        }
      };
      if constexpr (has_vnni_v<Arch>) {
        const std::int8_t* token_qs[T];
        __m512i isums[T];
        for (std::size_t t = 0; t < T; ++t) {
          token_qs[t] = x[t * x_stride + b].qs + 32 * u;
          isums[t] = start(t);
        }
        block_sums_512<Arch, Group>(q, token_qs, isums);
#pragma GCC unroll 4
        for (std::size_t t = 0; t < T; ++t) finish(t, isums[t]);
      } else {
#pragma GCC unroll 4
        for (std::size_t t = 0; t < T; ++t) {
          finish(t, block_sums_512<Arch, Group>(q, x[t * x_stride + b].qs + 32 * u, start(t)));
        }
      }
    }
    if constexpr (kSumsWholeBlock<Group>) {
#pragma GCC unroll 4
      for (std::size_t t = 0; t < T; ++t) {
        const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(whole[t]), d);
        acc[t] = _mm512_fmadd_ps(v, _mm512_set1_ps(terms[t * x_stride + b].d), acc[t]);
      }
    }
  }
  for (std::size_t t = 0; t < T; ++t) {
    if constexpr (Traits::kMin) acc[t] = _mm512_add_ps(acc[t], mins[t]);
    _mm512_mask_storeu_ps(y + t * y_stride, rows, acc[t]);
  }
}

// The WeightKernels::rows16 kernel: tokens four at a time, then the rest.
template <class Arch, class Group>
void rows16_512(const Group* w, std::size_t nblocks, std::size_t n_rows,
                const typename Rows16Traits<Group>::Token* x, std::size_t x_stride,
                std::size_t n_tokens, const Rows16Terms<Group>* terms, float* y,
                std::size_t y_stride) noexcept {
  const std::size_t nr = n_rows < kRows16 ? n_rows : kRows16;
  const auto rows = static_cast<__mmask16>((1u << nr) - 1);
  const auto at = [&](std::size_t t) { return terms + t * x_stride; };
  std::size_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) {
    rows16_tokens_512<Arch, 4>(w, nblocks, rows, x + t * x_stride, x_stride, at(t),
                               y + t * y_stride, y_stride);
  }
  switch (n_tokens - t) {
    case 3:
      return rows16_tokens_512<Arch, 3>(w, nblocks, rows, x + t * x_stride, x_stride, at(t),
                                        y + t * y_stride, y_stride);
    case 2:
      return rows16_tokens_512<Arch, 2>(w, nblocks, rows, x + t * x_stride, x_stride, at(t),
                                        y + t * y_stride, y_stride);
    case 1:
      return rows16_tokens_512<Arch, 1>(w, nblocks, rows, x + t * x_stride, x_stride, at(t),
                                        y + t * y_stride, y_stride);
    default:
      return;
  }
}

// AVX2: the same steps on two 256-bit halves, rows 0-7 and rows 8-15 of each 64-byte
// quad vector (vpmaddubsw and vpmaddwd for the u8 x s8 dot, exact as above; Q8_0,
// IQ4_NL and IQ4_XS with the signs moved).
//
// Q4_1's and Q4_0's nibble products are summed in 16-bit words over a block's eight quads
// and widened once: each vpmaddubsw pair is within 2 x 15 x 128 = 3840, eight of them within
// 30720 < 32767, so the words stay exact and a block takes one vpmaddwd per half instead of
// eight. The sign-moved pairs (up to 2 x 128 x 127) are widened quad by quad.
template <class Group>
inline constexpr bool kNibbleWords =
    std::is_same_v<Group, BlockQ4_1Rows16> || std::is_same_v<Group, BlockQ4_0Rows16>;

// The eight quads of unit `unit` for rows 8h to 8h + 7, as calls f(c, w): Q4_1's and Q4_0's
// nibbles (vpmaddubsw's unsigned operand), IQ4's and MXFP4's levels and Q8_0's quants (signed, for
// the sign-moving dot), Q5's 5-bit quants (0..31, which the sign-moving dot takes as they are: abs
// and sign leave non-negative bytes alone).
template <class Arch, class Group, class F>
requires kNibbleWords<Group>
inline void half_quads_256(const Group& blk, std::size_t /*unit*/, std::size_t h, F&& f) noexcept {
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (std::size_t c = 0; c < 4; ++c) {
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk.qs[c][8 * h]));
    f(c, _mm256_and_si256(v, low));
    f(c + 4, _mm256_and_si256(_mm256_srli_epi16(v, 4), low));
  }
}
template <class Arch, class F>
inline void looked_up_half_quads_256(const std::uint8_t (*qs)[kRows16][4],
                                     const std::int8_t (&values)[16], std::size_t h,
                                     F&& f) noexcept {
  const __m256i low = _mm256_set1_epi8(0x0F);
  const __m256i levels =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
  for (std::size_t c = 0; c < 4; ++c) {  // (MXFP4's groups: 16-byte aligned)
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs[c][8 * h]));
    f(c, _mm256_shuffle_epi8(levels, _mm256_and_si256(v, low)));
    f(c + 4, _mm256_shuffle_epi8(levels, _mm256_and_si256(_mm256_srli_epi16(v, 4), low)));
  }
}
template <class Arch, class F>
inline void half_quads_256(const BlockIQ4NLRows16& blk, std::size_t /*unit*/, std::size_t h,
                           F&& f) noexcept {
  looked_up_half_quads_256<Arch>(blk.qs, kIq4nlValues, h, f);
}
template <class Arch, class F>
inline void half_quads_256(const BlockIQ4XSRows16& blk, std::size_t unit, std::size_t h,
                           F&& f) noexcept {
  looked_up_half_quads_256<Arch>(blk.qs[unit], kIq4nlValues, h, f);
}
template <class Arch, class F>
inline void half_quads_256(const BlockMXFP4Rows16& blk, std::size_t /*unit*/, std::size_t h,
                           F&& f) noexcept {
  looked_up_half_quads_256<Arch>(blk.qs, kMxfp4Values, h, f);
}
template <class Arch, class Group, class F>
requires kFifthBits<Group>
inline void half_quads_256(const Group& blk, std::size_t /*unit*/, std::size_t h, F&& f) noexcept {
  const __m256i low = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  const __m256i qh = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk.qh[8 * h]));
  for (std::size_t c = 0; c < 4; ++c) {
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(blk.qs[c][8 * h]));
    const auto shift = static_cast<int>(c);
    f(c,
      _mm256_or_si256(_mm256_and_si256(v, low),
                      _mm256_and_si256(_mm256_sllv_epi32(qh, _mm256_set1_epi32(4 - shift)), bit4)));
    f(c + 4,
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low),
                      _mm256_and_si256(_mm256_srlv_epi32(qh, _mm256_set1_epi32(shift)), bit4)));
  }
}
template <class Arch, class F>
inline void half_quads_256(const BlockQ8_0Rows16& blk, std::size_t /*unit*/, std::size_t h,
                           F&& f) noexcept {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (std::size_t c = 0; c < 8; ++c) {
    f(c, _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk.qs[c][8 * h])),
                          flip));
  }
}

// One quad's products added to a token's sums: 16-bit words for the nibbles, int32
// lanes for the signed levels (|w| x (y with w's sign), pairs within 2 x 128 x 127) and
// Q5's quants (eight pairs of up to 2 x 31 x 128 would overflow a word).
template <class Group>
inline __m256i add_quad_256(__m256i sums, __m256i w, __m256i x) noexcept {
  if constexpr (kNibbleWords<Group>) {
    return _mm256_add_epi16(sums, _mm256_maddubs_epi16(w, x));
  } else {
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(sums, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
}

// A token's int32 sums of a unit from add_quad_256's.
template <class Group>
inline __m256i widen_sums_256(__m256i sums) noexcept {
  if constexpr (kNibbleWords<Group>) {
    return _mm256_madd_epi16(sums, _mm256_set1_epi16(1));
  } else {
    return sums;
  }
}

// Rows 8h to 8h + 7 (the first n_out of them written) times T tokens: each half-group's
// quads are loaded and unpacked once for all T (prefill, where the group stays in L1 while
// the tokens pass over it), and each token's floats take the one-token kernel's steps in
// its order (below), so a token gets the same bits from either, for any T.
template <class Arch, std::size_t T, class Group>
inline void rows16_half_tokens_256(const Group* w, std::size_t nblocks, std::size_t h,
                                   const typename Rows16Traits<Group>::Token* x,
                                   std::size_t x_stride, const Rows16Terms<Group>* terms, float* y,
                                   std::size_t y_stride, std::size_t n_out) noexcept {
  using Traits = Rows16Traits<Group>;
  constexpr std::size_t kUnits = Group::kSubBlocks;
  __m256 acc[T];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::size_t b = 0; b < nblocks; ++b) {
    const Group& blk = w[b];
    const __m256 wd = row_scales_256<Arch>(blk, h);
    [[maybe_unused]] __m256i whole[T];  // kSumsWholeBlock: the block's integer sums
    if constexpr (kSumsWholeBlock<Group>) {
      for (auto& s : whole) s = _mm256_setzero_si256();
    }
    for (std::size_t u = 0; u < kUnits; ++u) {
      __m256i sums[T];
      for (auto& s : sums) s = _mm256_setzero_si256();
      half_quads_256<Arch>(blk, u, h, [&](std::size_t c, __m256i wq) {
#pragma GCC unroll 4
        for (std::size_t t = 0; t < T; ++t) {
          std::int32_t quad;
          std::memcpy(&quad, x[t * x_stride + b].qs + 32 * u + 4 * c, sizeof(quad));
          sums[t] = add_quad_256<Group>(sums[t], wq, _mm256_set1_epi32(quad));
        }
      });
#pragma GCC unroll 4
      for (std::size_t t = 0; t < T; ++t) {
        __m256i isum = widen_sums_256<Group>(sums[t]);
        if constexpr (kSubtractsOffset<Arch, Group>) {
          isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(terms[t * x_stride + b].offset[u]));
        }
        if constexpr (kSumsWholeBlock<Group>) {  // times s_j - 32, in integers
          const __m256i scales = _mm256_cvtepi8_epi32(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.scales[u] + 8 * h)));
          whole[t] = _mm256_add_epi32(whole[t], _mm256_mullo_epi32(isum, scales));
        } else {
          const __m256 yd = _mm256_set1_ps(terms[t * x_stride + b].d);
          acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), wd), yd, acc[t]);
        }
      }
    }
    if constexpr (kSumsWholeBlock<Group>) {
#pragma GCC unroll 4
      for (std::size_t t = 0; t < T; ++t) {
        const __m256 yd = _mm256_set1_ps(terms[t * x_stride + b].d);
        acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(whole[t]), wd), yd, acc[t]);
      }
    }
  }
  if constexpr (Traits::kMin) {  // the min terms apart, in a pass of their own (registers)
    __m256 mins[T];
    for (auto& m : mins) m = _mm256_setzero_ps();
    for (std::size_t b = 0; b < nblocks; ++b) {
      const __m256 wm =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(w[b].m + 8 * h)));
#pragma GCC unroll 4
      for (std::size_t t = 0; t < T; ++t) {
        mins[t] = _mm256_fmadd_ps(wm, _mm256_set1_ps(terms[t * x_stride + b].s), mins[t]);
      }
    }
    for (std::size_t t = 0; t < T; ++t) acc[t] = _mm256_add_ps(acc[t], mins[t]);
  }
  for (std::size_t t = 0; t < T; ++t) {
    alignas(32) float out[8];
    _mm256_store_ps(out, acc[t]);
    std::memcpy(y + t * y_stride + 8 * h, out, n_out * sizeof(float));
  }
}

// One token, both halves in one pass over the group, streaming it from memory (decode):
// per block and row, acc = fma(float(isum) x wd, yd, acc), the min terms apart, added at
// the end, as rows16_half_tokens_256.
template <class Arch, class Group>
void rows16_token_256(const Group* w, std::size_t nblocks, std::size_t n_rows,
                      const typename Rows16Traits<Group>::Token* xt,
                      const Rows16Terms<Group>* terms, float* y) noexcept {
  using Traits = Rows16Traits<Group>;
  constexpr std::size_t kUnits = Group::kSubBlocks;
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  __m256 mins[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};  // the min terms apart
  for (std::size_t b = 0; b < nblocks; ++b) {
    const Group& blk = w[b];
    const __m256 yd = _mm256_set1_ps(terms[b].d);
    [[maybe_unused]] __m256i whole[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (std::size_t u = 0; u < kUnits; ++u) {
      prefetch_unit_ahead(w + b, u);
      for (std::size_t h = 0; h < 2; ++h) {
        __m256i sums = _mm256_setzero_si256();
        half_quads_256<Arch>(blk, u, h, [&](std::size_t c, __m256i wq) {
          std::int32_t quad;
          std::memcpy(&quad, xt[b].qs + 32 * u + 4 * c, sizeof(quad));
          sums = add_quad_256<Group>(sums, wq, _mm256_set1_epi32(quad));
        });
        __m256i isum = widen_sums_256<Group>(sums);
        if constexpr (kSubtractsOffset<Arch, Group>) {
          isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(terms[b].offset[u]));
        }
        if constexpr (kSumsWholeBlock<Group>) {  // times s_j - 32, in integers
          const __m256i scales = _mm256_cvtepi8_epi32(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.scales[u] + 8 * h)));
          whole[h] = _mm256_add_epi32(whole[h], _mm256_mullo_epi32(isum, scales));
        } else {
          const __m256 wd = row_scales_256<Arch>(blk, h);
          acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(isum), wd), yd, acc[h]);
        }
      }
    }
    for (std::size_t h = 0; h < 2; ++h) {
      if constexpr (kSumsWholeBlock<Group>) {
        const __m256 wd = row_scales_256<Arch>(blk, h);
        acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(whole[h]), wd), yd, acc[h]);
      }
      if constexpr (Traits::kMin) {
        const __m256 wm =
            _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(blk.m + 8 * h)));
        mins[h] = _mm256_fmadd_ps(wm, _mm256_set1_ps(terms[b].s), mins[h]);
      }
    }
  }
  if constexpr (Traits::kMin) {
    acc[0] = _mm256_add_ps(acc[0], mins[0]);
    acc[1] = _mm256_add_ps(acc[1], mins[1]);
  }
  alignas(32) float out[kRows16];
  _mm256_store_ps(out, acc[0]);
  _mm256_store_ps(out + 8, acc[1]);
  std::memcpy(y, out, (n_rows < kRows16 ? n_rows : kRows16) * sizeof(float));
}

// The WeightKernels::rows16 kernel on AVX2: one token streams the group (decode); more go
// half a group at a time, four tokens per pass over it, then the rest.
template <class Arch, class Group>
void rows16_256(const Group* w, std::size_t nblocks, std::size_t n_rows,
                const typename Rows16Traits<Group>::Token* x, std::size_t x_stride,
                std::size_t n_tokens, const Rows16Terms<Group>* terms, float* y,
                std::size_t y_stride) noexcept {
  if (n_tokens == 1) return rows16_token_256<Arch>(w, nblocks, n_rows, x, terms, y);
  const std::size_t nr = n_rows < kRows16 ? n_rows : kRows16;
  const auto at = [&](std::size_t t) { return terms + t * x_stride; };
  for (std::size_t h = 0; 8 * h < nr; ++h) {
    const std::size_t n_out = nr - 8 * h < 8 ? nr - 8 * h : 8;
    std::size_t t = 0;
    for (; t + 4 <= n_tokens; t += 4) {
      rows16_half_tokens_256<Arch, 4>(w, nblocks, h, x + t * x_stride, x_stride, at(t),
                                      y + t * y_stride, y_stride, n_out);
    }
    switch (n_tokens - t) {
      case 3:
        rows16_half_tokens_256<Arch, 3>(w, nblocks, h, x + t * x_stride, x_stride, at(t),
                                        y + t * y_stride, y_stride, n_out);
        break;
      case 2:
        rows16_half_tokens_256<Arch, 2>(w, nblocks, h, x + t * x_stride, x_stride, at(t),
                                        y + t * y_stride, y_stride, n_out);
        break;
      case 1:
        rows16_half_tokens_256<Arch, 1>(w, nblocks, h, x + t * x_stride, x_stride, at(t),
                                        y + t * y_stride, y_stride, n_out);
        break;
      default:
        break;
    }
  }
}

}  // namespace smol::simd::x86

#endif  // SMOL_X86
