// Synthetic models (smol/testing/synthetic.hpp): layout, type mix, metadata, weight
// statistics and tokenizer, checked in memory and against the tiny fixture.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/quant/dequantize.hpp"
#include "smol/testing/synthetic.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_quant_synthetic {

namespace {

smol::gguf::GgufFile write_in_memory(const smol::SyntheticSpec& spec) {
  return smol::gguf::GgufFile::from_bytes(smol::make_synthetic_writer(spec).to_bytes(), spec.name);
}

std::vector<float> dequantized(const smol::gguf::TensorInfo& tensor) {
  std::vector<float> values(tensor.elements());
  smol::dequantize_row(tensor.type, tensor.data, values.data(), values.size());
  return values;
}

struct Moments {
  double mean = 0;
  double stddev = 0;
};

Moments moments(const std::vector<float>& values) {
  double sum = 0;
  double sum2 = 0;
  for (float v : values) {
    sum += v;
    sum2 += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(values.size());
  return {sum / n, std::sqrt(sum2 / n - (sum / n) * (sum / n))};
}

const smol::gguf::GgufFile& fixture() {
  static const auto file =
      smol::gguf::GgufFile::open(SMOL_FIXTURES_DIR "/tiny-smollm3-a.q4_k_m.gguf");
  return file;
}

}  // namespace

TEST_CASE("Q4_K_M rule: Q6_K blocks for attn_v and ffn_down") {
  const auto q6k_layers = [](std::size_t n) {
    std::vector<std::size_t> layers;
    for (std::size_t il = 0; il < n; ++il)
      if (smol::uses_more_bits(il, n)) layers.push_back(il);
    return layers;
  };
  // DESIGN.md: layers 0-3, 6, 9, ..., 27, 30-35 of SmolLM3-3B; the fixture: 0, 3, 6, 7.
  CHECK(q6k_layers(36) ==
        std::vector<std::size_t>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31, 32, 33, 34, 35});
  CHECK(q6k_layers(8) == std::vector<std::size_t>{0, 3, 6, 7});
}

