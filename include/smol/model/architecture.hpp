// Architecture: what one model family's GGUF files look like, as data.
//
// Every family smol runs is one entry of kArchitectures below: the prefix of its
// metadata keys and the keys themselves, the names of its tensors, which optional
// tensors its files may carry, and its RoPE and NoPE rules. The config reader, the
// weight loader and the forward pass read the entry; none of them asks for a family
// by name. Adding a family is adding an entry (docs/ARCHITECTURE.md walks through
// Qwen2 and Qwen3), plus the forward-pass code for any optional tensor it brings.
//
// The names and keys are llama.cpp's (its LLM_KV_* and LLM_TENSOR_* tables), since
// its converter writes the files.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/ops/activation.hpp"     // FfnActivation
#include "smol/ops/expert_choice.hpp"  // ExpertWeighting

namespace smol {

// The metadata keys of the hyperparameters, each after "<prefix>.".
struct HyperparameterKeys {
  std::string_view block_count = "block_count";
  std::string_view embedding_length = "embedding_length";
  std::string_view feed_forward_length = "feed_forward_length";
  std::string_view head_count = "attention.head_count";
  std::string_view head_count_kv = "attention.head_count_kv";  // optional: head_count
  std::string_view key_length = "attention.key_length";        // optional: the head size
  std::string_view value_length = "attention.value_length";    // optional
  std::string_view context_length = "context_length";
  std::string_view rms_epsilon = "attention.layer_norm_rms_epsilon";
  std::string_view rope_dimension_count = "rope.dimension_count";  // optional: head size
  // RoPE scaling, all optional (ops/rope.hpp's RopeScaling; llama.cpp's names).
  std::string_view rope_scaling_type = "rope.scaling.type";  // "none", "linear", "yarn"
  std::string_view rope_scaling_factor = "rope.scaling.factor";
  std::string_view rope_scale_linear = "rope.scale_linear";  // older files: linear factor
  std::string_view rope_scaling_original_context = "rope.scaling.original_context_length";
  std::string_view yarn_ext_factor = "rope.scaling.yarn_ext_factor";
  std::string_view yarn_attn_factor = "rope.scaling.yarn_attn_factor";
  std::string_view yarn_beta_fast = "rope.scaling.yarn_beta_fast";
  std::string_view yarn_beta_slow = "rope.scaling.yarn_beta_slow";
  // Mixture of experts (MixtureRule): experts per block, chosen per token, and the
  // feed-forward size of one expert.
  std::string_view expert_count = "expert_count";
  std::string_view expert_used_count = "expert_used_count";
  std::string_view expert_feed_forward_length = "expert_feed_forward_length";
  // Embedding models (ops/pooling.hpp), both optional: how a sequence's states become
  // one vector (llama.cpp's numbers; absent: none), and whether a token sees the tokens
  // after it (absent: true, the decoders' causal mask).
  std::string_view pooling_type = "pooling_type";
  std::string_view causal_attention = "attention.causal";
};

// Tensor names: the model's own as they are, a block's after "blk.<il>.". Each is
// followed by ".weight" (or ".bias" for a bias).
struct TensorNames {
  std::string_view token_embd = "token_embd";
  std::string_view output_norm = "output_norm";
  std::string_view output = "output";
  std::string_view rope_freqs = "rope_freqs";
  std::string_view attn_norm = "attn_norm";
  std::string_view attn_q = "attn_q";
  std::string_view attn_k = "attn_k";
  std::string_view attn_v = "attn_v";
  // Q, K and V as one matrix [n_embd, q_dim + 2 kv_dim] (an encoder's file may fuse them:
  // nomic-bert's always do), Q's rows first.
  std::string_view attn_qkv = "attn_qkv";
  std::string_view attn_q_norm = "attn_q_norm";
  std::string_view attn_k_norm = "attn_k_norm";
  std::string_view attn_output = "attn_output";
  // One learned score per query head that joins every softmax of its attention
  // (OptionalTensors::attention_sinks): [n_head], F32.
  std::string_view attn_sinks = "attn_sinks";
  std::string_view ffn_norm = "ffn_norm";
  std::string_view ffn_gate = "ffn_gate";
  std::string_view ffn_up = "ffn_up";
  std::string_view ffn_down = "ffn_down";
  // Mixture of experts: the router [n_embd, n_expert] and the experts' matrices, one
  // 3-D tensor each ([n_embd, n_ff_expert, n_expert]; down [n_ff_expert, n_embd, n_expert]).
  std::string_view ffn_gate_inp = "ffn_gate_inp";
  std::string_view ffn_gate_exps = "ffn_gate_exps";
  std::string_view ffn_up_exps = "ffn_up_exps";
  std::string_view ffn_down_exps = "ffn_down_exps";
  // The norms after the attention and after the feed-forward (BlockRule::post_norms).
  std::string_view attn_post_norm = "post_attention_norm";
  std::string_view ffn_post_norm = "post_ffw_norm";
  // An encoder's (EncoderRule): learned position rows [n_embd, n_ctx_train], token-type
  // rows [n_embd, n_types], the LayerNorm of the embeddings, and each block's LayerNorms
  // after its attention's and its feed-forward's residual sums.
  std::string_view position_embd = "position_embd";
  std::string_view token_types = "token_types";
  std::string_view token_embd_norm = "token_embd_norm";
  std::string_view attn_output_norm = "attn_output_norm";
  std::string_view layer_output_norm = "layer_output_norm";
  // A reranker's classifier head (pooling rank): cls [n_embd, n_embd] with its bias,
  // then tanh, then cls.output [n_embd, n_labels] with its bias.
  std::string_view classifier = "cls";
  std::string_view classifier_output = "cls.output";

