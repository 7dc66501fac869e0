// SentencePiece-style merging for `llama` vocabularies (Llama 1/2, Mistral, ...).
//
// Like llama.cpp's SPM tokenizer: start from single characters, repeatedly join the
// adjacent pair whose joined text is a token with the highest score (leftmost on a
// tie), and spell any character that never became a token as byte tokens <0xNN>.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/token_index.hpp"
#include "smol/text/unicode.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

// "▁" (U+2581), SentencePiece's visible stand-in for a space.
inline constexpr std::string_view kSentencePieceSpace = "\xE2\x96\x81";

// "<0x0A>" for byte 10: the spelling of SentencePiece byte-fallback tokens.
inline std::string byte_token_spelling(std::uint8_t byte) {
  char spelling[8];
  std::snprintf(spelling, sizeof spelling, "<0x%02X>", byte);
  return spelling;
}

class SentencePieceEncoder {
 public:
  SentencePieceEncoder() = default;

  SentencePieceEncoder(const Vocabulary& vocab, const TokenIndex& index)
      : scores_(vocab.scores), unknown_id_(vocab.unknown_id) {
    for (unsigned byte = 0; byte < 256; ++byte) {
      auto id = index.find(byte_token_spelling(static_cast<std::uint8_t>(byte)));
      if (!id) id = index.find(std::string(1, static_cast<char>(byte)));
      byte_ids_[byte] = id;
    }
  }

  // Appends the ids of `text` (spaces already replaced by "▁") to `out`.
  void encode(std::string_view text, const TokenIndex& index, std::vector<TokenId>& out) const {
    std::vector<Symbol> symbols;
    for (std::size_t pos = 0; pos < text.size();) {
      const std::size_t length = unicode::decode_utf8(text, pos).length;
      const int i = static_cast<int>(symbols.size());
      symbols.push_back({pos, length, i - 1, -1});
      if (i > 0) symbols[static_cast<std::size_t>(i) - 1].next = i;
      pos += length;
    }

    std::priority_queue<Bigram, std::vector<Bigram>, WorseBigram> queue;
    const auto consider = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const Symbol& a = symbols[static_cast<std::size_t>(left)];
      const Symbol& b = symbols[static_cast<std::size_t>(right)];
      const auto id = index.find(text.substr(a.start, a.length + b.length));
      if (!id) return;
      queue.push({score_of(*id), left, right, a.length + b.length});
    };
    for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i, i + 1);

    while (!queue.empty()) {
      const Bigram top = queue.top();
      queue.pop();
      Symbol& left = symbols[static_cast<std::size_t>(top.left)];
      Symbol& right = symbols[static_cast<std::size_t>(top.right)];
      // Stale: one side was merged away or grew since this pair was queued.
      if (left.length == 0 || right.length == 0 || left.length + right.length != top.length) {
        continue;
      }
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = top.left;
      consider(left.prev, top.left);
      consider(top.left, left.next);
    }

    for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
      const Symbol& symbol = symbols[static_cast<std::size_t>(i)];
      const std::string_view piece = text.substr(symbol.start, symbol.length);
      if (const auto id = index.find(piece)) {
        out.push_back(*id);
        continue;
      }
      for (const char byte : piece) {
        const auto& id = byte_ids_[static_cast<std::uint8_t>(byte)];
        if (id) {
          out.push_back(*id);
        } else if (unknown_id_) {
          out.push_back(*unknown_id_);
        } else {
          fail("tokenizer: the vocabulary has no byte token ",
               byte_token_spelling(static_cast<std::uint8_t>(byte)), " and no unknown token");
        }
      }
    }
  }

 private:
  struct Symbol {
    std::size_t start;
    std::size_t length;  // 0 once merged into its left neighbour
    int prev;
    int next;
  };
  struct Bigram {
    float score;
    int left;
    int right;
    std::size_t length;
  };
  struct WorseBigram {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.score != b.score ? a.score < b.score : a.left > b.left;
    }
  };

  float score_of(TokenId id) const {
    return scores_.empty() ? 0.0f : scores_[static_cast<std::size_t>(id)];
  }

  std::vector<float> scores_;
  std::array<std::optional<TokenId>, 256> byte_ids_{};
  std::optional<TokenId> unknown_id_;
};

}  // namespace smol
