// Every vector kernel set the machine runs against the scalar reference, and the scalar
// reference against an independent double-precision computation.
#include <doctest/doctest.h>

#include <bit>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "smol/ops/context.hpp"
#include "test_simd_data.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_simd_dot {

using namespace smol;
using namespace smol::testing;

namespace {

constexpr std::size_t kLengths[] = {256, 768, 2048, 11008};
// The 32-value block types also take rows that are not whole groups of eight blocks
// (the AVX-512 dots gather eight blocks' scales at a time): 1, 3, 18 (SmolLM2's 576
// columns), 47 blocks, with the lengths above.
constexpr std::size_t kBlock32Lengths[] = {32, 96, 576, 1504, 256, 768, 2048, 11008};

template <class W>
constexpr std::span<const std::size_t> lengths_for() {
  if constexpr (W::values_per_block == 32) {
    return kBlock32Lengths;
  } else {
    return kLengths;
  }
}

const Kernels& scalar_kernels() {
  return kernels_for_isa(Isa::scalar);
}

// Float results agree to rounding: relative to the sum of |products|, which does not
// shrink when the terms cancel.
void check_close(float got, float want, double magnitude, double rel = 2e-6) {
  CHECK(std::fabs(static_cast<double>(got) - want) <= rel * magnitude + 1e-30);
}

std::vector<BlockQ8KLanes> lane_packed(const std::vector<BlockQ8K>& act, LaneSums kind) {
  std::vector<BlockQ8KLanes> lanes(act.size());
  pack_q8k_lanes(kind, act.data(), lanes.data(), act.size());
  return lanes;
}

std::string label(Isa isa, std::string_view type, std::size_t n, Pattern p) {
  return cat(isa_name(isa), " ", type, " n=", n, " pattern=", static_cast<int>(p));
}

}  // namespace

TEST_CASE("isa names, detection and SMOL_ISA") {
  for (Isa isa : kAllIsas) CHECK(parse_isa(isa_name(isa)) == isa);
  CHECK_THROWS_AS(parse_isa("sse9"), Error);
  CHECK(cpu_supports(Isa::scalar));
  const auto available = available_isas();
  REQUIRE(!available.empty());
  CHECK(available.back() == best_isa());
  MESSAGE("best isa: ", isa_name(best_isa()), ", cpu: ", isa_name(best_cpu_isa()));
#if defined(SMOL_X86)
  CHECK_THROWS_AS(Context(1, Isa::neon), Error);
#else
  CHECK_THROWS_AS(Context(1, Isa::avx2), Error);
#endif
  for (Isa isa : kAllIsas) {
    if (!cpu_supports(isa)) CHECK_THROWS_AS(kernels_for_isa(isa), Error);
  }
  ::setenv("SMOL_ISA", "scalar", 1);
  CHECK(Context(1).isa() == Isa::scalar);
  ::setenv("SMOL_ISA", "avx9000", 1);
  CHECK_THROWS_AS(Context(1), Error);
  ::unsetenv("SMOL_ISA");
  CHECK(Context(1).isa() == best_isa());
  CHECK(Context(2).threads() == 2);
  CHECK_THROWS_AS(Context(-1), Error);
}

TEST_CASE("Q8_K quantizer: every ISA equals quantize_q8k.hpp bit for bit") {
  std::mt19937 rng(1);
  std::vector<float> x = random_floats(11008, rng);
  for (std::size_t i = 0; i < 256; ++i) x[i] = 0.0f;  // all-zero block
  x[300] = 3.0f, x[301] = -3.0f;                      // tie: the first one wins
  for (std::size_t i = 512; i < 768; ++i) x[i] = 0.5f + 0.25f * static_cast<float>(i % 5);  // ties
  x[1024] = -1e30f;                                                                   // extreme
  for (std::size_t i = 1280; i < 1536; ++i) x[i] = static_cast<float>(i % 7) - 3.0f;  // .5 cases
  std::vector<BlockQ8K> want(x.size() / QK_K), got(want.size());
  quantize_row_q8k(x.data(), want.data(), x.size());
  for (Isa isa : available_isas()) {
    CAPTURE(isa_name(isa));
    std::memset(got.data(), 0x5a, got.size() * sizeof(BlockQ8K));
    kernels_for_isa(isa).quantize_row_q8k(x.data(), got.data(), x.size());
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(BlockQ8K)) == 0);
  }
}

