// Quantize -> dequantize round trips: error on Gaussian data, determinism,
// idempotence on values that are already on a quantization grid, and odd inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "smol/quant/dequantize.hpp"
#include "smol/quant/quantize.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_quant_roundtrip {

namespace {

std::vector<float> gaussian(std::size_t n, unsigned seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> values(n);
  for (auto& v : values) v = normal(rng);
  return values;
}

std::vector<std::byte> quantize(smol::GgmlType type, const std::vector<float>& values) {
  std::vector<std::byte> bytes(smol::ggml_row_bytes(type, values.size()));
  smol::quantize_row(type, values.data(), bytes.data(), values.size());
  return bytes;
}

std::vector<float> dequantize(smol::GgmlType type, const std::vector<std::byte>& bytes,
                              std::size_t n) {
  std::vector<float> values(n);
  smol::dequantize_row(type, bytes.data(), values.data(), n);
  return values;
}

double rms(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum / static_cast<double>(v.size()));
}

double relative_rmse(const std::vector<float>& reference, const std::vector<float>& approx) {
  double sum = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double diff = static_cast<double>(reference[i]) - approx[i];
    sum += diff * diff;
  }
  return std::sqrt(sum / static_cast<double>(reference.size())) / rms(reference);
}

constexpr std::size_t kValues = 256 * 1024;

}  // namespace

TEST_CASE("Relative RMSE on Gaussian data") {
  struct Case {
    smol::GgmlType type;
    double bound;
  };
  // Bounds sit a little above what ggml's reference quantizers reach on N(0, 1)
  // (4.5, 5, 5.5, 6, 8.5, 2.63, 3.44, 4.5, 5.5, 6.56, 4.5 and 4.25 bits per value).
  const Case cases[] = {
      {smol::GgmlType::Q4_0, 0.125},  {smol::GgmlType::Q4_1, 0.09},  {smol::GgmlType::Q5_0, 0.05},
      {smol::GgmlType::Q5_1, 0.045},  {smol::GgmlType::Q8_0, 0.006}, {smol::GgmlType::Q2_K, 0.31},
      {smol::GgmlType::Q3_K, 0.16},   {smol::GgmlType::Q4_K, 0.105}, {smol::GgmlType::Q5_K, 0.055},
      {smol::GgmlType::Q6_K, 0.025},  {smol::GgmlType::F16, 0.0003}, {smol::GgmlType::BF16, 0.0025},
      {smol::GgmlType::IQ4_NL, 0.11}, {smol::GgmlType::IQ4_XS, 0.11}};
  const auto values = gaussian(kValues, 1234, 0.02f);
  for (const auto& c : cases) {
    const auto restored = dequantize(c.type, quantize(c.type, values), values.size());
    const double error = relative_rmse(values, restored);
    MESSAGE(smol::ggml_type_name(c.type), ": RMSE / RMS = ", error);
    CAPTURE(smol::ggml_type_name(c.type));
    CHECK(error < c.bound);
    CHECK(error > 0);
  }
}

TEST_CASE("Quantization is deterministic") {
  const auto values = gaussian(4096, 99);
  for (auto type : {smol::GgmlType::Q4_0, smol::GgmlType::Q4_1, smol::GgmlType::Q5_0,
                    smol::GgmlType::Q5_1, smol::GgmlType::Q8_0, smol::GgmlType::Q2_K,
                    smol::GgmlType::Q3_K, smol::GgmlType::Q4_K, smol::GgmlType::Q5_K,
                    smol::GgmlType::Q6_K, smol::GgmlType::IQ4_NL, smol::GgmlType::IQ4_XS}) {
    CAPTURE(smol::ggml_type_name(type));
    CHECK(quantize(type, values) == quantize(type, values));
  }
}

