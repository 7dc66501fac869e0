// The kernel unit of Q5_K (quant/q5_k.hpp): its dot with Q8_K activations in every
// instruction set, all here. Q5_K is Q4_K plus a fifth bit per value, so each kernel is
// its Q4_K sibling with the bit from qh added to the nibble before the multiply; the
// min term is Q4_K's. Prefill on x86: tiles of tokens on the Q8_K rows (tile_dots), each
// weight block unpacked once per tile, with the dot's bits (as Q3_K's). On AMX, prefill
// on the matrix unit as Q4_K's (x86_amx.hpp): s*q is at most 63 * 31 = 1953, so Q4_K's two
// byte planes 32 h + l hold it with h <= 61. Dots on the file's rows on the AVX-512 sets:
// Q4_K's 512-bit dots (x86_avx512.hpp) with the fifth bit added by chunk (Q5KChunks).
// Where the model makes the eight-row copy (quant/rows8.hpp, every x86 set), decode and
// the batched steps read it through Q4_K's interleaved kernels with the fifth bit
// (x86_avx2_rows8.hpp, x86_avx512_rows8.hpp), and so does prefill, AMX's matrix unit
// through the file's block taken back out of the copy.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smol/core/half.hpp"
#include "smol/quant/q5_k.hpp"
#include "smol/simd/kernels.hpp"
#include "smol/simd/neon.hpp"
#include "smol/simd/tile_loop.hpp"
#include "smol/simd/x86_amx.hpp"
#include "smol/simd/x86_avx2.hpp"
#include "smol/simd/x86_avx2_rows8.hpp"
#include "smol/simd/x86_avx512.hpp"
#include "smol/simd/x86_avx512_rows8.hpp"
#include "smol/simd/x86_avx512_token_lanes.hpp"
#include "smol/simd/x86_k_quant_sums.hpp"

namespace smol {

namespace scalar {

// The reference: sum_j d*sc_j*S_j - dmin*m_j*B_j as for Q4_K, with 5-bit quants.
inline float dot_q5k_q8k(const BlockQ5K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::uint8_t scales[8], mins[8];
    unpack_q4k_scales(x[b].scales, scales, mins);
    std::int32_t sumi = 0, summ = 0;
    for (std::size_t j = 0; j < 8; ++j) {
      std::int32_t s = 0;
      for (std::size_t l = 0; l < 32; ++l) s += q5k_quant(x[b], j, l) * y[b].qs[32 * j + l];
      sumi += scales[j] * s;
      summ += mins[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
    }
    sum += f16_to_f32(x[b].d) * y[b].d * static_cast<float>(sumi) -
           f16_to_f32(x[b].dmin) * y[b].d * static_cast<float>(summ);
  }
  return sum;
}

}  // namespace scalar

#if defined(SMOL_X86)
namespace simd::x86 {

// A Q5_K block unpacked for the 256-bit kernels (x86_k_quant_sums.hpp): the 5-bit quants of
// sub-block v in quants[v] with its scale, the eight mins as int16 pairs matching the
// activations' sixteen bsums.
template <class Arch>
inline void unpack_q5k(const BlockQ5K& x, KQuantUnpacked<Arch>& u) noexcept {
  const __m256i nibble = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  const __m128i mins_per_group =
      _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  const __m128i packed = q4k_scales_and_mins<Arch>(x);
  const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(packed));
  u.mins = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(packed, mins_per_group));
  // Bit 2c of each qh byte belongs to sub-block 2c: shifted down two bits per chunk.
  // (A 16-bit shift moves the high byte's bits into the low byte's top, which the
  // mask by 1 discards.)
  __m256i high_bits = load256<Arch>(x.qh);
  for (int c = 0; c < 4; ++c) {
    const __m256i q = load256<Arch>(x.qs + 32 * c);
    u.quants[2 * c] = _mm256_or_si256(_mm256_and_si256(q, nibble),
                                      _mm256_slli_epi16(_mm256_and_si256(high_bits, one), 4));
    u.quants[2 * c + 1] = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble),
        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 1), one), 4));
    high_bits = _mm256_srli_epi16(high_bits, 2);
  }
  for (int v = 0; v < 8; ++v) u.scales[v] = _mm256_shuffle_epi8(sc16, pick_words<Arch>(v, v));
  u.d = _cvtsh_ss(x.d);
  u.dmin = _cvtsh_ss(x.dmin);
}

