// Random and adversarial quantized blocks for the kernel tests (test_simd_*, matvec,
// matmul). Blocks are random bytes with sane f16 scales: never NaN or infinity.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "smol/core/aligned_buffer.hpp"
#include "smol/core/half.hpp"
#include "smol/ops/weight_matrix.hpp"
#include "smol/quant/blocks.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/quant/interleaved_rows.hpp"
#include "smol/quant/iq4.hpp"
#include "smol/quant/legacy_blocks.hpp"
#include "smol/quant/q2_k.hpp"
#include "smol/quant/q3_k.hpp"
#include "smol/quant/q5_k.hpp"
#include "smol/quant/quantize_q8k.hpp"
#include "smol/quant/weight_types.hpp"
#include "smol/simd/kernels_impl.hpp"

namespace smol::testing {

enum class Pattern { random, all_max, zero_scales, huge_scales, tiny_scales };
inline constexpr Pattern kPatterns[] = {Pattern::random, Pattern::all_max, Pattern::zero_scales,
                                        Pattern::huge_scales, Pattern::tiny_scales};

inline f16_bits scale_for(Pattern p, std::mt19937& rng, float typical) {
  std::uniform_real_distribution<float> u(0.25f, 1.0f);
  switch (p) {
    case Pattern::zero_scales:
      return 0;
    case Pattern::huge_scales:
      return 0x7bff;  // 65504, the largest finite f16
    case Pattern::tiny_scales:
      return 0x0001;  // the smallest subnormal
    default:
      return f32_to_f16(typical * u(rng));
  }
}

inline void fill_bytes(std::uint8_t* p, std::size_t n, Pattern pattern, std::mt19937& rng) {
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = pattern == Pattern::all_max ? 0xFF : static_cast<std::uint8_t>(rng());
  }
}

inline std::vector<BlockQ4K> q4k_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockQ4K> v(n);
  for (auto& b : v) {
    b.d = scale_for(p, rng, 0.01f);
    b.dmin = scale_for(p, rng, 0.005f);
    fill_bytes(b.scales, sizeof(b.scales), p, rng);
    fill_bytes(b.qs, sizeof(b.qs), p, rng);
    if (p == Pattern::zero_scales) std::fill(std::begin(b.scales), std::end(b.scales), 0);
  }
  return v;
}

// Q2_K: random quants, scales and mins (all_max: every one 15, with every quant 3).
inline std::vector<BlockQ2K> q2k_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockQ2K> v(n);
  for (auto& b : v) {
    b.d = scale_for(p, rng, 0.005f);
    b.dmin = scale_for(p, rng, 0.005f);
    fill_bytes(b.scales, sizeof(b.scales), p, rng);
    fill_bytes(b.qs, sizeof(b.qs), p, rng);
    if (p == Pattern::zero_scales) std::fill(std::begin(b.scales), std::end(b.scales), 0);
  }
  return v;
}

// Q3_K: random quants, hmask bits and scale codes; all_max sets every code to 63 (scale
// +31) and every level to 3, zero_scales every code to 32 (scale 0). The scale codes of
// random bytes reach both ends, -32 and +31.
inline std::vector<BlockQ3K> q3k_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockQ3K> v(n);
  for (auto& b : v) {
    b.d = scale_for(p, rng, 0.002f);
    fill_bytes(b.hmask, sizeof(b.hmask), p, rng);
    fill_bytes(b.qs, sizeof(b.qs), p, rng);
    fill_bytes(b.scales, sizeof(b.scales), p, rng);
    if (p == Pattern::zero_scales) {
      std::uint8_t codes[16];
      std::fill(std::begin(codes), std::end(codes), std::uint8_t{32});
      pack_q3k_scales(codes, b.scales);
    }
  }
  return v;
}

inline std::vector<BlockQ5K> q5k_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockQ5K> v(n);
  for (auto& b : v) {
    b.d = scale_for(p, rng, 0.005f);
    b.dmin = scale_for(p, rng, 0.005f);
    fill_bytes(b.scales, sizeof(b.scales), p, rng);
    fill_bytes(b.qh, sizeof(b.qh), p, rng);
    fill_bytes(b.qs, sizeof(b.qs), p, rng);
    if (p == Pattern::zero_scales) std::fill(std::begin(b.scales), std::end(b.scales), 0);
  }
  return v;
}

inline std::vector<BlockQ6K> q6k_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockQ6K> v(n);
  for (auto& b : v) {
    b.d = scale_for(p, rng, 0.002f);
    fill_bytes(b.ql, sizeof(b.ql), p, rng);
    fill_bytes(b.qh, sizeof(b.qh), p, rng);
    fill_bytes(reinterpret_cast<std::uint8_t*>(b.scales), sizeof(b.scales), p, rng);
    if (p == Pattern::all_max) std::fill(std::begin(b.scales), std::end(b.scales), 127);
    if (p == Pattern::zero_scales) std::fill(std::begin(b.scales), std::end(b.scales), 0);
  }
  return v;
}