TEST_CASE("Re-quantizing dequantized values reproduces them") {
  // Values that are already on a grid should stay there. Q8_0 and the other 32-value
  // types (Q4_0, Q4_1, Q5_0, Q5_1) are there after one round. For Q6_K, Q5_K, Q4_K and Q2_K the
  // scale search of the second round can still move a few sub-blocks to a slightly better
  // grid (as llama-quantize does: the fixture needed two rounds); from then on the values
  // are a fixed point.
  const auto values = gaussian(kValues, 7, 0.05f);
  for (auto type :
       {smol::GgmlType::Q8_0, smol::GgmlType::Q6_K, smol::GgmlType::Q5_K, smol::GgmlType::Q4_K,
        smol::GgmlType::Q3_K, smol::GgmlType::Q2_K, smol::GgmlType::Q4_0, smol::GgmlType::Q4_1,
        smol::GgmlType::Q5_0, smol::GgmlType::Q5_1}) {
    CAPTURE(smol::ggml_type_name(type));
    const std::size_t block_values = smol::ggml_type_info(type).block_values;
    const std::size_t block_bytes = smol::ggml_type_info(type).block_bytes;
    auto bytes = quantize(type, values);
    auto grid = dequantize(type, bytes, values.size());
    int round = 1;
    std::size_t last_same_values = 0;
    for (; round <= 4; ++round) {
      const auto again = quantize(type, grid);
      std::size_t same_blocks = 0;
      for (std::size_t b = 0; b < values.size() / block_values; ++b) {
        same_blocks += std::memcmp(again.data() + b * block_bytes, bytes.data() + b * block_bytes,
                                   block_bytes) == 0;
      }
      const auto regrid = dequantize(type, again, values.size());
      std::size_t same_values = 0;
      for (std::size_t i = 0; i < values.size(); ++i) same_values += regrid[i] == grid[i];
      last_same_values = same_values;
      MESSAGE(smol::ggml_type_name(type), " round ", round + 1, ": ", same_blocks, " of ",
              values.size() / block_values, " blocks and ", same_values, " of ", values.size(),
              " values unchanged");
      if (same_values == values.size()) break;
      bytes = again;
      grid = regrid;
    }
    // Q5_K's 32 levels leave its search more near-ties to settle: measured 90 % of the
    // blocks unchanged after round 2, 99.5 % after round 3, all after round 4.
    // ggml's Q3_K has no fixed point to reach: each round re-derives the 6-bit scales from
    // the largest one and re-rounds against them, which keeps moving a few blocks (measured
    // 99.97 % of the values settled after round 3, 5 of 1024 blocks still moving in round 5).
    const bool one_round = smol::ggml_type_info(type).block_values == 32;
    if (type == smol::GgmlType::Q3_K) {
      CHECK(last_same_values >= values.size() / 1000 * 999);
    } else {
      CHECK(round <= (one_round ? 1 : type == smol::GgmlType::Q5_K ? 3 : 2));
    }
  }
}

TEST_CASE("Degenerate blocks: zeros, constants, a single outlier") {
  std::vector<std::vector<float>> inputs;
  inputs.emplace_back(256, 0.0f);
  inputs.emplace_back(256, 0.75f);
  inputs.emplace_back(256, -0.75f);
  auto outlier = std::vector<float>(256, 1e-3f);
  outlier[77] = -40.0f;
  inputs.push_back(outlier);
  auto tiny = gaussian(256, 3, 1e-30f);
  inputs.push_back(tiny);
  for (auto type : {smol::GgmlType::Q4_0, smol::GgmlType::Q4_1, smol::GgmlType::Q5_0,
                    smol::GgmlType::Q5_1, smol::GgmlType::Q8_0, smol::GgmlType::Q2_K,
                    smol::GgmlType::Q3_K, smol::GgmlType::Q4_K, smol::GgmlType::Q5_K,
                    smol::GgmlType::Q6_K, smol::GgmlType::IQ4_NL, smol::GgmlType::IQ4_XS}) {
    CAPTURE(smol::ggml_type_name(type));
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      CAPTURE(k);
      const auto restored = dequantize(type, quantize(type, inputs[k]), 256);
      double worst = 0;
      double amax = 0;
      for (std::size_t i = 0; i < 256; ++i) {
        REQUIRE(std::isfinite(restored[i]));
        worst = std::fmax(worst, std::fabs(restored[i] - inputs[k][i]));
        amax = std::fmax(amax, std::fabs(inputs[k][i]));
      }
      if (k == 0) CHECK(worst == 0);
      CHECK(worst <= amax * 0.6 + 1e-6);
    }
  }
  // A constant block is exactly representable by every type with an offset (Q4_1 and
  // Q5_1: d = 0, m = the constant) or a symmetric grid whose end point is the constant.
  for (auto type :
       {smol::GgmlType::Q8_0, smol::GgmlType::Q6_K, smol::GgmlType::Q5_K, smol::GgmlType::Q4_K,
        smol::GgmlType::Q3_K, smol::GgmlType::Q2_K, smol::GgmlType::Q4_1, smol::GgmlType::Q5_1}) {
    CAPTURE(smol::ggml_type_name(type));
    const auto restored = dequantize(type, quantize(type, inputs[2]), 256);
    for (float v : restored) CHECK(v == doctest::Approx(-0.75).epsilon(1e-3));
  }
}

}  // namespace test_quant_roundtrip
