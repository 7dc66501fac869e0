// ModelConfig from metadata and the tensor checks of ModelWeights: the NoPE schedule,
// and one clear error naming the tensor for each way a file can be wrong.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/gguf/writer.hpp"
#include "smol/model/architecture.hpp"
#include "smol/model/config.hpp"
#include "smol/model/model.hpp"
#include "smol/testing/synthetic.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_model_config {

namespace {

const std::string kQ4Model = std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf";

// The fixture rewritten: `edit` sees each tensor and may add a replacement (return
// true) or drop it (return true without adding).
using TensorEdit = std::function<bool(const smol::gguf::TensorInfo&, smol::gguf::GgufWriter&)>;

std::string load_error(const smol::gguf::GgufFile& original, const TensorEdit& edit,
                       const std::function<void(smol::gguf::GgufWriter&)>& edit_metadata = {}) {
  smol::gguf::GgufWriter writer;
  for (const auto& entry : original.metadata()) {
    writer.set(entry.key, smol::gguf::Value::copy_of(entry.value));
  }
  if (edit_metadata) edit_metadata(writer);
  for (const auto& info : original.tensors()) {
    if (!edit(info, writer)) {
      writer.add_tensor(std::string(info.name), info.type, smol::gguf::Shape(info.shape()),
                        info.span());
    }
  }
  try {
    auto file = smol::gguf::GgufFile::from_bytes(writer.to_bytes(), "edited.gguf");
    auto config = smol::ModelConfig::from_gguf(file);
    smol::Model model(std::move(file), std::move(config));
  } catch (const smol::Error& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("SmolLM3 skips RoPE in every fourth block; llama never does") {
  const std::vector<bool> smollm3 = smol::default_rope_layers("smollm3", 36);
  std::vector<std::size_t> nope;
  for (std::size_t il = 0; il < smollm3.size(); ++il) {
    if (!smollm3[il]) nope.push_back(il);
  }
  CHECK(nope == std::vector<std::size_t>{3, 7, 11, 15, 19, 23, 27, 31, 35});
  const std::vector<bool> llama = smol::default_rope_layers("llama", 36);
  CHECK(std::count(llama.begin(), llama.end(), true) == 36);
}

TEST_CASE("the fixture's config comes from its metadata") {
  const smol::Model model = smol::Model::open(kQ4Model);
  const smol::ModelConfig& c = model.config();
  CHECK(c.architecture == "smollm3");
  CHECK(c.n_layer == 8);
  CHECK(c.n_embd == 256);
  CHECK(c.n_ff == 768);
  CHECK(c.n_head == 4);
  CHECK(c.n_head_kv == 1);
  CHECK(c.head_dim == 64);
  CHECK(c.n_rot == 64);
  CHECK(c.n_ctx_train == 4096);
  CHECK(c.n_vocab == 1024);
  CHECK(c.rope_base == 5e6f);
  CHECK(c.rms_eps == 1e-6f);
  CHECK(c.rope_layers == std::vector<bool>{true, true, true, false, true, true, true, false});
  CHECK(model.weights().tied_embeddings);
  CHECK(model.weights().output.data == model.weights().token_embd.data);
  CHECK(model.weights().token_embd.type == smol::GgmlType::Q6_K);
  CHECK(model.weights().layers[1].attn_v.type == smol::GgmlType::Q4_K);
  // Views into the mapping, not copies.
  const auto bytes = model.file().bytes();
  CHECK(model.weights().layers[7].ffn_down.data >= bytes.data());
  CHECK(model.weights().layers[7].ffn_down.data < bytes.data() + bytes.size());
}

TEST_CASE("a missing, mis-shaped or unsupported tensor is an error naming it") {
  const auto original = smol::gguf::GgufFile::open(kQ4Model);

  const std::string missing = load_error(
      original, [](const auto& info, auto&) { return info.name == "blk.5.ffn_down.weight"; });
  CHECK(missing.find("blk.5.ffn_down.weight") != std::string::npos);
  CHECK(missing.find("missing") != std::string::npos);

  const std::string misshaped = load_error(original, [](const auto& info, auto& writer) {
    if (info.name != "blk.2.attn_k.weight") return false;
    // Two KV heads' worth of rows where the config implies one.
    std::vector<std::byte> data(2 * info.bytes);
    writer.add_tensor_copy("blk.2.attn_k.weight", info.type, {256, 128}, data);
    return true;
  });
  CHECK(misshaped.find("blk.2.attn_k.weight") != std::string::npos);
  CHECK(misshaped.find("[256, 128]") != std::string::npos);
  CHECK(misshaped.find("[256, 64]") != std::string::npos);

  const std::string unsupported = load_error(original, [](const auto& info, auto& writer) {
    if (info.name != "blk.0.ffn_up.weight") return false;
    std::vector<std::byte> data(768 * 66);
    writer.add_tensor_copy("blk.0.ffn_up.weight", smol::GgmlType::IQ2_XXS, {256, 768}, data);
    return true;
  });
  CHECK(unsupported.find("blk.0.ffn_up.weight") != std::string::npos);
  CHECK(unsupported.find("IQ2_XXS") != std::string::npos);

  const std::string no_embeddings = load_error(
      original, [](const auto& info, auto&) { return info.name == "token_embd.weight"; });
  CHECK(no_embeddings.find("token_embd.weight") != std::string::npos);

  const std::string wrong_arch = load_error(
      original, [](const auto&, auto&) { return false; },
      [](auto& writer) { writer.set("general.architecture", "gpt2"); });
  CHECK(wrong_arch.find("gpt2") != std::string::npos);
  CHECK(wrong_arch.find("llama, smollm3, qwen2, qwen3, qwen3moe, gemma3, gpt-oss") !=
        std::string::npos);

  const std::string no_blocks = load_error(
      original, [](const auto&, auto&) { return false; },
      [](auto& writer) { writer.set("smollm3.block_count", std::uint32_t{9}); });
  CHECK(no_blocks.find("blk.8.") != std::string::npos);

  CHECK(load_error(original, [](const auto&, auto&) { return false; }).empty());
}

TEST_CASE("each architecture is one table entry: keys, NoPE rule, RoPE style, optional tensors") {
  const smol::Architecture& smollm3 = smol::find_architecture("smollm3");
  CHECK(smollm3.key(smollm3.keys.block_count) == "smollm3.block_count");
  CHECK(smollm3.key(smollm3.rope.freq_base_key) == "smollm3.rope.freq_base");
  CHECK(smollm3.rope.style == smol::RopeStyle::normal);
  CHECK(smollm3.nope.skips_rope(3));
  CHECK_FALSE(smollm3.nope.skips_rope(4));
  CHECK(smollm3.optional.tied_output);
  CHECK_FALSE(smollm3.optional.qkv_bias);

  const smol::Architecture& llama = smol::find_architecture("llama");
  CHECK(llama.key(llama.keys.head_count_kv) == "llama.attention.head_count_kv");
  CHECK(llama.nope.interval == 0);
  CHECK(llama.optional.qkv_bias);
  CHECK(llama.optional.rope_freqs);
  CHECK(smol::TensorNames::block(5, llama.tensors.attn_q, "bias") == "blk.5.attn_q.bias");

  CHECK(smol::rope_layout_of(smol::RopeStyle::normal) == smol::RopeLayout::adjacent_pairs);
  CHECK(smol::rope_layout_of(smol::RopeStyle::neox) == smol::RopeLayout::rotate_half);

  // Qwen2 and Qwen3: llama.cpp's key suffixes and tensor names under their own prefix,
  // rotate-half RoPE, no NoPE blocks; biases for Qwen2, per-head Q/K norms for Qwen3.
  const smol::Architecture& qwen2 = smol::find_architecture("qwen2");
  CHECK(qwen2.key(qwen2.keys.block_count) == "qwen2.block_count");
  CHECK(qwen2.key(qwen2.rope.freq_base_key) == "qwen2.rope.freq_base");
  CHECK(qwen2.rope.style == smol::RopeStyle::neox);
  CHECK(qwen2.nope.interval == 0);
  CHECK(qwen2.optional.qkv_bias);
  CHECK_FALSE(qwen2.optional.qk_norm);
  CHECK(qwen2.optional.tied_output);
  const smol::Architecture& qwen3 = smol::find_architecture("qwen3");
  CHECK(qwen3.key(qwen3.keys.key_length) == "qwen3.attention.key_length");
  CHECK(qwen3.rope.style == smol::RopeStyle::neox);
  CHECK(qwen3.optional.qk_norm);
  CHECK_FALSE(qwen3.optional.qkv_bias);
  CHECK(smol::TensorNames::block(2, qwen3.tensors.attn_k_norm) == "blk.2.attn_k_norm.weight");
  // What smol applies covers what every family declares: no file of a known family is
  // refused for an optional tensor any more.
  for (const smol::Architecture& architecture : smol::kArchitectures) {
    const smol::OptionalTensors& may = architecture.optional;
    const smol::OptionalTensors& applied = smol::kAppliedOptionalTensors;
    CHECK((!may.qkv_bias || applied.qkv_bias));
    CHECK((!may.qk_norm || applied.qk_norm));
    CHECK((!may.rope_freqs || applied.rope_freqs));
  }

  // Gemma 3: its block's mechanisms and its sliding window, as data.
  const smol::Architecture& gemma3 = smol::find_architecture("gemma3");
  CHECK(gemma3.block.scale_embeddings);
  CHECK(gemma3.block.post_norms);
  CHECK(gemma3.block.activation == smol::FfnActivation::gelu_tanh);
  CHECK(gemma3.optional.qk_norm);
  CHECK(gemma3.rope.style == smol::RopeStyle::neox);
  CHECK(gemma3.key(gemma3.sliding_window.window_key) == "gemma3.attention.sliding_window");
  CHECK(gemma3.sliding_window.local_freq_base == 10000.0f);
  CHECK(smol::TensorNames::block(0, gemma3.tensors.ffn_post_norm) == "blk.0.post_ffw_norm.weight");
  const std::vector<bool> local = gemma3.sliding_window.local_layers(13);
  std::vector<std::size_t> global;
  for (std::size_t il = 0; il < local.size(); ++il) {
    if (!local[il]) global.push_back(il);
  }
  CHECK(global == std::vector<std::size_t>{5, 11});  // llama.cpp: every sixth block
  CHECK_FALSE(llama.block.post_norms);
  CHECK(llama.sliding_window.pattern == 0);

  // BERT: an encoder, its epsilon LayerNorm's key.
  const smol::Architecture& bert = smol::find_architecture("bert");
  CHECK(bert.encoder.encoder);
  CHECK(bert.key(bert.keys.rms_epsilon) == "bert.attention.layer_norm_epsilon");
  CHECK(bert.encoder.learned_positions);
  CHECK_FALSE(llama.encoder.encoder);
  // nomic-bert: the encoder with RoPE and a gated feed-forward.
  const smol::Architecture& nomic = smol::find_architecture("nomic-bert");
  CHECK(nomic.encoder.encoder);
  CHECK_FALSE(nomic.encoder.learned_positions);
  CHECK(nomic.encoder.gated_ffn);
  CHECK(nomic.rope.style == smol::RopeStyle::neox);

  CHECK(smol::known_architectures() ==
        "llama, smollm3, qwen2, qwen3, qwen3moe, gemma3, gpt-oss, bert, nomic-bert");
  try {
    smol::find_architecture("gemma2", "model.gguf");
    FAIL("an unknown architecture must be refused");
  } catch (const smol::Error& error) {
    CHECK(std::string(error.what()) ==
          "model.gguf: architecture \"gemma2\" is not supported (smol runs llama, smollm3, qwen2, "
          "qwen3, qwen3moe, gemma3, gpt-oss, bert, nomic-bert)");
  }
}

TEST_CASE("a tensor the forward pass would leave out is refused at load, named") {
  const auto original = smol::gguf::GgufFile::open(kQ4Model);
  const auto f32_vector = [](std::size_t n) { return std::vector<std::byte>(n * sizeof(float)); };

  // Not part of the family at all: smollm3 declares no biases.
  const std::string unknown = load_error(original, [&](const auto& info, auto& writer) {
    if (info.name != "blk.0.attn_q.weight") return false;
    writer.add_tensor(std::string(info.name), info.type, smol::gguf::Shape(info.shape()),
                      info.span());
    writer.add_tensor_copy("blk.0.attn_q.bias", smol::GgmlType::F32, {256}, f32_vector(256));
    return true;
  });
  CHECK(unknown.find("blk.0.attn_q.bias") != std::string::npos);
  CHECK(unknown.find("not part of a smollm3 model") != std::string::npos);

  // Declared by the family (llama's optional QKV biases): one bias turns the mechanism
  // on for the whole model, and then every block must have all three, so a partial set
  // is named as missing. rope_freqs is applied, so it loads.
  const auto as_llama = [](smol::gguf::GgufWriter& writer, const smol::gguf::GgufFile& file) {
    writer.set("general.architecture", "llama");
    for (const auto& entry : file.metadata()) {
      if (entry.key.starts_with("smollm3.")) {
        writer.set("llama." + std::string(entry.key.substr(8)),
                   smol::gguf::Value::copy_of(entry.value));
      }
    }
  };
  const std::string bias = load_error(
      original,
      [&](const auto& info, auto& writer) {
        if (info.name != "blk.3.attn_k.weight") return false;
        writer.add_tensor(std::string(info.name), info.type, smol::gguf::Shape(info.shape()),
                          info.span());
        writer.add_tensor_copy("blk.3.attn_k.bias", smol::GgmlType::F32, {64}, f32_vector(64));
        return true;
      },
      [&](auto& writer) { as_llama(writer, original); });
  CHECK(bias.find("blk.0.attn_q.bias is missing") != std::string::npos);

  // All of them: a llama file with QKV biases loads.
  const std::string biases = load_error(
      original,
      [&](const auto& info, auto& writer) {
        if (!info.name.ends_with("attn_k.weight")) return false;
        writer.add_tensor(std::string(info.name), info.type, smol::gguf::Shape(info.shape()),
                          info.span());
        const std::string block(info.name.substr(0, info.name.size() - 13));  // "blk.N."
        writer.add_tensor_copy(block + "attn_q.bias", smol::GgmlType::F32, {256}, f32_vector(256));
        writer.add_tensor_copy(block + "attn_k.bias", smol::GgmlType::F32, {64}, f32_vector(64));
        writer.add_tensor_copy(block + "attn_v.bias", smol::GgmlType::F32, {64}, f32_vector(64));
        return true;
      },
      [&](auto& writer) { as_llama(writer, original); });
  CHECK(biases.empty());

  const std::string rope_freqs = load_error(
      original,
      [&](const auto& info, auto& writer) {
        if (info.name != "output_norm.weight") return false;
        writer.add_tensor(std::string(info.name), info.type, smol::gguf::Shape(info.shape()),
                          info.span());
        writer.add_tensor_copy("rope_freqs.weight", smol::GgmlType::F32, {32}, f32_vector(32));
        return true;
      },
      [&](auto& writer) { as_llama(writer, original); });
  CHECK(rope_freqs.empty());  // applied (ops/rope.hpp): see the RopeTable case below

  // The same file as llama without the extra tensor loads: only the tensor was wrong.
  CHECK(load_error(
            original, [](const auto&, auto&) { return false; },
            [&](auto& writer) { as_llama(writer, original); })
            .empty());
}

namespace {

// The fixture's config with `edit_metadata` applied to its keys.
smol::ModelConfig edited_config(const std::function<void(smol::gguf::GgufWriter&)>& edit_metadata) {
  const auto original = smol::gguf::GgufFile::open(kQ4Model);
  smol::gguf::GgufWriter writer;
  for (const auto& entry : original.metadata()) {
    writer.set(entry.key, smol::gguf::Value::copy_of(entry.value));
  }
  edit_metadata(writer);
  for (const auto& info : original.tensors()) {
    writer.add_tensor(std::string(info.name), info.type, smol::gguf::Shape(info.shape()),
                      info.span());
  }
  return smol::ModelConfig::from_gguf(
      smol::gguf::GgufFile::from_bytes(writer.to_bytes(), "edited.gguf"));
}

}  // namespace

TEST_CASE("RoPE scaling comes from the file's rope.scaling keys, or the overrides") {
  const smol::ModelConfig plain = edited_config([](auto&) {});
  CHECK(plain.rope_scaling.type == smol::RopeScalingType::none);
  CHECK(plain.max_context() == plain.n_ctx_train);

  const smol::ModelConfig yarn = edited_config([](smol::gguf::GgufWriter& w) {
    w.set("smollm3.rope.scaling.type", "yarn");
    w.set("smollm3.rope.scaling.factor", 2.0f);
    w.set("smollm3.rope.scaling.original_context_length", std::uint32_t{1024});
    w.set("smollm3.rope.scaling.yarn_beta_fast", 16.0f);
  });
  CHECK(yarn.rope_scaling.type == smol::RopeScalingType::yarn);
  CHECK(yarn.rope_scaling.factor == 2.0f);
  CHECK(yarn.rope_scaling.original_context == 1024);
  CHECK(yarn.rope_scaling.beta_fast == 16.0f);
  CHECK(yarn.rope_scaling.beta_slow == 1.0f);
  CHECK(yarn.max_context() == std::max<std::size_t>(plain.n_ctx_train, 2048));

  const smol::ModelConfig linear =
      edited_config([](smol::gguf::GgufWriter& w) { w.set("smollm3.rope.scale_linear", 4.0f); });
  CHECK(linear.rope_scaling.type == smol::RopeScalingType::linear);
  CHECK(linear.max_context() == 4 * plain.n_ctx_train);

  CHECK_THROWS_WITH_AS(edited_config([](smol::gguf::GgufWriter& w) {
                         w.set("smollm3.rope.scaling.type", "longrope");
                       }),
                       doctest::Contains("\"longrope\" is not supported"), smol::Error);

  smol::ModelConfig overridden = plain;
  smol::apply_rope_overrides(overridden, {.type = smol::RopeScalingType::yarn, .factor = 2.0f});
  CHECK(overridden.rope_scaling.original_context == plain.n_ctx_train);
  CHECK(overridden.max_context() == 2 * plain.n_ctx_train);
  smol::ModelConfig no_factor = plain;
  CHECK_THROWS_WITH_AS(smol::apply_rope_overrides(no_factor, {.type = smol::RopeScalingType::yarn}),
                       doctest::Contains("--rope-scale"), smol::Error);
}

TEST_CASE("a context past the trained one is refused unless RoPE scaling stretches it") {
  smol::ModelConfig config = edited_config([](auto&) {});
  const std::size_t trained = config.n_ctx_train;
  CHECK_NOTHROW(smol::check_context_fits(config, trained));
  CHECK_THROWS_WITH_AS(smol::check_context_fits(config, 2 * trained),
                       doctest::Contains("--rope-scaling yarn --rope-scale 2"), smol::Error);
  smol::apply_rope_overrides(config, {.type = smol::RopeScalingType::yarn, .factor = 2.0f});
  CHECK_NOTHROW(smol::check_context_fits(config, 2 * trained));
  CHECK_THROWS_WITH_AS(smol::check_context_fits(config, 2 * trained + 1),
                       doctest::Contains("yarn scaling by 2"), smol::Error);
}

TEST_CASE("rope_freqs divisors and linear scaling turn the RoPE table the same way") {
  constexpr std::size_t kDims = 64;
  const smol::RopeTable divided(
      kDims, smol::RopeFrequencies{10000.0f, {}, std::vector<float>(kDims / 2, 2.0f)});
  const smol::RopeTable linear(
      kDims,
      smol::RopeFrequencies{10000.0f, {.type = smol::RopeScalingType::linear, .factor = 2.0f}, {}});
  const smol::RopeTable plain(kDims, 10000.0f);
  for (std::size_t i = 0; i < kDims / 2; ++i) {
    CHECK(divided.frequency(i) == linear.frequency(i));
    CHECK(divided.frequency(i) == plain.frequency(i) / 2);
  }
  CHECK(linear.magnitude() == 1.0f);
  const smol::RopeTable yarn(
      kDims, smol::RopeFrequencies{
                 10000.0f,
                 {.type = smol::RopeScalingType::yarn, .factor = 4.0f, .original_context = 4096},
                 {}});
  CHECK(yarn.magnitude() == doctest::Approx(1.0 + 0.1 * std::log(4.0)));
  // The fastest pairs keep their frequency (extrapolation), the slowest are divided.
  CHECK(yarn.frequency(0) == plain.frequency(0));
  CHECK(yarn.frequency(kDims / 2 - 1) == doctest::Approx(plain.frequency(kDims / 2 - 1) / 4));
}

namespace {

// A synthetic file of `preset`, with `edit` applied to its tensors as load_error does.
std::string synthetic_load_error(const char* preset, const TensorEdit& edit) {
  smol::SyntheticSpec spec = smol::synthetic_preset(preset);
  spec.layers = 2;
  spec.vocab = 512;
  spec.weights = smol::SyntheticWeights::q8_0;
  const auto file = smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(),
                                                     std::string(preset) + ".gguf");
  return load_error(file, edit);
}

}  // namespace

TEST_CASE("Qwen2 and Qwen3 files: their mechanisms on, their tensors required and shaped") {
  smol::SyntheticSpec spec = smol::synthetic_preset("qwen3-tiny");
  spec.layers = 2;
  spec.vocab = 512;
  auto file =
      smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(), "qwen3.gguf");
  CHECK(file.get<std::string>("tokenizer.ggml.pre") == "qwen2");
  auto config = smol::ModelConfig::from_gguf(file);
  CHECK(config.architecture == "qwen3");
  CHECK(config.head_dim == 128);  // attention.key_length, wider than 256 / 4
  CHECK(config.q_dim() == 512);
  CHECK(config.n_rot == 128);
  CHECK(config.rope_layout == smol::RopeLayout::rotate_half);
  CHECK(config.qk_norm);
  CHECK_FALSE(config.attention_biases);
  const smol::Model qwen3(std::move(file), std::move(config));
  CHECK(qwen3.weights().layers[1].attn_k_norm.size() == 128);
  CHECK(qwen3.weights().layers[1].attn_q_bias.empty());

  spec = smol::synthetic_preset("qwen2-tiny");
  spec.layers = 2;
  spec.vocab = 512;
  file =
      smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(), "qwen2.gguf");
  config = smol::ModelConfig::from_gguf(file);
  CHECK(config.attention_biases);
  CHECK_FALSE(config.qk_norm);
  CHECK(config.head_dim == 64);
  const smol::Model qwen2(std::move(file), std::move(config));
  CHECK(qwen2.weights().layers[0].attn_q_bias.size() == 256);
  CHECK(qwen2.weights().layers[0].attn_v_bias.size() == 128);  // 2 KV heads of 64