inline std::vector<BlockQ8_0> q8_0_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockQ8_0> v(n);
  std::uniform_int_distribution<int> q(-127, 127);  // ggml never writes -128
  for (auto& b : v) {
    b.d = scale_for(p, rng, 0.01f);
    for (auto& x : b.qs) x = static_cast<std::int8_t>(p == Pattern::all_max ? 127 : q(rng));
  }
  return v;
}

inline std::vector<BlockQ4_0> q4_0_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockQ4_0> v(n);
  for (auto& b : v) {
    b.d = scale_for(p, rng, 0.01f);
    fill_bytes(b.qs, sizeof(b.qs), p, rng);
  }
  return v;
}

// Q4_1, Q5_0, Q5_1: random quants and fifth bits; the min of Q4_1/Q5_1 takes either
// sign (a block's minimum is usually negative), at the pattern's extreme magnitude.
inline f16_bits signed_scale_for(Pattern p, std::mt19937& rng, float typical) {
  const f16_bits magnitude = scale_for(p, rng, typical);
  return (rng() & 1) ? static_cast<f16_bits>(magnitude | 0x8000) : magnitude;
}

inline std::vector<BlockQ4_1> q4_1_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockQ4_1> v(n);
  for (auto& b : v) {
    b.d = scale_for(p, rng, 0.01f);
    b.m = signed_scale_for(p, rng, 0.08f);
    fill_bytes(b.qs, sizeof(b.qs), p, rng);
  }
  return v;
}

inline std::vector<BlockQ5_0> q5_0_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockQ5_0> v(n);
  for (auto& b : v) {
    b.d = scale_for(p, rng, 0.005f);
    fill_bytes(b.qh, sizeof(b.qh), p, rng);
    fill_bytes(b.qs, sizeof(b.qs), p, rng);
  }
  return v;
}

inline std::vector<BlockQ5_1> q5_1_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockQ5_1> v(n);
  for (auto& b : v) {
    b.d = scale_for(p, rng, 0.005f);
    b.m = signed_scale_for(p, rng, 0.08f);
    fill_bytes(b.qh, sizeof(b.qh), p, rng);
    fill_bytes(b.qs, sizeof(b.qs), p, rng);
  }
  return v;
}

// IQ4_NL: random indices; all_max gives every value index 0, level -127, the largest
// magnitude.
inline std::vector<BlockIQ4NL> iq4nl_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockIQ4NL> v(n);
  for (auto& b : v) {
    b.d = signed_scale_for(p, rng, 0.001f);
    fill_bytes(b.qs, sizeof(b.qs), p, rng);
    if (p == Pattern::all_max) std::fill(std::begin(b.qs), std::end(b.qs), 0);
  }
  return v;
}

// MXFP4: random codes under E8M0 scales; all_max gives every value code 15 (-12, the
// largest magnitude), zero_scales e = 0 (2^-128, the smallest scale: E8M0 has no zero),
// huge_scales 2^15 (values to 6 * 2^16, as f16's largest), tiny_scales 2^-24.
inline std::vector<BlockMXFP4> mxfp4_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockMXFP4> v(n);
  std::uniform_int_distribution<int> typical(118, 124);  // scales 2^-9 .. 2^-3
  for (auto& b : v) {
    b.e = p == Pattern::zero_scales   ? 0
          : p == Pattern::huge_scales ? 142
          : p == Pattern::tiny_scales ? 103
                                      : static_cast<std::uint8_t>(typical(rng));
    fill_bytes(b.qs, sizeof(b.qs), p, rng);
  }
  return v;
}

// IQ4_XS: random indices and sub-block scales; all_max gives every scale -32 and every
// index 0 (level -127), zero_scales every sub-block scale 0 (stored 32) besides d = 0.
inline std::vector<BlockIQ4XS> iq4xs_blocks(std::size_t n, Pattern p, std::mt19937& rng) {
  std::vector<BlockIQ4XS> v(n);
  for (auto& b : v) {
    b.d = signed_scale_for(p, rng, 0.0001f);
    b.scales_h = static_cast<std::uint16_t>(rng());
    fill_bytes(b.scales_l, sizeof(b.scales_l), p, rng);
    fill_bytes(b.qs, sizeof(b.qs), p, rng);
    if (p == Pattern::all_max) {
      b.scales_h = 0;
      std::fill(std::begin(b.scales_l), std::end(b.scales_l), 0);
      std::fill(std::begin(b.qs), std::end(b.qs), 0);
    }
    if (p == Pattern::zero_scales) {
      b.scales_h = 0xAAAA;
      std::fill(std::begin(b.scales_l), std::end(b.scales_l), 0);
    }
  }
  return v;
}

