// Weight views of a Llama-family model, checked against its ModelConfig.
//
// Matrices are WeightMatrix views into the memory map: nothing is copied or
// dequantized up front. Only the norm vectors are widened to f32 at load time; they
// are a few thousand values per block (0.03% of SmolLM3-3B) and every kernel that
// reads them wants f32.
//
// Which tensors there are comes from the architecture's entry (architecture.hpp). The
// loader takes every tensor of the file or refuses it: a tensor it does not know, or
// an optional one the forward pass does not apply yet, is an error naming it, never
// silently left out of the computation (llama.cpp refuses such files too).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/ggml_type.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/model/architecture.hpp"
#include "smol/model/config.hpp"
#include "smol/ops/weight_matrix.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/quant/weight_types.hpp"

namespace smol {

// The optional tensors (OptionalTensors) that every forward pass of smol applies:
// LayerPass, the f32 reference and the CUDA unit. A family that brings another one
// gets it applied in all three, then set here; until then a file that carries it is
// refused at load.
// (The CUDA unit refuses the files of the last three: GPT-OSS's, whose mixture and
// sliding window it does not run either.)
inline constexpr OptionalTensors kAppliedOptionalTensors{.qkv_bias = true,
                                                         .qk_norm = true,
                                                         .rope_freqs = true,
                                                         .tied_output = true,
                                                         .output_bias = true,
                                                         .attention_sinks = true,
                                                         .expert_biases = true};

struct LayerWeights {
  std::vector<float> attn_norm;
  WeightMatrix attn_q, attn_k, attn_v, attn_output;
  std::vector<float> ffn_norm;
  WeightMatrix ffn_gate, ffn_up, ffn_down;  // empty in a mixture of experts
  // A mixture of experts (config.has_experts()): the router [n_expert rows of n_embd]
  // and each expert's matrices, views of the file's 3-D tensors (expert e's rows of
  // ffn_gate_exps are e * n_ff_expert onwards), so that a token reads only its experts'.
  WeightMatrix ffn_gate_inp;
  std::vector<WeightMatrix> ffn_gate_exps, ffn_up_exps, ffn_down_exps;

  // The optional tensors of the architecture's entry, widened to f32 like the norms;
  // empty unless the config's mechanism is on (then every block has them).
  std::vector<float> attn_q_bias;       // [q_dim]   (config.attention_biases)
  std::vector<float> attn_k_bias;       // [kv_dim]
  std::vector<float> attn_v_bias;       // [kv_dim]
  std::vector<float> attn_q_norm;       // [head_dim], one for all heads (config.qk_norm)
  std::vector<float> attn_k_norm;       // [head_dim]
  std::vector<float> attn_output_bias;  // [n_embd] (config.output_bias)
  std::vector<float> attn_sinks;        // [n_head] (config.attention_sinks)
  // config.expert_biases: the router's [n_expert], and each expert's after its gate, up
  // and down projections, expert e's from e * n_ff_expert (gate, up) or e * n_embd (down).
  std::vector<float> ffn_gate_inp_bias, ffn_gate_exps_bias, ffn_up_exps_bias, ffn_down_exps_bias;
  // The norms of the attention's and the FFN's outputs (config.post_norms), [n_embd];
  // empty without.
  std::vector<float> attn_post_norm, ffn_post_norm;
  // An encoder's (config.encoder): the LayerNorms of the sums after the attention and
  // after the feed-forward (weights and biases, [n_embd]), and the feed-forward's biases.
  std::vector<float> attn_out_norm, attn_out_norm_bias, ffn_out_norm, ffn_out_norm_bias;
  std::vector<float> ffn_up_bias, ffn_down_bias;
};

// An encoder's embeddings beyond the token rows (config.encoder).
struct EncoderWeights {
  WeightMatrix position_embd;          // [n_ctx_train rows of n_embd]
  std::vector<float> token_type;       // the first token-type row ("sentence A"), [n_embd]
  std::vector<float> norm, norm_bias;  // the embeddings' LayerNorm
};

// A reranker's classifier head (config.n_labels != 0; llama.cpp's rank pooling): a
// cross-encoder's `cls` [n_embd rows] then tanh, where the file has it, and `cls.output`
// [n_labels rows]; a Qwen3-Reranker has only cls.output (the LM head's "yes" and "no"
// rows). Biases where the file has them (empty: none).
struct ClassifierWeights {
  bool has_hidden = false;
  WeightMatrix hidden, output;
  std::vector<float> hidden_bias, output_bias;
};

struct ModelWeights {
  WeightMatrix token_embd;  // [n_vocab rows of n_embd]
  std::vector<float> output_norm;
  // The LM head: output.weight, or token_embd.weight itself when the file has none.
  WeightMatrix output;
  bool tied_embeddings = false;
  // rope_freqs.weight, [n_rot / 2] frequency divisors (the rope_freqs optional tensor);
  // null where the file or the family has none.
  const gguf::TensorInfo* rope_freqs = nullptr;
  std::vector<LayerWeights> layers;
  EncoderWeights encoder;        // empty but for an encoder
  ClassifierWeights classifier;  // empty but for a reranker

