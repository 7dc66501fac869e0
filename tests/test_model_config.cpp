// ModelConfig from metadata and the tensor checks of ModelWeights: the NoPE schedule,
// and one clear error naming the tensor for each way a file can be wrong.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/gguf/writer.hpp"
#include "smol/model/architecture.hpp"
#include "smol/model/config.hpp"
#include "smol/model/model.hpp"

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
    std::vector<std::byte> data(768 * 84);
    writer.add_tensor_copy("blk.0.ffn_up.weight", smol::GgmlType::Q2_K, {256, 768}, data);
    return true;
  });
  CHECK(unsupported.find("blk.0.ffn_up.weight") != std::string::npos);
  CHECK(unsupported.find("Q2_K") != std::string::npos);

  const std::string no_embeddings = load_error(
      original, [](const auto& info, auto&) { return info.name == "token_embd.weight"; });
  CHECK(no_embeddings.find("token_embd.weight") != std::string::npos);

  const std::string wrong_arch = load_error(
      original, [](const auto&, auto&) { return false; },
      [](auto& writer) { writer.set("general.architecture", "gpt2"); });
  CHECK(wrong_arch.find("gpt2") != std::string::npos);
  CHECK(wrong_arch.find("llama, smollm3") != std::string::npos);

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

  CHECK(smol::known_architectures() == "llama, smollm3");
  try {
    smol::find_architecture("qwen3", "model.gguf");
    FAIL("an unknown architecture must be refused");
  } catch (const smol::Error& error) {
    CHECK(std::string(error.what()) ==
          "model.gguf: architecture \"qwen3\" is not supported (smol runs llama, smollm3)");
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

  // Declared by the family (llama's optional QKV biases and rope_freqs), but not applied
  // by the forward pass yet: the message says which kind.
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
  CHECK(bias.find("blk.3.attn_k.bias") != std::string::npos);
  CHECK(bias.find("QKV biases") != std::string::npos);
  CHECK(bias.find("does not apply") != std::string::npos);

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
  CHECK(rope_freqs.find("rope_freqs.weight") != std::string::npos);
  CHECK(rope_freqs.find("RoPE frequency factors") != std::string::npos);

  // The same file as llama without the extra tensor loads: only the tensor was wrong.
  CHECK(load_error(
            original, [](const auto&, auto&) { return false; },
            [&](auto& writer) { as_llama(writer, original); })
            .empty());
}