  // A block without its K norm, a bias of the wrong length: refused, named.
  const std::string no_norm = synthetic_load_error("qwen3-tiny", [](const auto& info, auto&) {
    return info.name == "blk.1.attn_k_norm.weight";
  });
  CHECK(no_norm.find("blk.1.attn_k_norm.weight is missing") != std::string::npos);
  const std::string short_bias =
      synthetic_load_error("qwen2-tiny", [](const auto& info, auto& writer) {
        if (info.name != "blk.0.attn_k.bias") return false;
        writer.add_tensor_copy("blk.0.attn_k.bias", smol::GgmlType::F32, {64},
                               std::vector<std::byte>(64 * sizeof(float)));
        return true;
      });
  CHECK(short_bias.find("blk.0.attn_k.bias has shape [64], expected [128]") != std::string::npos);
  // Qwen3 declares no biases: one is not part of the model.
  const std::string foreign =
      synthetic_load_error("qwen3-tiny", [](const auto& info, auto& writer) {
        if (info.name != "blk.0.attn_v.weight") return false;
        writer.add_tensor(std::string(info.name), info.type, smol::gguf::Shape(info.shape()),
                          info.span());
        writer.add_tensor_copy("blk.0.attn_v.bias", smol::GgmlType::F32, {256},
                               std::vector<std::byte>(256 * sizeof(float)));
        return true;
      });
  CHECK(foreign.find("blk.0.attn_v.bias is not part of a qwen3 model") != std::string::npos);
}

