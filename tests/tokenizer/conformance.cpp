// Compares our byte-level BPE with Hugging Face's JavaScript tokenizers on Llama-3's
// real 128k vocabulary (see tests/text.cmake for how the reference ids are made).
//
// Usage: tokenizer_conformance TOKENIZER.json CORPUS.json REFERENCE_IDS.json
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_file.hpp"
#include "smol/text/tokenizer.hpp"

namespace {

constexpr std::string_view kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// A Hugging Face tokenizer.json (BPE model, Llama-3 split pattern) as a Vocabulary.
smol::Vocabulary vocabulary_from_tokenizer_json(const nlohmann::json& json) {
  const auto& model = json.at("model");
  if (model.at("type").get<std::string>() != "BPE") smol::fail("tokenizer.json: model is not BPE");
  if (!model.at("ignore_merges").get<bool>()) smol::fail("tokenizer.json: expected ignore_merges");
  bool llama3_split = false;
  for (const auto& step : json.at("pre_tokenizer").at("pretokenizers")) {
    if (step.at("type").get<std::string>() == "Split") {
      llama3_split = step.at("pattern").at("Regex").get<std::string>() == kLlama3Pattern;
    }
  }
  if (!llama3_split) smol::fail("tokenizer.json: the split pattern is not Llama-3's");

  smol::Vocabulary vocab;
  vocab.model = "gpt2";
  vocab.pre_tokenizer = "llama-bpe";
  const auto place = [&](std::size_t id, const std::string& text, smol::TokenType type) {
    if (id >= vocab.tokens.size()) {
      vocab.tokens.resize(id + 1);
      vocab.token_types.resize(id + 1, smol::TokenType::unused);
    }
    vocab.tokens[id] = text;
    vocab.token_types[id] = type;
  };
  for (const auto& entry : model.at("vocab").items()) {
    place(entry.value().get<std::size_t>(), entry.key(), smol::TokenType::normal);
  }
  for (const auto& added : json.at("added_tokens")) {
    place(
        added.at("id").get<std::size_t>(), added.at("content").get<std::string>(),
        added.at("special").get<bool>() ? smol::TokenType::control : smol::TokenType::user_defined);
  }
  for (const auto& merge : model.at("merges")) {
    // Older files write "left right", newer ones ["left", "right"].
    vocab.merges.push_back(merge.is_string() ? merge.get<std::string>()
                                             : merge.at(0).get<std::string>() + " " +
                                                   merge.at(1).get<std::string>());
  }
  return vocab;
}

std::string ids_text(const std::vector<smol::TokenId>& ids) {
  std::string text;
  for (const auto id : ids) text += std::to_string(id) + " ";
  return text;
}

std::vector<smol::TokenId> ids_of(const nlohmann::json& array) {
  return array.get<std::vector<smol::TokenId>>();
}

// `text` as a JSON string literal, for readable mismatch reports.
std::string quote(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s TOKENIZER.json CORPUS.json REFERENCE_IDS.json\n", argv[0]);
    return 2;
  }
  const smol::Tokenizer tokenizer(
      vocabulary_from_tokenizer_json(smol::test::read_json_file(argv[1])));
  const auto strings = smol::test::read_json_file(argv[2]);
  const auto reference = smol::test::read_json_file(argv[3]);
  const auto& huggingface = reference.at("huggingface");
  const auto& lenml = reference.at("lenml");
  if (huggingface.size() != strings.size() || lenml.size() != strings.size()) {
    smol::fail("reference ids do not cover the corpus");
  }

  int mismatches = 0, round_trip_failures = 0, references_disagree = 0;
  for (std::size_t i = 0; i < strings.size(); ++i) {
    const auto& text = strings.at(i).get_ref<const std::string&>();
    const auto ours = tokenizer.encode(text, {.parse_special = true, .add_bos = false});
    const auto expected = ids_of(huggingface.at(i));
    if (ids_of(lenml.at(i)) != expected) ++references_disagree;
    if (ours != expected) {
      if (++mismatches <= 10) {
        std::printf("MISMATCH #%zu %s\n  ours:     %s\n  expected: %s\n", i, quote(text).c_str(),
                    ids_text(ours).c_str(), ids_text(expected).c_str());
      }
    }
    if (tokenizer.decode(ours, {.render_special = true}) != text) ++round_trip_failures;
  }
  std::printf(
      "%zu strings: %d differ from @huggingface/tokenizers, %d do not decode back; "
      "@lenml/tokenizers disagrees with @huggingface/tokenizers on %d\n",
      strings.size(), mismatches, round_trip_failures, references_disagree);
  return mismatches == 0 && round_trip_failures == 0 ? 0 : 1;
} catch (const std::exception& error) {
  std::fprintf(stderr, "tokenizer_conformance: %s\n", error.what());
  return 1;
}