// The scale of the rounding an ISA's kernel may differ from the scalar one by. For the
// types with a min (dotted with Q8_1), the kernels compute d_x d_y sum(q y) + m_x s_y per
// block, two terms that can be far larger than the dot of the dequantized values
// (d q + m near zero, both terms large and cancelling), so their magnitudes count
// separately.
template <class W>
double kernel_magnitude(const std::vector<typename W::Block>& w,
                        const std::vector<typename W::Activation>& act, std::size_t n) {
  if constexpr (std::is_same_v<typename W::Activation, BlockQ8_1>) {
    auto no_min = w;
    double min_terms = 0;
    for (std::size_t b = 0; b < w.size(); ++b) {
      no_min[b].m = f32_to_f16(0.0f);
      min_terms += std::fabs(static_cast<double>(f16_to_f32(w[b].m)) * f16_to_f32(act[b].s));
    }
    return reference_dot(dequantized(W::type, no_min, n), dequantized(act)).magnitude + min_terms;
  } else {
    return reference_dot(dequantized(W::type, w, n), dequantized(act)).magnitude;
  }
}

TEST_CASE("scalar reference kernels match a double-precision computation, for every type") {
  std::mt19937 rng(2);
  for_each_weight_type([&]<class W>(W tag) {
    if constexpr (is_quantized_v<W>) {
      for (std::size_t n : kLengths) {
        CAPTURE(ggml_type_name(W::type));
        CAPTURE(n);
        const auto act = weight_activations<W>(n, Pattern::random, rng);
        const auto w = weight_blocks<W>(n / W::values_per_block, Pattern::random, rng);
        const auto r = reference_dot(dequantized(W::type, w, n), dequantized(act));
        // Q8_1's s is d * sum(q) rounded to f16, as ggml stores it, so the min term of
        // Q4_1 and Q5_1 carries that rounding (2^-11) where the double sum does not.
        const bool min_term_in_f16 = std::is_same_v<typename W::Activation, BlockQ8_1>;
        check_close(scalar_kernels().of(tag).dot(w.data(), act.data(), w.size()), r.value,
                    r.magnitude, min_term_in_f16 ? 5e-4 : 1e-5);
      }
    }
  });
}

TEST_CASE("quantized dots: every ISA equals the scalar reference, for every type") {
  std::mt19937 rng(3);
  const Kernels& ref = scalar_kernels();
  for (Isa isa : available_isas()) {
    const Kernels& k = kernels_for_isa(isa);
    for_each_weight_type([&]<class W>(W tag) {
      if constexpr (is_quantized_v<W>) {
        for (std::size_t n : lengths_for<W>()) {
          for (Pattern p : kPatterns) {
            const auto act =
                weight_activations<W>(n, p == Pattern::all_max ? p : Pattern::random, rng);
            const auto w = weight_blocks<W>(n / W::values_per_block, p, rng);
            const auto r = reference_dot(dequantized(W::type, w, n), dequantized(act));
            const float want = ref.of(tag).dot(w.data(), act.data(), w.size());
            CAPTURE(label(isa, ggml_type_name(W::type), n, p));
            check_close(k.of(tag).dot(w.data(), act.data(), w.size()), want,
                        kernel_magnitude<W>(w, act, n));
            if (k.of(tag).dot_plain) {
              check_close(k.of(tag).dot_plain(w.data(), act.data(), w.size()), want,
                          kernel_magnitude<W>(w, act, n));
            }
            if constexpr (std::is_same_v<typename W::Activation, BlockQ8K>) {
              if (k.of(tag).dot_lanes) {
                const auto lanes = lane_packed(act, k.of(tag).lanes);
                check_close(k.of(tag).dot_lanes(w.data(), lanes.data(), w.size()), want,
                            r.magnitude);
              }
            }
          }
        }
      }
    });
  }
}

