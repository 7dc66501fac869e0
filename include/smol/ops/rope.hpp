// Rotary position embedding (RoPE) with precomputed cos/sin tables.
//
// GGUF files of the Llama family store the Q and K projections already permuted by
// the converter, so the rotation acts on ADJACENT pairs (x[2i], x[2i+1]) with angle
// pos * base^(-2i/rotary_dims): ggml's "normal" mode. The rotate-half layout of the
// Hugging Face code, pairs (x[i], x[i + d/2]), is here only so a test can show that
// the goldens reject it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <vector>

namespace smol {

enum class RopeLayout { adjacent_pairs, rotate_half };

enum class RopeScalingType { none, linear, yarn };

// Stretching RoPE beyond the trained context, as llama.cpp does it (ggml's rope_yarn).
// linear divides every frequency by `factor`. yarn blends, per rotary pair, the divided
// frequency (interpolation) with the original one (extrapolation): pairs that turn many
// times within the original context keep theirs, slow ones are interpolated, with a
// linear ramp between the pairs at which `beta_fast` and `beta_slow` turns fit into
// the original context; and it scales the rotated values by 1 + 0.1 ln(factor) (times
// attn_factor), the magnitude correction of the YaRN paper.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  float factor = 1.0f;               // context multiplier: frequency scale 1 / factor
  std::size_t original_context = 0;  // yarn: the context trained without scaling
  float ext_factor = 1.0f;           // yarn: weight of the ramp (0: plain interpolation)
  float attn_factor = 1.0f;          // extra magnitude scale
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};

inline const char* rope_scaling_name(RopeScalingType type) noexcept {
  return type == RopeScalingType::yarn     ? "yarn"
         : type == RopeScalingType::linear ? "linear"
                                           : "none";
}

// Everything that sets a RoPE angle: angle(pos, pair) = pos * frequency(pair).
struct RopeFrequencies {
  float base = 10000.0f;
  RopeScaling scaling{};
  // rope_freqs.weight (Llama 3.1+): a divisor per rotary pair; empty: none.
  std::vector<float> factors{};
};

// cos and sin of every (position, pair) angle, computed once and then only looked
// up: a forward pass touches each value for every head of every layer. Rows are
// computed on demand (ensure) so a session that uses 100 positions of a 64K
// context pays for 100 rows.
class RopeTable {
 public:
  RopeTable() = default;
  RopeTable(std::size_t rotary_dims, float base)
      : RopeTable(rotary_dims, RopeFrequencies{.base = base}) {}
  // Each pair's frequency and the magnitude are fixed here, so a row is
  // pos * frequency per pair, scaled by the magnitude.
  RopeTable(std::size_t rotary_dims, const RopeFrequencies& rope)
      : pairs_(rotary_dims / 2), frequency_(pairs_) {
    const RopeScaling& scaling = rope.scaling;
    const double frequency_scale =
        scaling.type == RopeScalingType::none ? 1.0 : 1.0 / static_cast<double>(scaling.factor);
    // yarn's ramp: ggml_rope_yarn_corr_dims, in float as ggml computes it.
    float ramp_low = 0, ramp_high = 0;
    if (scaling.type == RopeScalingType::yarn) {
      const auto pair_for_turns = [&](float turns) {
        const float dims = static_cast<float>(rotary_dims);
        return dims *
               std::log(static_cast<float>(scaling.original_context) /
                        (turns * 2.0f * std::numbers::pi_v<float>)) /
               (2.0f * std::log(rope.base));
      };
      ramp_low = std::max(0.0f, std::floor(pair_for_turns(scaling.beta_fast)));
      ramp_high = std::min(static_cast<float>(rotary_dims - 1),
                           std::ceil(pair_for_turns(scaling.beta_slow)));
    }
    for (std::size_t i = 0; i < pairs_; ++i) {
      // In double: at position 65535 a float angle would already be off by ~0.01 rad.
      double frequency = std::pow(static_cast<double>(rope.base),
                                  -2.0 * static_cast<double>(i) / static_cast<double>(2 * pairs_));
      if (i < rope.factors.size()) frequency /= static_cast<double>(rope.factors[i]);
      double blend = frequency_scale;  // linear, and yarn's interpolated share
      if (scaling.type == RopeScalingType::yarn && scaling.ext_factor != 0.0f) {
        const float y = (static_cast<float>(i) - ramp_low) / std::max(0.001f, ramp_high - ramp_low);
        const double extrapolated = (1.0f - std::min(1.0f, std::max(0.0f, y))) * scaling.ext_factor;
        blend = frequency_scale * (1.0 - extrapolated) + extrapolated;
      }
      frequency_[i] = frequency * blend;
    }
    magnitude_ = scaling.attn_factor;
    if (scaling.type == RopeScalingType::yarn && scaling.ext_factor != 0.0f) {
      magnitude_ *= 1.0f + 0.1f * std::log(1.0f / static_cast<float>(frequency_scale));
    }
  }

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
        const double angle = static_cast<double>(pos) * frequency_[i];
        cos_[pos * pairs_ + i] = static_cast<float>(std::cos(angle)) * magnitude_;
        sin_[pos * pairs_ + i] = static_cast<float>(std::sin(angle)) * magnitude_;
      }
    }
  }

  // Radians per position of `pair`, and the factor cos and sin are scaled by (for the
  // CUDA unit and the reference, which build their own tables from them).
  double frequency(std::size_t pair) const noexcept { return frequency_[pair]; }
  float magnitude() const noexcept { return magnitude_; }

  const float* cos(std::size_t pos) const noexcept { return cos_.data() + pos * pairs_; }
  const float* sin(std::size_t pos) const noexcept { return sin_.data() + pos * pairs_; }

 private:
  std::size_t pairs_ = 0;
  std::vector<double> frequency_;  // radians per position, per pair
  float magnitude_ = 1.0f;         // yarn's correction, else 1
  std::vector<float> cos_;         // [position][pair]
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