  // Validates every tensor's presence, shape and type, and that the file holds no
  // tensor the forward pass would leave out; throws smol::Error naming the tensor.
  static ModelWeights from_gguf(const gguf::GgufFile& file, const ModelConfig& config);

  // x = token_embd[token]: one row dequantized, out of n_embd floats.
  void embed(std::int32_t token, float* out) const {
    if (token < 0 || static_cast<std::size_t>(token) >= token_embd.rows) {
      fail("token id ", token, " is outside the vocabulary of ", token_embd.rows, " tokens");
    }
    dequantize_row(token_embd.type, token_embd.row(static_cast<std::size_t>(token)), out,
                   token_embd.cols);
  }
};

namespace detail {

inline std::string shape_text(const gguf::TensorInfo& info) {
  std::string text = "[";
  for (int d = 0; d < info.n_dims; ++d) text += (d ? ", " : "") + std::to_string(info.dims[d]);
  return text + "]";
}

inline const gguf::TensorInfo& checked_tensor(const gguf::GgufFile& file, const std::string& name,
                                              std::initializer_list<std::size_t> shape) {
  const gguf::TensorInfo* info = file.find_tensor(name);
  if (info == nullptr) fail(file.name(), ": tensor ", name, " is missing");
  bool matches = static_cast<std::size_t>(info->n_dims) == shape.size();
  std::size_t d = 0;
  for (const std::size_t expected : shape) {
    matches = matches && info->dims[d++] == expected;
  }
  if (!matches) {
    std::string expected_text = "[";
    d = 0;
    for (const std::size_t expected : shape) {
      expected_text += (d++ ? ", " : "") + std::to_string(expected);
    }
    fail(file.name(), ": tensor ", name, " has shape ", shape_text(*info), ", expected ",
         expected_text, "]");
  }
  if (!is_weight_type(info->type)) {  // the kernels accept exactly quant/weight_types.hpp's list
    fail(file.name(), ": tensor ", name, " has type ", ggml_type_name(info->type),
         ", which smol does not support (supported: ", weight_type_names(), ")");
  }
  return *info;
}

inline WeightMatrix matrix_view(const gguf::GgufFile& file, const std::string& name,
                                std::size_t cols, std::size_t rows) {
  const gguf::TensorInfo& info = checked_tensor(file, name, {cols, rows});
  WeightMatrix matrix;
  matrix.type = info.type;
  matrix.data = info.data;
  matrix.rows = rows;
  matrix.cols = cols;
  matrix.row_bytes = ggml_row_bytes(info.type, cols);
  matrix.name = info.name;
  if (cols % ggml_type_info(info.type).block_values != 0 || matrix.row_bytes * rows != info.bytes) {
    fail(file.name(), ": tensor ", name, " of type ", ggml_type_name(info.type), " has rows of ",
         cols, " values, not whole blocks");
  }
  return matrix;
}

// The experts' matrices of a 3-D tensor [cols, rows, n_expert]: one view of `rows`
// rows per expert, named "<tensor>[e]".
inline std::vector<WeightMatrix> expert_views(const gguf::GgufFile& file, const std::string& name,
                                              std::size_t cols, std::size_t rows,
                                              std::size_t n_expert) {
  const gguf::TensorInfo& info = checked_tensor(file, name, {cols, rows, n_expert});
  const std::size_t row_bytes = ggml_row_bytes(info.type, cols);
  if (cols % ggml_type_info(info.type).block_values != 0 ||
      row_bytes * rows * n_expert != info.bytes) {
    fail(file.name(), ": tensor ", name, " of type ", ggml_type_name(info.type), " has rows of ",
         cols, " values, not whole blocks");
  }
  std::vector<WeightMatrix> views(n_expert);
  for (std::size_t e = 0; e < n_expert; ++e) {
    WeightMatrix& view = views[e];
    view.type = info.type;
    view.data = info.data + e * rows * row_bytes;
    view.rows = rows;
    view.cols = cols;
    view.row_bytes = row_bytes;
    view.name = info.name;
  }
  return views;
}

inline std::vector<float> norm_vector(const gguf::GgufFile& file, const std::string& name,
                                      std::initializer_list<std::size_t> shape) {
  const gguf::TensorInfo& info = checked_tensor(file, name, shape);
  std::size_t n = 1;
  for (const std::size_t dim : shape) n *= dim;
  if (n % ggml_type_info(info.type).block_values != 0) {
    fail(file.name(), ": tensor ", name, " of type ", ggml_type_name(info.type), " with ", n,
         " values is not whole blocks");
  }
  std::vector<float> values(n);
  dequantize_row(info.type, info.data, values.data(), n);
  return values;
}

// Rows [first, first + count) of `matrix`, as a matrix of their own (the parts of a
// fused Q/K/V matrix).
inline WeightMatrix row_range(const WeightMatrix& matrix, std::size_t first, std::size_t count) {
  WeightMatrix view = matrix;
  view.data = matrix.row(first);
  view.rows = count;
  return view;
}

// Looks tensors up by name and remembers which it gave out, so that what is left at
// the end is what the loader does not know.
class TensorClaims {
 public:
  TensorClaims(const gguf::GgufFile& file, const Architecture& architecture)
      : file_(&file), architecture_(&architecture) {}

