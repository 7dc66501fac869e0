// Weight views of a Llama-family model, checked against its ModelConfig.
//
// Matrices are WeightMatrix views into the memory map: nothing is copied or
// dequantized up front. Only the norm vectors are widened to f32 at load time; they
// are a few thousand values per block (0.03% of SmolLM3-3B) and every kernel that
// reads them wants f32.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/ggml_type.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/model/config.hpp"
#include "smol/ops/weight_matrix.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/quant/weight_types.hpp"

namespace smol {

struct LayerWeights {
  std::vector<float> attn_norm;
  WeightMatrix attn_q, attn_k, attn_v, attn_output;
  std::vector<float> ffn_norm;
  WeightMatrix ffn_gate, ffn_up, ffn_down;
};

struct ModelWeights {
  WeightMatrix token_embd;  // [n_vocab rows of n_embd]
  std::vector<float> output_norm;
  // The LM head: output.weight, or token_embd.weight itself when the file has none.
  WeightMatrix output;
  bool tied_embeddings = false;
  std::vector<LayerWeights> layers;

  // Validates every tensor's presence, shape and type; throws smol::Error naming
  // the tensor that is wrong.
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

inline std::vector<float> norm_vector(const gguf::GgufFile& file, const std::string& name,
                                      std::size_t n) {
  const gguf::TensorInfo& info = checked_tensor(file, name, {n});
  if (n % ggml_type_info(info.type).block_values != 0) {
    fail(file.name(), ": tensor ", name, " of type ", ggml_type_name(info.type), " with ", n,
         " values is not whole blocks");
  }
  std::vector<float> values(n);
  dequantize_row(info.type, info.data, values.data(), n);
  return values;
}

}  // namespace detail

inline ModelWeights ModelWeights::from_gguf(const gguf::GgufFile& file, const ModelConfig& config) {
  ModelWeights weights;
  const std::size_t n_embd = config.n_embd;
  weights.token_embd = detail::matrix_view(file, "token_embd.weight", n_embd, config.n_vocab);
  weights.output_norm = detail::norm_vector(file, "output_norm.weight", n_embd);
  weights.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  weights.output = weights.tied_embeddings
                       ? weights.token_embd
                       : detail::matrix_view(file, "output.weight", n_embd, config.n_vocab);

  weights.layers.resize(config.n_layer);
  for (std::size_t il = 0; il < config.n_layer; ++il) {
    const std::string prefix = "blk." + std::to_string(il) + ".";
    const auto matrix = [&](const char* name, std::size_t cols, std::size_t rows) {
      return detail::matrix_view(file, prefix + name + ".weight", cols, rows);
    };
    const auto norm = [&](const char* name) {
      return detail::norm_vector(file, prefix + name + ".weight", n_embd);
    };
    LayerWeights& layer = weights.layers[il];
    layer.attn_norm = norm("attn_norm");
    layer.attn_q = matrix("attn_q", n_embd, config.q_dim());
    layer.attn_k = matrix("attn_k", n_embd, config.kv_dim());
    layer.attn_v = matrix("attn_v", n_embd, config.kv_dim());
    layer.attn_output = matrix("attn_output", config.q_dim(), n_embd);
    layer.ffn_norm = norm("ffn_norm");
    layer.ffn_gate = matrix("ffn_gate", n_embd, config.n_ff);
    layer.ffn_up = matrix("ffn_up", n_embd, config.n_ff);
    layer.ffn_down = matrix("ffn_down", config.n_ff, n_embd);
  }
  return weights;
}

}  // namespace smol