TEST_CASE("a Qwen3-MoE file: experts per block, their views, and a mixture refused elsewhere") {
  smol::SyntheticSpec spec = smol::synthetic_preset("qwen3moe-tiny");
  CHECK(smol::synthetic_preset("qwen3-moe-tiny").arch == "qwen3moe");
  spec.layers = 2;
  spec.vocab = 512;
  spec.weights = smol::SyntheticWeights::q8_0;
  auto file = smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(),
                                               "qwen3moe.gguf");
  auto config = smol::ModelConfig::from_gguf(file);
  CHECK(config.architecture == "qwen3moe");
  CHECK(config.has_experts());
  CHECK(config.n_expert == 16);
  CHECK(config.n_expert_used == 4);
  CHECK(config.n_ff_expert == 256);
  CHECK(config.ffn_width() == 256);
  CHECK(config.normalize_chosen_experts);
  CHECK(config.qk_norm);
  CHECK(config.rope_layout == smol::RopeLayout::rotate_half);
  const smol::Model moe(std::move(file), std::move(config));
  const smol::LayerWeights& layer = moe.weights().layers[1];
  CHECK(layer.ffn_gate.rows == 0);  // no dense feed-forward
  CHECK(layer.ffn_gate_inp.type == smol::GgmlType::F32);
  CHECK(layer.ffn_gate_inp.rows == 16);
  REQUIRE(layer.ffn_gate_exps.size() == 16);
  REQUIRE(layer.ffn_down_exps.size() == 16);
  // Expert e's rows follow expert e - 1's in the file's one tensor.
  const smol::WeightMatrix& first = layer.ffn_up_exps[0];
  CHECK(first.rows == 256);
  CHECK(first.cols == 256);
  CHECK(layer.ffn_up_exps[5].data == first.data + 5 * 256 * first.row_bytes);
  CHECK(layer.ffn_down_exps[15].cols == 256);

  // A missing or mis-shaped expert tensor is named.
  const std::string missing = synthetic_load_error("qwen3moe-tiny", [](const auto& info, auto&) {
    return info.name == "blk.1.ffn_up_exps.weight";
  });
  CHECK(missing.find("blk.1.ffn_up_exps.weight is missing") != std::string::npos);
  const std::string fewer =
      synthetic_load_error("qwen3moe-tiny", [](const auto& info, auto& writer) {
        if (info.name != "blk.0.ffn_gate_exps.weight") return false;
        writer.add_tensor_copy("blk.0.ffn_gate_exps.weight", smol::GgmlType::F32, {256, 256, 8},
                               std::vector<std::byte>(256 * 256 * 8 * sizeof(float)));
        return true;
      });
  CHECK(fewer.find("blk.0.ffn_gate_exps.weight has shape [256, 256, 8], expected [256, 256, 16]") !=
        std::string::npos);

  // More experts used than there are; a llama file that declares experts (Mixtral's).
  const auto with_key = [](const char* preset, const std::string& key, std::uint32_t value) {
    smol::SyntheticSpec s = smol::synthetic_preset(preset);
    s.layers = 1;
    s.vocab = 512;
    smol::gguf::GgufWriter writer = smol::make_synthetic_writer(s);
    writer.set(key, value);
    const auto edited = smol::gguf::GgufFile::from_bytes(writer.to_bytes(), "edited.gguf");
    try {
      (void)smol::ModelConfig::from_gguf(edited);
    } catch (const smol::Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  CHECK(with_key("qwen3moe-tiny", "qwen3moe.expert_used_count", 17) ==
        "edited.gguf: qwen3moe.expert_used_count 17 exceeds the 16 experts of "
        "qwen3moe.expert_count");
  CHECK(with_key("qwen3moe-tiny", "qwen3moe.expert_count", 0) ==
        "edited.gguf: metadata key qwen3moe.expert_count is 0");
  CHECK(with_key("tiny", "smollm3.expert_count", 8) ==
        "edited.gguf: smollm3.expert_count is 8: this smollm3 file is a mixture of experts, "
        "which smol runs only for qwen3moe, gpt-oss");
}

TEST_CASE("a GPT-OSS file: biases, sinks, windowed even blocks under the one YaRN RoPE, experts") {
  smol::SyntheticSpec spec = smol::synthetic_preset("gpt-oss-tiny");
  spec.layers = 3;
  spec.vocab = 512;
  spec.weights = smol::SyntheticWeights::mxfp4_moe;
  auto file =
      smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(), "oss.gguf");
  auto config = smol::ModelConfig::from_gguf(file);
  CHECK(config.architecture == "gpt-oss");
  CHECK(config.head_dim == 64);
  CHECK(config.q_dim() == 512);  // 8 heads of 64 over a hidden size of 256
  CHECK(config.rope_layout == smol::RopeLayout::rotate_half);
  CHECK(config.attention_biases);
  CHECK(config.output_bias);
  CHECK(config.attention_sinks);
  CHECK(config.expert_biases);
  CHECK(config.n_expert == 16);
  CHECK(config.n_expert_used == 4);
  CHECK(config.expert_weighting == smol::ExpertWeighting::softmax_chosen);
  CHECK_FALSE(config.normalize_chosen_experts);
  CHECK(config.ffn_activation == smol::FfnActivation::swiglu_oai);
  // Blocks 0 and 2 see the last 16 positions, block 1 all; every block turns by the
  // file's YaRN-scaled RoPE.
  CHECK(config.sliding_window == 16);
  CHECK(config.attention_window(0) == 16);
  CHECK(config.attention_window(1) == 0);
  CHECK(config.attention_window(2) == 16);
  CHECK_FALSE(config.uses_local_rope(0));
  CHECK(config.rope_scaling.type == smol::RopeScalingType::yarn);
  CHECK(config.rope_scaling.factor == 32.0f);
  CHECK(config.rope_scaling.original_context == 4096);
  const smol::Model oss(std::move(file), std::move(config));
  const smol::LayerWeights& layer = oss.weights().layers[2];
  CHECK(layer.attn_sinks.size() == 8);
  CHECK(layer.attn_q_bias.size() == 512);
  CHECK(layer.attn_output_bias.size() == 256);
  CHECK(layer.ffn_norm.size() == 256);  // blk.N.post_attention_norm
  CHECK(layer.ffn_gate_inp_bias.size() == 16);
  CHECK(layer.ffn_gate_exps_bias.size() == 16 * 256);
  CHECK(layer.ffn_down_exps_bias.size() == 16 * 256);
  CHECK(layer.ffn_up_exps[3].type == smol::GgmlType::MXFP4);

  // One block without its sinks, or an expert bias of the wrong shape: named.
  const std::string missing = synthetic_load_error("gpt-oss-tiny", [](const auto& info, auto&) {
    return info.name == "blk.1.attn_sinks.weight";
  });
  CHECK(missing.find("blk.1.attn_sinks.weight is missing") != std::string::npos);
  const std::string wrong =
      synthetic_load_error("gpt-oss-tiny", [](const auto& info, auto& writer) {
        if (info.name != "blk.0.ffn_up_exps.bias") return false;
        writer.add_tensor_copy("blk.0.ffn_up_exps.bias", smol::GgmlType::F32, {256, 8},
                               std::vector<std::byte>(256 * 8 * sizeof(float)));
        return true;
      });
  CHECK(wrong.find("blk.0.ffn_up_exps.bias has shape [256, 8], expected [256, 16]") !=
        std::string::npos);
}

