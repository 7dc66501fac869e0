// ForwardEngine<Backend>: the forward pass of smol::cuda::GpuTransformer, written once
// over a backend that owns memory and runs the kernels.
//
// DeviceBackend (smol_cuda.cu) runs it on a GPU; HostBackend (host_backend.cuh) runs
// the same kernel bodies in loops on the host, so the whole pass (weight layout, KV
// cache, RoPE/NoPE schedule, attention chunking, logits) is tested without a device.
// The pass mirrors smol::Transformer (model/transformer.hpp) step for step, with f32
// activations throughout: it is the reference mode of the CPU path, not its Q8 one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernel_bodies.cuh"
#include "smol/core/error.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"

namespace smol::cuda::detail {

// A weight matrix in backend memory.
struct DeviceMatrix {
  GgmlType type = GgmlType::F32;
  const std::uint8_t* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t row_bytes = 0;

  std::size_t groups() const;  // per row
};

template <GgmlType T>
using TypeTag = std::integral_constant<GgmlType, T>;

// Calls f(TypeTag<type>{}) for each weight type the kernels decode.
template <class F>
decltype(auto) with_weight_type(GgmlType type, F&& f) {
  switch (type) {
    case GgmlType::Q4_K:
      return f(TypeTag<GgmlType::Q4_K>{});
    case GgmlType::Q6_K:
      return f(TypeTag<GgmlType::Q6_K>{});
    case GgmlType::Q8_0:
      return f(TypeTag<GgmlType::Q8_0>{});
    case GgmlType::Q4_0:
      return f(TypeTag<GgmlType::Q4_0>{});
    case GgmlType::F16:
      return f(TypeTag<GgmlType::F16>{});
    case GgmlType::BF16:
      return f(TypeTag<GgmlType::BF16>{});
    case GgmlType::F32:
      return f(TypeTag<GgmlType::F32>{});
    default:
      fail("smol cuda: no GPU kernel for weight type ", ggml_type_name(type));
  }
}

inline std::size_t DeviceMatrix::groups() const {
  return with_weight_type(type, [this](auto tag) {
    return cols / static_cast<std::size_t>(GroupFormat<decltype(tag)::value>::values);
  });
}

// Calls f(Element{}) with the cache element type: float or KvHalf.
template <class F>
decltype(auto) with_kv_element(KvType type, F&& f) {
  if (type == KvType::f32) return f(float{});
  return f(KvHalf{});
}

// Every tensor offset in the weight buffer is a multiple of this: more than any load
// in block_decode.cuh needs.
inline constexpr std::size_t kTensorAlignment = 256;
// Most tokens one pass runs, whatever TransformerOptions::max_batch says: the grid's
// y and z dimensions (65535) and the scratch memory stay bounded.
inline constexpr std::size_t kMaxPassTokens = 4096;

template <class Backend>
class ForwardEngine {
  template <class T>
  using Array = typename Backend::template Array<T>;

 public:
  ForwardEngine(const Model& model, TransformerOptions options, Backend backend = Backend())
      : backend_(std::move(backend)), model_(&model), options_(options) {
    const ModelConfig& c = model.config();
    if (options_.context == 0) options_.context = c.n_ctx_train;
    check_context_fits(c, options_.context);
    if (options_.max_batch == 0) fail("max_batch must be at least 1");
    if (options_.kv_type.key != options_.kv_type.value ||
        (options_.kv_type.key != KvType::f16 && options_.kv_type.key != KvType::f32)) {
      fail("smol cuda: the GPU keeps its KV cache in f16 or f32, K and V alike (asked: K ",
           kv_type_name(options_.kv_type.key), ", V ", kv_type_name(options_.kv_type.value),
           "); the CPU engine has the other types");
    }
    pass_tokens_ = std::min(options_.max_batch, kMaxPassTokens);
    if (c.n_head / c.n_head_kv > kMaxGroup) {
      fail("smol cuda: ", c.n_head / c.n_head_kv,
           " query heads per KV head; the GPU kernels take at most ", kMaxGroup);
    }
    if (c.head_dim > kMaxHeadDim) {
      fail("smol cuda: heads of ", c.head_dim, " values; the GPU kernels take at most ",
           kMaxHeadDim);
    }
    refuse_unimplemented_mechanisms(c);
    upload_weights();
    const std::size_t pairs = c.n_rot / 2;
    // The CPU's frequencies (linear scaling and rope_freqs included), so the angles are
    // the CPU's. YaRN's magnitude correction scales cos and sin, which the kernels do
    // not do yet.
    const RopeTable rope(c.n_rot, rope_frequencies(model));
    if (rope.magnitude() != 1.0f) {
      fail(
          "smol cuda: YaRN RoPE scaling (its magnitude correction) is not implemented on the "
          "GPU yet; run on the CPU");
    }
    std::vector<double> inverse_frequency(pairs);
    for (std::size_t i = 0; i < pairs; ++i) inverse_frequency[i] = rope.frequency(i);
    inverse_frequency_ = Array<double>(std::max<std::size_t>(pairs, 1));
    backend_.copy_in(inverse_frequency_.data(), inverse_frequency.data(), pairs * sizeof(double));
  }

