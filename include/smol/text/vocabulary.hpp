// The data a tokenizer is built from: what a GGUF file's tokenizer.ggml.* keys hold,
// as plain values, so tests and tools can make one without any file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "smol/core/error.hpp"

namespace smol {

using TokenId = std::int32_t;

// The values of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
enum class TokenType : std::int32_t {
  normal = 1,
  unknown = 2,
  control = 3,       // <|im_start|>, <|begin_of_text|>: only parsed from text when asked
  user_defined = 4,  // added tokens: always matched as whole strings
  unused = 5,
  byte = 6,  // SentencePiece byte fallback <0xNN>
};

// WordPiece's BertNormalizer options (tokenizer.ggml.normalizer.lowercase and
// .strip_accents; llama.cpp: both on by default, and accents follow lowercase where the
// file names only that).
struct WordPieceNormalizer {
  bool lowercase = true;
  bool strip_accents = true;
};

struct Vocabulary {
  // tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SentencePiece) or "bert"
  // (WordPiece)
  std::string model = "gpt2";
  std::string pre_tokenizer = "default";  // tokenizer.ggml.pre: "llama-bpe", "smollm", "gpt2", ...
  std::vector<std::string> tokens;
  std::vector<TokenType> token_types;  // empty: every token is normal
  std::vector<std::string> merges;     // "left right"; the rank is the index (BPE only)
  std::vector<float> scores;           // SentencePiece merge priorities; empty: all 0
  std::optional<TokenId> bos_id;
  std::optional<TokenId> eos_id;
  std::optional<TokenId> eot_id;
  std::optional<TokenId> padding_id;
  std::optional<TokenId> unknown_id;
  std::optional<TokenId> separator_id;  // WordPiece's [SEP], which ends its inputs
  bool add_bos = false;
  // tokenizer.ggml.add_eos_token: inputs that add special tokens end in eos (WordPiece's:
  // in [SEP], always)
  bool add_eos = false;
  bool add_space_prefix = true;              // SentencePiece only: a leading space becomes "▁"
  WordPieceNormalizer wordpiece_normalizer;  // WordPiece only

  std::size_t size() const { return tokens.size(); }

  TokenType type_of(TokenId id) const {
    return token_types.empty() ? TokenType::normal : token_types[static_cast<std::size_t>(id)];
  }

  // Throws smol::Error when the arrays disagree or an id points outside the vocabulary.
  void validate() const {
    if (tokens.empty()) fail("vocabulary: no tokens");
    if (!token_types.empty() && token_types.size() != tokens.size()) {
      fail("vocabulary: ", token_types.size(), " token types for ", tokens.size(), " tokens");
    }
    if (!scores.empty() && scores.size() != tokens.size()) {
      fail("vocabulary: ", scores.size(), " scores for ", tokens.size(), " tokens");
    }
    for (std::size_t i = 0; i < token_types.size(); ++i) {
      const auto type = static_cast<std::int32_t>(token_types[i]);
      if (type < 1 || type > 6) fail("vocabulary: token ", i, " has unknown type ", type);
    }
    const auto check_id = [&](const std::optional<TokenId>& id, const char* what) {
      if (id && (*id < 0 || static_cast<std::size_t>(*id) >= tokens.size())) {
        fail("vocabulary: ", what, " id ", *id, " is outside the ", tokens.size(), " tokens");
      }
    };
    check_id(bos_id, "bos");
    check_id(eos_id, "eos");
    check_id(eot_id, "eot");
    check_id(padding_id, "padding");
    check_id(unknown_id, "unknown");
    check_id(separator_id, "separator");
    if (model != "gpt2" && model != "llama" && model != "bert") {
      fail("vocabulary: tokenizer model \"", model,
           "\" is not supported (only gpt2, llama and bert)");
    }
  }
};

}  // namespace smol