  static std::string block(std::size_t il, std::string_view name,
                           std::string_view kind = "weight") {
    return "blk." + std::to_string(il) + "." + std::string(name) + "." + std::string(kind);
  }
  static std::string model(std::string_view name, std::string_view kind = "weight") {
    return std::string(name) + "." + std::string(kind);
  }
};

// What a family's files may carry beyond the plain Llama block. The loader takes each
// one that is there; one that the forward pass does not apply yet makes it refuse the
// file (weights.hpp), so a model never runs without a tensor its file has.
struct OptionalTensors {
  bool qkv_bias = false;     // blk.N.attn_{q,k,v}.bias, added to the projections (Qwen2)
  bool qk_norm = false;      // blk.N.attn_{q,k}_norm.weight, per-head RMSNorm before RoPE (Qwen3)
  bool rope_freqs = false;   // rope_freqs.weight, per-dimension RoPE frequency factors (Llama 3.1+)
  bool tied_output = false;  // output.weight may be absent: token_embd is then the LM head
  bool output_bias = false;  // blk.N.attn_output.bias, added to the attention's output (GPT-OSS)
  // blk.N.attn_sinks.weight: per query head, a score that every softmax of the attention
  // counts in its denominator and that weights no value ("attention sinks", GPT-OSS).
  bool attention_sinks = false;
  // blk.N.ffn_gate_inp.bias and ffn_{gate,up,down}_exps.bias: the router's bias and
  // each expert's biases after its projections (GPT-OSS).
  bool expert_biases = false;
};

// How a head's rotary dimensions are paired: ggml's "normal" mode pairs adjacent values
// (the Llama converter permuted Q and K rows for it), "neox" pairs value i with
// i + n_rot/2 (the rotate-half of Hugging Face's code, kept as is by the converter for
// Qwen2, Qwen3, GPT-NeoX, ...).
enum class RopeStyle { normal, neox };

struct RopeRule {
  RopeStyle style = RopeStyle::normal;
  std::string_view freq_base_key = "rope.freq_base";  // after "<prefix>."
  float default_freq_base = 10000.0f;                 // when the file has no such key
};

// Blocks that skip RoPE (NoPE). llama.cpp fixes the rhythm per family rather than
// reading a key: with interval n, block il (0-based) skips it when (il + 1) % n == 0.
struct NopeRule {
  std::size_t interval = 0;  // 0: every block applies RoPE

