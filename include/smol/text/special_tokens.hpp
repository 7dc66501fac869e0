// Cutting special tokens (<|im_start|>, <think>, ...) out of text before BPE, so the
// text "<|im_end|>" becomes one token instead of eight pieces of punctuation.
//
// As in llama.cpp, the longest special tokens are cut first, each wherever it occurs
// in the text that is still raw; a shorter token can then only match in what is left.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/text/vocabulary.hpp"

namespace smol {

struct TextFragment {
  std::string_view text;           // the raw text, or the special token's spelling
  std::optional<TokenId> special;  // set when this fragment is one special token
};

struct SpecialToken {
  std::string spelling;
  TokenId id;
};

// Orders `tokens` longest first (lowest id first among equal lengths).
inline void sort_longest_first(std::vector<SpecialToken>& tokens) {
  std::sort(tokens.begin(), tokens.end(), [](const SpecialToken& a, const SpecialToken& b) {
    return a.spelling.size() != b.spelling.size() ? a.spelling.size() > b.spelling.size()
                                                  : a.id < b.id;
  });
}

// Splits `text` around every occurrence of `tokens` (sorted by sort_longest_first).
inline std::vector<TextFragment> split_special_tokens(std::string_view text,
                                                      const std::vector<SpecialToken>& tokens) {
  std::vector<TextFragment> fragments;
  if (!text.empty()) fragments.push_back({text, std::nullopt});
  std::vector<TextFragment> next;
  for (const SpecialToken& token : tokens) {
    if (token.spelling.empty()) continue;
    bool found_any = false;
    next.clear();
    for (const TextFragment& fragment : fragments) {
      if (fragment.special) {
        next.push_back(fragment);
        continue;
      }
      std::string_view rest = fragment.text;
      for (std::size_t at; (at = rest.find(token.spelling)) != std::string_view::npos;) {
        found_any = true;
        if (at > 0) next.push_back({rest.substr(0, at), std::nullopt});
        next.push_back({token.spelling, token.id});
        rest.remove_prefix(at + token.spelling.size());
      }
      if (!rest.empty()) next.push_back({rest, std::nullopt});
    }
    if (found_any) fragments.swap(next);
  }
  return fragments;
}

}  // namespace smol
