// Rotary position embedding (RoPE) with precomputed cos/sin tables.
//
// GGUF files of the Llama family store the Q and K projections already permuted by
// the converter, so the rotation acts on ADJACENT pairs (x[2i], x[2i+1]) with angle
// pos * base^(-2i/rotary_dims): ggml's "normal" mode. The rotate-half layout of the
// Hugging Face code, pairs (x[i], x[i + d/2]), is here only so a test can show that
// the goldens reject it.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace smol {

enum class RopeLayout { adjacent_pairs, rotate_half };

// cos and sin of every (position, pair) angle, computed once and then only looked
// up: a forward pass touches each value for every head of every layer. Rows are
// computed on demand (ensure) so a session that uses 100 positions of a 64K
// context pays for 100 rows.
class RopeTable {
 public:
  RopeTable() = default;
  RopeTable(std::size_t rotary_dims, float base) : pairs_(rotary_dims / 2), base_(base) {}

  std::size_t rotary_dims() const noexcept { return 2 * pairs_; }
  std::size_t positions() const noexcept { return pairs_ == 0 ? 0 : cos_.size() / pairs_; }

  // Makes rows [0, end) available. Not thread-safe: call before parallel use.
  void ensure(std::size_t end) {
    const std::size_t have = positions();
    if (end <= have || pairs_ == 0) return;
    // Grow geometrically (at least 256 rows) so decode does not reallocate every step.
    std::size_t target = have == 0 ? 256 : have * 2;
    while (target < end) target *= 2;
    cos_.resize(target * pairs_);
    sin_.resize(target * pairs_);
    for (std::size_t pos = have; pos < target; ++pos) {
      for (std::size_t i = 0; i < pairs_; ++i) {
        // In double: at position 65535 a float angle would already be off by ~0.01 rad.
        const double inverse_frequency =
            std::pow(static_cast<double>(base_),
                     -2.0 * static_cast<double>(i) / static_cast<double>(2 * pairs_));
        const double angle = static_cast<double>(pos) * inverse_frequency;
        cos_[pos * pairs_ + i] = static_cast<float>(std::cos(angle));
        sin_[pos * pairs_ + i] = static_cast<float>(std::sin(angle));
      }
    }
  }

  const float* cos(std::size_t pos) const noexcept { return cos_.data() + pos * pairs_; }
  const float* sin(std::size_t pos) const noexcept { return sin_.data() + pos * pairs_; }

 private:
  std::size_t pairs_ = 0;
  float base_ = 10000.0f;
  std::vector<float> cos_;  // [position][pair]
  std::vector<float> sin_;
};

// Rotates `n_heads` consecutive vectors of `head_dim` values, all at position `pos`.
// Only the first table.rotary_dims() values of each head turn; the rest pass through.
// The table must cover `pos` (RopeTable::ensure).
inline void apply_rope(float* x, std::size_t n_heads, std::size_t head_dim, const RopeTable& table,
                       std::size_t pos, RopeLayout layout = RopeLayout::adjacent_pairs) noexcept {
  const std::size_t pairs = table.rotary_dims() / 2;
  const float* cos = table.cos(pos);
  const float* sin = table.sin(pos);
  for (std::size_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (std::size_t i = 0; i < pairs; ++i) {
      // rotate_half pairs value i with value i + rotary_dims/2.
      const std::size_t first = layout == RopeLayout::adjacent_pairs ? 2 * i : i;
      const std::size_t second = layout == RopeLayout::adjacent_pairs ? 2 * i + 1 : i + pairs;
      const float a = v[first];
      const float b = v[second];
      v[first] = a * cos[i] - b * sin[i];
      v[second] = a * sin[i] + b * cos[i];
    }
  }
}

}  // namespace smol
