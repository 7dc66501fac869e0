// A small byte-level BPE vocabulary learned from built-in text, for synthetic models.
//
// Laid out like SmolLM3's (and the tiny fixture's): ids 0-255 are the single bytes in
// GPT-2's byte-to-character order ('!' is 0, '\n' 198, ' ' 220), then one token per
// learned merge in merge order, then the control tokens <|begin_of_text|>,
// <|end_of_text|>, <think>, </think>, <|im_start|>, <|im_end|> and reserved control
// tokens up to the requested size. Pre-tokenization is Llama-3's (llama-bpe), so the
// vocabulary tokenizes exactly as it was trained.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/testing/synthetic_corpus.hpp"
#include "smol/text/byte_unicode.hpp"
#include "smol/text/pre_tokenizer.hpp"
#include "smol/text/unicode.hpp"
#include "smol/text/vocabulary.hpp"
#include "smol/text/wordpiece.hpp"

namespace smol {

inline constexpr std::string_view kSmolLM3ControlTokens[] = {
    "<|begin_of_text|>", "<|end_of_text|>", "<think>", "</think>", "<|im_start|>", "<|im_end|>",
};

namespace detail {

// Greedy BPE training: repeatedly merge the most frequent adjacent pair (ties go to
// the lowest pair of ids, so the result is deterministic) until `max_merges` merges
// exist or no pair is left. A pair whose concatenation is already a token is never
// chosen, so every merge adds exactly one new token.
class BpeTrainer {
 public:
  BpeTrainer(std::string_view corpus, std::vector<std::string>& tokens) : tokens_(tokens) {
    for (std::size_t id = 0; id < tokens_.size(); ++id) token_ids_.emplace(tokens_[id], id);
    std::unordered_map<std::string_view, std::size_t> counts;
    const PreTokenizer pre_tokenizer = PreTokenizer::named("llama-bpe");
    for (const std::string_view piece : pre_tokenizer.split(corpus)) ++counts[piece];
    for (const auto& [piece, count] : counts) {
      Word word{{}, count};
      for (const char byte : piece) {
        word.symbols.push_back(
            token_ids_.at(byte_unicode::encode_bytes(std::string_view(&byte, 1))));
      }
      words_.push_back(std::move(word));
    }
    // Map iteration order is unspecified; sorting makes every later step reproducible.
    std::sort(words_.begin(), words_.end(),
              [](const Word& a, const Word& b) { return a.symbols < b.symbols; });
  }

  // Learns up to `max_merges` merges; returns them as "left right".
  std::vector<std::string> learn(std::size_t max_merges) {
    std::vector<std::string> merges;
    while (merges.size() < max_merges) {
      const auto best = most_frequent_pair();
      if (!best) break;
      const auto [left, right] = *best;
      merges.push_back(tokens_[left] + " " + tokens_[right]);
      const std::size_t merged = tokens_.size();
      tokens_.push_back(tokens_[left] + tokens_[right]);
      token_ids_.emplace(tokens_.back(), merged);
      for (Word& word : words_) apply(word, left, right, merged);
    }
    return merges;
  }

 private:
  struct Word {
    std::vector<std::size_t> symbols;
    std::size_t count;
  };

  std::optional<std::pair<std::size_t, std::size_t>> most_frequent_pair() const {
    std::unordered_map<std::uint64_t, std::size_t> pair_counts;
    for (const Word& word : words_) {
      for (std::size_t i = 0; i + 1 < word.symbols.size(); ++i) {
        pair_counts[key(word.symbols[i], word.symbols[i + 1])] += word.count;
      }
    }
    std::optional<std::uint64_t> best;
    std::size_t best_count = 0;
    for (const auto& [pair, count] : pair_counts) {
      if (count < best_count || (count == best_count && pair > *best)) continue;
      const auto left = static_cast<std::size_t>(pair >> 32);
      const auto right = static_cast<std::size_t>(pair & 0xffffffffu);
      if (token_ids_.count(tokens_[left] + tokens_[right]) != 0) continue;
      best = pair;
      best_count = count;
    }
    if (!best) return std::nullopt;
    return std::pair{static_cast<std::size_t>(*best >> 32),
                     static_cast<std::size_t>(*best & 0xffffffffu)};
  }

  static std::uint64_t key(std::size_t left, std::size_t right) {
    return static_cast<std::uint64_t>(left) << 32 | right;
  }

  static void apply(Word& word, std::size_t left, std::size_t right, std::size_t merged) {
    std::size_t out = 0;
    for (std::size_t i = 0; i < word.symbols.size(); ++i) {
      if (i + 1 < word.symbols.size() && word.symbols[i] == left && word.symbols[i + 1] == right) {
        word.symbols[out++] = merged;
        ++i;
      } else {
        word.symbols[out++] = word.symbols[i];
      }
    }
    word.symbols.resize(out);
  }

