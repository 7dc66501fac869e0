// RMSNorm, LayerNorm, softmax, the feed-forward gates (GELU's f16 table among them) and
// the experts' choice against their textbook definitions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "smol/ops/activation.hpp"
#include "smol/ops/context.hpp"
#include "smol/ops/expert_choice.hpp"
#include "smol/ops/layernorm.hpp"
#include "smol/ops/rmsnorm.hpp"
#include "smol/ops/softmax.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_ops_elementwise {

TEST_CASE("rmsnorm divides by the root mean square and scales by the weight") {
  const std::vector<float> x{1, -2, 3, -4};
  const std::vector<float> w{1, 0.5f, 2, 1};
  std::vector<float> y(4);
  smol::rmsnorm(x.data(), w.data(), y.data(), 4, 1e-6f);
  const double rms = std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6);
  for (std::size_t i = 0; i < 4; ++i) CHECK(y[i] == doctest::Approx(x[i] / rms * w[i]));
}

TEST_CASE("layernorm centres, divides by the standard deviation, scales and shifts") {
  const std::vector<float> x{1, -2, 3, -4};
  const std::vector<float> w{1, 0.5f, 2, 1}, b{0.5f, 0, -1, 0};
  std::vector<float> y(4);
  smol::layernorm(x.data(), w.data(), b.data(), y.data(), 4, 1e-5f);
  const double mean = -0.5, variance = (2.25 + 2.25 + 12.25 + 12.25) / 4.0;
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(y[i] == doctest::Approx((x[i] - mean) / std::sqrt(variance + 1e-5) * w[i] + b[i]));
  }
}

TEST_CASE("GELU by its f16 table is GELU of the input rounded to f16, rounded to f16") {
  // Every f16 input of the table's range, and floats between them (rounded on the way in).
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float x = smol::f16_to_f32(static_cast<smol::f16_bits>(h));
    if (!(std::abs(x) < 10.0f)) continue;  // beyond +-10, NaN and inf: x or 0 below
    CHECK(smol::gelu_tanh_like_ggml(x) == smol::gelu_tanh_by_rounding(x));
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> values(-12.0f, 12.0f);
  for (int i = 0; i < 10000; ++i) {
    const float x = values(rng);
    const float want = x <= -10.0f ? 0.0f : (x >= 10.0f ? x : smol::gelu_tanh_by_rounding(x));
    CHECK(smol::gelu_tanh_like_ggml(x) == want);
  }
  CHECK(smol::gelu_tanh_like_ggml(1.0f) == doctest::Approx(0.8412).epsilon(1e-3));
}

TEST_CASE("softmax is stable for huge scores and sums to one") {
  std::vector<float> x{1000.0f, 999.0f, -1000.0f, 1000.0f};
  smol::softmax(x.data(), x.size());
  CHECK(std::accumulate(x.begin(), x.end(), 0.0) == doctest::Approx(1.0));
  CHECK(x[0] == doctest::Approx(1.0 / (2.0 + std::exp(-1.0))));
  CHECK(x[2] == 0.0f);
}

TEST_CASE("swiglu is silu(gate) * up") {
  const std::vector<float> gate{-3, 0, 2};
  const std::vector<float> up{2, 5, -1};
  std::vector<float> out(3);
  smol::Context ctx(1);
  smol::swiglu(ctx, gate.data(), up.data(), out.data(), 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(out[i] == doctest::Approx(gate[i] / (1 + std::exp(-gate[i])) * up[i]));
  }
}

TEST_CASE("every ISA's swiglu matches the scalar reference, in place and at the extremes") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (std::size_t n : {1, 15, 16, 17, 64, 11008 + 3}) {
    std::vector<float> gate(n), up(n);
    for (std::size_t i = 0; i < n; ++i) {
      gate[i] = normal(rng);
      up[i] = normal(rng);
    }
    // Saturation on both sides and the exp overflow: silu(-200) = -0, silu(200) = 200.
    const float extremes[] = {-200.0f, -88.0f, -20.0f, 0.0f, 20.0f, 88.0f, 200.0f};
    for (std::size_t i = 0; i < n && i < std::size(extremes); ++i) gate[i] = extremes[i];
    std::vector<float> want(n);
    smol::kernels_for_isa(smol::Isa::scalar).swiglu(gate.data(), up.data(), want.data(), n);
    for (smol::Isa isa : smol::available_isas()) {
      CAPTURE(smol::isa_name(isa));
      CAPTURE(n);
      // Every vector set has its own (xsimd) kernel; only the scalar set has the reference.
      CHECK((smol::kernels_for_isa(isa).swiglu ==
             smol::kernels_for_isa(smol::Isa::scalar).swiglu) == (isa == smol::Isa::scalar));
      std::vector<float> out = gate;  // in place, as the model calls it
      smol::kernels_for_isa(isa).swiglu(out.data(), up.data(), out.data(), n);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < n; ++i) {
        bad += !(std::isfinite(out[i]) &&
                 std::fabs(out[i] - want[i]) <= 4e-7f * std::fabs(want[i]) + 1e-30f);
      }
      CHECK(bad == 0);
    }
  }
}

constexpr auto kSoftmaxAll = smol::ExpertWeighting::softmax_all;

