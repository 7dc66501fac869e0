// Model: an opened GGUF file with its validated config and weight views. Immutable
// once built, so any number of Transformer sessions can share one.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "smol/gguf/gguf_file.hpp"
#include "smol/model/config.hpp"
#include "smol/model/repacked_weights.hpp"
#include "smol/model/weights.hpp"
#include "smol/simd/kernels_impl.hpp"

namespace smol {

// Whether to interleave the Q4_K / Q6_K matrices in groups of 8 rows at load time
// (RepackedWeights): faster decode and prefill where the kernels prefer it, for a few
// seconds of copying at load. `never` reads every weight straight from the memory map.
enum class Repack {
  never,
  when_faster,  // if the kernels a Context would pick ($SMOL_ISA, else the best) prefer it
  always,
};

struct ModelOptions {
  Repack repack = Repack::never;
};

inline bool repacking_pays(std::optional<Isa> isa = std::nullopt) {
  return kernels_for_isa(select_isa(isa)).prefers_rows8;
}

class Model {
 public:
  static Model open(const std::string& path, ModelOptions options = {}) {
    gguf::GgufFile file = gguf::GgufFile::open(path);
    ModelConfig config = ModelConfig::from_gguf(file);
    return Model(std::move(file), std::move(config), options);
  }

  // For a config adjusted after reading (e.g. another NoPE schedule in an experiment).
  Model(gguf::GgufFile file, ModelConfig config, ModelOptions options = {})
      : file_(std::move(file)), config_(std::move(config)) {
    if (config_.rope_layers.size() != config_.n_layer) {
      fail(file_.name(), ": the RoPE schedule covers ", config_.rope_layers.size(),
           " blocks, the model has ", config_.n_layer);
    }
    // Views point into file_'s mapping, which a move of the GgufFile keeps in place.
    weights_ = ModelWeights::from_gguf(file_, config_);
    if (options.repack == Repack::always ||
        (options.repack == Repack::when_faster && repacking_pays())) {
      repacked_ = RepackedWeights(weights_, file_);
    }
  }

  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;

  const gguf::GgufFile& file() const noexcept { return file_; }
  const ModelConfig& config() const noexcept { return config_; }
  const ModelWeights& weights() const noexcept { return weights_; }
  const RepackedWeights& repacked() const noexcept { return repacked_; }

 private:
  gguf::GgufFile file_;
  ModelConfig config_;
  ModelWeights weights_;
  RepackedWeights repacked_;  // owns the copies weights_' views point to
};

}  // namespace smol
