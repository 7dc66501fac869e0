// TokenTrie: a vocabulary as the grammar sees it, the bytes each token writes, arranged
// as a byte trie so that a mask is one walk in which tokens sharing a prefix share its
// work, and a prefix the grammar refuses removes its whole subtree at once.
//
// Made once per vocabulary and shared by every grammar over it. Which tokens can match
// grammar text: normal, byte and user-defined tokens with at least one byte. Control
// tokens (<|im_start|>, ...) never do, unless named as `spelled` (a tool-call syntax's
// markers, as [TOOL_CALLS] is a control token in Mistral's vocabulary: they match their
// spelling), nor unknown or unused ones, nor a token with no bytes (it would let the
// model emit forever without advancing). End-of-generation tokens are listed apart: the
// grammar allows them only where it may end.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/tokenizer.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

class TokenTrie {
 public:
  // The trie in preorder: a node's subtree is the run of nodes [its index, subtree_end).
  struct Node {
    std::uint32_t subtree_end;
    std::uint32_t tokens_begin;  // into token_ids(): the tokens whose bytes end here
    std::uint16_t tokens_count;
    std::uint16_t depth;  // 1 for a token's first byte
    std::uint8_t byte;
  };

  explicit TokenTrie(const Tokenizer& tokenizer, std::span<const TokenId> spelled = {})
      : size_(tokenizer.size()) {
    pieces_.resize(size_);
    for (std::size_t i = 0; i < size_; ++i) {
      const auto id = static_cast<TokenId>(i);
      const TokenType type = tokenizer.vocabulary().type_of(id);
      const bool text =
          type == TokenType::normal || type == TokenType::byte || type == TokenType::user_defined;
      if (text) pieces_[i] = tokenizer.token_to_piece(id);
    }
    for (const TokenId id : spelled) {
      if (id >= 0 && static_cast<std::size_t>(id) < size_) {
        pieces_[static_cast<std::size_t>(id)] =
            tokenizer.token_to_piece(id, {.render_special = true});
      }
    }
    end_of_generation_ = tokenizer.end_of_generation_ids();
    std::sort(end_of_generation_.begin(), end_of_generation_.end());
    for (const TokenId id : end_of_generation_) pieces_[static_cast<std::size_t>(id)].clear();
    build();
  }

  std::size_t vocabulary_size() const { return size_; }
  // The bytes a token writes; empty for tokens that never match grammar text.
  std::string_view piece(TokenId id) const { return pieces_[static_cast<std::size_t>(id)]; }
  const std::vector<TokenId>& end_of_generation() const { return end_of_generation_; }
  bool is_end_of_generation(TokenId id) const {
    return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
  }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<TokenId>& token_ids() const { return token_ids_; }
  std::size_t max_depth() const { return max_depth_; }

 private:
  static constexpr std::size_t kMaxTokenBytes = 65535;

  void build() {
    std::vector<TokenId> order;
    for (std::size_t i = 0; i < size_; ++i) {
      if (!pieces_[i].empty() && pieces_[i].size() <= kMaxTokenBytes) {
        order.push_back(static_cast<TokenId>(i));
      }
    }
    std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) {
      return pieces_[static_cast<std::size_t>(a)] < pieces_[static_cast<std::size_t>(b)];
    });
    // Sorted pieces give the preorder directly: each piece adds the nodes below its
    // longest common prefix with the piece before it.
    std::vector<std::uint32_t> path;  // node index at each depth of the current piece
    std::string_view previous;
    for (const TokenId id : order) {
      const std::string_view piece = pieces_[static_cast<std::size_t>(id)];
      std::size_t common = 0;
      while (common < previous.size() && common < piece.size() &&
             previous[common] == piece[common]) {
        ++common;
      }
      path.resize(common);
      for (std::size_t d = common; d < piece.size(); ++d) {
        path.push_back(static_cast<std::uint32_t>(nodes_.size()));
        nodes_.push_back({0, static_cast<std::uint32_t>(token_ids_.size()), 0,
                          static_cast<std::uint16_t>(d + 1), static_cast<std::uint8_t>(piece[d])});
      }
      Node& last = nodes_[path.back()];
      if (last.tokens_count == 0) last.tokens_begin = static_cast<std::uint32_t>(token_ids_.size());
      ++last.tokens_count;
      token_ids_.push_back(id);
      max_depth_ = std::max(max_depth_, piece.size());
      previous = piece;
    }
    // A node's subtree ends at the next node no deeper than it.
    std::vector<std::uint32_t> open;
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      while (!open.empty() && nodes_[open.back()].depth >= nodes_[i].depth) {
        nodes_[open.back()].subtree_end = i;
        open.pop_back();
      }
      open.push_back(i);
    }
    for (const std::uint32_t i : open)
      nodes_[i].subtree_end = static_cast<std::uint32_t>(nodes_.size());
  }

  std::size_t size_;
  std::vector<std::string> pieces_;
  std::vector<TokenId> end_of_generation_;
  std::vector<Node> nodes_;
  std::vector<TokenId> token_ids_;
  std::size_t max_depth_ = 0;
};

}  // namespace smol