  bool skips_rope(std::size_t il) const noexcept {
    return interval != 0 && (il + 1) % interval == 0;
  }
  // rope_layers[il]: whether block il applies RoPE.
  std::vector<bool> rope_layers(std::size_t n_layer) const {
    std::vector<bool> layers(n_layer);
    for (std::size_t il = 0; il < n_layer; ++il) layers[il] = !skips_rope(il);
    return layers;
  }
};

// How a family's block departs from the Llama block, beyond its optional tensors. Each
// field is one mechanism the forward passes apply when the config says so.
struct BlockRule {
  // The embeddings are multiplied by sqrt(n_embd) before the first block (Gemma).
  bool scale_embeddings = false;
  // RMSNorm of the attention's and of the feed-forward's output before each is added
  // to the residual stream (Gemma 2/3: blk.N.post_attention_norm, post_ffw_norm).
  bool post_norms = false;
  FfnActivation activation = FfnActivation::silu;
  // The attention scores are scaled by 1/sqrt(head_dim), except in a file of exactly
  // this many blocks, whose scale is 1/sqrt(n_embd / n_head): Gemma 3 27B (62 blocks)
  // was trained with query_pre_attn_scalar = n_embd / n_head (5376 / 32 = 168) rather
  // than its head size (128), and llama.cpp tells the 27B by its block count. 0: never.
  std::size_t embd_per_head_scale_blocks = 0;
};

// Sliding-window attention (Gemma 3): "local" blocks attend to the last `window`
// positions only (the window is the file's <prefix>.attention.sliding_window) and
// rotate with their own RoPE base, unscaled; every `pattern`-th block (il % pattern ==
// pattern - 1) is global. llama.cpp fixes the pattern and the local base per family,
// as smol does here; a file without the window key has no local blocks.
struct SlidingWindowRule {
  std::size_t pattern = 0;  // 0: no sliding window
  std::string_view window_key = "attention.sliding_window";
  // Whether local blocks turn by a RoPE of their own (local_freq_base, unscaled: Gemma 3)
  // or by the global one, scaling included (GPT-OSS).
  bool own_local_rope = true;
  float local_freq_base = 10000.0f;

  // local_layers[il]: whether block il attends through the window.
  std::vector<bool> local_layers(std::size_t n_layer) const {
    std::vector<bool> local(n_layer, false);
    for (std::size_t il = 0; il < n_layer && pattern != 0; ++il) {
      local[il] = il % pattern != pattern - 1;
    }
    return local;
  }
};

// A mixture of experts in place of every block's feed-forward (Qwen3-MoE, GPT-OSS): a
// router scores each token against every expert, the token goes through the
// `expert_used_count` best-scored experts (each a gated feed-forward of its own, with the
// block's activation), and their outputs are summed weighted as `weighting` says,
// renormalised over the chosen ones when `normalize_chosen` (Qwen3's norm_topk_prob;
// llama.cpp's build_moe_ffn with norm_w).
struct MixtureRule {
  bool experts = false;
  bool normalize_chosen = true;
  ExpertWeighting weighting = ExpertWeighting::softmax_all;
};

// An encoder (BERT and the embedders and rerankers built on it): a bidirectional stack
// whose block is laid out after the original Transformer rather than Llama. Its
// embeddings are the token's row plus the first token-type row (and a learned position
// row), LayerNorm'd; each block adds the attention to its input and LayerNorms the sum,
// then adds the feed-forward and LayerNorms again; no final norm and no LM head: the
// last block's states are what pooling reads (llama.cpp's build_bert). The biases on
// the projections are taken where the file has them.
struct EncoderRule {
  bool encoder = false;
  // Positions as learned rows added to the embeddings (BERT); else RoPE turns Q and K
  // (nomic-bert), by the entry's RopeRule.
  bool learned_positions = true;
  // The feed-forward: up, GELU, down (BERT); or gated, the block's activation of the
  // gate times up, then down (nomic-bert's SwiGLU).
  bool gated_ffn = false;
};

struct Architecture {
  std::string_view name;        // general.architecture
  std::string_view key_prefix;  // of the hyperparameter keys; the name in every family so far
  HyperparameterKeys keys = {};
  TensorNames tensors = {};
  OptionalTensors optional = {};
  RopeRule rope = {};
  NopeRule nope = {};
  BlockRule block = {};
  SlidingWindowRule sliding_window = {};
  MixtureRule mixture = {};
  EncoderRule encoder = {};
  // Whether rank pooling softmaxes the classifier's outputs, as llama.cpp does for this
  // family (Qwen3-Reranker: the LM head's "yes" and "no" rows, so the score is p(yes)).
  bool rank_softmax = false;