  WeightMatrix matrix(const std::string& name, std::size_t cols, std::size_t rows) {
    claimed_.insert(name);
    return matrix_view(*file_, name, cols, rows);
  }
  std::vector<WeightMatrix> experts(const std::string& name, std::size_t cols, std::size_t rows,
                                    std::size_t n_expert) {
    claimed_.insert(name);
    return expert_views(*file_, name, cols, rows, n_expert);
  }
  std::vector<float> norm(const std::string& name, std::size_t n) { return vector(name, {n}); }
  // A tensor of `shape` (a vector, or a few of them) widened to f32 like a norm.
  std::vector<float> vector(const std::string& name, std::initializer_list<std::size_t> shape) {
    claimed_.insert(name);
    return norm_vector(*file_, name, shape);
  }

  // An optional tensor of `n` values (`meaning` says what it is for): null when its
  // family does not declare it (`declared`) or the file has none; refused when the file
  // has it but the forward pass does not apply it (`applied`).
  const gguf::TensorInfo* optional(const std::string& name, std::size_t n, bool declared,
                                   bool applied, std::string_view meaning) {
    if (!declared || file_->find_tensor(name) == nullptr) return nullptr;
    const gguf::TensorInfo& info = checked_tensor(*file_, name, {n});
    if (!applied) {
      fail(file_->name(), ": tensor ", name, " (", meaning, ") is in this ", architecture_->name,
           " file, but smol does not apply ", meaning,
           " yet; it will not run the model without it");
    }
    claimed_.insert(name);
    return &info;
  }

  // The vectors of an optional per-block kind that the config found in the file
  // (`present`): required then, widened like a norm; refused when the forward pass
  // does not apply the kind (`applied`). Empty when the kind is off.
  std::vector<float> optional_vector(const std::string& name,
                                     std::initializer_list<std::size_t> shape, bool present,
                                     bool applied, std::string_view meaning) {
    if (!present) return {};
    if (!applied) {
      fail(file_->name(), ": tensor ", name, " (", meaning, ") is in this ", architecture_->name,
           " file, but smol does not apply ", meaning,
           " yet; it will not run the model without it");
    }
    return vector(name, shape);
  }

