// Reads a Vocabulary from a GGUF file's tokenizer.ggml.* metadata.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

inline Vocabulary load_vocabulary(const gguf::GgufFile& file) {
  Vocabulary vocab;
  vocab.model = file.get<std::string>("tokenizer.ggml.model");
  vocab.pre_tokenizer =
      file.get_optional<std::string>("tokenizer.ggml.pre").value_or(std::string("default"));
  vocab.tokens = file.get<std::vector<std::string>>("tokenizer.ggml.tokens");
  if (const auto types =
          file.get_optional<std::vector<std::int32_t>>("tokenizer.ggml.token_type")) {
    vocab.token_types.reserve(types->size());
    for (const std::int32_t type : *types)
      vocab.token_types.push_back(static_cast<TokenType>(type));
  }
  vocab.merges = file.get_optional<std::vector<std::string>>("tokenizer.ggml.merges")
                     .value_or(std::vector<std::string>{});
  vocab.scores =
      file.get_optional<std::vector<float>>("tokenizer.ggml.scores").value_or(std::vector<float>{});

  const auto token_id = [&](std::string_view key) -> std::optional<TokenId> {
    const auto id = file.get_optional<std::uint32_t>(key);
    if (!id) return std::nullopt;
    if (*id >= vocab.tokens.size()) {
      fail(file.name(), ": ", key, " = ", *id, " is outside the ", vocab.tokens.size(), " tokens");
    }
    return static_cast<TokenId>(*id);
  };
  vocab.bos_id = token_id("tokenizer.ggml.bos_token_id");
  vocab.eos_id = token_id("tokenizer.ggml.eos_token_id");
  vocab.eot_id = token_id("tokenizer.ggml.eot_token_id");
  vocab.padding_id = token_id("tokenizer.ggml.padding_token_id");
  vocab.unknown_id = token_id("tokenizer.ggml.unknown_token_id");

  // Defaults when the keys are absent follow llama.cpp: SentencePiece and Llama-3
  // vocabularies start with bos, others do not.
  const bool bos_by_default = vocab.model == "llama" || vocab.pre_tokenizer == "llama-bpe";
  vocab.add_bos = file.get_optional<bool>("tokenizer.ggml.add_bos_token").value_or(bos_by_default);
  vocab.add_space_prefix =
      file.get_optional<bool>("tokenizer.ggml.add_space_prefix").value_or(true);

  try {
    vocab.validate();
  } catch (const Error& error) {
    fail(file.name(), ": ", error.what());
  }
  return vocab;
}

}  // namespace smol
