// Every vector kernel set the machine runs against the scalar reference, and the scalar
// reference against an independent double-precision computation.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "smol/ops/context.hpp"
#include "test_simd_data.hpp"

using namespace smol;
using namespace smol::testing;

namespace {

constexpr std::size_t kLengths[] = {256, 768, 2048, 11008};

const Kernels& scalar_kernels() {
  return kernels_for_isa(Isa::scalar);
}

// Float results agree to rounding: relative to the sum of |products|, which does not
// shrink when the terms cancel.
void check_close(float got, float want, double magnitude, double rel = 2e-6) {
  CHECK(std::fabs(static_cast<double>(got) - want) <= rel * magnitude + 1e-30);
}

std::vector<BlockQ8KLanes> lane_packed(const std::vector<BlockQ8K>& act) {
  std::vector<BlockQ8KLanes> lanes(act.size());
  pack_q8k_lanes<LaneSums::q4k_scaled_by_d>(act.data(), lanes.data(), act.size());
  return lanes;
}

std::string label(Isa isa, const char* type, std::size_t n, Pattern p) {
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

TEST_CASE("scalar reference kernels match a double-precision computation") {
  std::mt19937 rng(2);
  for (std::size_t n : kLengths) {
    auto act = q8k_activations(n, Pattern::random, rng);
    auto a = dequantized_q8k(act);
    auto w4 = q4k_blocks(n / QK_K, Pattern::random, rng);
    auto r4 = reference_dot(dequantized(GgmlType::Q4_K, w4, n), a);
    check_close(scalar_kernels().dot_q4k_q8k(w4.data(), act.data(), n / QK_K), r4.value,
                r4.magnitude, 1e-5);
    auto w6 = q6k_blocks(n / QK_K, Pattern::random, rng);
    auto r6 = reference_dot(dequantized(GgmlType::Q6_K, w6, n), a);
    check_close(scalar_kernels().dot_q6k_q8k(w6.data(), act.data(), n / QK_K), r6.value,
                r6.magnitude, 1e-5);
    std::vector<BlockQ8_0> act0(n / 32);
    auto xf = random_floats(n, rng);
    scalar_kernels().quantize_row_q8_0(xf.data(), act0.data(), n);
    auto a0 = dequantized_q8_0(act0);
    auto w8 = q8_0_blocks(n / 32, Pattern::random, rng);
    auto r8 = reference_dot(dequantized(GgmlType::Q8_0, w8, n), a0);
    check_close(scalar_kernels().dot_q8_0_q8_0(w8.data(), act0.data(), n / 32), r8.value,
                r8.magnitude, 1e-5);
    auto w40 = q4_0_blocks(n / 32, Pattern::random, rng);
    auto r40 = reference_dot(dequantized(GgmlType::Q4_0, w40, n), a0);
    check_close(scalar_kernels().dot_q4_0_q8_0(w40.data(), act0.data(), n / 32), r40.value,
                r40.magnitude, 1e-5);
  }
}

TEST_CASE("quantized dots: every ISA equals the scalar reference") {
  std::mt19937 rng(3);
  const Kernels& ref = scalar_kernels();
  for (Isa isa : available_isas()) {
    const Kernels& k = kernels_for_isa(isa);
    for (std::size_t n : kLengths) {
      for (Pattern p : kPatterns) {
        auto act = q8k_activations(n, p == Pattern::all_max ? p : Pattern::random, rng);
        const auto a = dequantized_q8k(act);
        const std::size_t nb = n / QK_K;
        {
          auto w = q4k_blocks(nb, p, rng);
          const auto r = reference_dot(dequantized(GgmlType::Q4_K, w, n), a);
          CAPTURE(label(isa, "Q4_K", n, p));
          check_close(k.dot_q4k_q8k(w.data(), act.data(), nb),
                      ref.dot_q4k_q8k(w.data(), act.data(), nb), r.magnitude);
          if (k.dot_q4k_lanes) {
            const auto lanes = lane_packed(act);
            check_close(k.dot_q4k_lanes(w.data(), lanes.data(), nb),
                        ref.dot_q4k_q8k(w.data(), act.data(), nb), r.magnitude);
          }
        }
        {
          auto w = q6k_blocks(nb, p, rng);
          const auto r = reference_dot(dequantized(GgmlType::Q6_K, w, n), a);
          CAPTURE(label(isa, "Q6_K", n, p));
          check_close(k.dot_q6k_q8k(w.data(), act.data(), nb),
                      ref.dot_q6k_q8k(w.data(), act.data(), nb), r.magnitude);
        }
        std::vector<BlockQ8_0> act0 =
            q8_0_blocks(n / 32, p == Pattern::all_max ? p : Pattern::random, rng);
        const auto a0 = dequantized_q8_0(act0);
        {
          auto w = q8_0_blocks(n / 32, p, rng);
          const auto r = reference_dot(dequantized(GgmlType::Q8_0, w, n), a0);
          CAPTURE(label(isa, "Q8_0", n, p));
          check_close(k.dot_q8_0_q8_0(w.data(), act0.data(), n / 32),
                      ref.dot_q8_0_q8_0(w.data(), act0.data(), n / 32), r.magnitude);
        }
        {
          auto w = q4_0_blocks(n / 32, p, rng);
          const auto r = reference_dot(dequantized(GgmlType::Q4_0, w, n), a0);
          CAPTURE(label(isa, "Q4_0", n, p));
          check_close(k.dot_q4_0_q8_0(w.data(), act0.data(), n / 32),
                      ref.dot_q4_0_q8_0(w.data(), act0.data(), n / 32), r.magnitude);
        }
      }
    }
  }
}

TEST_CASE("integer parts are exact: unit scales give identical floats") {
  // d = dmin = 1 and an activation scale of 1 leave only the integer sums, all below
  // 2^24, so every ISA must return exactly the scalar value.
  std::mt19937 rng(4);
  for (Isa isa : available_isas()) {
    const Kernels& k = kernels_for_isa(isa);
    for (int trial = 0; trial < 50; ++trial) {
      auto w4 = q4k_blocks(1, Pattern::random, rng);
      auto w6 = q6k_blocks(1, Pattern::random, rng);
      w4[0].d = w4[0].dmin = w6[0].d = f32_to_f16(1.0f);
      for (auto& s : w6[0].scales) s = static_cast<std::int8_t>(s / 4);
      for (auto& s : w4[0].scales) s = static_cast<std::uint8_t>(s & 0x33);
      auto act = q8k_activations(QK_K, Pattern::random, rng);
      act[0].d = 1.0f;
      CAPTURE(isa_name(isa));
      CHECK(k.dot_q4k_q8k(w4.data(), act.data(), 1) ==
            scalar_kernels().dot_q4k_q8k(w4.data(), act.data(), 1));
      if (k.dot_q4k_lanes) {
        CHECK(k.dot_q4k_lanes(w4.data(), lane_packed(act).data(), 1) ==
              scalar_kernels().dot_q4k_q8k(w4.data(), act.data(), 1));
      }
      CHECK(k.dot_q6k_q8k(w6.data(), act.data(), 1) ==
            scalar_kernels().dot_q6k_q8k(w6.data(), act.data(), 1));
    }
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
      check_close(k.dot_f32(x.data(), y.data(), n), static_cast<float>(r.value), r.magnitude, 1e-6);
      check_close(k.dot_f16_f32(h.data(), y.data(), n), static_cast<float>(rh.value), rh.magnitude,
                  1e-6);
      check_close(k.dot_bf16_f32(bh.data(), y.data(), n), static_cast<float>(rb.value),
                  rb.magnitude, 1e-6);
    }
  }
}