  // The full metadata key, e.g. "smollm3.block_count".
  std::string key(std::string_view suffix) const {
    return std::string(key_prefix) + "." + std::string(suffix);
  }
};

inline constexpr std::array kArchitectures{
    // Llama 1/2/3 and the many files that reuse its layout (TinyLlama, Mistral 7B v0.1,
    // SmolLM v1/v2, ...). llama.cpp accepts optional QKV biases and, for Llama 3.1 and
    // later, rope_freqs.weight.
    Architecture{
        .name = "llama",
        .key_prefix = "llama",
        .optional = {.qkv_bias = true, .rope_freqs = true, .tied_output = true},
        .rope = {.style = RopeStyle::normal},
    },
    // SmolLM3: the Llama block, with RoPE left out of every fourth block (3, 7, 11, ...).
    Architecture{
        .name = "smollm3",
        .key_prefix = "smollm3",
        .optional = {.tied_output = true},
        .rope = {.style = RopeStyle::normal},
        .nope = {.interval = 4},
    },
    // Qwen2 / Qwen2.5: the Llama block with biases on the Q, K and V projections, and
    // Hugging Face's rotate-half RoPE kept as is by the converter (ggml's "neox").
    Architecture{
        .name = "qwen2",
        .key_prefix = "qwen2",
        .optional = {.qkv_bias = true, .tied_output = true},
        .rope = {.style = RopeStyle::neox},
    },
    // Qwen3: no biases; each head of Q and K is RMS-normalised (one weight vector for
    // all heads) before RoPE, and heads may be wider than n_embd / n_head
    // (attention.key_length: Qwen3-0.6B has 16 heads of 128 over 1024).
    Architecture{
        .name = "qwen3",
        .key_prefix = "qwen3",
        .optional = {.qk_norm = true, .tied_output = true},
        .rope = {.style = RopeStyle::neox},
        .rank_softmax = true,
    },
    // Qwen3-MoE (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B): Qwen3's attention, and a mixture of
    // experts in every block's feed-forward (no shared expert).
    Architecture{
        .name = "qwen3moe",
        .key_prefix = "qwen3moe",
        .optional = {.qk_norm = true, .tied_output = true},
        .rope = {.style = RopeStyle::neox},
        .mixture = {.experts = true, .normalize_chosen = true},
    },
    // Gemma 3: embeddings scaled by sqrt(n_embd), per-head Q/K norms, RMSNorm after the
    // attention and after the feed-forward as well as before, a GELU-gated feed-forward,
    // and five sliding-window blocks (RoPE base 10000) for every global one. The
    // converter stores the norm weights as 1 + w, so they are plain RMSNorm weights.
    Architecture{
        .name = "gemma3",
        .key_prefix = "gemma3",
        .optional = {.qk_norm = true, .tied_output = true},
        .rope = {.style = RopeStyle::neox},
        .block = {.scale_embeddings = true,
                  .post_norms = true,
                  .activation = FfnActivation::gelu_tanh,
                  .embd_per_head_scale_blocks = 62},
        .sliding_window = {.pattern = 6, .local_freq_base = 10000.0f},
    },
    // GPT-OSS (gpt-oss-20b, gpt-oss-120b; llama.cpp's openai-moe): biases on every
    // attention projection, a learned sink per query head in every softmax, every other
    // block (the even ones) attending through a sliding window but turning by the same
    // YaRN-scaled RoPE, the norm after the attention named post_attention_norm, and a
    // mixture whose router (with its bias) picks the top scores and softmaxes theirs
    // alone, each expert a clamped SwiGLU with biases (activation.hpp's swiglu_oai).
    Architecture{
        .name = "gpt-oss",
        .key_prefix = "gpt-oss",
        .tensors = {.ffn_norm = "post_attention_norm"},
        .optional =
            {.qkv_bias = true, .output_bias = true, .attention_sinks = true, .expert_biases = true},
        .rope = {.style = RopeStyle::neox},
        .block = {.activation = FfnActivation::swiglu_oai},
        .sliding_window = {.pattern = 2, .own_local_rope = false},
        .mixture = {.experts = true,
                    .normalize_chosen = false,
                    .weighting = ExpertWeighting::softmax_chosen},
    },
    // BERT (BGE, all-MiniLM, E5, GTE and their cross-encoder rerankers): an encoder
    // (EncoderRule) without RoPE, its norms LayerNorms with biases under
    // attention.layer_norm_epsilon, its attention bidirectional (the converter writes
    // attention.causal false) and the file's pooling_type saying how it embeds.
    Architecture{
        .name = "bert",
        .key_prefix = "bert",
        .keys = {.rms_epsilon = "attention.layer_norm_epsilon"},
        .optional = {.qkv_bias = true, .output_bias = true},
        .block = {.activation = FfnActivation::gelu_tanh},
        .encoder = {.encoder = true},
    },
    // nomic-bert (nomic-embed-text v1 and v1.5): BERT's post-norm encoder with RoPE
    // (rotate-half) instead of learned positions, Q, K and V fused in one matrix, and a
    // SwiGLU feed-forward, its projections without biases.
    Architecture{
        .name = "nomic-bert",
        .key_prefix = "nomic-bert",
        .keys = {.rms_epsilon = "attention.layer_norm_epsilon"},
        .optional = {.qkv_bias = true, .output_bias = true},
        .rope = {.style = RopeStyle::neox},
        .encoder = {.encoder = true, .learned_positions = false, .gated_ffn = true},
    },
};

// "llama, smollm3, qwen2, qwen3, qwen3moe, gemma3, gpt-oss, bert, nomic-bert": for messages.
inline std::string known_architectures() {
  std::string names;
  for (const Architecture& architecture : kArchitectures) {
    names += (names.empty() ? "" : ", ") + std::string(architecture.name);
  }
  return names;
}

// "qwen3moe": the families whose blocks have experts, for messages.
inline std::string experts_architectures() {
  std::string names;
  for (const Architecture& architecture : kArchitectures) {
    if (!architecture.mixture.experts) continue;
    names += (names.empty() ? "" : ", ") + std::string(architecture.name);
  }
  return names;
}

// The entry of `name` (general.architecture); an unknown one is an error naming the
// known ones. `file` only names the file in the message.
inline const Architecture& find_architecture(std::string_view name, std::string_view file = {}) {
  for (const Architecture& architecture : kArchitectures) {
    if (architecture.name == name) return architecture;
  }
  fail(file, file.empty() ? "" : ": ", "architecture \"", name, "\" is not supported (smol runs ",
       known_architectures(), ")");
}

}  // namespace smol
