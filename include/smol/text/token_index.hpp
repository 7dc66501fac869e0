// Lookup of token ids by their vocabulary spelling.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "smol/text/vocabulary.hpp"

namespace smol {

class TokenIndex {
 public:
  TokenIndex() = default;

  // When a spelling repeats, the lowest id wins (as in llama.cpp and HF tokenizers).
  explicit TokenIndex(const std::vector<std::string>& tokens) {
    ids_.reserve(tokens.size());
    for (std::size_t id = 0; id < tokens.size(); ++id) {
      ids_.emplace(tokens[id], static_cast<TokenId>(id));
    }
  }

  std::optional<TokenId> find(std::string_view spelling) const {
    const auto found = ids_.find(spelling);
    if (found == ids_.end()) return std::nullopt;
    return found->second;
  }

 private:
  struct Hash {
    using is_transparent = void;  // lets find() take a string_view without a copy
    std::size_t operator()(std::string_view text) const {
      return std::hash<std::string_view>{}(text);
    }
  };
  std::unordered_map<std::string, TokenId, Hash, std::equal_to<>> ids_;
};

}  // namespace smol
