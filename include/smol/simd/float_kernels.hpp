// Float dot products, SwiGLU and the Q8_K quantizer, written once over xsimd batches.
//
// Only the f16/bf16 -> f32 widening differs per ISA (xsimd 8.1 has no half types):
// each ISA header specialises HalfLoads<Arch>. Everything here is a template on the
// arch tag, so each dispatch unit compiles its own copy under its own flags.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <xsimd/xsimd.hpp>

#include "smol/core/half.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/simd/arch.hpp"

namespace smol::simd {

// Specialised per ISA with three static members:
//   batch<float, A> f16(const f16_bits*), batch<float, A> bf16(const bf16_bits*)
//   (each widening batch::size values) and float f16_one(f16_bits).
template <class Arch>
struct HalfLoads;

// Specialised per ISA with two static members, the 32 values of a quantized block
// times its scale (the same floats as quant/dequantize.hpp's dequantize_block) as
// 32 / batch::size batches, widened in registers:
//   void q8_0(const BlockQ8_0&, batch<float, A>* out), void q4_0(const BlockQ4_0&, ...).
template <class Arch>
struct BlockLoads;

template <class Arch>
float bf16_one(bf16_bits h) noexcept {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// x is given as a loader: load(i) returns the batch of x values starting at i, and
// one(i) a single value. Four accumulators hide the FMA latency.
template <class Arch, class Load, class One>
float dot_loaded(Load load, One one, const float* y, std::size_t n) noexcept {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  constexpr std::size_t w = batch::size;
  batch a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
  std::size_t i = 0;
  for (; i + 4 * w <= n; i += 4 * w) {
    a0 = xsimd::fma(load(i), batch::load_unaligned(y + i), a0);
    a1 = xsimd::fma(load(i + w), batch::load_unaligned(y + i + w), a1);
    a2 = xsimd::fma(load(i + 2 * w), batch::load_unaligned(y + i + 2 * w), a2);
    a3 = xsimd::fma(load(i + 3 * w), batch::load_unaligned(y + i + 3 * w), a3);
  }
  for (; i + w <= n; i += w) a0 = xsimd::fma(load(i), batch::load_unaligned(y + i), a0);
  float sum = xsimd::hadd((a0 + a1) + (a2 + a3));
  for (; i < n; ++i) sum += one(i) * y[i];
  return sum;
}

template <class Arch>
float dot_f32(const float* x, const float* y, std::size_t n) noexcept {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  return dot_loaded<Arch>([x](std::size_t i) { return batch::load_unaligned(x + i); },
                          [x](std::size_t i) { return x[i]; }, y, n);
}

template <class Arch>
float dot_f16_f32(const f16_bits* x, const float* y, std::size_t n) noexcept {
  return dot_loaded<Arch>([x](std::size_t i) { return HalfLoads<Arch>::f16(x + i); },
                          [x](std::size_t i) { return HalfLoads<Arch>::f16_one(x[i]); }, y, n);
}

template <class Arch>
float dot_bf16_f32(const bf16_bits* x, const float* y, std::size_t n) noexcept {
  return dot_loaded<Arch>([x](std::size_t i) { return HalfLoads<Arch>::bf16(x + i); },
                          [x](std::size_t i) { return bf16_one<Arch>(x[i]); }, y, n);
}

// SwiGLU with xsimd's vector exp: the scalar std::exp per element (11008 values per layer,
// on one thread) was a visible share of a decode step and of prefill (bench/HISTORY.md,
// "Figures moved from code comments").
template <class Arch>
void swiglu(const float* gate, const float* up, float* out, std::size_t n) noexcept {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  constexpr std::size_t w = batch::size;
  const batch one(1.0f);
  std::size_t i = 0;
  for (; i + w <= n; i += w) {
    const batch g = batch::load_unaligned(gate + i);
    (g / (one + xsimd::exp(-g)) * batch::load_unaligned(up + i)).store_unaligned(out + i);
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// f32 -> Q8_K with ggml's rounding (see quant/quantize_q8k.hpp): the largest magnitude
// m (first one on a tie), iscale = -127 / m, q = min(round-half-even(x * iscale), 127).
// Vector ops give the same bits: multiply, nearbyint and min are exactly rounded.
template <class Arch>
void quantize_row_q8k(const float* x, BlockQ8K* out, std::size_t n) noexcept {
  using batch = xsimd::batch<float, xsimd_arch_t<Arch>>;
  constexpr std::size_t w = batch::size;
  static_assert(QK_K % w == 0);
  for (std::size_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    BlockQ8K& o = out[b];
    batch vmax(0.0f);
    for (std::size_t j = 0; j < QK_K; j += w) {
      vmax = xsimd::max(vmax, xsimd::abs(batch::load_unaligned(x + j)));
    }
    alignas(64) float lanes[w];
    vmax.store_aligned(lanes);
    float amax = 0.0f;
    for (float lane : lanes) amax = lane > amax ? lane : amax;
    if (!(amax > 0.0f)) {
      std::memset(&o, 0, sizeof(o));
      continue;
    }
    std::size_t first = 0;
    while (x[first] != amax && x[first] != -amax) ++first;
    const float iscale = -127.0f / x[first];
    const batch vscale(iscale), cap(127.0f);
    alignas(64) std::int32_t q[QK_K];
    for (std::size_t j = 0; j < QK_K; j += w) {
      const batch v = xsimd::min(xsimd::nearbyint(batch::load_unaligned(x + j) * vscale), cap);
      xsimd::batch_cast<std::int32_t>(v).store_aligned(q + j);
    }
    for (std::size_t g = 0; g < 16; ++g) {
      int s = 0;
      for (std::size_t k = 0; k < 16; ++k) {
        o.qs[16 * g + k] = static_cast<std::int8_t>(q[16 * g + k]);
        s += q[16 * g + k];
      }
      o.bsums[g] = static_cast<std::int16_t>(s);
    }
    o.d = 1.0f / iscale;
  }
}

}  // namespace smol::simd
