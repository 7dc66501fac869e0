// ReferenceForward: the whole model in plain f32 Eigen algebra, for tests.
//
// Every matrix is dequantized once into a dense Eigen matrix and every position is
// recomputed from scratch: no KV cache, no quantized kernels, no threads of our own.
// It is written to be read next to the architecture description, not to be fast,
// and it is the yardstick the Transformer's quantized path is measured against.
//
// With `round_activations`, each matrix product first rounds its input the way ggml
// does before a quantized dot product (Q8_K for k-quant weights, Q8_0's rounding for the
// 32-value block types, f16/bf16 for those weights): the products then equal the integer
// dot products of the fast path, up to the order of float sums. Without it, the yardstick is the
// exact-activation answer that llama.cpp's F32 goldens represent.
#pragma once

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "smol/model/model.hpp"
#include "smol/ops/activation.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/quant/quantize.hpp"
#include "smol/quant/quantize_q8k.hpp"

namespace smol {

struct ReferenceOptions {
  bool round_activations = false;  // round matrix inputs as ggml does (see above)
};

class ReferenceForward {
 public:
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Vector = Eigen::RowVectorXf;

  explicit ReferenceForward(const Model& model, ReferenceOptions options = {})
      : config_(model.config()),
        options_(options),
        rope_table_(model.config().n_rot, rope_frequencies(model)),
        local_rope_table_(model.config().n_rot, model.config().local_rope_frequencies()) {
    if (model.config().encoder) {
      fail("the f32 reference runs decoders; this ", model.config().architecture,
           " model is an encoder");
    }
    const ModelWeights& w = model.weights();
    token_embd_ = dense(w.token_embd);
    output_ = w.tied_embeddings ? dense(w.token_embd) : dense(w.output);
    output_norm_ = row_vector(w.output_norm);
    for (const LayerWeights& layer : w.layers) {
      layers_.push_back({row_vector(layer.attn_norm), dense(layer.attn_q), dense(layer.attn_k),
                         dense(layer.attn_v), dense(layer.attn_output), row_vector(layer.ffn_norm),
                         dense(layer.ffn_gate), dense(layer.ffn_up), dense(layer.ffn_down),
                         row_vector(layer.attn_q_bias), row_vector(layer.attn_k_bias),
                         row_vector(layer.attn_v_bias), row_vector(layer.attn_q_norm),
                         row_vector(layer.attn_k_norm), row_vector(layer.attn_post_norm),
                         row_vector(layer.ffn_post_norm)});
      Layer& reference = layers_.back();
      reference.attn_output_bias = row_vector(layer.attn_output_bias);
      reference.attn_sinks = layer.attn_sinks;
      if (!model.config().has_experts()) continue;
      reference.router = dense(layer.ffn_gate_inp);
      reference.router_bias = row_vector(layer.ffn_gate_inp_bias);
      const ModelConfig& c = model.config();
      for (std::size_t e = 0; e < c.n_expert; ++e) {
        const auto bias = [&](const std::vector<float>& all, std::size_t width) {
          return all.empty() ? Vector()
                             : Vector(row_vector(all).segment(static_cast<Eigen::Index>(e * width),
                                                              static_cast<Eigen::Index>(width)));
        };
        reference.experts.push_back({dense(layer.ffn_gate_exps[e]),
                                     dense(layer.ffn_up_exps[e]),
                                     dense(layer.ffn_down_exps[e]),
                                     {bias(layer.ffn_gate_exps_bias, c.n_ff_expert),
                                      bias(layer.ffn_up_exps_bias, c.n_ff_expert),
                                      bias(layer.ffn_down_exps_bias, c.n_embd)}});
      }
    }
  }