// A Q5_K block's quants by chunk for the AVX-512 dots of Q4_K's shape (x86_avx512.hpp):
// Q4_K's nibbles of chunk c, plus 16 where the fifth bit is set (bit 2c of qh[l] for
// sub-block 2c in bytes 0-31, bit 2c+1 for sub-block 2c+1 in bytes 32-63): one test
// against a per-half bit and one masked add.
template <class Arch>
struct Q5KChunks {
  using Block = BlockQ5K;
  const BlockQ5K& x;
  __m512i high_bits;  // qh's 32 bytes in both halves
  explicit Q5KChunks(const BlockQ5K& block) noexcept
      : x(block),
        high_bits(_mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh)))) {}
  __m512i operator()(int c) const noexcept {
    const __m512i low4 = q4k_chunk_nibbles<Arch>(x.qs, c);
    const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * c))),
                                           _mm256_set1_epi8(static_cast<char>(2 << (2 * c))), 1);
    return _mm512_mask_add_epi8(low4, _mm512_test_epi8_mask(high_bits, bit), low4,
                                _mm512_set1_epi8(16));
  }
};

// Prefill (WeightKernels::tile_dots): each block unpacked once per tile, with AVX2's dot's
// bits (on the AVX-512 sets decode's 512-bit dot sums in another order).
template <class Arch, std::size_t T>
using Q5KRowTile = KQuantRowTile<Arch, T, BlockQ5K, unpack_q5k<Arch>>;

template <class Arch>
void tile_dots_q5k(const std::byte* w, std::size_t row_bytes, std::size_t n_rows, const BlockQ8K* x,
                   std::size_t x_stride, std::size_t nblocks, std::size_t n_tokens, float* y,
                   std::size_t y_stride) noexcept {
  run_tiles<BlockQ5K, Arch, Q5KRowTile, is_avx512_v<Arch> ? 8 : 4, /*kAssign=*/true>(
      w, row_bytes, n_rows, x, x_stride, nblocks, n_tokens, y, y_stride);
}

// AMX prefill (WeightKernels::matrix, amx_matrix_with_mins): Q4_K's expansion with the fifth
// bit of every quant (bit 2c of qh[l] for sub-block 2c, bit 2c + 1 for 2c + 1) added to the
// nibble.
template <class Arch>
inline void expand_q5k_block(const BlockQ5K& x, std::size_t b, std::size_t cols, std::size_t r,
                             const ExpandedRows& e) noexcept {
  const __m512i nibble = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
  expand_scaled_block<Arch>(x, b, r * cols + b * QK_K, r, e, [&](int c) {
    const __m512i low4 = _mm512_and_si512(broadcast_shifted<Arch>(x.qs + 32 * c, 0, 4), nibble);
    const __m512i bit5 = _mm512_and_si512(broadcast_shifted<Arch>(x.qh, 2 * c, 2 * c + 1), one);
    return _mm512_or_si512(low4, _mm512_slli_epi16(bit5, 4));
  });
}

// The planes of expand_q5k_block from lane `lane` of an eight-row copy's block, through
// the file's block.
template <class Arch>
inline void expand_q5k_copy_block(const BlockQ5KRows8& g, std::size_t lane, std::size_t b,
                                  std::size_t cols, std::size_t r, const ExpandedRows& e) noexcept {
  expand_q5k_block<Arch>(file_block_of(g, lane), b, cols, r, e);
}

}  // namespace simd::x86
#endif  // SMOL_X86

