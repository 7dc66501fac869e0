// ModelConfig: the hyper-parameters of a Llama-family model, read from GGUF metadata.
//
// Every number comes from the file (the metadata wins over any documentation), under
// the keys its architecture's entry names (architecture.hpp); only what llama.cpp fixes
// per family, the NoPE rhythm and the RoPE style, comes from the entry itself.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/model/architecture.hpp"
#include "smol/ops/pooling.hpp"
#include "smol/ops/rope.hpp"

namespace smol {

struct ModelConfig {
  std::string architecture;  // general.architecture, an entry of kArchitectures
  std::size_t n_layer = 0;
  std::size_t n_embd = 0;     // hidden size
  std::size_t n_ff = 0;       // feed-forward (SwiGLU) size; a mixture's: 0 or unused
  std::size_t n_head = 0;     // query heads
  std::size_t n_head_kv = 0;  // key/value heads (GQA)
  std::size_t head_dim = 0;
  std::size_t n_rot = 0;        // rotated dims per head (usually head_dim)
  std::size_t n_ctx_train = 0;  // the model's context length
  std::size_t n_vocab = 0;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;  // the norms' epsilon (an encoder's LayerNorms' too)
  // RoPE scaling from the file's rope.scaling.* keys, or set by ModelOptions::rope.
  RopeScaling rope_scaling;
  // What an embedding of this model is (<arch>.pooling_type; none for a file without
  // it: each token's state, as llama.cpp), and whether its attention is causal
  // (<arch>.attention.causal; an encoder's or a bidirectional embedder's is not).
  Pooling pooling = Pooling::none;
  bool causal_attention = true;
  // An encoder (EncoderRule: BERT's post-norm block, no LM head), with learned
  // positions or RoPE, and a gated feed-forward or GELU's.
  bool encoder = false;
  bool learned_positions = false;
  bool gated_ffn = false;
  // A classifier head on the pooled state (cls and cls.output: a reranker's), with
  // n_labels outputs; 0: none. rank_softmax: its outputs softmaxed (Architecture).
  std::size_t n_labels = 0;
  bool rank_softmax = false;

  // rope_layers[il]: whether block il applies RoPE (the architecture's NoPE rule:
  // SmolLM3 leaves it out of every fourth block). Public so experiments and tests can
  // override the schedule.
  std::vector<bool> rope_layers;
  // From the architecture's RoPE style: adjacent_pairs for ggml's "normal" mode (llama,
  // smollm3), rotate_half for "neox"; a test also forces rotate_half to show that the
  // goldens reject it.
  RopeLayout rope_layout = RopeLayout::adjacent_pairs;

  // The optional mechanisms of the attention block, on when the file carries their
  // tensors (a kind its family declares, OptionalTensors): then every block has them
  // and the forward passes apply them, after the Q/K/V projections and before RoPE.
  bool attention_biases = false;  // blk.N.attn_{q,k,v}.bias added to the projections
  bool qk_norm = false;           // blk.N.attn_{q,k}_norm: RMSNorm of each Q and K head
  bool output_bias = false;       // blk.N.attn_output.bias added to the attention's output
  bool attention_sinks = false;   // blk.N.attn_sinks: a sink per query head in the softmax

  // The block's mechanisms from the architecture's BlockRule (architecture.hpp).
  float embedding_scale = 1.0f;  // sqrt(n_embd) with BlockRule::scale_embeddings
  // The width whose 1/sqrt scales the attention scores (BlockRule::
  // embd_per_head_scale_blocks: n_embd / n_head for Gemma 3 27B); 0: head_dim.
  std::size_t attention_scale_dim = 0;
  bool post_norms = false;  // RMSNorm of the attention's and the FFN's outputs
  FfnActivation ffn_activation = FfnActivation::silu;

