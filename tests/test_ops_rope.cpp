// RoPE: the adjacent-pair convention of GGUF Llama-family files, its table, and the
// rotate-half layout that only the negative tests use.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "smol/ops/rope.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_ops_rope {

TEST_CASE("adjacent pairs rotate by pos * base^(-2i/d)") {
  const std::size_t head_dim = 8;
  smol::RopeTable table(head_dim, 10000.0f);
  table.ensure(100);
  REQUIRE(table.positions() >= 100);
  std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8};
  const std::vector<float> original = x;
  const std::size_t pos = 37;
  smol::apply_rope(x.data(), 2, head_dim, table, pos);
  for (std::size_t h = 0; h < 2; ++h) {
    for (std::size_t i = 0; i < head_dim / 2; ++i) {
      const double angle = pos * std::pow(10000.0, -2.0 * i / head_dim);
      const double a = original[h * head_dim + 2 * i];
      const double b = original[h * head_dim + 2 * i + 1];
      CHECK(x[h * head_dim + 2 * i] == doctest::Approx(a * std::cos(angle) - b * std::sin(angle)));
      CHECK(x[h * head_dim + 2 * i + 1] ==
            doctest::Approx(a * std::sin(angle) + b * std::cos(angle)));
    }
  }
}

TEST_CASE("position 0 is the identity; rotate-half pairs i with i + d/2") {
  smol::RopeTable table(4, 5e6f);
  table.ensure(2);
  std::vector<float> x{1, 2, 3, 4};
  smol::apply_rope(x.data(), 1, 4, table, 0);
  CHECK(x == std::vector<float>{1, 2, 3, 4});

  std::vector<float> half{1, 0, 0, 0};  // only the (0, 2) pair has anything to rotate
  smol::apply_rope(half.data(), 1, 4, table, 1, smol::RopeLayout::rotate_half);
  CHECK(half[0] == doctest::Approx(std::cos(1.0)));
  CHECK(half[1] == 0.0f);
  CHECK(half[2] == doctest::Approx(std::sin(1.0)));
}

TEST_CASE("partial rotary dims leave the tail untouched; the table grows on demand") {
  smol::RopeTable table(4, 10000.0f);  // head_dim 6, only 4 rotate
  table.ensure(1);
  const std::size_t first = table.positions();
  table.ensure(first + 1);
  CHECK(table.positions() > first);
  std::vector<float> x{1, 1, 1, 1, 5, 6};
  smol::apply_rope(x.data(), 1, 6, table, first);
  CHECK(x[4] == 5.0f);
  CHECK(x[5] == 6.0f);
  CHECK(x[0] * x[0] + x[1] * x[1] == doctest::Approx(2.0f));
}

}  // namespace test_ops_rope