TEST_CASE("integer parts are exact: unit scales give identical floats") {
  // d = dmin = 1 and an activation scale of 1 leave only the integer sums, all below
  // 2^24, so every ISA must return exactly the scalar value.
  std::mt19937 rng(4);
  for (Isa isa : available_isas()) {
    const Kernels& k = kernels_for_isa(isa);
    const Kernels& ref = scalar_kernels();
    for (int trial = 0; trial < 50; ++trial) {
      auto w2 = q2k_blocks(1, Pattern::random, rng);
      auto w3 = q3k_blocks(1, Pattern::random, rng);
      auto w4 = q4k_blocks(1, Pattern::random, rng);
      auto w5 = q5k_blocks(1, Pattern::random, rng);
      auto w6 = q6k_blocks(1, Pattern::random, rng);
      w2[0].d = w2[0].dmin = w3[0].d = w4[0].d = w4[0].dmin = w5[0].d = w5[0].dmin = w6[0].d =
          f32_to_f16(1.0f);
      for (auto& s : w6[0].scales) s = static_cast<std::int8_t>(s / 4);
      for (auto& s : w4[0].scales) s = static_cast<std::uint8_t>(s & 0x33);
      for (auto& s : w5[0].scales) s = static_cast<std::uint8_t>(s & 0x13);
      auto act = q8k_activations(QK_K, Pattern::random, rng);
      act[0].d = 1.0f;
      CAPTURE(isa_name(isa));
      const auto& q4 = k.of<GgmlType::Q4_K>();
      CHECK(q4.dot(w4.data(), act.data(), 1) ==
            ref.of<GgmlType::Q4_K>().dot(w4.data(), act.data(), 1));
      if (q4.dot_lanes) {
        CHECK(q4.dot_lanes(w4.data(), lane_packed(act, q4.lanes).data(), 1) ==
              ref.of<GgmlType::Q4_K>().dot(w4.data(), act.data(), 1));
      }
      CHECK(k.of<GgmlType::Q2_K>().dot(w2.data(), act.data(), 1) ==
            ref.of<GgmlType::Q2_K>().dot(w2.data(), act.data(), 1));
      CHECK(k.of<GgmlType::Q3_K>().dot(w3.data(), act.data(), 1) ==
            ref.of<GgmlType::Q3_K>().dot(w3.data(), act.data(), 1));
      if (const auto plain = k.of<GgmlType::Q2_K>().dot_plain) {  // AMX's plain decode
        CHECK(plain(w2.data(), act.data(), 1) ==
              ref.of<GgmlType::Q2_K>().dot(w2.data(), act.data(), 1));
      }
      if (const auto plain = k.of<GgmlType::Q3_K>().dot_plain) {
        CHECK(plain(w3.data(), act.data(), 1) ==
              ref.of<GgmlType::Q3_K>().dot(w3.data(), act.data(), 1));
      }
      CHECK(k.of<GgmlType::Q5_K>().dot(w5.data(), act.data(), 1) ==
            ref.of<GgmlType::Q5_K>().dot(w5.data(), act.data(), 1));
      CHECK(k.of<GgmlType::Q6_K>().dot(w6.data(), act.data(), 1) ==
            ref.of<GgmlType::Q6_K>().dot(w6.data(), act.data(), 1));
    }
  }
}

