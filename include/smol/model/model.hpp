// Model: an opened GGUF file with its validated config and weight views. Immutable
// once built, so any number of Transformer sessions can share one.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/model/config.hpp"
#include "smol/model/repacked_weights.hpp"
#include "smol/model/weights.hpp"
#include "smol/ops/attention.hpp"
#include "smol/simd/kernels_impl.hpp"

namespace smol {

// Whether to copy the weights at load time (RepackedWeights): the K-quants interleaved in
// groups of 8 rows, the 32-value types and IQ4_XS in groups of 16, every other matrix in the file's
// order, all in huge pages: faster decode and prefill where the kernels prefer it, for a
// few seconds of copying at load. `never` reads every weight straight from the memory map.
enum class Repack {
  never,
  when_faster,  // if the kernels a Context would pick ($SMOL_ISA, else the best) prefer it
  always,
};

// Changes to the file's RoPE, as llama.cpp's flags make them (--rope-scaling,
// --rope-scale, --yarn-orig-ctx, --rope-freq-base, --yarn-*-factor, --yarn-beta-*);
// each one that is set replaces the file's value.
struct RopeOverrides {
  std::optional<RopeScalingType> type{};
  std::optional<float> factor{};                  // context multiplier (--rope-scale)
  std::optional<std::size_t> original_context{};  // --yarn-orig-ctx
  std::optional<float> freq_base{};               // --rope-freq-base
  std::optional<float> ext_factor{}, attn_factor{}, beta_fast{}, beta_slow{};
};

inline void apply_rope_overrides(ModelConfig& config, const RopeOverrides& o) {
  RopeScaling& s = config.rope_scaling;
  if (o.freq_base) {
    if (!(*o.freq_base > 0.0f)) fail("RoPE frequency base ", *o.freq_base, " must be positive");
    config.rope_base = *o.freq_base;
  }
  if (o.factor) {
    if (!(*o.factor >= 1.0f) || !std::isfinite(*o.factor)) {
      fail("RoPE scaling factor ", *o.factor, " must be at least 1");
    }
    s.factor = *o.factor;
    // A factor alone, on a file without scaling, means linear as in llama.cpp.
    if (s.type == RopeScalingType::none && !o.type) s.type = RopeScalingType::linear;
  }
  if (o.type) s.type = *o.type;
  if (o.original_context) s.original_context = *o.original_context;
  if (o.ext_factor) s.ext_factor = *o.ext_factor;
  if (o.attn_factor) s.attn_factor = *o.attn_factor;
  if (o.beta_fast) s.beta_fast = *o.beta_fast;
  if (o.beta_slow) s.beta_slow = *o.beta_slow;
  if (s.type != RopeScalingType::none && s.factor == 1.0f) {
    fail("RoPE scaling ", rope_scaling_name(s.type),
         " needs a factor above 1 (--rope-scale N, e.g. 2 for twice the trained context)");
  }
  if (s.original_context == 0) s.original_context = config.n_ctx_train;
}

struct ModelOptions {
  Repack repack = Repack::never;
  RopeOverrides rope{};
  // The instruction set whose kernels Repack::when_faster asks (a benchmark forcing one);
  // unset: the one a Context would pick ($SMOL_ISA, else the best).
  std::optional<Isa> repack_for{};
  // With repacking: the matrices that get no interleaved copy copied in the file's order
  // (RepackLayouts::file_order); off, they are read from the map, as before (a comparison).
  bool file_order_copies = true;
  // Polled between matrices while the copies are made (seconds for a 3B model): a Ctrl-C
  // or SIGTERM during loading stops it with Cancelled.
  CancelCheck cancel{};
};

inline bool repacking_pays(std::optional<Isa> isa = std::nullopt) {
  return kernels_for_isa(select_isa(isa)).prefers_rows8;
}

// The types whose eight-row copy the set would decode on the scalar references, for want of
// a kernel of its own (Q2_K and Q3_K on AMX): a set that prefers the copies
// (Kernels::prefers_rows8) leaves these in the file's order. Where no set prefers them
// (scalar, NEON), Repack::always makes every copy, as a comparison.
inline std::vector<GgmlType> rows8_types_without_kernels(std::optional<Isa> isa = std::nullopt) {
  const Kernels& k = kernels_for_isa(select_isa(isa));
  std::vector<GgmlType> types;
  if (!k.prefers_rows8) return types;
  const Kernels& scalar = kernels_for_isa(Isa::scalar);
  for_each_weight_type([&]<class W>(W) {
    if constexpr (!std::is_void_v<typename Rows8Of<typename W::Block>::type>) {
      if (k.of<W::type>().rows8 == scalar.of<W::type>().rows8) types.push_back(W::type);
    }
  });
  return types;
}

// The sixteen-row copies (quant/rows16.hpp: the 32-value types, IQ4_XS) where the prefill
// reads them too (AMX: tiles or the matrix unit; the other x86 sets: the copy's own kernel), so
// the file's pages stay released. A set whose prefill read the file's rows would bring those
// pages back: the weights resident twice.
inline bool repacking_rows16_pays(std::optional<Isa> isa = std::nullopt) {
  const Kernels& k = kernels_for_isa(select_isa(isa));
  bool pays = true;
  for_each_weight_type([&]<class W>(W) {
    if constexpr (!std::is_void_v<typename Rows16Of<typename W::Block>::type>) {
      const auto& kw = k.of<W::type>();
      pays = pays &&
             (kw.tile_dots_rows16 != nullptr || kw.packed_rows16 != nullptr || kw.rows16_prefills);
    }
  });
  return pays;
}

class Model {
 public:
  static Model open(const std::string& path, ModelOptions options = {}) {
    options.cancel.throw_if_requested();
    gguf::GgufFile file = gguf::GgufFile::open(path);
    ModelConfig config = ModelConfig::from_gguf(file);
    return Model(std::move(file), std::move(config), options);
  }