  // Refuses the file if it holds a tensor nobody claimed.
  void check_all_claimed() const {
    for (const gguf::TensorInfo& info : file_->tensors()) {
      if (!claimed_.contains(std::string(info.name))) {
        fail(file_->name(), ": tensor ", info.name, " is not part of a ", architecture_->name,
             " model as smol runs it; it will not run the model without it");
      }
    }
  }

 private:
  const gguf::GgufFile* file_;
  const Architecture* architecture_;
  std::unordered_set<std::string> claimed_;
};

// The classifier head, for a file with cls.output (config.n_labels), of any architecture.
inline ClassifierWeights classifier_weights(const gguf::GgufFile& file, TensorClaims& claims,
                                            const ModelConfig& config, const TensorNames& names) {
  ClassifierWeights head;
  if (config.n_labels == 0) return head;
  const auto bias = [&](std::string_view name, std::size_t n) {
    const std::string full = TensorNames::model(name, "bias");
    return file.find_tensor(full) != nullptr ? claims.norm(full, n) : std::vector<float>{};
  };
  const std::string hidden = TensorNames::model(names.classifier);
  head.has_hidden = file.find_tensor(hidden) != nullptr;
  if (head.has_hidden) {
    head.hidden = claims.matrix(hidden, config.n_embd, config.n_embd);
    head.hidden_bias = bias(names.classifier, config.n_embd);
  }
  head.output =
      claims.matrix(TensorNames::model(names.classifier_output), config.n_embd, config.n_labels);
  head.output_bias = bias(names.classifier_output, config.n_labels);
  return head;
}

}  // namespace detail

// An encoder's tensors (EncoderRule, llama.cpp's LLM_ARCH_BERT): no output norm or LM
// head, biases on every projection, LayerNorms after the residual sums.
inline ModelWeights encoder_weights(const gguf::GgufFile& file, const ModelConfig& config,
                                    const Architecture& arch) {
  const TensorNames& names = arch.tensors;
  detail::TensorClaims claims(file, arch);
  ModelWeights weights;
  const std::size_t n_embd = config.n_embd;
  weights.token_embd = claims.matrix(TensorNames::model(names.token_embd), n_embd, config.n_vocab);
  EncoderWeights& encoder = weights.encoder;
  if (config.learned_positions) {
    encoder.position_embd =
        claims.matrix(TensorNames::model(names.position_embd), n_embd, config.n_ctx_train);
  }
  const std::string types = TensorNames::model(names.token_types);
  const gguf::TensorInfo* types_info = file.find_tensor(types);
  if (types_info != nullptr) {
    const std::size_t n_types = types_info->n_dims == 2 ? types_info->dims[1] : 0;
    const WeightMatrix rows = claims.matrix(types, n_embd, std::max<std::size_t>(n_types, 1));
    encoder.token_type.resize(n_embd);
    dequantize_row(rows.type, rows.row(0), encoder.token_type.data(), n_embd);
  }
  encoder.norm = claims.norm(TensorNames::model(names.token_embd_norm), n_embd);
  encoder.norm_bias = claims.norm(TensorNames::model(names.token_embd_norm, "bias"), n_embd);
  weights.classifier = detail::classifier_weights(file, claims, config, names);
  weights.layers.resize(config.n_layer);
  for (std::size_t il = 0; il < config.n_layer; ++il) {
    const auto matrix = [&](std::string_view name, std::size_t cols, std::size_t rows) {
      return claims.matrix(TensorNames::block(il, name), cols, rows);
    };
    const auto vector = [&](std::string_view name, std::string_view kind, std::size_t n) {
      return claims.norm(TensorNames::block(il, name, kind), n);
    };
    // A bias the file may leave out (empty then: nothing is added).
    const auto bias = [&](std::string_view name, std::size_t n) {
      const std::string full = TensorNames::block(il, name, "bias");
      return file.find_tensor(full) != nullptr ? claims.norm(full, n) : std::vector<float>{};
    };
    LayerWeights& layer = weights.layers[il];
    const std::size_t q_dim = config.q_dim(), kv_dim = config.kv_dim();
    if (file.find_tensor(TensorNames::block(il, names.attn_qkv)) != nullptr) {
      // One matrix: Q's rows, K's, V's; each a view of its rows, as are the bias's parts.
      const WeightMatrix qkv = matrix(names.attn_qkv, n_embd, q_dim + 2 * kv_dim);
      layer.attn_q = detail::row_range(qkv, 0, q_dim);
      layer.attn_k = detail::row_range(qkv, q_dim, kv_dim);
      layer.attn_v = detail::row_range(qkv, q_dim + kv_dim, kv_dim);
      const std::vector<float> fused = bias(names.attn_qkv, q_dim + 2 * kv_dim);
      if (!fused.empty()) {
        layer.attn_q_bias.assign(fused.begin(), fused.begin() + static_cast<std::ptrdiff_t>(q_dim));
        layer.attn_k_bias.assign(fused.begin() + static_cast<std::ptrdiff_t>(q_dim),
                                 fused.begin() + static_cast<std::ptrdiff_t>(q_dim + kv_dim));
        layer.attn_v_bias.assign(fused.begin() + static_cast<std::ptrdiff_t>(q_dim + kv_dim),
                                 fused.end());
      }
    } else {
      layer.attn_q = matrix(names.attn_q, n_embd, q_dim);
      layer.attn_k = matrix(names.attn_k, n_embd, kv_dim);
      layer.attn_v = matrix(names.attn_v, n_embd, kv_dim);
    }
    if (layer.attn_q_bias.empty()) {
      layer.attn_q_bias = bias(names.attn_q, q_dim);
      layer.attn_k_bias = bias(names.attn_k, kv_dim);
      layer.attn_v_bias = bias(names.attn_v, kv_dim);
    }
    layer.attn_output = matrix(names.attn_output, q_dim, n_embd);
    layer.attn_output_bias = bias(names.attn_output, n_embd);
    layer.attn_out_norm = vector(names.attn_output_norm, "weight", n_embd);
    layer.attn_out_norm_bias = vector(names.attn_output_norm, "bias", n_embd);
    if (config.gated_ffn) layer.ffn_gate = matrix(names.ffn_gate, n_embd, config.n_ff);
    layer.ffn_up = matrix(names.ffn_up, n_embd, config.n_ff);
    layer.ffn_down = matrix(names.ffn_down, config.n_ff, n_embd);
    layer.ffn_up_bias = bias(names.ffn_up, config.n_ff);
    layer.ffn_down_bias = bias(names.ffn_down, n_embd);
    layer.ffn_out_norm = vector(names.layer_output_norm, "weight", n_embd);
    layer.ffn_out_norm_bias = vector(names.layer_output_norm, "bias", n_embd);
  }
  claims.check_all_claimed();
  return weights;
}

inline ModelWeights ModelWeights::from_gguf(const gguf::GgufFile& file, const ModelConfig& config) {
  const Architecture& arch = find_architecture(config.architecture, file.name());
  if (config.encoder) return encoder_weights(file, config, arch);
  const TensorNames& names = arch.tensors;
  const OptionalTensors& may = arch.optional;
  const OptionalTensors& applied = kAppliedOptionalTensors;
  detail::TensorClaims claims(file, arch);
  ModelWeights weights;
  const std::size_t n_embd = config.n_embd;
  weights.token_embd = claims.matrix(TensorNames::model(names.token_embd), n_embd, config.n_vocab);
  weights.output_norm = claims.norm(TensorNames::model(names.output_norm), n_embd);
  const std::string output = TensorNames::model(names.output);
  // Without output.weight, a family that ties its LM head reads token_embd instead;
  // for any other, the matrix() below names the missing tensor.
  weights.tied_embeddings = may.tied_output && file.find_tensor(output) == nullptr;
  weights.output =
      weights.tied_embeddings ? weights.token_embd : claims.matrix(output, n_embd, config.n_vocab);
  weights.rope_freqs =
      claims.optional(TensorNames::model(names.rope_freqs), config.n_rot / 2, may.rope_freqs,
                      applied.rope_freqs, "per-dimension RoPE frequency factors");
  weights.classifier = detail::classifier_weights(file, claims, config, names);

  weights.layers.resize(config.n_layer);
  for (std::size_t il = 0; il < config.n_layer; ++il) {
    const auto matrix = [&](std::string_view name, std::size_t cols, std::size_t rows) {
      return claims.matrix(TensorNames::block(il, name), cols, rows);
    };
    const auto norm = [&](std::string_view name) {
      return claims.norm(TensorNames::block(il, name), n_embd);
    };
    const auto bias = [&](std::string_view name, std::size_t n) {
      return claims.optional_vector(TensorNames::block(il, name, "bias"), {n},
                                    config.attention_biases, applied.qkv_bias, "QKV biases");
    };
    const auto head_norm = [&](std::string_view name) {
      return claims.optional_vector(TensorNames::block(il, name), {config.head_dim}, config.qk_norm,
                                    applied.qk_norm, "per-head Q/K norms");
    };
    const auto expert_bias = [&](std::string_view name, std::initializer_list<std::size_t> shape) {
      return claims.optional_vector(TensorNames::block(il, name, "bias"), shape,
                                    config.expert_biases, applied.expert_biases,
                                    "the router's and the experts' biases");
    };
    LayerWeights& layer = weights.layers[il];
    layer.attn_norm = norm(names.attn_norm);
    layer.attn_q = matrix(names.attn_q, n_embd, config.q_dim());
    layer.attn_k = matrix(names.attn_k, n_embd, config.kv_dim());
    layer.attn_v = matrix(names.attn_v, n_embd, config.kv_dim());
    layer.attn_output = matrix(names.attn_output, config.q_dim(), n_embd);
    layer.ffn_norm = norm(names.ffn_norm);
    if (config.has_experts()) {
      const auto experts = [&](std::string_view name, std::size_t cols, std::size_t rows) {
        return claims.experts(TensorNames::block(il, name), cols, rows, config.n_expert);
      };
      layer.ffn_gate_inp = matrix(names.ffn_gate_inp, n_embd, config.n_expert);
      layer.ffn_gate_exps = experts(names.ffn_gate_exps, n_embd, config.n_ff_expert);
      layer.ffn_up_exps = experts(names.ffn_up_exps, n_embd, config.n_ff_expert);
      layer.ffn_down_exps = experts(names.ffn_down_exps, config.n_ff_expert, n_embd);
    } else {
      layer.ffn_gate = matrix(names.ffn_gate, n_embd, config.n_ff);
      layer.ffn_up = matrix(names.ffn_up, n_embd, config.n_ff);
      layer.ffn_down = matrix(names.ffn_down, config.n_ff, n_embd);
    }
    layer.attn_q_bias = bias(names.attn_q, config.q_dim());
    layer.attn_k_bias = bias(names.attn_k, config.kv_dim());
    layer.attn_v_bias = bias(names.attn_v, config.kv_dim());
    layer.attn_q_norm = head_norm(names.attn_q_norm);
    layer.attn_k_norm = head_norm(names.attn_k_norm);
    layer.attn_output_bias = claims.optional_vector(
        TensorNames::block(il, names.attn_output, "bias"), {n_embd}, config.output_bias,
        applied.output_bias, "the attention output's bias");
    layer.attn_sinks =
        claims.optional_vector(TensorNames::block(il, names.attn_sinks), {config.n_head},
                               config.attention_sinks, applied.attention_sinks, "attention sinks");
    if (config.has_experts()) {
      const std::size_t n_expert = config.n_expert, n_ff = config.n_ff_expert;
      layer.ffn_gate_inp_bias = expert_bias(names.ffn_gate_inp, {n_expert});
      layer.ffn_gate_exps_bias = expert_bias(names.ffn_gate_exps, {n_ff, n_expert});
      layer.ffn_up_exps_bias = expert_bias(names.ffn_up_exps, {n_ff, n_expert});
      layer.ffn_down_exps_bias = expert_bias(names.ffn_down_exps, {n_embd, n_expert});
    }
    if (config.post_norms) {
      layer.attn_post_norm = norm(names.attn_post_norm);
      layer.ffn_post_norm = norm(names.ffn_post_norm);
    }
  }
  claims.check_all_claimed();
  return weights;
}

}  // namespace smol