  std::vector<std::string>& tokens_;
  std::unordered_map<std::string, std::size_t> token_ids_;
  std::vector<Word> words_;
};

}  // namespace detail

// A vocabulary of exactly `size` tokens (at least 256 bytes + 6 control tokens).
// At least 26 reserved tokens are kept when the size allows, as in the fixture;
// when the corpus runs out of merges, more reserved tokens fill the rest.
inline Vocabulary build_synthetic_vocabulary(std::size_t size,
                                             std::string_view corpus = kSyntheticCorpus) {
  constexpr std::size_t kControl = std::size(kSmolLM3ControlTokens);
  if (size < 256 + kControl) {
    fail("a synthetic vocabulary needs at least ", 256 + kControl, " tokens, not ", size);
  }
  Vocabulary vocab;
  vocab.model = "gpt2";
  vocab.pre_tokenizer = "llama-bpe";
  vocab.add_bos = false;

  // The 256 byte tokens, ordered by the code point that spells them.
  std::vector<std::pair<char32_t, std::uint8_t>> bytes;
  for (unsigned byte = 0; byte < 256; ++byte) {
    bytes.emplace_back(byte_unicode::kByteToCodepoint[byte], static_cast<std::uint8_t>(byte));
  }
  std::sort(bytes.begin(), bytes.end());
  for (const auto& [codepoint, byte] : bytes) {
    const char raw = static_cast<char>(byte);
    vocab.tokens.push_back(byte_unicode::encode_bytes(std::string_view(&raw, 1)));
  }

  const std::size_t min_reserved = std::min<std::size_t>(26, size - 256 - kControl);
  detail::BpeTrainer trainer(corpus, vocab.tokens);
  vocab.merges = trainer.learn(size - 256 - kControl - min_reserved);

  for (const std::string_view control : kSmolLM3ControlTokens) {
    vocab.tokens.emplace_back(control);
  }
  for (std::size_t reserved = 0; vocab.tokens.size() < size; ++reserved) {
    vocab.tokens.push_back("<|reserved_special_token_" + std::to_string(reserved) + "|>");
  }
  const std::size_t first_control = 256 + vocab.merges.size();
  vocab.token_types.assign(size, TokenType::normal);
  std::fill(vocab.token_types.begin() + static_cast<std::ptrdiff_t>(first_control),
            vocab.token_types.end(), TokenType::control);
  vocab.bos_id = static_cast<TokenId>(first_control);      // <|begin_of_text|>
  vocab.eos_id = static_cast<TokenId>(first_control + 5);  // <|im_end|>, as SmolLM3
  vocab.validate();
  return vocab;
}

// A WordPiece vocabulary (BERT's: tokenizer.ggml.model "bert") of exactly `size`
// tokens, spelled as llama.cpp's converter writes them: [PAD] [UNK] [CLS] [SEP] [MASK]
// (control), then every character of the corpus as a word start ("▁a") and as a
// continuation ("a"), then the corpus's words by frequency ("▁lighthouse") and their
// endings by frequency ("ing", "ed"), then [unusedN] to fill. The words are the
// WordPiece normalizer's own (lowercased, punctuation apart), so the corpus tokenizes
// into whole words and pieces, with [UNK] for what it lacks.
inline Vocabulary build_wordpiece_vocabulary(std::size_t size,
                                             std::string_view corpus = kSyntheticCorpus) {
  constexpr std::string_view kSpecials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  constexpr std::string_view kStart = WordPieceEncoder::kWordStart;
  Vocabulary vocab;
  vocab.model = "bert";
  vocab.add_bos = true;
  vocab.add_eos = true;
  std::unordered_map<std::string, std::size_t> seen;
  const auto add = [&](std::string token) {
    if (vocab.tokens.size() >= size || seen.contains(token)) return;
    seen.emplace(token, vocab.tokens.size());
    vocab.tokens.push_back(std::move(token));
  };
  for (const std::string_view special : kSpecials) add(std::string(special));

  const std::vector<std::string> words = WordPieceEncoder::words(corpus);
  std::vector<std::string> characters;
  std::unordered_map<std::string, std::size_t> word_count, ending_count;
  for (const std::string& word : words) {
    ++word_count[word];
    for (std::size_t pos = 0; pos < word.size();) {
      const std::size_t length = unicode::decode_utf8(word, pos).length;
      characters.push_back(word.substr(pos, length));
      if (pos > 0) ++ending_count[word.substr(pos)];
      pos += length;
    }
  }
  std::sort(characters.begin(), characters.end());
  characters.erase(std::unique(characters.begin(), characters.end()), characters.end());
  for (const std::string& c : characters) {
    add(std::string(kStart) + c);
    add(c);
  }
  // Most frequent first, ties by spelling, so the vocabulary is the same everywhere.
  const auto by_frequency = [](const std::unordered_map<std::string, std::size_t>& counts) {
    std::vector<std::pair<std::size_t, std::string>> sorted;
    for (const auto& [text, count] : counts) sorted.emplace_back(count, text);
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    return sorted;
  };
  const auto frequent_words = by_frequency(word_count);
  const auto frequent_endings = by_frequency(ending_count);
  // Two words for every ending, while both last.
  for (std::size_t w = 0, e = 0; w < frequent_words.size() || e < frequent_endings.size();) {
    for (int k = 0; k < 2 && w < frequent_words.size(); ++k) {
      add(std::string(kStart) + frequent_words[w++].second);
    }
    if (e < frequent_endings.size() && frequent_endings[e].first > 1) {
      add(frequent_endings[e].second);
    }
    ++e;
  }
  for (std::size_t unused = 0; vocab.tokens.size() < size; ++unused) {
    add("[unused" + std::to_string(unused) + "]");
  }
  vocab.token_types.assign(vocab.tokens.size(), TokenType::normal);
  for (std::size_t i = 0; i < std::size(kSpecials); ++i) vocab.token_types[i] = TokenType::control;
  vocab.padding_id = 0;
  vocab.unknown_id = 1;
  vocab.bos_id = 2;  // [CLS]
  vocab.separator_id = 3;
  vocab.validate();
  return vocab;
}

}  // namespace smol
