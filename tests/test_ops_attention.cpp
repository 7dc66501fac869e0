// Attention against a plain double-precision implementation: GQA groupings, the head
// sizes with specialisations and one without, both K/V element types, prefill blocks
// that start mid-context, and contexts long enough to split the softmax into blocks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "smol/core/half.hpp"
#include "smol/ops/attention.hpp"
#include "smol/ops/context.hpp"
#include "smol/simd/kernels.hpp"

namespace {

struct Case {
  std::size_t n_head, n_head_kv, head_dim, context, n_tokens;
};

// out[t][h] = softmax_p(q.k_p / sqrt(d)) . v_p over p <= first + t.
std::vector<double> naive_attention(const Case& c, const std::vector<float>& q,
                                    const std::vector<float>& keys,
                                    const std::vector<float>& values, std::size_t first) {
  const std::size_t d = c.head_dim;
  std::vector<double> out(c.n_tokens * c.n_head * d, 0.0);
  for (std::size_t t = 0; t < c.n_tokens; ++t) {
    for (std::size_t h = 0; h < c.n_head; ++h) {
      const std::size_t g = h / (c.n_head / c.n_head_kv);
      const std::size_t visible = first + t + 1;
      std::vector<double> scores(visible);
      double max = -1e300;
      for (std::size_t p = 0; p < visible; ++p) {
        double s = 0;
        for (std::size_t i = 0; i < d; ++i) {
          s += double{q[(t * c.n_head + h) * d + i]} * keys[(g * c.context + p) * d + i];
        }
        scores[p] = s / std::sqrt(static_cast<double>(d));
        max = std::max(max, scores[p]);
      }
      double total = 0;
      for (double& s : scores) total += (s = std::exp(s - max));
      for (std::size_t p = 0; p < visible; ++p) {
        for (std::size_t i = 0; i < d; ++i) {
          out[(t * c.n_head + h) * d + i] +=
              scores[p] / total * values[(g * c.context + p) * d + i];
        }
      }
    }
  }
  return out;
}

template <class Element>
double max_error(const Case& c, smol::Context& ctx) {
  std::mt19937 rng(static_cast<unsigned>(c.head_dim * 131 + c.n_head_kv * 7 + c.context));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random_vector = [&](std::size_t n, float scale) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng) * scale;
    return v;
  };
  std::vector<float> keys = random_vector(c.n_head_kv * c.context * c.head_dim, 1.0f);
  std::vector<float> values = random_vector(c.n_head_kv * c.context * c.head_dim, 1.0f);
  // Large queries make the scores span tens of units: a naive exp would overflow.
  const std::vector<float> q = random_vector(c.n_tokens * c.n_head * c.head_dim, 3.0f);
  // Keys go in tiled (smol::key_offset), over a stride of whole tiles; values as rows.
  const std::size_t padded = (c.context + smol::kKeyTile - 1) / smol::kKeyTile * smol::kKeyTile;
  const std::size_t key_stride = padded * c.head_dim;
  std::vector<Element> stored_keys(c.n_head_kv * key_stride);
  for (std::size_t g = 0; g < c.n_head_kv; ++g) {
    for (std::size_t p = 0; p < c.context; ++p) {
      smol::store_key(&keys[(g * c.context + p) * c.head_dim], &stored_keys[g * key_stride], p,
                      c.head_dim);
    }
  }
  std::vector<Element> stored_values(values.size());
  smol::store_kv(values.data(), stored_values.data(), values.size());
  if constexpr (!std::is_same_v<Element, float>) {  // compare with what was actually stored
    for (float& k : keys) k = smol::f16_to_f32(smol::f32_to_f16(k));
    for (float& v : values) v = smol::f16_to_f32(smol::f32_to_f16(v));
  }
  const std::size_t first = c.context - c.n_tokens;
  const smol::KvHeads<Element> kv{stored_keys.data(), key_stride, stored_values.data(),
                                  c.context * c.head_dim};
  std::vector<float> out(q.size());
  smol::attention(ctx, {c.n_head, c.n_head_kv, c.head_dim}, q.data(), c.n_tokens, first, kv,
                  out.data());
  const std::vector<double> expected = naive_attention(c, q, keys, values, first);
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    worst = std::max(worst, std::abs(out[i] - expected[i]));
  }
  return worst;
}

}  // namespace

TEST_CASE("attention matches a naive double implementation on every ISA") {
  const Case cases[] = {
      {4, 1, 64, 7, 7},      // whole prefill from position 0, GQA 4:1
      {4, 4, 64, 300, 1},    // decode across two softmax blocks, no grouping
      {16, 4, 128, 600, 3},  // SmolLM3-3B's shape, tokens appended mid-context
      {8, 2, 128, 1, 1},     // the very first token sees only itself
      {6, 3, 80, 530, 2},    // head size without a specialisation
      {2, 1, 32, 1030, 1},   // five blocks
      {16, 1, 64, 270, 2},   // a group too large for the stack scores
  };
  for (const smol::Isa isa : smol::available_isas()) {
    smol::Context ctx(2, isa);
    CAPTURE(smol::isa_name(isa));
    for (const Case& c : cases) {
      CAPTURE(c.n_head);
      CAPTURE(c.n_head_kv);
      CAPTURE(c.head_dim);
      CAPTURE(c.context);
      CHECK(max_error<float>(c, ctx) < 2e-5);
      CHECK(max_error<smol::f16_bits>(c, ctx) < 2e-5);
    }
  }
}