#if defined(__aarch64__)
namespace simd::neon {

template <class Arch>
float dot_q5k_q8k(const BlockQ5K* x, const BlockQ8K* y, std::size_t nblocks) noexcept {
  float sum = 0.0f;
  const uint8x16_t nibble = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
  for (std::size_t b = 0; b < nblocks; ++b) {
    std::uint8_t scales[8], mins[8];
    unpack_q4k_scales(x[b].scales, scales, mins);
    const uint8x16_t qh[2] = {vld1q_u8(x[b].qh), vld1q_u8(x[b].qh + 16)};
    std::int32_t sumi = 0, summ = 0;
    for (std::size_t j = 0; j < 8; ++j) {
      const std::uint8_t* q = x[b].qs + 32 * (j / 2);
      const std::int8_t* yq = y[b].qs + 32 * j;
      const int8x16_t down = vdupq_n_s8(static_cast<std::int8_t>(-static_cast<int>(j)));
      std::int32_t s = 0;
      for (int half = 0; half < 2; ++half) {
        const uint8x16_t raw = vld1q_u8(q + 16 * half);
        const uint8x16_t low4 = j % 2 == 0 ? vandq_u8(raw, nibble) : vshrq_n_u8(raw, 4);
        const uint8x16_t bit5 = vshlq_n_u8(vandq_u8(vshlq_u8(qh[half], down), one), 4);
        s += dot16<Arch>(vreinterpretq_s8_u8(vorrq_u8(low4, bit5)), vld1q_s8(yq + 16 * half));
      }
      sumi += scales[j] * s;
      summ += mins[j] * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
    }
    sum += HalfLoads<Arch>::f16_one(x[b].d) * y[b].d * static_cast<float>(sumi) -
           HalfLoads<Arch>::f16_one(x[b].dmin) * y[b].d * static_cast<float>(summ);
  }
  return sum;
}

}  // namespace simd::neon
#endif  // __aarch64__

template <>
struct KernelUnit<BlockWeight<BlockQ5K>> {
  template <class Arch>
  static WeightKernels<BlockWeight<BlockQ5K>> make() noexcept {
    WeightKernels<BlockWeight<BlockQ5K>> k;
    if constexpr (std::is_same_v<Arch, scalar_arch>) {
      k.dot = scalar::dot_q5k_q8k;
      k.rows8 = rows8_q5k_q8k_reference;
#if defined(SMOL_X86)
    } else if constexpr (std::is_same_v<Arch, avx2_arch> || is_avx512_v<Arch>) {
      using simd::x86::Q5KChunks;
      if constexpr (std::is_same_v<Arch, avx2_arch>) {
        k.dot = simd::x86::dot_k_quant_q8k<Arch, BlockQ5K, simd::x86::unpack_q5k<Arch>,
                                           /*kStreams=*/false>;
        k.dot_rounds_like_tile_dots = true;  // Q5KRowTile does this dot's operations
        k.rows8 = simd::x86::rows8_q5k_q8k_256<Arch>;
      } else if constexpr (has_vnni_v<Arch>) {
        k.dot = simd::x86::dot_q4k_like_512_vnni<Arch, Q5KChunks<Arch>>;
        k.dot_streams = true;
        k.rows8 = simd::x86::rows8_q5k_q8k_512<Arch>;
      } else {
        k.dot = simd::x86::dot_q4k_like_512<Arch, Q5KChunks<Arch>>;
        k.dot_streams = true;
        k.rows8 = simd::x86::rows8_q5k_q8k_512<Arch>;
      }
      k.tile_dots = simd::x86::tile_dots_q5k<Arch>;
      if constexpr (std::is_same_v<Arch, amx_arch>) {
        using simd::x86::amx_matrix_with_mins, simd::x86::expand_q5k_block;
        k.matrix = amx_matrix_with_mins<
            Arch, simd::x86::expand_file_row<Arch, BlockQ5K, expand_q5k_block<Arch>>>;
        k.packed_rows8 = amx_matrix_with_mins<
            Arch, simd::x86::expand_copy_row<Arch, BlockQ5KRows8,
                                             simd::x86::expand_q5k_copy_block<Arch>>>;
        k.rows8_rounds_like_packed = simd::x86::kRows8MatrixOrder<Arch>;
      } else if constexpr (is_avx512_v<Arch>) {
        // Prefill with the tokens in the lanes, with `rows8`'s bits (x86_avx512_token_lanes.hpp).
        k.packed_rows8 = simd::x86::token_lanes_512<Arch, BlockQ5KRows8>;
        k.rows8_rounds_like_packed = true;
      }
#endif
#if defined(__aarch64__)
    } else if constexpr (std::is_same_v<Arch, neon_arch>) {
      k.dot = simd::neon::dot_q5k_q8k<Arch>;
#endif
    }
    return k;
  }
};

}  // namespace smol
