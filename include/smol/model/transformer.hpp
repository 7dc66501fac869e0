// Transformer: one inference session over a Model, the fast path.
//
// It owns what a conversation accumulates (the KV cache, RoPE table, scratch) and
// borrows the immutable Model and the Context that provides threads and the
// activation precision. Prefill runs the whole block of tokens through each matrix
// with one matmul and attends causally within the block; decode (one token) uses
// matvecs and attends over the cache.
#pragma once

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/core/error.hpp"
#include "smol/core/half.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"
#include "smol/ops/activation.hpp"
#include "smol/ops/attention.hpp"
#include "smol/ops/context.hpp"
#include "smol/ops/matmul.hpp"
#include "smol/ops/matvec.hpp"
#include "smol/ops/rmsnorm.hpp"
#include "smol/ops/rope.hpp"

namespace smol {

struct TransformerOptions {
  // Positions the session can hold; 0 means the model's context length. Memory is
  // committed only for positions actually filled (see KvCache).
  std::size_t context = 0;
  KvType kv_type = KvType::f16;
  // Tokens per internal pass; bounds the scratch memory of a long prefill.
  std::size_t max_batch = 512;
};

// Which positions of a forward call get logits.
enum class LogitsFor { none, last, all };

class Transformer {
 public:
  Transformer(const Model& model, Context& context, TransformerOptions options = {})
      : model_(&model), context_(&context), options_(options) {
    const ModelConfig& config = model.config();
    if (options_.context == 0) options_.context = config.n_ctx_train;
    if (options_.context > config.n_ctx_train) {
      fail("a context of ", options_.context, " positions exceeds the model's ",
           config.n_ctx_train);
    }
    if (options_.max_batch == 0) fail("max_batch must be at least 1");
    kv_ = KvCache(config.n_layer, config.n_head_kv, config.head_dim, options_.context,
                  options_.kv_type);
    rope_ = RopeTable(config.n_rot, config.rope_base);
  }

  const Model& model() const noexcept { return *model_; }
  std::size_t context_length() const noexcept { return options_.context; }
  // Positions [0, n_filled()) hold valid K/V.
  std::size_t n_filled() const noexcept { return n_filled_; }

  // Runs `tokens` at positions [n_past, n_past + tokens.size()). n_past may be at most
  // n_filled(): rewinding drops the positions after it, skipping ahead is an error.
  // Returns the requested logits rows (n_vocab floats each, in position order),
  // valid until the next call.
  //
  // `cancel` is polled four times per layer (before it, after attention, after the
  // feed-forward's gate and up projections: each of the three feed-forward matrices
  // is about 30 % of a layer's work), so a cancel takes effect within about a third of
  // a layer, whatever the prompt's length. The call then throws Cancelled with n_filled() at the end of the last
  // internal pass that completed (max_batch tokens each): the cache is consistent, and
  // the caller resumes from n_filled() or rewinds to any earlier position.
  std::span<const float> forward(std::span<const std::int32_t> tokens, std::size_t n_past,
                                 LogitsFor which = LogitsFor::last,
                                 const CancelCheck& cancel = {}) {
    const ModelConfig& config = model_->config();
    if (tokens.empty()) fail("forward: no tokens to run");
    if (n_past > n_filled_) {
      fail("forward: position ", n_past, " is past the ", n_filled_, " positions filled so far");
    }
    if (n_past + tokens.size() > options_.context) {
      fail("context overflow: positions ", n_past, "..", n_past + tokens.size() - 1,
           " do not fit the session's context of ", options_.context, " positions");
    }
    for (const std::int32_t token : tokens) {
      if (token < 0 || static_cast<std::size_t>(token) >= config.n_vocab) {
        fail("token id ", token, " is outside the vocabulary of ", config.n_vocab, " tokens");
      }
    }
    n_filled_ = n_past;  // positions after n_past are about to be overwritten
    rope_.ensure(n_past + tokens.size());

    const std::size_t n_rows =
        which == LogitsFor::all ? tokens.size() : (which == LogitsFor::last ? 1 : 0);
    logits_.resize(n_rows * config.n_vocab);
    for (std::size_t begin = 0; begin < tokens.size(); begin += options_.max_batch) {
      const std::size_t count = std::min(options_.max_batch, tokens.size() - begin);
      run_blocks(tokens.subspan(begin, count), n_past + begin, cancel);
      if (which == LogitsFor::all) {
        compute_logits(0, count, logits_.data() + begin * config.n_vocab);
      } else if (which == LogitsFor::last && begin + count == tokens.size()) {
        compute_logits(count - 1, 1, logits_.data());
      }
      n_filled_ = n_past + begin + count;
    }
    return logits_;
  }