  // Logits of every position when `tokens` are fed from position 0:
  // tokens.size() rows of n_vocab.
  Matrix logits(std::span<const std::int32_t> tokens) const {
    const ModelConfig& c = config_;
    const auto n = static_cast<Eigen::Index>(tokens.size());
    Matrix x(n, static_cast<Eigen::Index>(c.n_embd));
    for (Eigen::Index t = 0; t < n; ++t) {
      x.row(t) = token_embd_.values.row(tokens[t]) * c.embedding_scale;
    }

    for (std::size_t il = 0; il < c.n_layer; ++il) {
      const Layer& layer = layers_[il];
      Matrix normed = rmsnorm(x, layer.attn_norm);
      Matrix q = product(normed, layer.attn_q);
      Matrix k = product(normed, layer.attn_k);
      Matrix v = product(normed, layer.attn_v);
      if (c.attention_biases) {  // the same bias row added to every position
        q.rowwise() += layer.attn_q_bias;
        k.rowwise() += layer.attn_k_bias;
        v.rowwise() += layer.attn_v_bias;
      }
      if (c.qk_norm) {
        head_rmsnorm(q, layer.attn_q_norm, c.n_head);
        head_rmsnorm(k, layer.attn_k_norm, c.n_head_kv);
      }
      if (c.uses_rope(il)) {
        const RopeTable& table = c.uses_local_rope(il) ? local_rope_table_ : rope_table_;
        rope(q, c.n_head, table);
        rope(k, c.n_head_kv, table);
      }
      Matrix attended =
          product(attention(q, k, v, c.attention_window(il), layer.attn_sinks), layer.attn_output);
      if (c.output_bias) attended.rowwise() += layer.attn_output_bias;
      if (c.post_norms) attended = rmsnorm(attended, layer.attn_post_norm);
      x += attended;

      normed = rmsnorm(x, layer.ffn_norm);
      Matrix down = c.has_experts()
                        ? mixture(normed, layer)
                        : feed_forward(normed, layer.ffn_gate, layer.ffn_up, layer.ffn_down, {});
      if (c.post_norms) down = rmsnorm(down, layer.ffn_post_norm);
      x += down;
    }
    return product(rmsnorm(x, output_norm_), output_);
  }

 private:
  struct Dense {
    Matrix values;                       // dequantized, [out features][in features]
    GgmlType stored_as = GgmlType::F32;  // the file's type, which decides activation rounding
  };
  // A feed-forward's biases after its gate, up and down projections; empty: none.
  struct FfnBiases {
    Vector gate, up, down;
  };
  struct Expert {
    Dense gate, up, down;
    FfnBiases biases;
  };
  struct Layer {
    Vector attn_norm;
    Dense attn_q, attn_k, attn_v, attn_output;
    Vector ffn_norm;
    Dense ffn_gate, ffn_up, ffn_down;              // empty in a mixture of experts
    Vector attn_q_bias, attn_k_bias, attn_v_bias;  // empty without config.attention_biases
    Vector attn_q_norm, attn_k_norm;               // empty without config.qk_norm
    Vector attn_post_norm, ffn_post_norm;          // empty without config.post_norms
    Dense router = {};                             // a mixture's (config.has_experts())
    std::vector<Expert> experts = {};
    Vector attn_output_bias = {};        // empty without config.output_bias
    std::vector<float> attn_sinks = {};  // empty without config.attention_sinks
    Vector router_bias = {};             // empty without config.expert_biases
  };

  Matrix feed_forward(const Matrix& x, const Dense& gate, const Dense& up, const Dense& down,
                      const FfnBiases& biases) const {
    Matrix g = product(x, gate);
    Matrix u = product(x, up);
    if (biases.gate.size() != 0) g.rowwise() += biases.gate;
    if (biases.up.size() != 0) u.rowwise() += biases.up;
    Matrix y = product(g.binaryExpr(u, [&](float a, float b) { return gated(a, b); }), down);
    if (biases.down.size() != 0) y.rowwise() += biases.down;
    return y;
  }

