// WordPiece: BERT's tokenizer (tokenizer.ggml.model "bert"), as llama.cpp's WPM
// tokenizer runs it, since llama.cpp is the reference for every number a model file
// gives. Written here because no packaged C++ library tokenizes a GGUF's vocabulary
// (Hugging Face's tokenizers is Rust and reads its own JSON).
//
// The converter spells a word's first piece with a leading U+2581 ("▁play") and a
// continuation bare ("ing", Hugging Face's "##ing"). The text is normalized code point
// by code point as the file's BertNormalizer options say (WordPieceNormalizer): accents
// stripped (each code point replaced by the first of its canonical decomposition, and
// combining marks dropped: "é" and "e\u0301" are "e"), lowercased; controls, NUL and
// U+FFFD dropped.
// Words split at whitespace, and every punctuation mark, ASCII symbol and CJK ideograph
// is a word of its own. Each word, with its "▁", is cut greedily into the longest
// pieces the vocabulary has; a word that cannot be cut whole is one [UNK].
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/token_index.hpp"
#include "smol/text/unicode.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

class WordPieceEncoder {
 public:
  WordPieceEncoder() = default;
  WordPieceEncoder(const Vocabulary& vocab, const TokenIndex& index)
      : index_(&index), normalizer_(vocab.wordpiece_normalizer) {
    if (!vocab.unknown_id) fail("tokenizer: a WordPiece vocabulary needs an unknown token");
    unknown_ = *vocab.unknown_id;
    for (const std::string& token : vocab.tokens) longest_ = std::max(longest_, token.size());
  }

  // The words of `text` after normalization (llama.cpp's WPM preprocess).
  static std::vector<std::string> words(std::string_view text,
                                        const WordPieceNormalizer& normalizer = {}) {
    std::vector<std::string> words(1);
    for (std::size_t pos = 0; pos < text.size();) {
      const unicode::DecodedCodepoint decoded = unicode::decode_utf8(text, pos);
      pos += decoded.length;
      char32_t c = decoded.status == unicode::Utf8Status::valid ? decoded.codepoint
                                                                : unicode::kReplacementCharacter;
      if (normalizer.strip_accents) c = unicode::nfd_first(c);
      if (unicode::is_whitespace(c)) {
        if (!words.back().empty()) words.emplace_back();
        continue;
      }
      if (c == 0 || c == unicode::kReplacementCharacter || unicode::is_control(c)) continue;
      if (normalizer.strip_accents && unicode::is_mark(c)) continue;
      const std::string piece = unicode::to_utf8(normalizer.lowercase ? unicode::to_lower(c) : c);
      if (unicode::is_punctuation(c) || (c < 0x7F && unicode::is_symbol(c)) || is_cjk(c)) {
        if (!words.back().empty()) words.emplace_back();
        words.back() = piece;
        words.emplace_back();
      } else {
        words.back() += piece;
      }
    }
    if (words.back().empty()) words.pop_back();
    return words;
  }

  // Appends the pieces of `text` to `ids`.
  void encode(std::string_view text, std::vector<TokenId>& ids) const {
    for (const std::string& word : words(text, normalizer_)) {
      const std::string marked = std::string(kWordStart) + word;
      const std::size_t before = ids.size();
      for (std::size_t i = 0; i < marked.size();) {
        // The longest piece from byte i (a cut inside a character matches nothing).
        std::optional<TokenId> piece;
        std::size_t end = std::min(marked.size(), i + longest_);
        while (end > i && !(piece = index_->find(std::string_view(marked).substr(i, end - i)))) {
          --end;
        }
        if (!piece) {  // the word cannot be cut whole: [UNK] for all of it
          ids.resize(before);
          break;
        }
        ids.push_back(*piece);
        i = end;
      }
      if (ids.size() == before) ids.push_back(unknown_);
    }
  }

  static constexpr std::string_view kWordStart = "\u2581";

 private:
  // The CJK ideograph blocks BERT's tokenizer splits apart (llama.cpp's is_chinese_char,
  // with its 0x2B920 for the start of Extension E, as Hugging Face's Rust code has it).
  static bool is_cjk(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
  }

  const TokenIndex* index_ = nullptr;
  WordPieceNormalizer normalizer_;
  TokenId unknown_ = 0;
  std::size_t longest_ = 0;  // bytes of the longest token
};

}  // namespace smol
