// Byte-level BPE merging: turns the bytes of one pre-token into token ids by applying
// the vocabulary's merges, lowest rank first (leftmost first among equal ranks).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/byte_unicode.hpp"
#include "smol/text/token_index.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

class BytePairEncoder {
 public:
  BytePairEncoder() = default;

  BytePairEncoder(const Vocabulary& vocab, const TokenIndex& index)
      : unknown_id_(vocab.unknown_id) {
    for (unsigned byte = 0; byte < 256; ++byte) {
      const auto id = index.find(unicode::to_utf8(byte_unicode::kByteToCodepoint[byte]));
      byte_ids_[byte] = id ? *id : kNoToken;
    }
    merges_.reserve(vocab.merges.size());
    for (std::size_t rank = 0; rank < vocab.merges.size(); ++rank) {
      const std::string_view merge = vocab.merges[rank];
      // Split at the first space after the first character (as llama.cpp does), so
      // a left part that is itself a literal space still parses.
      const std::size_t split = merge.find(' ', 1);
      if (split == std::string_view::npos)
        fail("tokenizer merge ", rank, " \"", merge, "\" has no space");
      const std::string_view left = merge.substr(0, split);
      const std::string_view right = merge.substr(split + 1);
      const auto left_id = index.find(left);
      const auto right_id = index.find(right);
      const auto merged_id = index.find(std::string(left) + std::string(right));
      // Merges whose parts or result are not tokens can never fire; skip them.
      if (!left_id || !right_id || !merged_id) continue;
      merges_.try_emplace(pair_key(*left_id, *right_id),
                          Merge{static_cast<std::uint32_t>(rank), *merged_id});
    }
  }

  // Appends the ids of `bytes` (raw bytes of one pre-token) to `out`.
  void encode(std::string_view bytes, std::vector<TokenId>& out) const {
    if (bytes.empty()) return;
    std::vector<Symbol> symbols(bytes.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      symbols[i] = {byte_ids_[static_cast<std::uint8_t>(bytes[i])], static_cast<int>(i) - 1,
                    i + 1 < bytes.size() ? static_cast<int>(i) + 1 : -1};
    }

    std::priority_queue<Candidate, std::vector<Candidate>, LaterCandidate> queue;
    const auto consider = [&](int left) {
      if (left < 0) return;
      const int right = symbols[left].next;
      if (right < 0) return;
      const auto found = merges_.find(pair_key(symbols[left].id, symbols[right].id));
      if (found == merges_.end()) return;
      queue.push(
          {found->second.rank, left, symbols[left].id, symbols[right].id, found->second.merged});
    };
    for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);

    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& left = symbols[top.left];
      // Ids pin down the byte spans, so matching ids mean the pair is still there.
      if (left.id != top.left_id || left.next < 0 || symbols[left.next].id != top.right_id) {
        continue;
      }
      Symbol& right = symbols[left.next];
      left.id = top.merged;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = top.left;
      right.id = kNoToken;
      consider(left.prev);
      consider(top.left);
    }

    for (int i = 0; i >= 0; i = symbols[i].next) {
      if (symbols[i].id != kNoToken) {
        out.push_back(symbols[i].id);
      } else if (unknown_id_) {
        out.push_back(*unknown_id_);
      } else {
        fail("tokenizer: the vocabulary has no token for byte ",
             static_cast<unsigned>(static_cast<std::uint8_t>(bytes[static_cast<std::size_t>(i)])));
      }
    }
  }

 private:
  static constexpr TokenId kNoToken = -1;

  struct Merge {
    std::uint32_t rank;
    TokenId merged;
  };
  struct Symbol {
    TokenId id;
    int prev;
    int next;
  };
  struct Candidate {
    std::uint32_t rank;
    int left;
    TokenId left_id;
    TokenId right_id;
    TokenId merged;
  };
  struct LaterCandidate {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
    }
  };

  static std::uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }

  std::array<TokenId, 256> byte_ids_{};
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::optional<TokenId> unknown_id_;
};

}  // namespace smol
