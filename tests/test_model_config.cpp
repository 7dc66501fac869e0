// ModelConfig from metadata and the tensor checks of ModelWeights: the NoPE schedule,
// and one clear error naming the tensor for each way a file can be wrong.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/gguf/writer.hpp"
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

  const std::string no_blocks = load_error(
      original, [](const auto&, auto&) { return false; },
      [](auto& writer) { writer.set("smollm3.block_count", std::uint32_t{9}); });
  CHECK(no_blocks.find("blk.8.") != std::string::npos);

  CHECK(load_error(original, [](const auto&, auto&) { return false; }).empty());
}
