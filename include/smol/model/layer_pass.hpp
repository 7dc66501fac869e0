// The transformer blocks over a batch of tokens: the one implementation of a forward
// pass that the single-sequence Transformer and the many-sequence BatchTransformer
// share. They differ only in where a token's keys and values live and which positions
// it sees, so that is what they pass in (a `KvAccess`, below); every weight matrix is
// applied once to all the batch's tokens (a matvec for one token, a matmul for more).
#pragma once

#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/core/error.hpp"
#include "smol/model/model.hpp"
#include "smol/ops/activation.hpp"
#include "smol/ops/context.hpp"
#include "smol/ops/expert_choice.hpp"
#include "smol/ops/layernorm.hpp"
#include "smol/ops/matmul.hpp"
#include "smol/ops/matvec.hpp"
#include "smol/ops/rmsnorm.hpp"
#include "smol/ops/rope.hpp"
#include "smol/ops/softmax.hpp"

namespace smol {

// What run_layers needs to know of the K/V side, for token t of the batch:
//   std::size_t position(std::size_t t)       its position in its own sequence
//   void store(layer, t, const float* k, const float* v)   keep its K and V rows
//   void attend(layer, const float* q, std::size_t n, float* out)
//                                             attention of all n query rows
template <class T>
concept KvAccess = requires(T kv, std::size_t i, const float* f, float* out) {
  { kv.position(i) } -> std::convertible_to<std::size_t>;
  kv.store(i, i, f, f);
  kv.attend(i, f, i, out);
};

// The biases of a feed-forward's three projections (GPT-OSS's experts'); null: none.
struct FfnBiases {
  const float* gate = nullptr;
  const float* up = nullptr;
  const float* down = nullptr;
};

// The activations of a batch, grown to the largest batch seen and then reused.
class LayerPass {
 public:
  // `one_token`: what a batch of one token runs on (see ops/matmul.hpp): the decode
  // kernels, or the block kernels when results must not depend on the batch's size.
  LayerPass(const Model& model, Context& context, OneToken one_token = OneToken::matvec)
      : model_(&model), context_(&context), one_token_(one_token) {}

  // Runs the tokens through every block, leaving their final hidden states inside.
  // RoPE turns the queries and keys of token t by kv.position(t), each block by its
  // table of `ropes`, which must cover every position. `cancel` is polled four times
  // per block (before it, after the attention, after the feed-forward's gate and up
  // projections: each of the three feed-forward matrices is about 30 % of a block's
  // work; a decoded token's gate and up are one pass, polled once), so a cancel stops
  // the pass within about a third of a block, however long the batch. It then throws Cancelled; the
  // K/V stored for the batch's positions so far is partial (the caller forgets it).
  template <KvAccess Kv>
  void run(std::span<const std::int32_t> tokens, const BlockRopes& ropes, Kv& kv,
           const CancelCheck& cancel) {
    const ModelConfig& c = model_->config();
    const ModelWeights& w = model_->weights();
    if (c.encoder) return run_encoder(tokens, ropes, kv, cancel);
    const std::size_t n = tokens.size();
    reserve(n);
    for (std::size_t t = 0; t < n; ++t) {
      float* row = x_.data() + t * c.n_embd;
      w.embed(tokens[t], row);
      if (c.embedding_scale != 1.0f) {  // Gemma: sqrt(n_embd)
        for (std::size_t i = 0; i < c.n_embd; ++i) row[i] *= c.embedding_scale;
      }
    }

    for (std::size_t il = 0; il < c.n_layer; ++il) {
      cancel.throw_if_requested();
      const LayerWeights& layer = w.layers[il];
      for_each_token(n, [&](std::size_t t) {
        rmsnorm(x_.data() + t * c.n_embd, layer.attn_norm.data(), normed_.data() + t * c.n_embd,
                c.n_embd, c.rms_eps);
      });
      queries_keys_values(layer, il, normed_.data(), n, ropes, kv);
      const auto attention_started = std::chrono::steady_clock::now();
      kv.attend(il, q_.data(), n, attended_.data());
      attention_seconds_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - attention_started)
              .count();
      project(layer.attn_output, attended_.data(), n, projected_.data());
      if (c.output_bias) add_to_rows(projected_.data(), layer.attn_output_bias.data(), n, c.n_embd);
      if (c.post_norms) post_norm(layer.attn_post_norm, n);
      add_in_place(x_.data(), projected_.data(), n * c.n_embd);
      cancel.throw_if_requested();

      for_each_token(n, [&](std::size_t t) {
        rmsnorm(x_.data() + t * c.n_embd, layer.ffn_norm.data(), normed_.data() + t * c.n_embd,
                c.n_embd, c.rms_eps);
      });
      if (c.has_experts()) {
        mixture_of_experts(layer, n, cancel);
      } else {
        feed_forward(layer.ffn_gate, layer.ffn_up, layer.ffn_down, normed_.data(), n,
                     projected_.data(), cancel);
      }
      if (c.post_norms) post_norm(layer.ffn_post_norm, n);
      add_in_place(x_.data(), projected_.data(), n * c.n_embd);
    }
  }

