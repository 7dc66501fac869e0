// Tokenizer: text <-> token ids for byte-level BPE ("gpt2") and SentencePiece
// ("llama") vocabularies, following llama.cpp's behaviour so that ids match it.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/bpe.hpp"
#include "smol/text/byte_unicode.hpp"
#include "smol/text/pre_tokenizer.hpp"
#include "smol/text/sentencepiece.hpp"
#include "smol/text/special_tokens.hpp"
#include "smol/text/token_index.hpp"
#include "smol/text/vocabulary.hpp"
#include "smol/text/warning.hpp"
#include "smol/text/wordpiece.hpp"

namespace smol {

struct EncodeOptions {
  // Match control tokens (<|im_start|>, ...) written in the text. Off for untrusted
  // user text, so "<|im_end|>" typed by a user stays plain characters. User-defined
  // tokens (type 4) are matched either way, as in llama.cpp.
  bool parse_special = false;
  // Prepend bos; unset: as the vocabulary says (tokenizer.ggml.add_bos_token).
  std::optional<bool> add_bos = std::nullopt;
  // Append eos. llama.cpp does where the vocabulary says so (tokenizer.ggml.add_eos_token,
  // Vocabulary::add_eos) and it adds special tokens: embedding inputs (Qwen3-Embedding
  // pools the state of that eos). Chat prompts end where their template ends them.
  bool add_eos = false;
};

struct DecodeOptions {
  // Give control and unknown tokens their text; otherwise they decode to nothing
  // (control) or U+FFFD (unknown).
  bool render_special = false;
};

class Tokenizer {
 public:
  // Throws smol::Error for a vocabulary it cannot tokenize as llama.cpp does (an unknown
  // tokenizer.ggml.pre among them). `warn` is for recoverable surprises; none today.
  explicit Tokenizer(Vocabulary vocab, [[maybe_unused]] const WarningHandler& warn = {})
      : vocab_(std::move(vocab)) {
    vocab_.validate();
    index_ = TokenIndex(vocab_.tokens);
    sentencepiece_ = vocab_.model == "llama";
    wordpiece_ = vocab_.model == "bert";
    if (sentencepiece_) {
      spm_ = SentencePieceEncoder(vocab_, index_);
    } else if (wordpiece_) {
      wpm_ = WordPieceEncoder(vocab_, index_);
    } else {
      pre_tokenizer_.emplace(PreTokenizer::named(vocab_.pre_tokenizer));
      ignore_merges_ = pre_tokenizer_->spec().ignore_merges;
      bpe_ = BytePairEncoder(vocab_, index_);
    }
    collect_special_tokens();
  }

  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& options = {}) const {
    std::vector<TokenId> ids;
    if (options.add_bos.value_or(vocab_.add_bos)) {
      if (!vocab_.bos_id) fail("tokenizer: asked to add bos, but the vocabulary has no bos token");
      ids.push_back(*vocab_.bos_id);
    }
    const auto& specials = options.parse_special ? all_specials_ : always_specials_;
    bool previous_was_special = true;  // SentencePiece: a space prefix at the start
    for (const TextFragment& fragment : split_special_tokens(text, specials)) {
      if (fragment.special) {
        ids.push_back(*fragment.special);
        previous_was_special = true;
        continue;
      }
      if (sentencepiece_) {
        encode_sentencepiece(fragment.text, previous_was_special, ids);
      } else if (wordpiece_) {
        wpm_.encode(fragment.text, ids);
      } else {
        encode_byte_level(fragment.text, ids);
      }
      previous_was_special = false;
    }
    if (options.add_eos) {  // WordPiece's inputs end in [SEP]
      const std::optional<TokenId> end = wordpiece_ ? vocab_.separator_id : vocab_.eos_id;
      if (!end) {
        fail("tokenizer: asked to end the input in ", wordpiece_ ? "[SEP]" : "eos",
             ", but the vocabulary has no such token");
      }
      ids.push_back(*end);
    }
    return ids;
  }

  // The bytes a token stands for (not necessarily valid UTF-8 on its own).
  std::string token_to_piece(TokenId id, const DecodeOptions& options = {}) const {
    check_id(id);
    const std::string& spelling = vocab_.tokens[static_cast<std::size_t>(id)];
    switch (vocab_.type_of(id)) {
      case TokenType::control:
        return options.render_special ? spelling : std::string();
      case TokenType::unknown:
        return options.render_special ? spelling : unicode::to_utf8(unicode::kReplacementCharacter);
      case TokenType::user_defined:
        return spelling;
      case TokenType::byte:
        if (sentencepiece_) return std::string(1, static_cast<char>(byte_of(spelling)));
        break;
      case TokenType::normal:
      case TokenType::unused:
        break;
    }
    if (!sentencepiece_ && !wordpiece_) return byte_unicode::decode_bytes(spelling);
    std::string piece;
    for (std::size_t pos = 0; pos < spelling.size();) {
      if (spelling.compare(pos, kSentencePieceSpace.size(), kSentencePieceSpace) == 0) {
        piece += ' ';
        pos += kSentencePieceSpace.size();
      } else {
        piece += spelling[pos++];
      }
    }
    return piece;
  }