TEST_CASE("Q4_1, Q5_0, Q5_1: unit scales give identical floats, min term included") {
  // d = 1, m = +-1 and an activation scale of 1 leave the integer sums (sum q*y, and
  // s = sum y for the min), so every ISA must return exactly the scalar value; all-max
  // blocks and activations give the largest sums.
  std::mt19937 rng(6);
  const f16_bits one = f32_to_f16(1.0f);
  for (Isa isa : available_isas()) {
    const Kernels& k = kernels_for_isa(isa);
    const Kernels& ref = scalar_kernels();
    for (int trial = 0; trial < 50; ++trial) {
      const Pattern p = trial % 5 == 0 ? Pattern::all_max : Pattern::random;
      // Q8_0 activations for Q5_0, Q8_1 for the others (s = the integer sum, exact).
      auto act = q8_0_blocks(4, p, rng);
      std::vector<BlockQ8_1> act1(4);
      for (std::size_t b = 0; b < 4; ++b) {
        act[b].d = act1[b].d = one;
        int sum = 0;
        for (std::size_t j = 0; j < 32; ++j) sum += act1[b].qs[j] = act[b].qs[j];
        act1[b].s = f32_to_f16(static_cast<float>(sum));
      }
      auto w41 = q4_1_blocks(4, p, rng);
      auto w50 = q5_0_blocks(4, p, rng);
      auto w51 = q5_1_blocks(4, p, rng);
      for (auto& b : w41) b.d = one, b.m = static_cast<f16_bits>(one | (trial % 2 ? 0x8000 : 0));
      for (auto& b : w50) b.d = one;
      for (auto& b : w51) b.d = one, b.m = static_cast<f16_bits>(one | (trial % 2 ? 0 : 0x8000));
      CAPTURE(isa_name(isa));
      CAPTURE(trial);
      CHECK(k.of<GgmlType::Q4_1>().dot(w41.data(), act1.data(), 4) ==
            ref.of<GgmlType::Q4_1>().dot(w41.data(), act1.data(), 4));
      CHECK(k.of<GgmlType::Q5_0>().dot(w50.data(), act.data(), 4) ==
            ref.of<GgmlType::Q5_0>().dot(w50.data(), act.data(), 4));
      CHECK(k.of<GgmlType::Q5_1>().dot(w51.data(), act1.data(), 4) ==
            ref.of<GgmlType::Q5_1>().dot(w51.data(), act1.data(), 4));
    }
  }
}

TEST_CASE("IQ4_NL, IQ4_XS: unit scales give identical floats, the table lookup included") {
  // d = 1 and an activation scale of 1 leave the integer sums of level * y (times the
  // sub-block scales for IQ4_XS), so every ISA (one shuffle per 16 indices) must return
  // exactly the scalar value; all-max blocks (level -127 everywhere, IQ4_XS scales -32)
  // and activations give the largest sums, which are exact in floats.
  std::mt19937 rng(7);
  const f16_bits one = f32_to_f16(1.0f);
  for (Isa isa : available_isas()) {
    const Kernels& k = kernels_for_isa(isa);
    const Kernels& ref = scalar_kernels();
    for (int trial = 0; trial < 50; ++trial) {
      const Pattern p = trial % 5 == 0 ? Pattern::all_max : Pattern::random;
      const f16_bits d = trial % 2 ? one : static_cast<f16_bits>(one | 0x8000);
      auto act = q8_0_blocks(4, p, rng);
      auto w = iq4nl_blocks(4, p, rng);
      for (auto& b : act) b.d = one;
      for (auto& b : w) b.d = d;
      auto act_k = q8k_activations(QK_K, p, rng);
      auto w_xs = iq4xs_blocks(1, p, rng);
      act_k[0].d = 1.0f;
      w_xs[0].d = d;
      CAPTURE(isa_name(isa));
      CAPTURE(trial);
      const float want = ref.of<GgmlType::IQ4_NL>().dot(w.data(), act.data(), 4);
      CHECK(k.of<GgmlType::IQ4_NL>().dot(w.data(), act.data(), 4) == want);
      const float want_xs = ref.of<GgmlType::IQ4_XS>().dot(w_xs.data(), act_k.data(), 1);
      CHECK(k.of<GgmlType::IQ4_XS>().dot(w_xs.data(), act_k.data(), 1) == want_xs);
      if (p == Pattern::all_max) {
        const float sign = trial % 2 ? -1.0f : 1.0f;
        CHECK(want == sign * 4 * 32 * 127 * 127);
        float sum_y = 0;
        for (auto q : act_k[0].qs) sum_y += static_cast<float>(q);
        CHECK(want_xs == -sign * 32 * 127 * sum_y);
      }
    }
  }
}

TEST_CASE("every ISA has a dot for every weight type") {
  for (Isa isa : available_isas()) {
    const Kernels& k = kernels_for_isa(isa);
    for_each_weight_type([&](auto tag) {
      CAPTURE(isa_name(isa));
      CAPTURE(ggml_type_name(decltype(tag)::type));
      CHECK(static_cast<bool>(k.of(tag).dot));
    });
  }
}