 private:
  void reserve_scratch(std::size_t n) {
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
    grow(gate_, c.n_ff);
    grow(up_, c.n_ff);
  }

  // y = W x for n rows of x: a matvec for one token, a matmul for a block.
  void project(const WeightMatrix& w, const float* x, std::size_t n, float* y) {
    if (n == 1) {
      matvec(*context_, w, x, y);
    } else {
      matmul(*context_, w, x, n, y);
    }
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

  // Leaves the final hidden states of the block's tokens in x_.
  void run_blocks(std::span<const std::int32_t> tokens, std::size_t first_pos,
                  const CancelCheck& cancel) {
    const ModelConfig& c = model_->config();
    const ModelWeights& w = model_->weights();
    const std::size_t n = tokens.size();
    reserve_scratch(n);
    for (std::size_t t = 0; t < n; ++t) w.embed(tokens[t], x_.data() + t * c.n_embd);

    for (std::size_t il = 0; il < c.n_layer; ++il) {
      cancel.throw_if_requested();
      const LayerWeights& layer = w.layers[il];
      for_each_token(n, [&](std::size_t t) {
        rmsnorm(x_.data() + t * c.n_embd, layer.attn_norm.data(), normed_.data() + t * c.n_embd,
                c.n_embd, c.rms_eps);
      });
      project(layer.attn_q, normed_.data(), n, q_.data());
      project(layer.attn_k, normed_.data(), n, k_.data());
      project(layer.attn_v, normed_.data(), n, v_.data());
      const bool rotate = c.uses_rope(il);
      for_each_token(n, [&](std::size_t t) {
        if (rotate) {
          apply_rope(q_.data() + t * c.q_dim(), c.n_head, c.head_dim, rope_, first_pos + t,
                     c.rope_layout);
          apply_rope(k_.data() + t * c.kv_dim(), c.n_head_kv, c.head_dim, rope_, first_pos + t,
                     c.rope_layout);
        }
        kv_.store(il, first_pos + t, k_.data() + t * c.kv_dim(), v_.data() + t * c.kv_dim());
      });
      const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim};
      if (kv_.type() == KvType::f16) {
        attention(*context_, shape, q_.data(), n, first_pos, kv_.layer<f16_bits>(il),
                  attended_.data());
      } else {
        attention(*context_, shape, q_.data(), n, first_pos, kv_.layer<float>(il),
                  attended_.data());
      }
      project(layer.attn_output, attended_.data(), n, projected_.data());
      add_in_place(x_.data(), projected_.data(), n * c.n_embd);
      cancel.throw_if_requested();

      for_each_token(n, [&](std::size_t t) {
        rmsnorm(x_.data() + t * c.n_embd, layer.ffn_norm.data(), normed_.data() + t * c.n_embd,
                c.n_embd, c.rms_eps);
      });
      project(layer.ffn_gate, normed_.data(), n, gate_.data());
      cancel.throw_if_requested();
      project(layer.ffn_up, normed_.data(), n, up_.data());
      cancel.throw_if_requested();
      for_each_token(n, [&](std::size_t t) {
        swiglu(*context_, gate_.data() + t * c.n_ff, up_.data() + t * c.n_ff,
               gate_.data() + t * c.n_ff, c.n_ff);
      });
      project(layer.ffn_down, gate_.data(), n, projected_.data());
      add_in_place(x_.data(), projected_.data(), n * c.n_embd);
    }
  }

  // Logits of hidden rows [first, first + count) of x_ into `out`.
  void compute_logits(std::size_t first, std::size_t count, float* out) {
    const ModelConfig& c = model_->config();
    const ModelWeights& w = model_->weights();
    for (std::size_t r = 0; r < count; ++r) {
      rmsnorm(x_.data() + (first + r) * c.n_embd, w.output_norm.data(),
              normed_.data() + r * c.n_embd, c.n_embd, c.rms_eps);
    }
    project(w.output, normed_.data(), count, out);
  }

  static void add_in_place(float* x, const float* delta, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) x[i] += delta[i];
  }

  const Model* model_;
  Context* context_;
  TransformerOptions options_;
  KvCache kv_;
  RopeTable rope_;
  std::size_t n_filled_ = 0;
  std::vector<float> x_, normed_, q_, k_, v_, attended_, projected_, gate_, up_;
  std::vector<float> logits_;
};

}  // namespace smol
