// ModelConfig: the hyper-parameters of a Llama-family model, read from GGUF metadata.
//
// Every number comes from the file (the metadata wins over any documentation); only
// the NoPE rhythm of SmolLM3 is fixed by the architecture itself, as in llama.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/ops/rope.hpp"

namespace smol {

struct ModelConfig {
  std::string architecture;  // "llama" or "smollm3"
  std::size_t n_layer = 0;
  std::size_t n_embd = 0;     // hidden size
  std::size_t n_ff = 0;       // feed-forward (SwiGLU) size
  std::size_t n_head = 0;     // query heads
  std::size_t n_head_kv = 0;  // key/value heads (GQA)
  std::size_t head_dim = 0;
  std::size_t n_rot = 0;        // rotated dims per head (usually head_dim)
  std::size_t n_ctx_train = 0;  // the model's context length
  std::size_t n_vocab = 0;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;

  // rope_layers[il]: whether block il applies RoPE. SmolLM3 leaves it out of every
  // fourth block (NoPE). Public so experiments and tests can override the schedule.
  std::vector<bool> rope_layers;
  // Always adjacent_pairs for GGUF files; rotate_half exists for the negative test.
  RopeLayout rope_layout = RopeLayout::adjacent_pairs;

  bool uses_rope(std::size_t il) const { return rope_layers.at(il); }
  std::size_t q_dim() const noexcept { return n_head * head_dim; }
  std::size_t kv_dim() const noexcept { return n_head_kv * head_dim; }

  static ModelConfig from_gguf(const gguf::GgufFile& file);
};

// SmolLM3 skips RoPE in block il when (il + 1) % 4 == 0 (blocks 3, 7, 11, ...);
// llama.cpp fixes this interval for the architecture rather than reading a key.
inline std::vector<bool> default_rope_layers(const std::string& architecture, std::size_t n_layer) {
  std::vector<bool> layers(n_layer, true);
  if (architecture == "smollm3") {
    constexpr std::size_t kNoRopeInterval = 4;
    for (std::size_t il = 0; il < n_layer; ++il) layers[il] = (il + 1) % kNoRopeInterval != 0;
  }
  return layers;
}

inline ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& file) {
  ModelConfig config;
  config.architecture = file.get<std::string>("general.architecture");
  const std::string& arch = config.architecture;
  if (arch != "llama" && arch != "smollm3") {
    fail(file.name(), ": architecture \"", arch, "\" is not supported (smol runs llama, smollm3)");
  }
  const auto key = [&](const char* suffix) { return arch + "." + suffix; };
  const auto positive = [&](const char* suffix) {
    const auto value = file.get<std::uint64_t>(key(suffix));
    if (value == 0) fail(file.name(), ": metadata key ", key(suffix), " is 0");
    return static_cast<std::size_t>(value);
  };

  config.n_layer = positive("block_count");
  config.n_embd = positive("embedding_length");
  config.n_ff = positive("feed_forward_length");
  config.n_head = positive("attention.head_count");
  config.n_head_kv =
      file.get_optional<std::uint64_t>(key("attention.head_count_kv")).value_or(config.n_head);
  config.n_ctx_train = positive("context_length");
  config.rope_base = file.get_optional<float>(key("rope.freq_base")).value_or(10000.0f);
  config.rms_eps = file.get<float>(key("attention.layer_norm_rms_epsilon"));

  if (config.n_head_kv == 0 || config.n_head % config.n_head_kv != 0) {
    fail(file.name(), ": ", config.n_head, " query heads cannot share ", config.n_head_kv,
         " KV heads evenly");
  }
  // The head size is the key length when the file says so, else hidden / heads;
  // rope.dimension_count says how much of it rotates.
  const auto rope_dims = file.get_optional<std::uint64_t>(key("rope.dimension_count"));
  if (const auto key_length = file.get_optional<std::uint64_t>(key("attention.key_length"))) {
    config.head_dim = static_cast<std::size_t>(*key_length);
  } else if (config.n_embd % config.n_head == 0) {
    config.head_dim = config.n_embd / config.n_head;
  } else if (rope_dims) {
    config.head_dim = static_cast<std::size_t>(*rope_dims);
  } else {
    fail(file.name(), ": hidden size ", config.n_embd, " is not a multiple of ", config.n_head,
         " heads and no head size is given");
  }
  if (const auto value_length = file.get_optional<std::uint64_t>(key("attention.value_length"));
      value_length && *value_length != config.head_dim) {
    fail(file.name(), ": value heads of ", *value_length, " differ from key heads of ",
         config.head_dim, "; smol needs them equal");
  }
  config.n_rot = rope_dims ? static_cast<std::size_t>(*rope_dims) : config.head_dim;
  if (config.head_dim == 0 || config.n_rot > config.head_dim || config.n_rot % 2 != 0) {
    fail(file.name(), ": rope.dimension_count ", config.n_rot, " does not fit head size ",
         config.head_dim);
  }
  if (!(config.rope_base > 0.0f) || !(config.rms_eps >= 0.0f)) {
    fail(file.name(), ": rope.freq_base ", config.rope_base, " or rms epsilon ", config.rms_eps,
         " is out of range");
  }

  const gguf::TensorInfo& embeddings = file.tensor("token_embd.weight");
  if (embeddings.n_dims != 2 || embeddings.dims[1] == 0) {
    fail(file.name(), ": tensor token_embd.weight must be 2-D [n_embd, n_vocab]");
  }
  config.n_vocab = static_cast<std::size_t>(embeddings.dims[1]);
  config.rope_layers = default_rope_layers(arch, config.n_layer);
  return config;
}

}  // namespace smol
