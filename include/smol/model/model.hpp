// Model: an opened GGUF file with its validated config and weight views. Immutable
// once built, so any number of Transformer sessions can share one.
#pragma once

#include <string>
#include <utility>

#include "smol/gguf/gguf_file.hpp"
#include "smol/model/config.hpp"
#include "smol/model/weights.hpp"

namespace smol {

class Model {
 public:
  static Model open(const std::string& path) {
    gguf::GgufFile file = gguf::GgufFile::open(path);
    ModelConfig config = ModelConfig::from_gguf(file);
    return Model(std::move(file), std::move(config));
  }

  // For a config adjusted after reading (e.g. another NoPE schedule in an experiment).
  Model(gguf::GgufFile file, ModelConfig config)
      : file_(std::move(file)), config_(std::move(config)) {
    if (config_.rope_layers.size() != config_.n_layer) {
      fail(file_.name(), ": the RoPE schedule covers ", config_.rope_layers.size(),
           " blocks, the model has ", config_.n_layer);
    }
    // Views point into file_'s mapping, which a move of the GgufFile keeps in place.
    weights_ = ModelWeights::from_gguf(file_, config_);
  }

  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;

  const gguf::GgufFile& file() const noexcept { return file_; }
  const ModelConfig& config() const noexcept { return config_; }
  const ModelWeights& weights() const noexcept { return weights_; }

 private:
  gguf::GgufFile file_;
  ModelConfig config_;
  ModelWeights weights_;
};

}  // namespace smol