inline std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> g(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

template <class>
inline constexpr bool kNoGenerator = false;

// `n_blocks` random blocks of the quantized weight type W (an entry of WeightTypes). A
// new block type adds its generator here.
template <class W>
std::vector<typename W::Block> weight_blocks(std::size_t n_blocks, Pattern p, std::mt19937& rng) {
  if constexpr (W::type == GgmlType::Q2_K) {
    return q2k_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::Q3_K) {
    return q3k_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::Q4_K) {
    return q4k_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::Q5_K) {
    return q5k_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::Q6_K) {
    return q6k_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::Q8_0) {
    return q8_0_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::Q4_0) {
    return q4_0_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::Q4_1) {
    return q4_1_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::Q5_0) {
    return q5_0_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::Q5_1) {
    return q5_1_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::IQ4_NL) {
    return iq4nl_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::IQ4_XS) {
    return iq4xs_blocks(n_blocks, p, rng);
  } else if constexpr (W::type == GgmlType::MXFP4) {
    return mxfp4_blocks(n_blocks, p, rng);
  } else {
    static_assert(kNoGenerator<W>, "tests/test_simd_data.hpp has no generator for this type");
  }
}

// Every entry of WeightTypes: the kernel suites run each one.
inline std::vector<GgmlType> all_weight_types() {
  std::vector<GgmlType> types;
  for_each_weight_type([&](auto w) { types.push_back(decltype(w)::type); });
  return types;
}

template <class W>
inline constexpr bool is_quantized_v = !std::is_same_v<typename W::Activation, float>;

// Q8_K activations; all_max gives every quant +-127 (the extremes the kernels must take).
inline std::vector<BlockQ8K> q8k_activations(std::size_t n_values, Pattern p, std::mt19937& rng) {
  std::vector<float> x = random_floats(n_values, rng);
  if (p == Pattern::all_max) {
    for (std::size_t i = 0; i < n_values; ++i) x[i] = (rng() & 1) ? 1.0f : -1.0f;
  }
  std::vector<BlockQ8K> v(n_values / QK_K);
  quantize_row_q8k(x.data(), v.data(), n_values);
  return v;
}

// An independent double-precision dot of dequantized weights with dequantized
// activations: the value, and the sum of |products| (the scale for tolerances).
struct Reference {
  double value = 0, magnitude = 0;
};
inline Reference reference_dot(const std::vector<float>& w, const std::vector<float>& a) {
  Reference r;
  for (std::size_t i = 0; i < w.size(); ++i) {
    r.value += static_cast<double>(w[i]) * a[i];
    r.magnitude += std::fabs(static_cast<double>(w[i]) * a[i]);
  }
  return r;
}

template <class Block>
std::vector<float> dequantized(GgmlType type, const std::vector<Block>& blocks, std::size_t n) {
  std::vector<float> out(n);
  dequantize_row(type, reinterpret_cast<const std::byte*>(blocks.data()), out.data(), n);
  return out;
}

inline std::vector<float> dequantized_q8k(const std::vector<BlockQ8K>& blocks) {
  std::vector<float> out;
  for (const auto& b : blocks) {
    for (auto q : b.qs) out.push_back(b.d * q);
  }
  return out;
}

inline std::vector<float> dequantized_q8_0(const std::vector<BlockQ8_0>& blocks) {
  std::vector<float> out;
  for (const auto& b : blocks) {
    for (auto q : b.qs) out.push_back(f16_to_f32(b.d) * q);
  }
  return out;
}

// Q8_1 activations, quantized from random floats as ggml does (so s matches the quants);
// all_max gives every quant +-127.
inline std::vector<BlockQ8_1> q8_1_activations(std::size_t n_values, Pattern p, std::mt19937& rng) {
  std::vector<float> x = random_floats(n_values, rng);
  if (p == Pattern::all_max) {
    for (std::size_t i = 0; i < n_values; ++i) x[i] = (rng() & 1) ? 1.0f : -1.0f;
  }
  std::vector<BlockQ8_1> v(n_values / 32);
  quantize_row_q8_1(x.data(), v.data(), n_values);
  return v;
}

// Activations of `n_values` for a quantized weight type W (Q8_K, Q8_0 or Q8_1 blocks);
// all_max gives every quant +-127.
template <class W>
std::vector<typename W::Activation> weight_activations(std::size_t n_values, Pattern p,
                                                       std::mt19937& rng) {
  if constexpr (std::is_same_v<typename W::Activation, BlockQ8K>) {
    return q8k_activations(n_values, p, rng);
  } else if constexpr (std::is_same_v<typename W::Activation, BlockQ8_1>) {
    return q8_1_activations(n_values, p, rng);
  } else {
    return q8_0_blocks(n_values / 32, p, rng);
  }
}

inline std::vector<float> dequantized(const std::vector<BlockQ8K>& act) {
  return dequantized_q8k(act);
}
inline std::vector<float> dequantized(const std::vector<BlockQ8_0>& act) {
  return dequantized_q8_0(act);
}
// d * q; s, which the kernels read for the min term, is d * sum(q) only up to its f16
// rounding.
inline std::vector<float> dequantized(const std::vector<BlockQ8_1>& act) {
  std::vector<float> out;
  for (const auto& b : act) {
    for (auto q : b.qs) out.push_back(f16_to_f32(b.d) * q);
  }
  return out;
}

// Weight bytes for a rows x cols matrix of `type` (random valid blocks).
inline std::vector<std::byte> random_matrix(GgmlType type, std::size_t rows, std::size_t cols,
                                            std::mt19937& rng) {
  std::vector<std::byte> bytes(rows * ggml_row_bytes(type, cols));
  auto put = [&](const auto& blocks) { std::memcpy(bytes.data(), blocks.data(), bytes.size()); };
  const std::size_t n = rows * cols;
  const bool known = visit_weight_type(type, [&]<class W>(W) {
    if constexpr (is_quantized_v<W>) {
      put(weight_blocks<W>(n / W::values_per_block, Pattern::random, rng));
    } else if constexpr (W::type == GgmlType::F32) {
      put(random_floats(n, rng, 0.05f));
    } else {
      std::vector<std::uint16_t> h(n);
      const auto f = random_floats(n, rng, 0.05f);
      for (std::size_t i = 0; i < n; ++i) {
        h[i] = W::type == GgmlType::F16 ? f32_to_f16(f[i]) : f32_to_bf16(f[i]);
      }
      put(h);
    }
  });
  if (!known) throw Error("no generator");
  return bytes;
}

inline WeightMatrix view(GgmlType type, const std::vector<std::byte>& bytes, std::size_t rows,
                         std::size_t cols) {
  return WeightMatrix{type, bytes.data(), rows, cols, ggml_row_bytes(type, cols), "test.weight"};
}

// The scalar kernels row by row: what matvec must reproduce in q8 mode.
inline std::vector<float> expected_q8(const WeightMatrix& w, const float* x) {
  const Kernels& k = kernels_for_isa(Isa::scalar);
  std::vector<float> y(w.rows);
  std::vector<BlockQ8K> q8k(w.cols / QK_K);
  std::vector<BlockQ8_0> q80(w.cols / 32);
  std::vector<BlockQ8_1> q81(w.cols / 32);
  if (w.cols % QK_K == 0) k.quantize_row_q8k(x, q8k.data(), w.cols);
  k.quantize_row_q8_0(x, q80.data(), w.cols);
  k.quantize_row_q8_1(x, q81.data(), w.cols);
  visit_weight_type(w.type, [&]<class W>(W tag) {
    const auto* act = [&] {
      if constexpr (std::is_same_v<typename W::Activation, BlockQ8K>) {
        return q8k.data();
      } else if constexpr (std::is_same_v<typename W::Activation, BlockQ8_0>) {
        return q80.data();
      } else if constexpr (std::is_same_v<typename W::Activation, BlockQ8_1>) {
        return q81.data();
      } else {
        return x;
      }
    }();
    for (std::size_t r = 0; r < w.rows; ++r) {
      y[r] = k.of(tag).dot(reinterpret_cast<const typename W::Block*>(w.row(r)), act,
                           w.cols / W::values_per_block);
    }
  });
  return y;
}

// Double-precision W x over dequantized weights, with the sum of |products| per row.
inline std::vector<Reference> expected_f64(const WeightMatrix& w, const float* x) {
  std::vector<Reference> out(w.rows);
  std::vector<float> row(w.cols);
  const std::vector<float> xs(x, x + w.cols);
  for (std::size_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, w.row(r), row.data(), w.cols);
    out[r] = reference_dot(row, xs);
  }
  return out;
}

// The interleaved copy of a matrix (quant/interleaved_rows.hpp; can_interleave), as
// Model's repack option makes it; with_rows8 points `w.rows8` at it.
inline AlignedBuffer<std::byte> rows8_copy(const WeightMatrix& w) {
  AlignedBuffer<std::byte> copy(interleaved_bytes(w.type, w.rows, w.cols));
  for (std::size_t g = 0; g < interleaved_groups(w.type, w.rows); ++g) {
    repack_interleaved_group(w.type, w.data, w.row_bytes, w.rows, w.cols, g, copy.data());
  }
  return copy;
}
inline WeightMatrix with_rows8(WeightMatrix w, const AlignedBuffer<std::byte>& copy) {
  w.rows8 = copy.data();
  return w;
}

}  // namespace smol::testing