  // Concatenated pieces. A SentencePiece space prefix on the first token is removed,
  // as the encoder added it; the bytes are returned as they are (see Utf8StreamDecoder).
  std::string decode(std::span<const TokenId> ids, const DecodeOptions& options = {}) const {
    std::string text;
    for (const TokenId id : ids) text += token_to_piece(id, options);
    if ((sentencepiece_ || wordpiece_) && vocab_.add_space_prefix && !ids.empty() &&
        vocab_.type_of(ids.front()) == TokenType::normal && !text.empty() && text.front() == ' ') {
      text.erase(0, 1);
    }
    return text;
  }

  // The id of the token spelled exactly `spelling` in the vocabulary ("<|im_start|>";
  // byte-level vocabularies spell a space as "Ġ").
  std::optional<TokenId> find_token(std::string_view spelling) const {
    return index_.find(spelling);
  }

  // Tokens after which generation stops: eos, eot, and the control tokens that end a
  // turn in the common chat formats (llama.cpp does the same).
  bool is_end_of_generation(TokenId id) const {
    return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) !=
           end_of_generation_.end();
  }
  const std::vector<TokenId>& end_of_generation_ids() const { return end_of_generation_; }

  bool is_control(TokenId id) const {
    check_id(id);
    return vocab_.type_of(id) == TokenType::control;
  }

  const Vocabulary& vocabulary() const { return vocab_; }
  std::size_t size() const { return vocab_.size(); }

 private:
  void check_id(TokenId id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= vocab_.size()) {
      fail("tokenizer: token id ", id, " is outside the vocabulary of ", vocab_.size());
    }
  }

  static std::uint8_t byte_of(const std::string& spelling) {
    // "<0xNN>"; a malformed byte token decodes to '?' rather than failing mid-stream.
    const auto hex_digit = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    if (spelling.size() != 6 || spelling.compare(0, 3, "<0x") != 0 || spelling[5] != '>') {
      return '?';
    }
    const int high = hex_digit(spelling[3]), low = hex_digit(spelling[4]);
    return high < 0 || low < 0 ? '?' : static_cast<std::uint8_t>(high * 16 + low);
  }

  void collect_special_tokens() {
    for (std::size_t i = 0; i < vocab_.size(); ++i) {
      const auto id = static_cast<TokenId>(i);
      const TokenType type = vocab_.type_of(id);
      const SpecialToken token{vocab_.tokens[i], id};
      if (type == TokenType::user_defined) always_specials_.push_back(token);
      if (type == TokenType::user_defined || type == TokenType::control ||
          type == TokenType::unknown) {
        all_specials_.push_back(token);
      }
    }
    sort_longest_first(always_specials_);
    sort_longest_first(all_specials_);

    for (const auto& id : {vocab_.eos_id, vocab_.eot_id}) {
      if (id) end_of_generation_.push_back(*id);
    }
    static constexpr std::array<std::string_view, 8> kTurnEnders = {
        "<|im_end|>",    "<|eot_id|>",    "<|eom_id|>",      "<|end|>",
        "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "</s>"};
    for (const std::string_view spelling : kTurnEnders) {
      const auto id = index_.find(spelling);
      if (id && vocab_.type_of(*id) == TokenType::control && !is_end_of_generation(*id)) {
        end_of_generation_.push_back(*id);
      }
    }
  }

  void encode_byte_level(std::string_view text, std::vector<TokenId>& ids) const {
    for (const std::string_view piece : pre_tokenizer_->split(text)) {
      if (ignore_merges_) {
        if (const auto whole = index_.find(byte_unicode::encode_bytes(piece))) {
          ids.push_back(*whole);
          continue;
        }
      }
      bpe_.encode(piece, ids);
    }
  }

  void encode_sentencepiece(std::string_view text, bool after_special,
                            std::vector<TokenId>& ids) const {
    std::string escaped;
    if (vocab_.add_space_prefix && after_special) escaped += kSentencePieceSpace;
    for (const char c : text) {
      if (c == ' ') {
        escaped += kSentencePieceSpace;
      } else {
        escaped += c;
      }
    }
    spm_.encode(escaped, index_, ids);
  }

  Vocabulary vocab_;
  TokenIndex index_;
  bool sentencepiece_ = false;
  bool wordpiece_ = false;
  std::optional<PreTokenizer> pre_tokenizer_;  // byte-level BPE only
  bool ignore_merges_ = false;
  BytePairEncoder bpe_;
  SentencePieceEncoder spm_;
  WordPieceEncoder wpm_;
  std::vector<SpecialToken> always_specials_;  // matched even without parse_special
  std::vector<SpecialToken> all_specials_;
  std::vector<TokenId> end_of_generation_;
};

}  // namespace smol
