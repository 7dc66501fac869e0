// Attention against a plain double-precision implementation of what the cache holds:
// GQA groupings, the head sizes with specialisations and one without, every K/V type,
// prefill blocks that start mid-context, and contexts long enough to split the softmax
// into blocks, sliding windows that start before, inside and at a block's edge, and
// attention sinks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "smol/ops/attention.hpp"
#include "smol/ops/context.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/quant/kv_layout.hpp"
#include "smol/quant/quantize.hpp"
#include "smol/simd/attention_kernels.hpp"
#include "smol/simd/kernels.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_ops_attention {

namespace {

struct Case {
  std::size_t n_head, n_head_kv, head_dim, context, n_tokens;
  std::size_t window = 0;  // sliding window: the last `window` positions; 0: all
  bool sinks = false;      // a sink per query head (GPT-OSS), drawn with the queries
};

// out[t][h] = softmax_p(q.k_p / sqrt(d)) . v_p over p <= first + t (and, with a window,
// p > first + t - window); with sinks, head h's softmax also counts exp(sinks[h]).
std::vector<double> naive_attention(const Case& c, const std::vector<float>& q,
                                    const std::vector<float>& keys,
                                    const std::vector<float>& values, std::size_t first,
                                    const std::vector<float>& sinks) {
  const std::size_t d = c.head_dim;
  std::vector<double> out(c.n_tokens * c.n_head * d, 0.0);
  for (std::size_t t = 0; t < c.n_tokens; ++t) {
    for (std::size_t h = 0; h < c.n_head; ++h) {
      const std::size_t g = h / (c.n_head / c.n_head_kv);
      const std::size_t visible = first + t + 1;
      const std::size_t start = c.window != 0 && visible > c.window ? visible - c.window : 0;
      std::vector<double> scores(visible, -1e300);
      double max = -1e300;
      for (std::size_t p = start; p < visible; ++p) {
        double s = 0;
        for (std::size_t i = 0; i < d; ++i) {
          s += double{q[(t * c.n_head + h) * d + i]} * keys[(g * c.context + p) * d + i];
        }
        scores[p] = s / std::sqrt(static_cast<double>(d));
        max = std::max(max, scores[p]);
      }
      if (!sinks.empty()) max = std::max(max, double{sinks[h]});
      double total = sinks.empty() ? 0.0 : std::exp(sinks[h] - max);
      for (double& s : scores) total += (s = std::exp(s - max));
      for (std::size_t p = start; p < visible; ++p) {
        for (std::size_t i = 0; i < d; ++i) {
          out[(t * c.n_head + h) * d + i] +=
              scores[p] / total * values[(g * c.context + p) * d + i];
        }
      }
    }
  }
  return out;
}

// What the cache holds for `x` stored as `type` (a row of head_dim values), turned
// back where the cache rotates its rows: `rotation` is key_rotation or value_rotation.
std::vector<float> stored_row(smol::KvType type, const float* x, std::size_t dim,
                              std::size_t rotation) {
  std::vector<float> rotated(x, x + dim);
  if (rotation != 0) smol::hadamard_rotate(rotated.data(), dim, rotation);
  std::vector<float> out(dim);
  smol::visit_kv_type(type, [&](auto tag) {
    constexpr smol::KvType T = decltype(tag)::value;
    if constexpr (smol::kv_is_quantized_v<T>) {
      for (std::size_t b = 0; b < dim / 32; ++b) {
        smol::KvElement<T> block;
        smol::quantize_block(rotated.data() + 32 * b, block);
        smol::dequantize_block(block, &out[32 * b]);
      }
    } else {
      std::vector<std::byte> region(smol::kKeyTile * smol::kv_row_bytes(type, dim));
      smol::store_value(type, x, region.data(), 0, dim);
      const auto* row = reinterpret_cast<const smol::KvElement<T>*>(region.data());
      for (std::size_t d = 0; d < dim; ++d) out[d] = smol::simd::kv_value<T>(row, d);
    }
  });
  if (rotation != 0) smol::hadamard_rotate(out.data(), dim, rotation);
  return out;
}

double max_error(const Case& c, smol::Context& ctx, smol::KvTypes types) {
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
  // Sinks as large as the scores, so that they take a good share of some heads' weight.
  const std::vector<float> sinks = c.sinks ? random_vector(c.n_head, 10.0f) : std::vector<float>();
  // Each KV head's region spans whole key tiles (quant/kv_layout.hpp).
  const std::size_t padded = (c.context + smol::kKeyTile - 1) / smol::kKeyTile * smol::kKeyTile;
  const std::size_t key_stride = padded * smol::kv_row_bytes(types.key, c.head_dim);
  const std::size_t value_stride = padded * smol::kv_row_bytes(types.value, c.head_dim);
  std::vector<std::byte> stored_keys(c.n_head_kv * key_stride);
  std::vector<std::byte> stored_values(c.n_head_kv * value_stride);
  for (std::size_t g = 0; g < c.n_head_kv; ++g) {
    for (std::size_t p = 0; p < c.context; ++p) {
      float* k = &keys[(g * c.context + p) * c.head_dim];
      float* v = &values[(g * c.context + p) * c.head_dim];
      smol::store_key(types.key, k, &stored_keys[g * key_stride], p, c.head_dim);
      smol::store_value(types.value, v, &stored_values[g * value_stride], p, c.head_dim);
      // Compare with what was actually stored.
      const std::vector<float> k_stored =
          stored_row(types.key, k, c.head_dim, smol::key_rotation(types.key, c.head_dim));
      const std::vector<float> v_stored =
          stored_row(types.value, v, c.head_dim, smol::value_rotation(types.value, c.head_dim));
      std::copy(k_stored.begin(), k_stored.end(), k);
      std::copy(v_stored.begin(), v_stored.end(), v);
    }
  }
  const std::size_t first = c.context - c.n_tokens;
  const smol::KvHeads kv{.types = types,
                         .keys = stored_keys.data(),
                         .key_head_stride = key_stride,
                         .values = stored_values.data(),
                         .value_head_stride = value_stride};
  std::vector<float> out(q.size());
  const smol::AttentionShape shape{.n_head = c.n_head,
                                   .n_head_kv = c.n_head_kv,
                                   .head_dim = c.head_dim,
                                   .sinks = sinks.empty() ? nullptr : sinks.data()};
  smol::attention(ctx, shape, q.data(), c.n_tokens, first, kv, out.data(), c.window);
  const std::vector<double> expected = naive_attention(c, q, keys, values, first, sinks);
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
      {4, 1, 64, 700, 40},   // prefill at depth: tiles of 16, 16 and 8 tokens sharing blocks
      {8, 2, 128, 530, 20},  // a tile that reaches into the next block
      // Sliding windows (Gemma 3's local blocks):
      {4, 1, 64, 40, 40, 16},    // prefill from 0: windows that start moving mid-tile
      {4, 1, 64, 700, 40, 512},  // prefill at depth, windows starting inside block 0 / 1
      {8, 2, 128, 530, 20, 16},  // a window inside one block
      {2, 1, 32, 1030, 1, 300},  // decode: blocks before the window skipped
      {4, 2, 64, 514, 3, 256},   // token 0's window starts on a block's edge
      {4, 1, 256, 520, 2, 512},  // Gemma 3 270M's heads and window
      // Attention sinks (GPT-OSS: heads of 64, 8 query heads a KV head, every other block
      // windowed):
      {8, 1, 64, 1, 1, 0, true},      // one position and the sink
      {8, 1, 64, 300, 1, 0, true},    // decode across two blocks
      {8, 1, 64, 40, 40, 16, true},   // prefill: tiles through a window
      {8, 2, 64, 530, 3, 128, true},  // gpt-oss's window of 128
  };
  for (const smol::Isa isa : smol::available_isas()) {
    smol::Context ctx(2, isa);
    CAPTURE(smol::isa_name(isa));
    for (const Case& c : cases) {
      CAPTURE(c.n_head);
      CAPTURE(c.n_head_kv);
      CAPTURE(c.head_dim);
      CAPTURE(c.context);
      CAPTURE(c.window);
      CAPTURE(c.sinks);
      for (const smol::KvType type : {smol::KvType::f32, smol::KvType::f16, smol::KvType::bf16}) {
        CAPTURE(smol::kv_type_name(type));
        CHECK(max_error(c, ctx, type) < 2e-5);
      }
      if (c.head_dim % 32 == 0) {
        // Quantized keys are dotted with the query rounded to Q8_0 (as llama.cpp does):
        // that rounding, not the stored keys, is what moves the result.
        for (const smol::KvTypes types : {smol::KvTypes(smol::KvType::f16, smol::KvType::q8_0),
                                          smol::KvTypes(smol::KvType::f16, smol::KvType::q4_0)}) {
          CAPTURE(smol::kv_type_name(types.value));
          CHECK(max_error(c, ctx, types) < 2e-5);
        }
        for (const smol::KvType key : {smol::KvType::q8_0, smol::KvType::q4_0}) {
          CAPTURE(smol::kv_type_name(key));
          // Measured: at most 0.043 over these cases (scores span tens of units); a
          // wrong scale or nibble order errs by whole units.
          CHECK(max_error(c, ctx, {key, smol::KvType::f32}) < 0.1);
        }
      }
    }
  }
}

}  // namespace test_ops_attention