  ForwardEngine(const ForwardEngine&) = delete;
  ForwardEngine& operator=(const ForwardEngine&) = delete;
  ~ForwardEngine() { backend_.synchronize_quietly(); }

  const Model& model() const noexcept { return *model_; }
  std::size_t context_length() const noexcept { return options_.context; }
  std::size_t n_filled() const noexcept { return n_filled_; }
  std::size_t weight_bytes() const noexcept { return weights_.size(); }
  Backend& backend() noexcept { return backend_; }

  // smol::Transformer::forward's contract: runs `tokens` at positions
  // [n_past, n_past + size); n_past <= n_filled(); returns the requested logits rows,
  // valid until the next call. Returns when the work is done.
  std::span<const float> forward(std::span<const std::int32_t> tokens, std::size_t n_past,
                                 LogitsFor which) {
    const ModelConfig& c = model_->config();
    if (tokens.empty()) fail("forward: no tokens to run");
    if (n_past > n_filled_) {
      fail("forward: position ", n_past, " is past the ", n_filled_, " positions filled so far");
    }
    if (n_past + tokens.size() > options_.context) {
      fail("context overflow: positions ", n_past, "..", n_past + tokens.size() - 1,
           " do not fit the session's context of ", options_.context, " positions");
    }
    for (const std::int32_t token : tokens) {
      if (token < 0 || static_cast<std::size_t>(token) >= c.n_vocab) {
        fail("token id ", token, " is outside the vocabulary of ", c.n_vocab, " tokens");
      }
    }
    n_filled_ = n_past;  // positions after n_past are about to be overwritten
    reserve_cache(n_past + tokens.size());

    const std::size_t n_rows =
        which == LogitsFor::all ? tokens.size() : (which == LogitsFor::last ? 1 : 0);
    logits_.resize(n_rows * c.n_vocab);
    for (std::size_t begin = 0; begin < tokens.size(); begin += pass_tokens_) {
      const std::size_t count = std::min(pass_tokens_, tokens.size() - begin);
      run_blocks(tokens.subspan(begin, count), n_past + begin);
      if (which == LogitsFor::all) {
        compute_logits(0, count, logits_.data() + begin * c.n_vocab);
      } else if (which == LogitsFor::last && begin + count == tokens.size()) {
        compute_logits(count - 1, 1, logits_.data());
      }
      n_filled_ = n_past + begin + count;
    }
    backend_.synchronize();
    return logits_;
  }

 private:
  // The block mechanisms the GPU pass does not apply yet (Gemma 3's): a model that
  // needs one is refused, never run without it.
  static void refuse_unimplemented_mechanisms(const ModelConfig& c) {
    std::string missing;
    const auto need = [&](bool needed, const char* what) {
      if (needed) missing += (missing.empty() ? "" : ", ") + std::string(what);
    };
    need(c.embedding_scale != 1.0f, "scaled embeddings");
    need(c.post_norms, "post-attention and post-FFN norms");
    need(c.ffn_activation != FfnActivation::silu, "a feed-forward gate other than SwiGLU");
    need(c.sliding_window != 0, "sliding-window attention");
    need(c.has_experts(), "a mixture of experts");
    need(c.output_bias, "a bias on the attention's output");
    need(c.attention_sinks, "attention sinks");
    need(c.attention_scale_dim != 0, "an attention scale other than 1/sqrt(head_dim)");
    need(c.encoder, "an encoder's post-norm blocks");
    if (!missing.empty()) {
      fail("smol cuda: this ", c.architecture, " model needs ", missing,
           ", which the GPU pass does not implement yet; run it on the CPU");
    }
  }