  // Sliding-window attention (SlidingWindowRule): local_layers[il] attend to the last
  // sliding_window positions only and, with own_local_rope, turn by the RoPE base
  // rope_base_local, unscaled (else as the global blocks). sliding_window 0 (and
  // local_layers empty): every block is global.
  std::size_t sliding_window = 0;
  // Mixture of experts (MixtureRule): n_expert experts per block (0: a dense
  // feed-forward), n_expert_used chosen per token, each of n_ff_expert.
  std::size_t n_expert = 0;
  std::size_t n_expert_used = 0;
  std::size_t n_ff_expert = 0;
  bool normalize_chosen_experts = false;
  ExpertWeighting expert_weighting = ExpertWeighting::softmax_all;
  bool expert_biases = false;  // the router's and the experts' biases (GPT-OSS)
  std::vector<bool> local_layers;
  bool own_local_rope = true;
  float rope_base_local = 10000.0f;

  bool uses_rope(std::size_t il) const { return rope_layers.at(il); }
  // Whether the model predicts tokens (an encoder has no LM head: it only embeds).
  bool has_lm_head() const noexcept { return !encoder; }
  bool has_experts() const noexcept { return n_expert != 0; }
  // The widest feed-forward a token passes: the dense one, or one expert.
  std::size_t ffn_width() const noexcept { return has_experts() ? n_ff_expert : n_ff; }
  std::size_t attention_scale_width() const {
    return attention_scale_dim != 0 ? attention_scale_dim : head_dim;
  }
  float attention_scale() const {
    return 1.0f / std::sqrt(static_cast<float>(attention_scale_width()));
  }
  bool is_local(std::size_t il) const { return sliding_window != 0 && local_layers.at(il); }
  // Whether block il turns by the local RoPE (local_rope_frequencies) rather than the global.
  bool uses_local_rope(std::size_t il) const { return own_local_rope && is_local(il); }
  // Positions a query of block il sees back from itself, itself included; 0: all.
  std::size_t attention_window(std::size_t il) const { return is_local(il) ? sliding_window : 0; }
  // The longest context the model runs: the trained one, or with RoPE scaling the
  // original context times the factor (SmolLM3-3B: 65536 x 2 with YaRN).
  std::size_t max_context() const noexcept {
    if (rope_scaling.type == RopeScalingType::none) return n_ctx_train;
    const std::size_t original =
        rope_scaling.original_context != 0 ? rope_scaling.original_context : n_ctx_train;
    const auto scaled =
        static_cast<std::size_t>(static_cast<double>(original) * rope_scaling.factor);
    return std::max(n_ctx_train, scaled);
  }
  RopeFrequencies rope_frequencies() const { return {rope_base, rope_scaling, {}}; }
  // The local blocks' RoPE: their own base, without the file's scaling (llama.cpp).
  RopeFrequencies local_rope_frequencies() const { return {rope_base_local, {}, {}}; }
  std::size_t q_dim() const noexcept { return n_head * head_dim; }
  std::size_t kv_dim() const noexcept { return n_head_kv * head_dim; }