  // Seconds spent in attention over every run so far (benchmarks split a step's time
  // into attention and the rest with it; two clock reads per block cost nothing).
  double attention_seconds() const noexcept { return attention_seconds_; }

  // Logits (n_vocab floats each) of the hidden states of the last run's tokens
  // `rows`, in that order, into `out`.
  void logits(std::span<const std::size_t> rows, float* out) {
    const ModelConfig& c = model_->config();
    if (!c.has_lm_head()) {
      fail("this ", c.architecture,
           " model is an encoder: it has no LM head to predict tokens with; "
           "it makes embeddings (smol-server --embeddings)");
    }
    final_norm(rows, normed_.data());
    project(model_->weights().output, normed_.data(), rows.size(), out);
  }

  // The final hidden states (after the output norm, before the LM head: what llama.cpp
  // pools into embeddings, its "result_norm"; an encoder's last block's output as it is)
  // of the last run's tokens `rows`, in that order, n_embd floats each, into `out`.
  void final_norm(std::span<const std::size_t> rows, float* out) {
    const ModelConfig& c = model_->config();
    const ModelWeights& w = model_->weights();
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const float* x = x_.data() + rows[r] * c.n_embd;
      if (c.encoder) {
        std::copy(x, x + c.n_embd, out + r * c.n_embd);
      } else {
        rmsnorm(x, w.output_norm.data(), out + r * c.n_embd, c.n_embd, c.rms_eps);
      }
    }
  }

  // A reranker's classifier head (config.n_labels) on `n` pooled states: tanh(cls x +
  // b) where the file has cls, then cls.output with its bias: n_labels scores each, into
  // `out`, softmaxed where the family's are (config.rank_softmax: Qwen3-Reranker's p(yes),
  // p(no)). llama.cpp's rank pooling.
  void classify(const float* states, std::size_t n, float* out) {
    const ModelConfig& c = model_->config();
    const ClassifierWeights& head = model_->weights().classifier;
    if (c.n_labels == 0)
      fail("this ", c.architecture, " model has no classifier head to rank with");
    const float* input = states;
    if (head.has_hidden) {
      reserve(n);
      project(head.hidden, states, n, projected_.data());
      if (!head.hidden_bias.empty())
        add_to_rows(projected_.data(), head.hidden_bias.data(), n, c.n_embd);
      for (float& value : std::span(projected_.data(), n * c.n_embd)) value = std::tanh(value);
      input = projected_.data();
    }
    project(head.output, input, n, out);
    if (!head.output_bias.empty()) add_to_rows(out, head.output_bias.data(), n, c.n_labels);
    if (c.rank_softmax) {
      for (std::size_t t = 0; t < n; ++t) softmax(out + t * c.n_labels, c.n_labels);
    }
  }

 private:
  // An encoder's pass (EncoderRule, llama.cpp's build_bert): the embeddings with their
  // type row (and BERT's position rows), LayerNorm'd; then each block adds its attention
  // to its input and LayerNorms the sum, and the same for its feed-forward (BERT's up,
  // GELU, down; nomic-bert's SwiGLU). The biases the file has are added; nomic-bert's
  // queries and keys turn by RoPE.
  template <KvAccess Kv>
  void run_encoder(std::span<const std::int32_t> tokens, const BlockRopes& ropes, Kv& kv,
                   const CancelCheck& cancel) {
    const ModelConfig& c = model_->config();
    const ModelWeights& w = model_->weights();
    const EncoderWeights& e = w.encoder;
    const std::size_t n = tokens.size(), width = c.n_embd;
    reserve(n);
    for (std::size_t t = 0; t < n; ++t) {
      float* row = x_.data() + t * width;
      w.embed(tokens[t], row);
      if (!e.token_type.empty()) add_in_place(row, e.token_type.data(), width);
      if (c.learned_positions) {
        const std::size_t position = kv.position(t);
        if (position >= e.position_embd.rows) {
          fail("position ", position, " is past the ", e.position_embd.rows,
               " positions this encoder learned");
        }
        float* scratch = normed_.data() + t * width;
        dequantize_row(e.position_embd.type, e.position_embd.row(position), scratch, width);
        add_in_place(row, scratch, width);
      }
      layernorm(row, e.norm.data(), e.norm_bias.data(), row, width, c.rms_eps);
    }
    for (std::size_t il = 0; il < c.n_layer; ++il) {
      cancel.throw_if_requested();
      const LayerWeights& layer = w.layers[il];
      queries_keys_values(layer, il, x_.data(), n, ropes, kv);
      kv.attend(il, q_.data(), n, attended_.data());
      project(layer.attn_output, attended_.data(), n, projected_.data());
      if (!layer.attn_output_bias.empty()) {
        add_to_rows(projected_.data(), layer.attn_output_bias.data(), n, width);
      }
      add_and_layernorm(layer.attn_out_norm, layer.attn_out_norm_bias, n);
      cancel.throw_if_requested();

      if (c.gated_ffn) {
        feed_forward(layer.ffn_gate, layer.ffn_up, layer.ffn_down, x_.data(), n, projected_.data(),
                     cancel,
                     {.up = layer.ffn_up_bias.empty() ? nullptr : layer.ffn_up_bias.data(),
                      .down = layer.ffn_down_bias.empty() ? nullptr : layer.ffn_down_bias.data()});
      } else {
        project(layer.ffn_up, x_.data(), n, up_.data());
        for_each_token(n, [&](std::size_t t) {
          float* u = up_.data() + t * c.n_ff;
          add_bias(u, layer.ffn_up_bias, c.n_ff);
          for (std::size_t i = 0; i < c.n_ff; ++i) u[i] = gelu_tanh_like_ggml(u[i]);
        });
        cancel.throw_if_requested();
        project(layer.ffn_down, up_.data(), n, projected_.data());
        if (!layer.ffn_down_bias.empty()) {
          add_to_rows(projected_.data(), layer.ffn_down_bias.data(), n, width);
        }
      }
      add_and_layernorm(layer.ffn_out_norm, layer.ffn_out_norm_bias, n);
    }
  }

  // Block il's queries, keys and values of the n rows of `input`, into q_, k_ and v_:
  // projected, then the family's optional mechanisms (the biases the file has, per-head
  // Q/K norms), then RoPE (the config says which apply: the NoPE rule and the RoPE style
  // come from the architecture's entry through it); K and V stored.
  template <KvAccess Kv>
  void queries_keys_values(const LayerWeights& layer, std::size_t il, const float* input,
                           std::size_t n, const BlockRopes& ropes, Kv& kv) {
    const ModelConfig& c = model_->config();
    project_shared_input({&layer.attn_q, &layer.attn_k, &layer.attn_v}, input, n,
                         {q_.data(), k_.data(), v_.data()}, CancelCheck{});
    const bool rotate = c.uses_rope(il);
    const RopeTable& rope = ropes.of_block(c, il);
    for_each_token(n, [&](std::size_t t) {
      float* q = q_.data() + t * c.q_dim();
      float* k = k_.data() + t * c.kv_dim();
      float* v = v_.data() + t * c.kv_dim();
      add_bias(q, layer.attn_q_bias, c.q_dim());
      add_bias(k, layer.attn_k_bias, c.kv_dim());
      add_bias(v, layer.attn_v_bias, c.kv_dim());
      if (c.qk_norm) {  // every head on its own, with the one weight vector
        rmsnorm_rows(q, layer.attn_q_norm.data(), q, c.n_head, c.head_dim, c.rms_eps);
        rmsnorm_rows(k, layer.attn_k_norm.data(), k, c.n_head_kv, c.head_dim, c.rms_eps);
      }
      if (rotate) {
        const std::size_t pos = kv.position(t);
        apply_rope(q, c.n_head, c.head_dim, rope, pos, c.rope_layout);
        apply_rope(k, c.n_head_kv, c.head_dim, rope, pos, c.rope_layout);
      }
      kv.store(il, t, k, v);
    });
  }

  // x = LayerNorm(projected + x) for the n rows: an encoder's residual sum and its norm.
  void add_and_layernorm(const std::vector<float>& weight, const std::vector<float>& bias,
                         std::size_t n) {
    const ModelConfig& c = model_->config();
    for_each_token(n, [&](std::size_t t) {
      float* x = x_.data() + t * c.n_embd;
      const float* delta = projected_.data() + t * c.n_embd;
      for (std::size_t i = 0; i < c.n_embd; ++i) x[i] = delta[i] + x[i];
      layernorm(x, weight.data(), bias.data(), x, c.n_embd, c.rms_eps);
    });
  }

  void reserve(std::size_t n) {
    const ModelConfig& c = model_->config();
    const auto grow = [n](std::vector<float>& buffer, std::size_t width) {
      if (buffer.size() < n * width) buffer.resize(n * width);
    };
    grow(x_, c.n_embd);
    grow(normed_, c.n_embd);
    grow(q_, c.q_dim());
    grow(k_, c.kv_dim());
    grow(v_, c.kv_dim());
    grow(attended_, c.q_dim());
    grow(projected_, c.n_embd);
    grow(gate_, c.ffn_width());
    grow(up_, c.ffn_width());
    if (c.has_experts()) {
      const std::size_t k = c.n_expert_used;
      grow(router_, c.n_expert);
      if (chosen_.size() < n * k) chosen_.resize(n * k);
      grow(chosen_weights_, k);
      // An expert may be chosen by every token (up to n rows in and out); each of a
      // token's k choices keeps its weighted output until they are summed in order.
      grow(expert_in_, c.n_embd);
      grow(expert_out_, c.n_embd);
      grow(slot_outputs_, k * c.n_embd);
    }
  }

  // The gated feed-forward of n rows of x into y: gate and up (one pass where they
  // share the input), the activation, down. `cancel` is polled after gate and up.
  void feed_forward(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down,
                    const float* x, std::size_t n, float* y, const CancelCheck& cancel,
                    const FfnBiases& biases = {}) {
    const ModelConfig& c = model_->config();
    const std::size_t width = gate.rows;
    project_shared_input({&gate, &up}, x, n, {gate_.data(), up_.data()}, cancel);
    for_each_token(n, [&](std::size_t t) {
      float* g = gate_.data() + t * width;
      float* u = up_.data() + t * width;
      if (biases.gate != nullptr) add_in_place(g, biases.gate, width);
      if (biases.up != nullptr) add_in_place(u, biases.up, width);
      gated_activation(*context_, c.ffn_activation, g, u, g, width);
    });
    project(down, gate_.data(), n, y);
    if (biases.down != nullptr) add_to_rows(y, biases.down, n, down.rows);
  }

  // A mixture of experts (MixtureRule) over the n rows of normed_, into projected_: the
  // router's probabilities per token, its chosen experts (choose_experts), then each
  // expert once over the tokens that chose it, so that a step reads each chosen
  // expert's weights once for the whole batch (and a decoded token only its own
  // experts'). A token's outputs are weighted and summed in the order of its choices,
  // most probable first, as llama.cpp's build_moe_ffn sums them.
  void mixture_of_experts(const LayerWeights& layer, std::size_t n, const CancelCheck& cancel) {
    const ModelConfig& c = model_->config();
    const std::size_t k = c.n_expert_used;
    project(layer.ffn_gate_inp, normed_.data(), n, router_.data());
    if (c.expert_biases) add_to_rows(router_.data(), layer.ffn_gate_inp_bias.data(), n, c.n_expert);
    for_each_token(n, [&](std::size_t t) {
      choose_experts(router_.data() + t * c.n_expert, c.n_expert, k, c.expert_weighting,
                     c.normalize_chosen_experts, chosen_.data() + t * k,
                     chosen_weights_.data() + t * k);
    });
    for (std::size_t e = 0; e < c.n_expert; ++e) {
      expert_slots_.clear();  // (token, slot) pairs that chose expert e
      for (std::size_t i = 0; i < n * k; ++i) {
        if (chosen_[i] == e) expert_slots_.push_back(i);
      }
      if (expert_slots_.empty()) continue;
      const std::size_t m = expert_slots_.size();
      for (std::size_t j = 0; j < m; ++j) {
        const float* row = normed_.data() + expert_slots_[j] / k * c.n_embd;
        std::copy(row, row + c.n_embd, expert_in_.data() + j * c.n_embd);
      }
      const auto bias = [&](const std::vector<float>& all, std::size_t width) {
        return all.empty() ? nullptr : all.data() + e * width;
      };
      feed_forward(layer.ffn_gate_exps[e], layer.ffn_up_exps[e], layer.ffn_down_exps[e],
                   expert_in_.data(), m, expert_out_.data(), cancel,
                   {.gate = bias(layer.ffn_gate_exps_bias, c.n_ff_expert),
                    .up = bias(layer.ffn_up_exps_bias, c.n_ff_expert),
                    .down = bias(layer.ffn_down_exps_bias, c.n_embd)});
      for_each_token(m, [&](std::size_t j) {
        const std::size_t slot = expert_slots_[j];
        const float weight = chosen_weights_[slot];
        const float* out = expert_out_.data() + j * c.n_embd;
        float* weighted = slot_outputs_.data() + slot * c.n_embd;
        for (std::size_t i = 0; i < c.n_embd; ++i) weighted[i] = out[i] * weight;
      });
    }
    for_each_token(n, [&](std::size_t t) {
      float* sum = projected_.data() + t * c.n_embd;
      const float* slots = slot_outputs_.data() + t * k * c.n_embd;
      std::copy(slots, slots + c.n_embd, sum);
      for (std::size_t s = 1; s < k; ++s) add_in_place(sum, slots + s * c.n_embd, c.n_embd);
    });
  }

  // RMSNorm of the n rows of projected_ (an attention's or FFN's output) before they
  // join the residual stream (config.post_norms).
  void post_norm(const std::vector<float>& weight, std::size_t n) {
    const ModelConfig& c = model_->config();
    for_each_token(n, [&](std::size_t t) {
      float* row = projected_.data() + t * c.n_embd;
      rmsnorm(row, weight.data(), row, c.n_embd, c.rms_eps);
    });
  }

  // y = W x for n rows of x (a matvec for one token, unless told otherwise).
  void project(const WeightMatrix& w, const float* x, std::size_t n, float* y) {
    matmul(*context_, w, x, n, y, one_token_);
  }

  // project() for matrices that read the same input: one pass over the threads for all
  // of them when the batch is one token decoded with the matvec kernels (OneToken::matvec,
  // or matrices whose matvec rounds like the tiles; microseconds:
  // `cancel` is polled once, after it); else matmul_shared_input (the input quantized once
  // where the matrices take it alike), `cancel` polled after each matrix, so that a long
  // prefill polls as often as with separate calls.
  void project_shared_input(std::initializer_list<const WeightMatrix*> ws, const float* x,
                            std::size_t n, std::initializer_list<float*> ys,
                            const CancelCheck& cancel) {
    if (n == 1 && (one_token_ == OneToken::matvec ||
                   std::all_of(ws.begin(), ws.end(), [&](const WeightMatrix* w) {
                     return matvec_rounds_like_tiles(*context_, *w);
                   }))) {
      matvec_shared_input(*context_, std::span(ws.begin(), ws.size()), x,
                          std::span(ys.begin(), ys.size()), one_token_);
      cancel.throw_if_requested();
      return;
    }
    matmul_shared_input(*context_, std::span(ws.begin(), ws.size()), x, n,
                        std::span(ys.begin(), ys.size()), one_token_,
                        [&] { cancel.throw_if_requested(); });
  }

  // Runs f(t) for t in [0, n), in parallel when the block is large enough to pay.
  template <class PerToken>
  void for_each_token(std::size_t n, const PerToken& f) {
    if (n < 8) {
      for (std::size_t t = 0; t < n; ++t) f(t);
      return;
    }
    context_->arena().execute([&] { tbb::parallel_for(std::size_t{0}, n, f); });
  }

  static void add_in_place(float* x, const float* delta, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) x[i] += delta[i];
  }
  // A bias the file may not have (empty: nothing to add).
  static void add_bias(float* x, const std::vector<float>& bias, std::size_t n) noexcept {
    if (!bias.empty()) add_in_place(x, bias.data(), n);
  }
  // The same `width` values added to each of n rows (a bias).
  static void add_to_rows(float* rows, const float* bias, std::size_t n, std::size_t width) {
    for (std::size_t t = 0; t < n; ++t) add_in_place(rows + t * width, bias, width);
  }

  const Model* model_;
  Context* context_;
  OneToken one_token_;
  double attention_seconds_ = 0;
  std::vector<float> x_, normed_, q_, k_, v_, attended_, projected_, gate_, up_;
  // Mixture of experts: router scores, each token's chosen experts and their weights,
  // the (token, slot) indices of one expert's tokens, its inputs and outputs, and every
  // choice's weighted output.
  std::vector<float> router_, chosen_weights_, expert_in_, expert_out_, slot_outputs_;
  std::vector<std::size_t> chosen_, expert_slots_;
};

}  // namespace smol