  // For a config adjusted after reading (e.g. another NoPE schedule in an experiment).
  Model(gguf::GgufFile file, ModelConfig config, ModelOptions options = {})
      : file_(std::move(file)), config_(std::move(config)) {
    apply_rope_overrides(config_, options.rope);
    if (config_.rope_layers.size() != config_.n_layer) {
      fail(file_.name(), ": the RoPE schedule covers ", config_.rope_layers.size(),
           " blocks, the model has ", config_.n_layer);
    }
    // Views point into file_'s mapping, which a move of the GgufFile keeps in place.
    weights_ = ModelWeights::from_gguf(file_, config_);
    const bool always = options.repack == Repack::always;
    const bool automatic = options.repack == Repack::when_faster;
    const RepackLayouts layouts{
        .rows8 = always || (automatic && repacking_pays(options.repack_for)),
        .rows16 = always || (automatic && repacking_rows16_pays(options.repack_for)),
        .file_order = options.file_order_copies &&
                      (always || (automatic && repacking_pays(options.repack_for))),
        .rows8_left_out = rows8_types_without_kernels(options.repack_for)};
    if (layouts.rows8 || layouts.rows16 || layouts.file_order) {
      repacked_ = RepackedWeights(weights_, file_, layouts, options.cancel);
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

// RoPE as this model turns it: the config's base and scaling, and the file's
// rope_freqs.weight divisors where it has them (Llama 3.1+).
inline RopeFrequencies rope_frequencies(const Model& model) {
  RopeFrequencies rope = model.config().rope_frequencies();
  if (const gguf::TensorInfo* factors = model.weights().rope_freqs) {
    rope.factors.resize(factors->elements());
    dequantize_row(factors->type, factors->data, rope.factors.data(), rope.factors.size());
  }
  return rope;
}

// The shape of block il's attention: heads, their size, the scores' scale and the
// block's sinks where the model has them.
inline AttentionShape attention_shape(const Model& model, std::size_t il) {
  const ModelConfig& c = model.config();
  const std::vector<float>& sinks = model.weights().layers.at(il).attn_sinks;
  return {.n_head = c.n_head,
          .n_head_kv = c.n_head_kv,
          .head_dim = c.head_dim,
          .scale = c.attention_scale(),
          .sinks = sinks.empty() ? nullptr : sinks.data()};
}

// The RoPE tables a model's blocks turn by: the model's, and for its sliding-window
// blocks their own (ModelConfig::local_rope_frequencies) when it has any.
class BlockRopes {
 public:
  BlockRopes() = default;
  explicit BlockRopes(const Model& model)
      : global_(model.config().n_rot, rope_frequencies(model)),
        local_(model.config().sliding_window != 0 && model.config().own_local_rope
                   ? RopeTable(model.config().n_rot, model.config().local_rope_frequencies())
                   : RopeTable()) {}

  // Makes every table cover positions [0, end).
  void ensure(std::size_t end) {
    global_.ensure(end);
    local_.ensure(end);
  }
  const RopeTable& of_block(const ModelConfig& config, std::size_t il) const {
    return config.uses_local_rope(il) ? local_ : global_;
  }
  const RopeTable& global() const noexcept { return global_; }

 private:
  RopeTable global_, local_;
};

}  // namespace smol