TEST_CASE("float dots: every ISA equals the scalar reference") {
  std::mt19937 rng(5);
  for (Isa isa : available_isas()) {
    const Kernels& k = kernels_for_isa(isa);
    for (std::size_t n : {1, 7, 31, 256, 768, 2048, 11008, 11011}) {
      const auto x = random_floats(n, rng), y = random_floats(n, rng);
      std::vector<f16_bits> h(n);
      std::vector<bf16_bits> bh(n);
      std::vector<float> hf(n), bf(n);
      for (std::size_t i = 0; i < n; ++i) {
        h[i] = f32_to_f16(x[i]);
        bh[i] = f32_to_bf16(x[i]);
        hf[i] = f16_to_f32(h[i]);
        bf[i] = bf16_to_f32(bh[i]);
      }
      CAPTURE(isa_name(isa));
      CAPTURE(n);
      const auto r = reference_dot(x, y), rh = reference_dot(hf, y), rb = reference_dot(bf, y);
      check_close(k.of<GgmlType::F32>().dot(x.data(), y.data(), n), static_cast<float>(r.value),
                  r.magnitude, 1e-6);
      check_close(k.of<GgmlType::F16>().dot(h.data(), y.data(), n), static_cast<float>(rh.value),
                  rh.magnitude, 1e-6);
      check_close(k.of<GgmlType::BF16>().dot(bh.data(), y.data(), n), static_cast<float>(rb.value),
                  rb.magnitude, 1e-6);
    }
  }
}

TEST_CASE("Q8_0 / Q8_1 quantizers: every ISA equals the scalar ones bit for bit") {
  std::mt19937 rng(11);
  std::vector<float> x = random_floats(4096, rng);
  for (std::size_t i = 0; i < 32; ++i) x[i] = 0.0f;                               // zero block
  for (std::size_t i = 32; i < 64; ++i) x[i] = static_cast<float>(i % 9) - 4.0f;  // exact .5s
  for (std::size_t i = 64; i < 96; ++i) x[i] = 127.0f * (static_cast<float>(i % 5) - 2.0f) / 4.0f;
  for (std::size_t i = 96; i < 128; ++i) x[i] = i % 2 ? 1e-30f : -3e30f;  // extremes
  for (std::size_t i = 128; i < 160; ++i) x[i] = -1.0f;                   // all equal
  // Whole groups of sixteen blocks (the AVX-512 quantizers' unit), SmolLM2's 576 (16 + 2)
  // and 125 blocks (7 x 16 + 13), a few blocks, one.
  for (std::size_t n :
       {x.size(), std::size_t{576}, std::size_t{32 * 125}, std::size_t{96}, std::size_t{32}}) {
    CAPTURE(n);
    std::vector<BlockQ8_0> want0(n / 32), got0(want0.size());
    std::vector<BlockQ8_1> want1(n / 32), got1(want1.size());
    scalar_kernels().quantize_row_q8_0(x.data(), want0.data(), n);
    scalar_kernels().quantize_row_q8_1(x.data(), want1.data(), n);
    for (Isa isa : available_isas()) {
      CAPTURE(isa_name(isa));
      std::memset(got0.data(), 0x5a, got0.size() * sizeof(BlockQ8_0));
      std::memset(got1.data(), 0x5a, got1.size() * sizeof(BlockQ8_1));
      kernels_for_isa(isa).quantize_row_q8_0(x.data(), got0.data(), n);
      kernels_for_isa(isa).quantize_row_q8_1(x.data(), got1.data(), n);
      CHECK(std::memcmp(got0.data(), want0.data(), got0.size() * sizeof(BlockQ8_0)) == 0);
      CHECK(std::memcmp(got1.data(), want1.data(), got1.size() * sizeof(BlockQ8_1)) == 0);
    }
  }
}