  struct Layer {
    const float* attn_norm;
    DeviceMatrix attn_q, attn_k, attn_v, attn_output;
    const float* ffn_norm;
    DeviceMatrix ffn_gate, ffn_up, ffn_down;
    // The optional mechanisms' vectors (config.attention_biases, config.qk_norm);
    // null when off.
    const float* attn_q_bias;
    const float* attn_k_bias;
    const float* attn_v_bias;
    const float* attn_q_norm;
    const float* attn_k_norm;
  };

  // ---- weights: uploaded once, straight from the memory map ----------------------

  struct Upload {
    const void* host;
    std::size_t bytes;
    std::size_t offset;
  };

  void upload_weights() {
    const ModelWeights& w = model_->weights();
    std::vector<Upload> uploads;
    std::size_t end = 0;
    const auto place = [&](const void* host, std::size_t bytes) {
      const std::size_t offset = (end + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
      uploads.push_back({host, bytes, offset});
      end = offset + bytes;
      return offset;
    };
    const auto place_matrix = [&](const WeightMatrix& m) {
      with_weight_type(m.type, [&](auto tag) {
        constexpr int kValues = GroupFormat<decltype(tag)::value>::values;
        if (m.cols % kValues != 0) {
          fail("smol cuda: tensor ", m.name, " has rows of ", m.cols, " ", ggml_type_name(m.type),
               " values; the GPU kernels need a multiple of ", kValues);
        }
      });
      return std::pair(place(m.data, m.row_bytes * m.rows), m);
    };
    const auto place_norm = [&](const std::vector<float>& v) {
      return place(v.data(), v.size() * sizeof(float));
    };
    // An optional vector (a bias, a head norm): kNone when the file has none.
    constexpr std::size_t kNone = ~std::size_t{0};
    const auto place_optional = [&](const std::vector<float>& v) {
      return v.empty() ? kNone : place_norm(v);
    };

    // Offsets first, pointers once the buffer exists.
    const auto embd = place_matrix(w.token_embd);
    // Tied embeddings: the LM head is token_embd itself, uploaded once.
    const auto output = w.tied_embeddings ? embd : place_matrix(w.output);
    const std::size_t output_norm = place_norm(w.output_norm);
    struct LayerPlan {
      std::size_t attn_norm, ffn_norm;
      std::pair<std::size_t, WeightMatrix> q, k, v, o, gate, up, down;
      std::size_t q_bias, k_bias, v_bias, q_norm, k_norm;
    };
    std::vector<LayerPlan> plans;
    for (const LayerWeights& l : w.layers) {
      plans.push_back({place_norm(l.attn_norm), place_norm(l.ffn_norm), place_matrix(l.attn_q),
                       place_matrix(l.attn_k), place_matrix(l.attn_v), place_matrix(l.attn_output),
                       place_matrix(l.ffn_gate), place_matrix(l.ffn_up), place_matrix(l.ffn_down),
                       place_optional(l.attn_q_bias), place_optional(l.attn_k_bias),
                       place_optional(l.attn_v_bias), place_optional(l.attn_q_norm),
                       place_optional(l.attn_k_norm)});
    }

    weights_ = Array<std::uint8_t>(end);
    for (const Upload& u : uploads) backend_.copy_in(weights_.data() + u.offset, u.host, u.bytes);
    backend_.synchronize();

    const auto matrix = [&](const std::pair<std::size_t, WeightMatrix>& placed) {
      const WeightMatrix& m = placed.second;
      return DeviceMatrix{m.type, weights_.data() + placed.first, m.rows, m.cols, m.row_bytes};
    };
    const auto floats = [&](std::size_t offset) {
      return offset == kNone ? nullptr : reinterpret_cast<const float*>(weights_.data() + offset);
    };
    token_embd_ = matrix(embd);
    output_ = matrix(output);
    output_norm_ = floats(output_norm);
    for (const LayerPlan& p : plans) {
      layers_.push_back({floats(p.attn_norm), matrix(p.q), matrix(p.k), matrix(p.v), matrix(p.o),
                         floats(p.ffn_norm), matrix(p.gate), matrix(p.up), matrix(p.down),
                         floats(p.q_bias), floats(p.k_bias), floats(p.v_bias), floats(p.q_norm),
                         floats(p.k_norm)});
    }
  }

  // ---- KV cache: [layer][K, V][kv head][position][head_dim], grown on demand -----

  std::size_t kv_element_bytes() const {
    return options_.kv_type.key == KvType::f32 ? sizeof(float) : sizeof(KvHalf);
  }

  // Makes room for `positions` positions, keeping the n_filled_ that are valid. The
  // capacity doubles (from 256) up to the context, so a short chat on a 64K-context
  // session holds memory for what it uses, as the CPU cache does.
  void reserve_cache(std::size_t positions) {
    if (positions <= capacity_) return;
    const ModelConfig& c = model_->config();
    std::size_t capacity = std::max<std::size_t>(capacity_ * 2, 256);
    capacity = std::min(std::max(capacity, positions), options_.context);
    const std::size_t heads = c.n_layer * 2 * c.n_head_kv;
    const std::size_t row_bytes = c.head_dim * kv_element_bytes();
    Array<std::uint8_t> grown(heads * capacity * row_bytes);
    if (n_filled_ > 0) {
      backend_.copy_rows(grown.data(), capacity * row_bytes, cache_.data(), capacity_ * row_bytes,
                         n_filled_ * row_bytes, heads);
    }
    backend_.synchronize();  // the old cache may still be read by queued work
    cache_ = std::move(grown);
    capacity_ = capacity;
  }

  template <class Element>
  Element* cache_heads(std::size_t layer, std::size_t which) {
    const ModelConfig& c = model_->config();
    const std::size_t head_stride = capacity_ * c.head_dim;
    return reinterpret_cast<Element*>(cache_.data()) +
           (2 * layer + which) * c.n_head_kv * head_stride;
  }

  // ---- scratch ---------------------------------------------------------------------

  template <class T>
  void grow(Array<T>& array, std::size_t count) {
    if (array.size() >= count) return;
    backend_.synchronize();  // queued work may still use the old buffer
    array = Array<T>(count);
  }

  void reserve_scratch(std::size_t n) {
    const ModelConfig& c = model_->config();
    grow(token_ids_, n);
    grow(x_, n * c.n_embd);
    grow(normed_, n * c.n_embd);
    grow(q_, n * c.q_dim());
    grow(k_, n * c.kv_dim());
    grow(v_, n * c.kv_dim());
    grow(attended_, n * c.q_dim());
    grow(projected_, n * c.n_embd);
    grow(gate_, n * c.n_ff);
    grow(up_, n * c.n_ff);
  }

  // ---- the pass ------------------------------------------------------------------

  template <class Body>
  void each(std::size_t count, const Body& body) {
    if (count > 0) backend_.for_each(count, body);
  }

  // y = W x for n rows of x.
  void project(const DeviceMatrix& w, const float* x, std::size_t n, float* y) {
    backend_.matmul(w, x, n, y);
  }

  // Leaves the final hidden states of the pass's tokens in x_.
  void run_blocks(std::span<const std::int32_t> tokens, std::size_t first_pos) {
    const ModelConfig& c = model_->config();
    const std::size_t n = tokens.size();
    reserve_scratch(n);
    backend_.copy_in(token_ids_.data(), tokens.data(), n * sizeof(std::int32_t));
    with_weight_type(token_embd_.type, [&](auto tag) {
      const EmbedBody<decltype(tag)::value> body{token_embd_.data, token_embd_.row_bytes,
                                                 token_embd_.cols, token_ids_.data(), x_.data()};
      each(n * body.groups(), body);
    });

    for (std::size_t il = 0; il < c.n_layer; ++il) {
      const Layer& layer = layers_[il];
      backend_.rmsnorm(x_.data(), layer.attn_norm, normed_.data(), n, c.n_embd, c.rms_eps);
      project(layer.attn_q, normed_.data(), n, q_.data());
      project(layer.attn_k, normed_.data(), n, k_.data());
      project(layer.attn_v, normed_.data(), n, v_.data());
      // The family's optional mechanisms, before RoPE, as LayerPass applies them.
      if (c.attention_biases) {
        each(n * c.q_dim(), AddBiasBody{q_.data(), layer.attn_q_bias, c.q_dim()});
        each(n * c.kv_dim(), AddBiasBody{k_.data(), layer.attn_k_bias, c.kv_dim()});
        each(n * c.kv_dim(), AddBiasBody{v_.data(), layer.attn_v_bias, c.kv_dim()});
      }
      if (c.qk_norm) {  // every head a row of its own; the norm may work in place
        backend_.rmsnorm(q_.data(), layer.attn_q_norm, q_.data(), n * c.n_head, c.head_dim,
                         c.rms_eps);
        backend_.rmsnorm(k_.data(), layer.attn_k_norm, k_.data(), n * c.n_head_kv, c.head_dim,
                         c.rms_eps);
      }
      if (c.uses_rope(il)) {  // NoPE blocks of SmolLM3 skip it
        const std::size_t pairs = c.n_rot / 2;
        const bool adjacent = c.rope_layout == RopeLayout::adjacent_pairs;
        each(n * c.n_head * pairs, RopeBody{q_.data(), c.q_dim(), c.n_head, c.head_dim, pairs,
                                            first_pos, inverse_frequency_.data(), adjacent});
        each(n * c.n_head_kv * pairs,
             RopeBody{k_.data(), c.kv_dim(), c.n_head_kv, c.head_dim, pairs, first_pos,
                      inverse_frequency_.data(), adjacent});
      }
      with_kv_element(options_.kv_type.key, [&](auto element) {
        using Element = decltype(element);
        each(n * c.kv_dim(), KvStoreBody<Element>{k_.data(), v_.data(), cache_heads<Element>(il, 0),
                                                  cache_heads<Element>(il, 1), c.n_head_kv,
                                                  c.head_dim, capacity_ * c.head_dim, first_pos});
        attend<Element>(il, n, first_pos);
      });
      project(layer.attn_output, attended_.data(), n, projected_.data());
      each(n * c.n_embd, AddBody{x_.data(), projected_.data()});

      backend_.rmsnorm(x_.data(), layer.ffn_norm, normed_.data(), n, c.n_embd, c.rms_eps);
      project(layer.ffn_gate, normed_.data(), n, gate_.data());
      project(layer.ffn_up, normed_.data(), n, up_.data());
      each(n * c.n_ff, SwigluBody{gate_.data(), up_.data(), gate_.data()});
      project(layer.ffn_down, gate_.data(), n, projected_.data());
      each(n * c.n_embd, AddBody{x_.data(), projected_.data()});
    }
  }

  template <class Element>
  void attend(std::size_t il, std::size_t n, std::size_t first_pos) {
    const ModelConfig& c = model_->config();
    const AttentionPlan plan = plan_attention(n, c.n_head_kv, first_pos + n);
    grow(partials_, n * c.n_head * plan.n_chunks * (c.head_dim + 2));
    const AttentionArgs<Element> args{q_.data(),
                                      cache_heads<Element>(il, 0),
                                      cache_heads<Element>(il, 1),
                                      capacity_ * c.head_dim,
                                      partials_.data(),
                                      n,
                                      c.n_head,
                                      c.n_head_kv,
                                      c.head_dim,
                                      first_pos,
                                      1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                                      plan.chunk_len,
                                      plan.n_chunks};
    backend_.attention(args);
    each(n * c.q_dim(),
         AttentionMergeBody{partials_.data(), attended_.data(), c.head_dim, plan.n_chunks});
  }

  // Logits of hidden rows [first, first + count) of x_ into host memory `out`.
  void compute_logits(std::size_t first, std::size_t count, float* out) {
    const ModelConfig& c = model_->config();
    grow(logits_device_, count * c.n_vocab);
    backend_.rmsnorm(x_.data() + first * c.n_embd, output_norm_, normed_.data(), count, c.n_embd,
                     c.rms_eps);
    project(output_, normed_.data(), count, logits_device_.data());
    backend_.copy_out(out, logits_device_.data(), count * c.n_vocab * sizeof(float));
  }

  Backend backend_;  // first: destroyed last, after every buffer it allocated
  const Model* model_;
  TransformerOptions options_;
  std::size_t pass_tokens_ = 0;

  Array<std::uint8_t> weights_;
  DeviceMatrix token_embd_, output_;
  const float* output_norm_ = nullptr;
  std::vector<Layer> layers_;
  Array<double> inverse_frequency_;

  Array<std::uint8_t> cache_;
  std::size_t capacity_ = 0;  // positions per KV head the cache holds
  std::size_t n_filled_ = 0;

  Array<std::int32_t> token_ids_;
  Array<float> x_, normed_, q_, k_, v_, attended_, projected_, gate_, up_;
  Array<float> partials_, logits_device_;
  std::vector<float> logits_;
};

}  // namespace smol::cuda::detail