TEST_CASE("a Gemma 3 file: scaled embeddings, post norms, GeGLU, a sliding window") {
  smol::SyntheticSpec spec = smol::synthetic_preset("gemma3-tiny");
  spec.layers = 7;
  spec.vocab = 512;
  auto file =
      smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(), "gemma3.gguf");
  auto config = smol::ModelConfig::from_gguf(file);
  CHECK(config.embedding_scale == std::sqrt(256.0f));
  CHECK(config.post_norms);
  CHECK(config.ffn_activation == smol::FfnActivation::gelu_tanh);
  CHECK(config.qk_norm);
  CHECK(config.sliding_window == 16);  // the file's gemma3.attention.sliding_window
  CHECK(config.local_layers == std::vector<bool>{true, true, true, true, true, false, true});
  CHECK(config.attention_window(0) == 16);
  CHECK(config.attention_window(5) == 0);  // global
  CHECK(config.local_rope_frequencies().base == 10000.0f);
  CHECK(config.rope_base == 1e6f);
  CHECK(config.attention_scale_dim == 0);  // 1/sqrt(head_dim) but in a 62-block file
  CHECK(config.attention_scale() == 1.0f / std::sqrt(128.0f));
  const smol::Model model(std::move(file), std::move(config));
  CHECK(model.weights().layers[6].attn_post_norm.size() == 256);
  CHECK(model.weights().layers[6].ffn_post_norm.size() == 256);

  // Without the window key every block is global; a missing post norm is named.
  const auto plain = smol::gguf::GgufFile::from_bytes(
      [&] {
        smol::SyntheticSpec unwindowed = spec;
        unwindowed.sliding_window = 0;
        return smol::make_synthetic_writer(unwindowed).to_bytes();
      }(),
      "gemma3-global.gguf");
  CHECK(smol::ModelConfig::from_gguf(plain).attention_window(0) == 0);
  const std::string no_post_norm = synthetic_load_error("gemma3-tiny", [](const auto& info, auto&) {
    return info.name == "blk.1.post_ffw_norm.weight";
  });
  CHECK(no_post_norm.find("blk.1.post_ffw_norm.weight is missing") != std::string::npos);
}