TEST_CASE(
    "tile_dots: every ISA's tiles equal the scalar dot, and a token's bits do not "
    "depend on the tile") {
  std::mt19937 rng(12);
  const Kernels& ref = scalar_kernels();
  const std::vector<std::size_t> block_counts_32 = {1, 3, 18, 33, 48, 72};
  const std::vector<std::size_t> block_counts_256 = {1, 2, 5, 9};
  for (Isa isa : available_isas()) {
    const Kernels& k = kernels_for_isa(isa);
    for_each_weight_type([&]<class W>(W tag) {
      if constexpr (is_quantized_v<W>) {
        // The tiles on the activation blocks, or packed as Block32Tiles (AMX).
        const auto& kw = k.of(tag);
        if (kw.tile_dots == nullptr && kw.tile_dots_packed == nullptr) return;
        const auto tile = [&](const std::byte* w, std::size_t row_bytes, std::size_t rows,
                              const typename W::Activation* x, std::size_t x_stride,
                              std::size_t nblocks, std::size_t n_tokens, float* y,
                              std::size_t y_stride) {
          if (kw.tile_dots != nullptr) {
            kw.tile_dots(w, row_bytes, rows, x, x_stride, nblocks, n_tokens, y, y_stride);
          } else if constexpr (W::values_per_block == 32) {
            const auto packed = pack_block32_tiles(x, x_stride, nblocks, n_tokens);
            kw.tile_dots_packed(w, row_bytes, rows, packed.tiles, y, y_stride);
          }
        };
        constexpr bool k_quant = W::values_per_block == QK_K;
        for (std::size_t nblocks : k_quant ? block_counts_256 : block_counts_32) {
          for (Pattern p : kPatterns) {
            // 5 rows: part of one group of 16 (the AMX tiles' rows); 37: two and a part.
            const std::size_t rows = nblocks % 2 ? 5 : 37, n_tokens = 19,
                              n = nblocks * W::values_per_block;
            const auto w = weight_blocks<W>(rows * nblocks, p, rng);
            const auto act = weight_activations<W>(
                n_tokens * n, p == Pattern::all_max ? p : Pattern::random, rng);
            std::vector<float> y(n_tokens * rows, -1.0f), one(rows);
            tile(reinterpret_cast<const std::byte*>(w.data()), nblocks * sizeof(w[0]), rows,
                 act.data(), nblocks, nblocks, n_tokens, y.data(), rows);
            CAPTURE(label(isa, ggml_type_name(W::type), n, p));
            for (std::size_t t = 0; t < n_tokens; ++t) {
              tile(reinterpret_cast<const std::byte*>(w.data()), nblocks * sizeof(w[0]), rows,
                   act.data() + t * nblocks, nblocks, nblocks, 1, one.data(), 1);
              for (std::size_t r = 0; r < rows; ++r) {
                const auto* wr = w.data() + r * nblocks;
                const auto* ar = act.data() + t * nblocks;
                const double m = kernel_magnitude<W>(std::vector(wr, wr + nblocks),
                                                     std::vector(ar, ar + nblocks), n);
                check_close(y[t * rows + r], ref.of(tag).dot(wr, ar, nblocks), m);
                CHECK(std::bit_cast<std::uint32_t>(y[t * rows + r]) ==
                      std::bit_cast<std::uint32_t>(one[r]));
                // The Q2_K and Q3_K tiles do the set's own dot, operation for operation,
                // and so do Q5_K's on AVX2, where the 32-value types' dots sum as the tiles
                // too (four blocks at a time for Q4_0, Q4_1, Q5_0 and Q5_1): prefill and
                // decode give a token the same bits, which dot_rounds_like_tile_dots
                // claims (IQ4_NL's, MXFP4's and IQ4_XS's tiles, and Q5_K's on the AVX-512
                // sets, sum in another order than the dot). On AMX the Q2_K and Q3_K dots round as
                // the matrix unit does instead (dot_rounds_like_matrix, test_matmul).
                const bool same_operations =
                    ((W::type == GgmlType::Q2_K || W::type == GgmlType::Q3_K) && isa != Isa::amx) ||
                    (W::type == GgmlType::Q5_K && isa == Isa::avx2);
                const bool avx2_blocks32 = isa == Isa::avx2 && W::values_per_block == 32 &&
                                           W::type != GgmlType::IQ4_NL &&
                                           W::type != GgmlType::MXFP4;
                CHECK(k.of(tag).dot_rounds_like_tile_dots == (same_operations || avx2_blocks32));
                if (k.of(tag).dot_rounds_like_tile_dots) {
                  CHECK(std::bit_cast<std::uint32_t>(y[t * rows + r]) ==
                        std::bit_cast<std::uint32_t>(k.of(tag).dot(wr, ar, nblocks)));
                }
              }
            }
          }
        }
      }
    });
  }
}

}  // namespace test_simd_dot
