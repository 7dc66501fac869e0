// Reads a Vocabulary from a GGUF file's tokenizer.ggml.* metadata.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/text/pre_tokenizer.hpp"
#include "smol/text/vocabulary.hpp"
#include "smol/text/warning.hpp"

namespace smol {

// Files that llama.cpp runs must load here too. Its converters write 0xFFFFFFFF (or -1)
// for a special token the model does not have (llama2.c conversions set padding and
// separator that way), and some write token types outside the six it names; llama.cpp
// warns and treats the first as absent and the second as undefined, and so does this
// reader: a warning through `warn`, never a refusal.
inline Vocabulary load_vocabulary(const gguf::GgufFile& file, const WarningHandler& warn = {}) {
  Vocabulary vocab;
  vocab.model = file.get<std::string>("tokenizer.ggml.model");
  vocab.pre_tokenizer =
      file.get_optional<std::string>("tokenizer.ggml.pre").value_or(std::string("default"));
  vocab.tokens = file.get<std::vector<std::string>>("tokenizer.ggml.tokens");
  if (const auto types =
          file.get_optional<std::vector<std::int32_t>>("tokenizer.ggml.token_type")) {
    vocab.token_types.reserve(types->size());
    std::size_t unknown_types = 0;
    for (const std::int32_t type : *types) {
      const bool known = type >= static_cast<std::int32_t>(TokenType::normal) &&
                         type <= static_cast<std::int32_t>(TokenType::byte);
      unknown_types += known ? 0 : 1;
      vocab.token_types.push_back(known ? static_cast<TokenType>(type) : TokenType::normal);
    }
    if (unknown_types > 0) {
      report_warning(warn, cat(file.name(), ": ", unknown_types,
                               " tokens have a type outside 1..6 in tokenizer.ggml.token_type; "
                               "treating them as normal text"));
    }
  }
  vocab.merges = file.get_optional<std::vector<std::string>>("tokenizer.ggml.merges")
                     .value_or(std::vector<std::string>{});
  vocab.scores =
      file.get_optional<std::vector<float>>("tokenizer.ggml.scores").value_or(std::vector<float>{});

  const auto token_id = [&](std::string_view key) -> std::optional<TokenId> {
    // Read wide, so that -1 stored signed reaches the same warning as 0xFFFFFFFF.
    const auto id = file.get_optional<std::int64_t>(key);
    if (!id) return std::nullopt;
    if (*id < 0 || static_cast<std::uint64_t>(*id) >= vocab.tokens.size()) {
      report_warning(warn, cat(file.name(), ": ", key, " = ", *id, " is outside the ",
                               vocab.tokens.size(), " tokens; treating that token as absent"));
      return std::nullopt;
    }
    return static_cast<TokenId>(*id);
  };
  vocab.bos_id = token_id("tokenizer.ggml.bos_token_id");
  vocab.eos_id = token_id("tokenizer.ggml.eos_token_id");
  vocab.eot_id = token_id("tokenizer.ggml.eot_token_id");
  vocab.padding_id = token_id("tokenizer.ggml.padding_token_id");
  vocab.unknown_id = token_id("tokenizer.ggml.unknown_token_id");
  vocab.separator_id = token_id("tokenizer.ggml.seperator_token_id");  // llama.cpp's spelling

  // Defaults when the keys are absent follow llama.cpp: SentencePiece vocabularies and
  // the pre-tokenizers whose row says so (Llama-3's) start with bos, others do not.
  const PreTokenizerSpec* pre = find_pre_tokenizer(vocab.pre_tokenizer);
  // WordPiece inputs are [CLS] (the bos) ... [SEP].
  const bool wordpiece = vocab.model == "bert";
  const bool bos_by_default =
      vocab.model == "llama" || wordpiece || (pre != nullptr && pre->add_bos);
  vocab.add_bos = file.get_optional<bool>("tokenizer.ggml.add_bos_token").value_or(bos_by_default);
  vocab.add_eos =
      file.get_optional<bool>("tokenizer.ggml.add_eos_token").value_or(false) || wordpiece;
  vocab.add_space_prefix =
      file.get_optional<bool>("tokenizer.ggml.add_space_prefix").value_or(true);
  WordPieceNormalizer& normalizer = vocab.wordpiece_normalizer;
  normalizer.lowercase =
      file.get_optional<bool>("tokenizer.ggml.normalizer.lowercase").value_or(true);
  normalizer.strip_accents = file.get_optional<bool>("tokenizer.ggml.normalizer.strip_accents")
                                 .value_or(normalizer.lowercase);

  try {
    vocab.validate();
  } catch (const Error& error) {
    fail(file.name(), ": ", error.what());
  }
  return vocab;
}

}  // namespace smol