// Gemma 3 27B's attention scale: 1/sqrt(n_embd / n_head) in a file of 62 blocks (the
// entry's data, as llama.cpp tells the 27B), 1/sqrt(head_dim) otherwise, and in no other
// family. The tiny shape's n_embd / n_head is 64, its head_dim 128.
TEST_CASE("Gemma 3 27B's attention scale: n_embd / n_head at 62 blocks") {
  CHECK(smol::find_architecture("gemma3").block.embd_per_head_scale_blocks == 62);
  CHECK(smol::find_architecture("qwen3").block.embd_per_head_scale_blocks == 0);
  const auto config_of = [](const char* preset, std::size_t layers) {
    smol::SyntheticSpec spec = smol::synthetic_preset(preset);
    spec.layers = layers;
    spec.vocab = 512;
    spec.fast = true;
    return smol::ModelConfig::from_gguf(smol::gguf::GgufFile::from_bytes(
        smol::make_synthetic_writer(spec).to_bytes(), std::string(preset) + ".gguf"));
  };
  const smol::ModelConfig big = config_of("gemma3-tiny", 62);
  CHECK(big.head_dim == 128);
  CHECK(big.attention_scale_dim == 64);
  CHECK(big.attention_scale() == 1.0f / std::sqrt(64.0f));
  CHECK(config_of("gemma3-tiny", 61).attention_scale() == 1.0f / std::sqrt(128.0f));
  CHECK(config_of("qwen3-tiny", 62).attention_scale_dim == 0);
}

TEST_CASE("a reranker's head: its rows are the labels; a label count that differs is refused") {
  smol::SyntheticSpec spec = smol::synthetic_preset("qwen3-reranker-tiny");
  spec.layers = 1;
  spec.vocab = 512;
  {
    const auto file = smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(),
                                                       "reranker.gguf");
    const smol::ModelConfig config = smol::ModelConfig::from_gguf(file);
    CHECK(config.n_labels == 2);
    CHECK(config.rank_softmax);  // Qwen3's entry: llama.cpp softmaxes its head
  }
  auto writer = smol::make_synthetic_writer(spec);
  writer.set("qwen3.classifier.output_labels",
             smol::gguf::Value::strings(std::vector<std::string>{"yes", "no", "maybe"}));
  const auto file = smol::gguf::GgufFile::from_bytes(writer.to_bytes(), "three-labels.gguf");
  CHECK_THROWS_WITH_AS(smol::ModelConfig::from_gguf(file),
                       doctest::Contains("names 3 labels, but cls.output.weight has 2 rows"),
                       smol::Error);
}

}  // namespace test_model_config