TEST_CASE("The smollm3-3b preset has the real file's 326 tensors and type mix") {
  const auto spec = smol::synthetic_preset("smollm3-3b");
  const auto tensors = smol::plan_synthetic_tensors(spec);
  std::map<smol::GgmlType, int> count;
  std::uint64_t bytes = 0;
  for (const auto& tensor : tensors) {
    ++count[tensor.type];
    bytes += smol::ggml_row_bytes(tensor.type, tensor.elements());
  }
  CHECK(tensors.size() == 326);
  CHECK(count[smol::GgmlType::Q6_K] == 37);
  CHECK(count[smol::GgmlType::Q4_K] == 216);
  CHECK(count[smol::GgmlType::F32] == 73);
  MESSAGE("smollm3-3b tensor data: ", bytes, " bytes");
  CHECK(bytes > 1'780'000'000u);
  CHECK(bytes < 1'950'000'000u);  // 1.78 GiB, like the real file
  CHECK(tensors[0].name == "token_embd.weight");
  CHECK(tensors[0].dims == std::vector<std::uint64_t>{2048, 128256});
  CHECK(tensors[0].type == smol::GgmlType::Q6_K);
}

TEST_CASE("The tiny q4_k_m model has the fixture's tensors, shapes, types and keys") {
  const auto file = write_in_memory(smol::synthetic_preset("tiny"));
  CHECK(file.tensors().size() == fixture().tensors().size());
  for (const auto& expected : fixture().tensors()) {
    CAPTURE(expected.name);
    const auto* tensor = file.find_tensor(expected.name);
    REQUIRE(tensor != nullptr);
    CHECK(tensor->dims == expected.dims);
    CHECK(tensor->n_dims == expected.n_dims);
    CHECK(tensor->type == expected.type);
  }
  for (const auto& entry : fixture().metadata()) {
    CAPTURE(entry.key);
    const auto* ours = file.find(entry.key);
    REQUIRE(ours != nullptr);
    CHECK(ours->value.type() == entry.value.type());
  }
  CHECK(file.get<std::string>("general.architecture") == "smollm3");
  CHECK(file.get<std::uint32_t>("general.file_type") == 15);
  CHECK(file.get<std::uint32_t>("smollm3.block_count") == 8);
  CHECK(file.get<std::uint32_t>("smollm3.attention.head_count_kv") == 1);
  CHECK(file.get<float>("smollm3.rope.freq_base") == 5e6f);
  CHECK(file.get<std::string>("tokenizer.chat_template") ==
        fixture().get<std::string>("tokenizer.chat_template"));
  CHECK(file.get<std::uint32_t>("tokenizer.ggml.bos_token_id") == 992);
  CHECK(file.get<std::uint32_t>("tokenizer.ggml.eos_token_id") == 997);
  CHECK_FALSE(file.get<bool>("tokenizer.ggml.add_bos_token"));
}

TEST_CASE("Weights: the Q4_K_M file is the F32 file quantized, with the intended statistics") {
  auto spec = smol::synthetic_preset("tiny");
  spec.seed = 7;
  const auto quantized = write_in_memory(spec);
  spec.weights = smol::SyntheticWeights::f32;
  const auto exact = write_in_memory(spec);

  for (const auto& tensor : exact.tensors()) {
    CAPTURE(tensor.name);
    const auto values = dequantized(tensor);
    const auto approx = dequantized(quantized.tensor(tensor.name));
    double err = 0;
    double norm = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      err += (values[i] - approx[i]) * static_cast<double>(values[i] - approx[i]);
      norm += static_cast<double>(values[i]) * values[i];
    }
    const double relative = std::sqrt(err / norm);
    const auto type = quantized.tensor(tensor.name).type;
    CHECK(relative <= (type == smol::GgmlType::Q4_K   ? 0.08
                       : type == smol::GgmlType::Q6_K ? 0.022
                                                      : 0.0));

    const std::string name(tensor.name);
    const auto m = moments(values);
    const double fan_in = static_cast<double>(tensor.dims[0]);
    if (name == "token_embd.weight") {
      CHECK(m.stddev == doctest::Approx(0.02).epsilon(0.02));
    } else if (name.ends_with("attn_q.weight") || name.ends_with("attn_k.weight")) {
      CHECK(m.stddev == doctest::Approx(1.5 / std::sqrt(fan_in)).epsilon(0.05));
    } else if (name.ends_with("ffn_down.weight") || name.ends_with("attn_output.weight")) {
      CHECK(m.stddev == doctest::Approx(2 / std::sqrt(fan_in)).epsilon(0.05));
    } else if (name == "output_norm.weight") {
      CHECK(m.mean == doctest::Approx(3 / (0.02 * 16)).epsilon(0.05));
    } else if (name.ends_with("norm.weight")) {
      CHECK(m.mean == doctest::Approx(1).epsilon(0.05));
      CHECK(m.stddev == doctest::Approx(0.1).epsilon(0.3));
    } else {
      CHECK(m.stddev == doctest::Approx(1 / std::sqrt(fan_in)).epsilon(0.05));
    }
  }
}

TEST_CASE("Fast mode writes valid random blocks of the same scale") {
  // Q4_K_M: Q4_K and Q6_K blocks; IQ4_XS: IQ4_XS, Q5_K (attn_v, four query heads a KV
  // head) and Q6_K; Q4_0 and Q4_1: theirs and Q6_K; Q5_K_M: Q5_K and Q6_K; IQ4_NL as
  // IQ4_XS; Q3_K_M: Q3_K, Q4_K, Q5_K and Q6_K; Q2_K: Q2_K, Q3_K, Q4_K and Q6_K; Q5_0 and
  // Q5_1 as Q4_0 and Q4_1.
  for (const auto weights : {smol::SyntheticWeights::q4_k_m, smol::SyntheticWeights::iq4_xs,
                             smol::SyntheticWeights::q4_0, smol::SyntheticWeights::q4_1,
                             smol::SyntheticWeights::q5_0, smol::SyntheticWeights::q5_1,
                             smol::SyntheticWeights::q5_k_m, smol::SyntheticWeights::iq4_nl,
                             smol::SyntheticWeights::q3_k_m, smol::SyntheticWeights::q2_k}) {
    auto spec = smol::synthetic_preset("tiny");
    spec.weights = weights;
    // Two layers are values enough for the IQ4 mixes' moments (their quantizers' search
    // is the slow part under the sanitizers: eight layers took 19 s there).
    const bool iq4 =
        weights == smol::SyntheticWeights::iq4_xs || weights == smol::SyntheticWeights::iq4_nl;
    if (iq4) spec.layers = 2;
    spec.fast = true;
    const auto fast = write_in_memory(spec);
    spec.fast = false;
    const auto slow = write_in_memory(spec);
    for (const auto& tensor : fast.tensors()) {
      CAPTURE(tensor.name);
      CAPTURE(smol::ggml_type_name(tensor.type));
      const auto values = dequantized(tensor);
      std::size_t finite = 0;
      for (float v : values) finite += std::isfinite(v);
      CHECK(finite == values.size());
      const auto m = moments(values);
      const auto reference = moments(dequantized(slow.tensor(tensor.name)));
      CHECK(m.stddev == doctest::Approx(reference.stddev).epsilon(0.15));
      CHECK(std::fabs(m.mean - reference.mean) < 0.1 * reference.stddev + 0.05 * reference.mean);
    }
    if (weights == smol::SyntheticWeights::iq4_xs) {
      CHECK(fast.tensor("blk.0.attn_q.weight").type == smol::GgmlType::IQ4_XS);
      CHECK(fast.tensor("blk.0.attn_v.weight").type == smol::GgmlType::Q5_K);
      CHECK(fast.tensor("token_embd.weight").type == smol::GgmlType::Q6_K);  // tied: the LM head
      CHECK(fast.get<std::uint32_t>("general.file_type") == 30);  // LLAMA_FTYPE_MOSTLY_IQ4_XS
    }
    if (weights == smol::SyntheticWeights::iq4_nl) {
      CHECK(fast.tensor("blk.0.attn_q.weight").type == smol::GgmlType::IQ4_NL);
      CHECK(fast.tensor("blk.1.ffn_down.weight").type == smol::GgmlType::IQ4_NL);
      CHECK(fast.tensor("blk.0.attn_v.weight").type == smol::GgmlType::Q5_K);
      CHECK(fast.tensor("token_embd.weight").type == smol::GgmlType::Q6_K);
      CHECK(fast.get<std::uint32_t>("general.file_type") == 25);  // LLAMA_FTYPE_MOSTLY_IQ4_NL
    }
    if (weights == smol::SyntheticWeights::q3_k_m) {  // the tiny preset: 8 layers
      CHECK(fast.tensor("blk.0.attn_q.weight").type == smol::GgmlType::Q3_K);
      CHECK(fast.tensor("blk.0.ffn_up.weight").type == smol::GgmlType::Q3_K);
      CHECK(fast.tensor("blk.1.attn_v.weight").type == smol::GgmlType::Q5_K);
      CHECK(fast.tensor("blk.2.attn_v.weight").type == smol::GgmlType::Q4_K);
      CHECK(fast.tensor("blk.0.attn_output.weight").type == smol::GgmlType::Q4_K);
      CHECK(fast.tensor("blk.0.ffn_down.weight").type == smol::GgmlType::Q4_K);  // 8 / 16 = 0
      CHECK(fast.tensor("token_embd.weight").type == smol::GgmlType::Q6_K);
      CHECK(fast.get<std::uint32_t>("general.file_type") == 12);  // LLAMA_FTYPE_MOSTLY_Q3_K_M
    }
    if (weights == smol::SyntheticWeights::q2_k) {
      CHECK(fast.tensor("blk.0.attn_q.weight").type == smol::GgmlType::Q2_K);
      CHECK(fast.tensor("blk.0.ffn_gate.weight").type == smol::GgmlType::Q2_K);
      CHECK(fast.tensor("blk.0.attn_v.weight").type == smol::GgmlType::Q4_K);  // 4 over 1
      CHECK(fast.tensor("blk.0.attn_output.weight").type == smol::GgmlType::Q3_K);
      CHECK(fast.tensor("blk.0.ffn_down.weight").type == smol::GgmlType::Q3_K);
      CHECK(fast.tensor("token_embd.weight").type == smol::GgmlType::Q6_K);
      CHECK(fast.get<std::uint32_t>("general.file_type") == 10);  // LLAMA_FTYPE_MOSTLY_Q2_K
    }
    // The legacy types and their general.file_type (LLAMA_FTYPE_MOSTLY_Q4_0 ... Q5_1).
    for (const auto& [legacy, type, file_type] :
         {std::tuple{smol::SyntheticWeights::q4_0, smol::GgmlType::Q4_0, 2u},
          std::tuple{smol::SyntheticWeights::q4_1, smol::GgmlType::Q4_1, 3u},
          std::tuple{smol::SyntheticWeights::q5_0, smol::GgmlType::Q5_0, 8u},
          std::tuple{smol::SyntheticWeights::q5_1, smol::GgmlType::Q5_1, 9u}}) {
      if (weights != legacy) continue;
      CHECK(fast.tensor("blk.0.attn_q.weight").type == type);
      CHECK(fast.tensor("blk.0.ffn_down.weight").type == type);
      CHECK(fast.tensor("token_embd.weight").type == smol::GgmlType::Q6_K);  // tied: the LM head
      CHECK(fast.get<std::uint32_t>("general.file_type") == file_type);
    }
    if (weights == smol::SyntheticWeights::q5_k_m) {  // Q4_K_M's mix, Q5_K for Q4_K
      CHECK(fast.tensor("blk.1.attn_q.weight").type == smol::GgmlType::Q5_K);
      CHECK(fast.tensor("blk.1.ffn_down.weight").type == smol::GgmlType::Q5_K);
      CHECK(fast.tensor("blk.0.ffn_down.weight").type == smol::GgmlType::Q6_K);  // more bits
      CHECK(fast.tensor("blk.0.attn_v.weight").type == smol::GgmlType::Q6_K);
      CHECK(fast.tensor("token_embd.weight").type == smol::GgmlType::Q6_K);
      CHECK(fast.get<std::uint32_t>("general.file_type") == 17);  // LLAMA_FTYPE_MOSTLY_Q5_K_M
    }
  }
}

TEST_CASE("Same seed, same bytes; another seed, other weights") {
  auto spec = smol::synthetic_preset("tiny");
  spec.layers = 2;
  const auto first = smol::make_synthetic_writer(spec).to_bytes();
  CHECK(first == smol::make_synthetic_writer(spec).to_bytes());
  spec.seed = 2;
  CHECK(first != smol::make_synthetic_writer(spec).to_bytes());
}

TEST_CASE("Other shapes: llama, untied, explicit head_dim, every weight format") {
  smol::SyntheticSpec spec;
  spec.arch = "llama";
  spec.layers = 3;
  spec.hidden = 512;
  spec.ffn = 1024;
  spec.heads = 8;
  spec.kv_heads = 2;
  spec.head_dim = 32;  // 8 x 32 = 256, not hidden
  spec.vocab = 600;
  spec.tied = false;
  for (auto weights :
       {smol::SyntheticWeights::f32, smol::SyntheticWeights::f16, smol::SyntheticWeights::q8_0,
        smol::SyntheticWeights::q4_k_m, smol::SyntheticWeights::iq4_xs}) {
    spec.weights = weights;
    const auto file = write_in_memory(spec);
    CHECK(file.get<std::uint32_t>("llama.attention.key_length") == 32);
    CHECK(file.tensor("blk.0.attn_q.weight").dims[1] == 256);
    CHECK(file.tensor("blk.0.attn_output.weight").dims[0] == 256);
    CHECK(file.tensor("output.weight").dims[1] == 600);
    const auto embd = file.tensor("token_embd.weight").type;
    const auto head = file.tensor("output.weight").type;
    if (weights == smol::SyntheticWeights::q4_k_m) {
      CHECK(embd == smol::GgmlType::Q4_K);  // untied: only output.weight gets Q6_K
      CHECK(head == smol::GgmlType::Q6_K);
    }
    if (weights == smol::SyntheticWeights::iq4_xs) {
      CHECK(embd == smol::GgmlType::IQ4_XS);
      CHECK(head == smol::GgmlType::Q6_K);
      CHECK(file.tensor("blk.0.attn_v.weight").type == smol::GgmlType::Q5_K);  // 8 over 2 heads
    }
    if (weights == smol::SyntheticWeights::q8_0) CHECK(head == smol::GgmlType::Q8_0);
    if (weights == smol::SyntheticWeights::f16) CHECK(head == smol::GgmlType::F16);
    CHECK(file.tensor("blk.2.ffn_norm.weight").type == smol::GgmlType::F32);
  }
  // Rows that do not split into 256-value blocks fall back to a 32-value type as in
  // llama-quantize: Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0.
  spec.hidden = 96;
  spec.heads = 3;
  spec.kv_heads = 1;
  spec.head_dim = 0;
  spec.ffn = 256;
  spec.weights = smol::SyntheticWeights::q4_k_m;
  const auto narrow = write_in_memory(spec);
  CHECK(narrow.tensor("blk.0.attn_q.weight").type == smol::GgmlType::Q5_0);
  CHECK(narrow.tensor("blk.2.attn_v.weight").type == smol::GgmlType::Q8_0);    // Q6_K's
  CHECK(narrow.tensor("blk.2.ffn_down.weight").type == smol::GgmlType::Q6_K);  // last eighth
  // IQ4_XS falls back to IQ4_NL, its 32-value sibling, as in llama-quantize.
  spec.weights = smol::SyntheticWeights::iq4_xs;
  CHECK(write_in_memory(spec).tensor("blk.0.attn_q.weight").type == smol::GgmlType::IQ4_NL);
  spec.weights = smol::SyntheticWeights::q4_k_m;

  spec.heads = 5;
  CHECK_THROWS_AS(smol::plan_synthetic_tensors(spec), smol::Error);
  CHECK_THROWS_AS(smol::synthetic_preset("huge"), smol::Error);
}

TEST_CASE("The synthetic vocabulary: layout, merges and a working tokenizer") {
  const auto vocab = smol::build_synthetic_vocabulary(1024);
  REQUIRE(vocab.size() == 1024);
  CHECK(vocab.merges.size() == 736);  // the fixture's split: 256 + 736 + 32 control
  CHECK(vocab.tokens[0] == "!");
  CHECK(vocab.tokens[198] == "\xC4\x8A");  // Ċ, newline
  CHECK(vocab.tokens[220] == "\xC4\xA0");  // Ġ, space
  CHECK(vocab.tokens[992] == "<|begin_of_text|>");
  CHECK(vocab.tokens[996] == "<|im_start|>");
  CHECK(vocab.tokens[997] == "<|im_end|>");
  CHECK(vocab.tokens[1023] == "<|reserved_special_token_25|>");
  CHECK(vocab.type_of(991) == smol::TokenType::normal);
  CHECK(vocab.type_of(992) == smol::TokenType::control);
  std::set<std::string> unique(vocab.tokens.begin(), vocab.tokens.end());
  CHECK(unique.size() == vocab.size());
  for (std::size_t m = 0; m < vocab.merges.size(); ++m) {
    const auto& merge = vocab.merges[m];
    const auto space = merge.find(' ');
    REQUIRE(space != std::string::npos);
    CHECK(vocab.tokens[256 + m] == merge.substr(0, space) + merge.substr(space + 1));
  }

  const smol::Tokenizer tokenizer(vocab);
  const std::string text = "Once upon a time, there was a little robot who lived by the sea.";
  const auto ids = tokenizer.encode(text);
  CHECK(tokenizer.decode(ids) == text);
  CHECK(ids.size() < text.size() / 3);
  smol::EncodeOptions special;
  special.parse_special = true;
  const auto chat = tokenizer.encode("<|im_start|>user\nHi<|im_end|>", special);
  CHECK(chat.front() == 996);
  CHECK(chat.back() == 997);

  // The 3B vocabulary: the corpus runs out of merges, reserved tokens fill the rest.
  const auto large = smol::build_synthetic_vocabulary(128256);
  CHECK(large.size() == 128256);
  MESSAGE("merges learned for a 128256-token vocabulary: ", large.merges.size());
  CHECK(large.tokens[256 + large.merges.size()] == "<|begin_of_text|>");
  CHECK_THROWS_AS(smol::build_synthetic_vocabulary(100), smol::Error);
}

TEST_CASE("A synthetic file's vocabulary loads back through the GGUF reader") {
  const auto file = write_in_memory(smol::synthetic_preset("tiny"));
  const auto loaded = smol::load_vocabulary(file);
  const auto built = smol::build_synthetic_vocabulary(1024);
  CHECK(loaded.tokens == built.tokens);
  CHECK(loaded.merges == built.merges);
  CHECK(loaded.pre_tokenizer == "llama-bpe");
  CHECK_FALSE(loaded.add_bos);
}

// BertNormalizer's options as llama.cpp reads them: both on when absent; strip_accents
// follows lowercase unless named.
TEST_CASE("WordPiece normalizer keys: lowercase, and strip_accents following it") {
  const smol::SyntheticSpec spec = smol::synthetic_preset("tiny");
  const auto load = [&](std::optional<bool> lowercase, std::optional<bool> strip) {
    auto writer = smol::make_synthetic_writer(spec);
    if (lowercase) writer.set("tokenizer.ggml.normalizer.lowercase", *lowercase);
    if (strip) writer.set("tokenizer.ggml.normalizer.strip_accents", *strip);
    const auto file = smol::gguf::GgufFile::from_bytes(writer.to_bytes(), "normalizer.gguf");
    return smol::load_vocabulary(file).wordpiece_normalizer;
  };
  const auto both = load(std::nullopt, std::nullopt);
  CHECK(both.lowercase);
  CHECK(both.strip_accents);
  const auto cased = load(false, std::nullopt);
  CHECK_FALSE(cased.lowercase);
  CHECK_FALSE(cased.strip_accents);
  const auto lower_only = load(true, false);
  CHECK(lower_only.lowercase);
  CHECK_FALSE(lower_only.strip_accents);
  const auto strip_only = load(false, true);
  CHECK_FALSE(strip_only.lowercase);
  CHECK(strip_only.strip_accents);
}

// llama.cpp's converters mark a special token the model lacks with 0xFFFFFFFF (models
// from llama2.c checkpoints carry padding and separator ids like that); others write
// -1 signed, or token types outside the six llama.cpp names. llama.cpp warns and runs
// such files, so they must load here too: the id counts as absent, with a warning.
TEST_CASE("Out-of-range special token ids and token types are warnings, not refusals") {
  const smol::SyntheticSpec spec = smol::synthetic_preset("tiny");
  auto writer = smol::make_synthetic_writer(spec);
  writer.set("tokenizer.ggml.padding_token_id", std::uint32_t{0xFFFFFFFFu});
  writer.set("tokenizer.ggml.seperator_token_id", std::uint32_t{0xFFFFFFFFu});
  writer.set("tokenizer.ggml.unknown_token_id", std::int32_t{-1});
  writer.set("tokenizer.ggml.eot_token_id", std::uint32_t{1u << 20});
  std::vector<std::int32_t> types(1024, 1);
  types[5] = 0;  // llama.cpp's LLAMA_TOKEN_TYPE_UNDEFINED
  types[6] = 42;
  writer.set("tokenizer.ggml.token_type", smol::gguf::Value::array(types));
  const auto file = smol::gguf::GgufFile::from_bytes(writer.to_bytes(), "odd-ids.gguf");

  std::vector<std::string> warnings;
  const auto vocab = smol::load_vocabulary(
      file, [&](std::string_view warning) { warnings.emplace_back(warning); });
  CHECK_FALSE(vocab.padding_id.has_value());
  CHECK_FALSE(vocab.unknown_id.has_value());
  CHECK_FALSE(vocab.eot_id.has_value());
  CHECK(vocab.type_of(5) == smol::TokenType::normal);
  CHECK(vocab.type_of(6) == smol::TokenType::normal);
  CHECK_FALSE(vocab.separator_id.has_value());
  REQUIRE(warnings.size() == 5);  // four ids, one line for the types
  CHECK(warnings[0].find("tokenizer.ggml.token_type") != std::string::npos);
  CHECK(warnings[1].find("eot_token_id = 1048576 is outside the 1024 tokens") != std::string::npos);
  CHECK(warnings[2].find("padding_token_id = 4294967295") != std::string::npos);
  CHECK(warnings[3].find("unknown_token_id = -1") != std::string::npos);
  CHECK(warnings[4].find("seperator_token_id = 4294967295") != std::string::npos);
  // And the tokenizer built from it works.
  const smol::Tokenizer tokenizer(vocab);
  CHECK(tokenizer.decode(tokenizer.encode("Hello there")) == "Hello there");
}

}  // namespace test_quant_synthetic