  // A mixture of experts as its description reads (architecture.hpp's MixtureRule): per
  // token, the router's scores (plus its bias), a softmax over them unless the family
  // softmaxes the chosen alone, the experts sorted by score (ties to the lower index),
  // the first n_expert_used of them, their weights (renormalised when the family says
  // so), and the sum of their outputs so weighted, best first.
  Matrix mixture(const Matrix& x, const Layer& layer) const {
    const ModelConfig& c = config_;
    Matrix scores = product(x, layer.router);
    if (layer.router_bias.size() != 0) scores.rowwise() += layer.router_bias;
    const bool softmax_all = c.expert_weighting == ExpertWeighting::softmax_all;
    Matrix out = Matrix::Zero(x.rows(), x.cols());
    for (Eigen::Index t = 0; t < x.rows(); ++t) {
      const Vector p = (scores.row(t).array() - scores.row(t).maxCoeff()).exp().matrix();
      const Vector probability = softmax_all ? Vector(p / p.sum()) : Vector(scores.row(t));
      std::vector<std::size_t> order(c.n_expert);
      for (std::size_t e = 0; e < c.n_expert; ++e) order[e] = e;
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return probability(static_cast<Eigen::Index>(a)) >
               probability(static_cast<Eigen::Index>(b));
      });
      Vector weights(static_cast<Eigen::Index>(c.n_expert_used));
      for (std::size_t i = 0; i < c.n_expert_used; ++i) {
        weights(static_cast<Eigen::Index>(i)) = probability(static_cast<Eigen::Index>(order[i]));
      }
      if (!softmax_all) {  // the best scores' own softmax
        weights = (weights.array() - weights.maxCoeff()).exp().matrix();
        weights /= weights.sum();
      }
      if (c.normalize_chosen_experts) weights /= weights.sum();
      for (std::size_t i = 0; i < c.n_expert_used; ++i) {
        const Expert& expert = layer.experts[order[i]];
        out.row(t) += weights(static_cast<Eigen::Index>(i)) *
                      feed_forward(x.row(t), expert.gate, expert.up, expert.down, expert.biases);
      }
    }
    return out;
  }

  // The feed-forward's gate of gate value g and up value u: SiLU, GELU as ggml computes
  // it, or GPT-OSS's clamped SwiGLU (activation.hpp).
  float gated(float g, float u) const {
    switch (config_.ffn_activation) {
      case FfnActivation::gelu_tanh:
        return gelu_tanh_like_ggml(g) * u;
      case FfnActivation::swiglu_oai:
        return swiglu_oai(g, u);
      case FfnActivation::silu:
        break;
    }
    return g / (1.0f + std::exp(-g)) * u;
  }

  static Dense dense(const WeightMatrix& w) {
    Matrix m(static_cast<Eigen::Index>(w.rows), static_cast<Eigen::Index>(w.cols));
    for (std::size_t r = 0; r < w.rows; ++r) {
      dequantize_row(w.type, w.row(r), m.row(static_cast<Eigen::Index>(r)).data(), w.cols);
    }
    return {std::move(m), w.type};
  }

  // x W^T, with x rounded first as ggml would for W's type when asked to.
  Matrix product(const Matrix& x, const Dense& w) const {
    if (!options_.round_activations) return x * w.values.transpose();
    Matrix rounded = x;
    for (Eigen::Index t = 0; t < rounded.rows(); ++t) round_like_ggml(rounded.row(t).data(), w);
    return rounded * w.values.transpose();
  }

  // The activation type of w's kernels (quant/weight_types.hpp) decides, so a new
  // weight type needs nothing here: Q8_K, Q8_0 or Q8_1 blocks for quantized weights, the
  // row's own type for f16/bf16 weights, nothing for f32.
  static void round_like_ggml(float* row, const Dense& w) {
    const auto n = static_cast<std::size_t>(w.values.cols());
    visit_weight_type(w.stored_as, [&]<class W>(W) {
      using Activation = typename W::Activation;
      if constexpr (std::is_same_v<Activation, BlockQ8K>) {
        BlockQ8K block;
        for (std::size_t b = 0; b < n / QK_K; ++b) {
          quantize_block_q8k(row + b * QK_K, block);
          for (std::size_t j = 0; j < QK_K; ++j) row[b * QK_K + j] = block.d * block.qs[j];
        }
      } else if constexpr (std::is_same_v<Activation, BlockQ8_0> ||
                           std::is_same_v<Activation, BlockQ8_1>) {
        round_trip(GgmlType::Q8_0, row, n);  // Q8_1's quants and scale are Q8_0's
      } else if constexpr (W::type != GgmlType::F32) {
        round_trip(W::type, row, n);
      }
    });
  }

  static void round_trip(GgmlType type, float* row, std::size_t n) {
    std::vector<std::byte> encoded(ggml_row_bytes(type, n));
    quantize_row(type, row, encoded.data(), n);
    dequantize_row(type, encoded.data(), row, n);
  }

  static Vector row_vector(const std::vector<float>& values) {
    return Eigen::Map<const Vector>(values.data(), static_cast<Eigen::Index>(values.size()));
  }

  // Each row divided by its root mean square, then scaled by the weight.
  Matrix rmsnorm(const Matrix& x, const Vector& weight) const {
    Matrix out(x.rows(), x.cols());
    for (Eigen::Index t = 0; t < x.rows(); ++t) {
      const float mean_square = x.row(t).squaredNorm() / static_cast<float>(x.cols());
      out.row(t) = x.row(t) / std::sqrt(mean_square + config_.rms_eps);
      out.row(t) = out.row(t).cwiseProduct(weight);
    }
    return out;
  }

  // Each head_dim-wide head of every row normalised on its own, with one weight for
  // all heads (Qwen3's Q/K norms).
  void head_rmsnorm(Matrix& x, const Vector& weight, std::size_t n_heads) const {
    const auto d = static_cast<Eigen::Index>(config_.head_dim);
    for (std::size_t h = 0; h < n_heads; ++h) {
      const Eigen::Index first = static_cast<Eigen::Index>(h) * d;
      x.middleCols(first, d) = rmsnorm(x.middleCols(first, d), weight);
    }
  }

  // Row t is at position t. Each head's pair i turns by t * frequency(i): base^(-2i /
  // n_rot) as scaled by the model's RoPE scaling and rope_freqs (the same RopeTable
  // definition as the engine; the yarn goldens check it against llama.cpp).
  void rope(Matrix& x, std::size_t n_heads, const RopeTable& table) const {
    const ModelConfig& c = config_;
    const std::size_t pairs = c.n_rot / 2;
    const float magnitude = table.magnitude();
    for (Eigen::Index t = 0; t < x.rows(); ++t) {
      for (std::size_t h = 0; h < n_heads; ++h) {
        float* head = x.row(t).data() + h * c.head_dim;
        for (std::size_t i = 0; i < pairs; ++i) {
          const double angle = static_cast<double>(t) * table.frequency(i);
          const bool adjacent = c.rope_layout == RopeLayout::adjacent_pairs;
          float& a = head[adjacent ? 2 * i : i];
          float& b = head[adjacent ? 2 * i + 1 : i + pairs];
          const float cos = static_cast<float>(std::cos(angle)) * magnitude;
          const float sin = static_cast<float>(std::sin(angle)) * magnitude;
          const float rotated_a = a * cos - b * sin;
          b = a * sin + b * cos;
          a = rotated_a;
        }
      }
    }
  }

  // Causal softmax(Q K^T / sqrt(d)) V per query head (d: head_dim, or the config's
  // attention_scale_dim), with query head h reading KV
  // head h / (n_head / n_head_kv); with a `window`, row i sees only rows (i - window, i].
  // With `sinks`, head h's softmax also counts exp(sinks[h]), a score with no value.
  Matrix attention(const Matrix& q, const Matrix& k, const Matrix& v, std::size_t window,
                   const std::vector<float>& sinks) const {
    const ModelConfig& c = config_;
    const auto d = static_cast<Eigen::Index>(c.head_dim);
    const Eigen::Index n = q.rows();
    const std::size_t group = c.n_head / c.n_head_kv;
    Matrix out(n, q.cols());
    for (std::size_t h = 0; h < c.n_head; ++h) {
      const auto kv_head = static_cast<Eigen::Index>(h / group);
      const Matrix qh = q.middleCols(static_cast<Eigen::Index>(h) * d, d);
      const Matrix kh = k.middleCols(kv_head * d, d);
      const Matrix vh = v.middleCols(kv_head * d, d);
      Matrix scores =
          (qh * kh.transpose()) / std::sqrt(static_cast<float>(c.attention_scale_width()));
      for (Eigen::Index i = 0; i < n; ++i) {
        const Eigen::Index visible = i + 1;
        const auto seen =
            window == 0 ? visible : std::min(visible, static_cast<Eigen::Index>(window));
        const Eigen::Index from = visible - seen;
        auto row = scores.row(i).segment(from, seen);
        const float sink = sinks.empty() ? -std::numeric_limits<float>::infinity() : sinks[h];
        const float max = std::max(row.maxCoeff(), sink);
        row = (row.array() - max).exp().matrix();
        row /= row.sum() + std::exp(sink - max);
        scores.row(i).head(from).setZero();
        scores.row(i).tail(n - visible).setZero();
      }
      out.middleCols(static_cast<Eigen::Index>(h) * d, d) = scores * vh;
    }
    return out;
  }

  ModelConfig config_;
  ReferenceOptions options_;
  RopeTable rope_table_;        // only its frequencies and magnitude are read
  RopeTable local_rope_table_;  // the sliding-window blocks' (config.is_local)
  Dense token_embd_;
  Dense output_;
  Vector output_norm_;
  std::vector<Layer> layers_;
};

}  // namespace smol