  static ModelConfig from_gguf(const gguf::GgufFile& file);
};

// The RoPE schedule of `architecture`'s NoPE rule over n_layer blocks (throws for an
// unknown architecture).
inline std::vector<bool> default_rope_layers(std::string_view architecture, std::size_t n_layer) {
  return find_architecture(architecture).nope.rope_layers(n_layer);
}

inline RopeLayout rope_layout_of(RopeStyle style) {
  return style == RopeStyle::neox ? RopeLayout::rotate_half : RopeLayout::adjacent_pairs;
}

// The file's RoPE scaling: rope.scaling.type/factor/original_context_length and the
// yarn_* keys, or the older rope.scale_linear. As in llama.cpp, YaRN's ext factor is 1
// unless the file says otherwise, and the original context defaults to the trained one.
inline RopeScaling read_rope_scaling(const gguf::GgufFile& file, const Architecture& arch,
                                     std::size_t n_ctx_train) {
  const HyperparameterKeys& keys = arch.keys;
  const auto key = [&](std::string_view suffix) { return arch.key(suffix); };
  RopeScaling scaling;
  const auto factor = file.get_optional<float>(key(keys.rope_scaling_factor));
  const auto linear = file.get_optional<float>(key(keys.rope_scale_linear));
  const auto type = file.get_optional<std::string>(key(keys.rope_scaling_type));
  if (type) {
    if (*type == "none") {
      scaling.type = RopeScalingType::none;
    } else if (*type == "linear") {
      scaling.type = RopeScalingType::linear;
    } else if (*type == "yarn") {
      scaling.type = RopeScalingType::yarn;
    } else {
      fail(file.name(), ": ", key(keys.rope_scaling_type), " \"", *type,
           "\" is not supported (smol knows none, linear and yarn)");
    }
  } else if (linear && *linear != 1.0f) {
    scaling.type = RopeScalingType::linear;
  }
  scaling.factor = factor.value_or(linear.value_or(1.0f));
  if (!(scaling.factor >= 1.0f) || !std::isfinite(scaling.factor)) {
    fail(file.name(), ": RoPE scaling factor ", scaling.factor, " must be at least 1");
  }
  if (scaling.factor == 1.0f) scaling.type = RopeScalingType::none;  // nothing to scale
  scaling.original_context = static_cast<std::size_t>(
      file.get_optional<std::uint64_t>(key(keys.rope_scaling_original_context))
          .value_or(n_ctx_train));
  scaling.ext_factor = file.get_optional<float>(key(keys.yarn_ext_factor)).value_or(1.0f);
  scaling.attn_factor = file.get_optional<float>(key(keys.yarn_attn_factor)).value_or(1.0f);
  scaling.beta_fast = file.get_optional<float>(key(keys.yarn_beta_fast)).value_or(32.0f);
  scaling.beta_slow = file.get_optional<float>(key(keys.yarn_beta_slow)).value_or(1.0f);
  return scaling;
}

// Whether any block of the file holds one of `names` (with `kind`): an optional
// mechanism is on for the whole model when the file has any of its tensors, and the
// loader then requires all of them, so a partial set is named as missing.
inline bool has_block_tensor(const gguf::GgufFile& file, std::size_t n_layer,
                             std::initializer_list<std::string_view> names, std::string_view kind) {
  for (std::size_t il = 0; il < n_layer; ++il) {
    for (const std::string_view name : names) {
      if (file.find_tensor(TensorNames::block(il, name, kind)) != nullptr) return true;
    }
  }
  return false;
}

// The architecture's metadata key `suffix`, which must hold a count above 0.
inline std::size_t positive_count(const gguf::GgufFile& file, const Architecture& arch,
                                  std::string_view suffix) {
  const auto value = file.get<std::uint64_t>(arch.key(suffix));
  if (value == 0) fail(file.name(), ": metadata key ", arch.key(suffix), " is 0");
  return static_cast<std::size_t>(value);
}

// The head size, into `config` (its head counts and embedding length read already): the
// key length when the file says so, else hidden / heads; rope.dimension_count says how
// much of it rotates (n_rot).
inline void read_head_dims(const gguf::GgufFile& file, const Architecture& arch,
                           ModelConfig& config) {
  const HyperparameterKeys& keys = arch.keys;
  const auto rope_dims = file.get_optional<std::uint64_t>(arch.key(keys.rope_dimension_count));
  if (const auto key_length = file.get_optional<std::uint64_t>(arch.key(keys.key_length))) {
    config.head_dim = static_cast<std::size_t>(*key_length);
  } else if (config.n_embd % config.n_head == 0) {
    config.head_dim = config.n_embd / config.n_head;
  } else if (rope_dims) {
    config.head_dim = static_cast<std::size_t>(*rope_dims);
  } else {
    fail(file.name(), ": hidden size ", config.n_embd, " is not a multiple of ", config.n_head,
         " heads and no head size is given");
  }
  if (const auto value_length = file.get_optional<std::uint64_t>(arch.key(keys.value_length));
      value_length && *value_length != config.head_dim) {
    fail(file.name(), ": value heads of ", *value_length, " differ from key heads of ",
         config.head_dim, "; smol needs them equal");
  }
  config.n_rot = rope_dims ? static_cast<std::size_t>(*rope_dims) : config.head_dim;
  if (config.head_dim == 0 || config.n_rot > config.head_dim || config.n_rot % 2 != 0) {
    fail(file.name(), ": rope.dimension_count ", config.n_rot, " does not fit head size ",
         config.head_dim);
  }
}

// The mixture-of-experts keys of a family whose blocks have experts (MixtureRule); a
// file of another family that declares experts (Mixtral's llama files) is refused
// rather than run with its dense tensors missing.
inline void read_experts(const gguf::GgufFile& file, const Architecture& arch,
                         ModelConfig& config) {
  const HyperparameterKeys& keys = arch.keys;
  if (!arch.mixture.experts) {
    const auto experts = file.get_optional<std::uint64_t>(arch.key(keys.expert_count));
    if (experts && *experts > 0) {
      fail(file.name(), ": ", arch.key(keys.expert_count), " is ", *experts, ": this ", arch.name,
           " file is a mixture of experts, which smol runs only for ", experts_architectures());
    }
    return;
  }
  config.n_expert = positive_count(file, arch, keys.expert_count);
  config.n_expert_used = positive_count(file, arch, keys.expert_used_count);
  config.n_ff_expert = positive_count(file, arch, keys.expert_feed_forward_length);
  config.normalize_chosen_experts = arch.mixture.normalize_chosen;
  config.expert_weighting = arch.mixture.weighting;
  const TensorNames& names = arch.tensors;
  config.expert_biases =
      arch.optional.expert_biases && has_block_tensor(file, config.n_layer,
                                                      {names.ffn_gate_inp, names.ffn_gate_exps,
                                                       names.ffn_up_exps, names.ffn_down_exps},
                                                      "bias");
  if (config.n_expert_used > config.n_expert) {
    fail(file.name(), ": ", arch.key(keys.expert_used_count), " ", config.n_expert_used,
         " exceeds the ", config.n_expert, " experts of ", arch.key(keys.expert_count));
  }
}

inline ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& file) {
  ModelConfig config;
  config.architecture = file.get<std::string>("general.architecture");
  const Architecture& arch = find_architecture(config.architecture, file.name());
  const HyperparameterKeys& keys = arch.keys;
  const auto key = [&](std::string_view suffix) { return arch.key(suffix); };
  const auto positive = [&](std::string_view suffix) { return positive_count(file, arch, suffix); };

  config.n_layer = positive(keys.block_count);
  config.n_embd = positive(keys.embedding_length);
  // A mixture's files may carry a dense size that no block uses (Qwen3-MoE's 6144).
  config.n_ff =
      arch.mixture.experts
          ? static_cast<std::size_t>(
                file.get_optional<std::uint64_t>(key(keys.feed_forward_length)).value_or(0))
          : positive(keys.feed_forward_length);
  config.n_head = positive(keys.head_count);
  config.n_head_kv =
      file.get_optional<std::uint64_t>(key(keys.head_count_kv)).value_or(config.n_head);
  config.n_ctx_train = positive(keys.context_length);
  config.rope_base =
      file.get_optional<float>(key(arch.rope.freq_base_key)).value_or(arch.rope.default_freq_base);
  config.rms_eps = file.get<float>(key(keys.rms_epsilon));

  if (config.n_head_kv == 0 || config.n_head % config.n_head_kv != 0) {
    fail(file.name(), ": ", config.n_head, " query heads cannot share ", config.n_head_kv,
         " KV heads evenly");
  }
  read_head_dims(file, arch, config);
  if (!(config.rope_base > 0.0f) || !(config.rms_eps >= 0.0f)) {
    fail(file.name(), ": rope.freq_base ", config.rope_base, " or rms epsilon ", config.rms_eps,
         " is out of range");
  }

  const gguf::TensorInfo& embeddings = file.tensor(TensorNames::model(arch.tensors.token_embd));
  if (embeddings.n_dims != 2 || embeddings.dims[1] == 0) {
    fail(file.name(), ": tensor token_embd.weight must be 2-D [n_embd, n_vocab]");
  }
  config.n_vocab = static_cast<std::size_t>(embeddings.dims[1]);
  config.rope_scaling = read_rope_scaling(file, arch, config.n_ctx_train);
  config.rope_layers = arch.nope.rope_layers(config.n_layer);
  config.rope_layout = rope_layout_of(arch.rope.style);
  config.attention_biases =
      arch.optional.qkv_bias &&
      has_block_tensor(file, config.n_layer,
                       {arch.tensors.attn_q, arch.tensors.attn_k, arch.tensors.attn_v}, "bias");
  config.embedding_scale =
      arch.block.scale_embeddings ? std::sqrt(static_cast<float>(config.n_embd)) : 1.0f;
  config.post_norms = arch.block.post_norms;
  if (arch.block.embd_per_head_scale_blocks != 0 &&
      config.n_layer == arch.block.embd_per_head_scale_blocks) {
    config.attention_scale_dim = config.n_embd / config.n_head;  // integer, as llama.cpp's
  }
  config.ffn_activation = arch.block.activation;
  if (arch.sliding_window.pattern != 0) {
    config.sliding_window = static_cast<std::size_t>(
        file.get_optional<std::uint64_t>(key(arch.sliding_window.window_key)).value_or(0));
    config.local_layers = arch.sliding_window.local_layers(config.n_layer);
    config.own_local_rope = arch.sliding_window.own_local_rope;
    config.rope_base_local = arch.sliding_window.local_freq_base;
  }
  config.output_bias = arch.optional.output_bias &&
                       has_block_tensor(file, config.n_layer, {arch.tensors.attn_output}, "bias");
  config.attention_sinks =
      arch.optional.attention_sinks &&
      has_block_tensor(file, config.n_layer, {arch.tensors.attn_sinks}, "weight");
  config.qk_norm = arch.optional.qk_norm &&
                   has_block_tensor(file, config.n_layer,
                                    {arch.tensors.attn_q_norm, arch.tensors.attn_k_norm}, "weight");
  read_experts(file, arch, config);
  if (const auto pooling = file.get_optional<std::uint64_t>(key(keys.pooling_type))) {
    config.pooling = pooling_from_number(*pooling, cat(file.name(), ": ", key(keys.pooling_type)));
  }
  config.causal_attention = file.get_optional<bool>(key(keys.causal_attention)).value_or(true);
  config.encoder = arch.encoder.encoder;
  if (config.encoder) {
    config.learned_positions = arch.encoder.learned_positions;
    config.gated_ffn = arch.encoder.gated_ffn;
    // Learned positions, or RoPE in every block.
    config.rope_layers.assign(config.n_layer, !arch.encoder.learned_positions);
  }
  if (const gguf::TensorInfo* head =
          file.find_tensor(TensorNames::model(arch.tensors.classifier_output));
      head != nullptr && head->n_dims == 2) {
    config.n_labels = static_cast<std::size_t>(head->dims[1]);
    // llama.cpp sizes the head by the labels the file names, and refuses a file where
    // the two differ.
    const std::string labels_key = key("classifier.output_labels");
    if (const auto labels = file.get_optional<std::vector<std::string>>(labels_key);
        labels && labels->size() != config.n_labels) {
      fail(file.name(), ": ", labels_key, " names ", labels->size(), " labels, but ",
           TensorNames::model(arch.tensors.classifier_output), " has ", config.n_labels, " rows");
    }
  }
  config.rank_softmax = arch.rank_softmax;
  return config;
}

// Refuses a context longer than the model runs, saying how to stretch it.
inline void check_context_fits(const ModelConfig& config, std::size_t context) {
  if (context <= config.max_context()) return;
  if (config.rope_scaling.type == RopeScalingType::none) {
    fail("a context of ", context, " positions exceeds the model's trained ", config.n_ctx_train,
         "; RoPE scaling stretches it (in the programs: --rope-scaling yarn --rope-scale ",
         (context + config.n_ctx_train - 1) / config.n_ctx_train, ")");
  }
  fail("a context of ", context, " positions exceeds the model's ", config.max_context(), " (",
       config.n_ctx_train, " trained, ", rope_scaling_name(config.rope_scaling.type),
       " scaling by ", config.rope_scaling.factor, ")");
}

}  // namespace smol
