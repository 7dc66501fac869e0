// RMSNorm, softmax and SwiGLU against their textbook definitions.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "smol/ops/activation.hpp"
#include "smol/ops/rmsnorm.hpp"
#include "smol/ops/softmax.hpp"

TEST_CASE("rmsnorm divides by the root mean square and scales by the weight") {
  const std::vector<float> x{1, -2, 3, -4};
  const std::vector<float> w{1, 0.5f, 2, 1};
  std::vector<float> y(4);
  smol::rmsnorm(x.data(), w.data(), y.data(), 4, 1e-6f);
  const double rms = std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6);
  for (std::size_t i = 0; i < 4; ++i) CHECK(y[i] == doctest::Approx(x[i] / rms * w[i]));
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
  smol::swiglu(gate.data(), up.data(), out.data(), 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(out[i] == doctest::Approx(gate[i] / (1 + std::exp(-gate[i])) * up[i]));
  }
}