TEST_CASE("choose_experts: the k most probable, in order, their weights renormalised") {
  // Scores 0, 2, 1, 3, -1: probabilities in that order, expert 3 first, then 1, then 2.
  const std::vector<float> scores{0, 2, 1, 3, -1};
  double total = 0;
  for (float s : scores) total += std::exp(s);
  const auto probability = [&](std::size_t e) { return std::exp(scores[e]) / total; };
  std::vector<float> work = scores;
  std::size_t chosen[3];
  float weights[3];
  smol::choose_experts(work.data(), 5, 3, kSoftmaxAll, /*normalize_chosen=*/false, chosen, weights);
  CHECK(chosen[0] == 3);
  CHECK(chosen[1] == 1);
  CHECK(chosen[2] == 2);
  for (std::size_t i = 0; i < 3; ++i) CHECK(weights[i] == doctest::Approx(probability(chosen[i])));
  // Renormalised over the chosen: they sum to one, in the same ratios.
  work = scores;
  smol::choose_experts(work.data(), 5, 3, kSoftmaxAll, /*normalize_chosen=*/true, chosen, weights);
  CHECK(weights[0] + weights[1] + weights[2] == doctest::Approx(1.0));
  CHECK(weights[0] / weights[1] == doctest::Approx(std::exp(1.0)));
  // Every expert (k = n), and ties: the lower expert first.
  std::vector<float> tied{1, 5, 5, 1};
  std::size_t all[4];
  float all_weights[4];
  smol::choose_experts(tied.data(), 4, 4, kSoftmaxAll, true, all, all_weights);
  CHECK(std::vector<std::size_t>(all, all + 4) == std::vector<std::size_t>{1, 2, 0, 3});
  CHECK(all_weights[0] == all_weights[1]);
  CHECK(all_weights[0] + all_weights[1] + all_weights[2] + all_weights[3] == doctest::Approx(1.0));
  // One expert of one: weight one.
  float single = -7;
  std::size_t one;
  float one_weight;
  smol::choose_experts(&single, 1, 1, kSoftmaxAll, true, &one, &one_weight);
  CHECK(one == 0);
  CHECK(one_weight == 1.0f);
}

TEST_CASE("choose_experts, GPT-OSS's way: the k best scores, a softmax over theirs alone") {
  // Scores 0, 2, 1, 3, -1: experts 3, 1, 2 chosen; weights e^3, e^2, e^1 over their sum.
  std::vector<float> scores{0, 2, 1, 3, -1};
  std::size_t chosen[3];
  float weights[3];
  smol::choose_experts(scores.data(), 5, 3, smol::ExpertWeighting::softmax_chosen, false, chosen,
                       weights);
  CHECK(std::vector<std::size_t>(chosen, chosen + 3) == std::vector<std::size_t>{3, 1, 2});
  const double total = std::exp(3.0) + std::exp(2.0) + std::exp(1.0);
  CHECK(weights[0] == doctest::Approx(std::exp(3.0) / total));
  CHECK(weights[1] == doctest::Approx(std::exp(2.0) / total));
  CHECK(weights[2] == doctest::Approx(std::exp(1.0) / total));
  // The scores are left as they were: only the chosen are softmaxed.
  CHECK(scores == std::vector<float>{0, 2, 1, 3, -1});
  // One expert chosen: weight one, whatever its score.
  std::vector<float> two{-4, -9};
  smol::choose_experts(two.data(), 2, 1, smol::ExpertWeighting::softmax_chosen, false, chosen,
                       weights);
  CHECK(chosen[0] == 0);
  CHECK(weights[0] == 1.0f);
}

TEST_CASE("swiglu_oai: GPT-OSS's clamped gate, as ggml_swiglu_oai computes it") {
  const auto expected = [](double gate, double up) {  // alpha 1.702, limit 7
    const double x = std::min(gate, 7.0);
    const double y = std::clamp(up, -7.0, 7.0);
    return x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0);
  };
  for (const auto& [gate, up] : std::vector<std::pair<float, float>>{
           {0.0f, 0.0f}, {1.0f, 2.0f}, {-3.0f, 0.5f}, {9.0f, 1.0f}, {2.0f, -12.0f}, {8.0f, 8.0f}}) {
    CAPTURE(gate);
    CAPTURE(up);
    CHECK(smol::swiglu_oai(gate, up) == doctest::Approx(expected(gate, up)).epsilon(1e-6));
  }
  // Past the limits the output stops growing: a gate of 9 acts as 7, an up of 20 as 7.
  CHECK(smol::swiglu_oai(9.0f, 20.0f) == smol::swiglu_oai(7.0f, 7.0f));
  // Through the feed-forward's dispatcher, in place.
  smol::Context context(1);
  std::vector<float> gate{1.0f, 9.0f, -3.0f}, up{2.0f, 1.0f, 0.5f};
  smol::gated_activation(context, smol::FfnActivation::swiglu_oai, gate.data(), up.data(),
                         gate.data(), gate.size());
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(gate[i] == smol::swiglu_oai(std::vector<float>{1.0f, 9.0f, -3.0f}[i], up[i]));
  }
}

}  // namespace test_ops_elementwise
