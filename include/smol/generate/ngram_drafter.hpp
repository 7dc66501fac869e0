// NgramDrafter: prompt lookup decoding. Text that is being copied, quoted, extracted or
// rewritten repeats spans of what came before; when the last few tokens occurred earlier,
// the tokens that followed them then are a good guess for what follows now.
//
// The lookup takes the longest suffix of the history, from max_ngram tokens down to
// min_ngram, that also occurs earlier, and proposes what followed its latest earlier
// occurrence (the latest is the likeliest to be the passage being copied now). It costs
// a scan of the history per draft, microseconds against a forward pass; with no match it
// proposes nothing and decoding goes on as without it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/generate/drafter.hpp"

namespace smol {

struct NgramSettings {
  // Shortest and longest suffix looked up. Three tokens at least: a match of one or two
  // ("of the", a comma and "and") recurs in any text and guesses wrongly, and each wrong
  // guess costs a share of a pass, while a passage being copied repeats longer runs.
  // Against 1..4, 3..4 made both grounded and open text faster (smol-bench --spec-type
  // ngram-simple; bench/HISTORY.md, "Prompt lookup after a repeat of three tokens"): fewer
  // drafts, more of them kept (the story prompt: 7 drafted, none kept, against 35
  // drafted, 21 kept). vLLM's prompt lookup examples use 3 too; llama.cpp's ngram-simple
  // matches 12 tokens by default (its older lookup example 1..4). The longest, 4 or 8,
  // made no difference there.
  std::size_t min_ngram = 3;
  std::size_t max_ngram = 4;

  // Drafts only after a repeat of at least `n` tokens (smol's --spec-ngram-size-n): the
  // longest looked up stays the default's, or `n` where that is longer, so a larger n
  // asks for longer repeats the way llama.cpp's ngram-simple N does (it matches exactly N).
  static NgramSettings at_least(std::size_t n) {
    return {.min_ngram = n, .max_ngram = std::max(n, NgramSettings{}.max_ngram)};
  }
};

class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(NgramSettings settings = {}) : settings_(settings) {
    if (settings_.min_ngram == 0 || settings_.min_ngram > settings_.max_ngram) {
      fail("n-gram drafter: need 1 <= min_ngram <= max_ngram, not ", settings_.min_ngram, " and ",
           settings_.max_ngram);
    }
  }

  void draft(std::span<const TokenId> history, std::size_t max_tokens,
             std::vector<TokenId>& draft) override {
    if (max_tokens == 0) return;
    const std::size_t size = history.size();
    for (std::size_t n = std::min(settings_.max_ngram, size > 0 ? size - 1 : 0);
         n >= settings_.min_ngram; --n) {
      const std::span<const TokenId> suffix = history.last(n);
      // Latest earlier start first; a start at size - n is the suffix itself.
      for (std::size_t start = size - n; start-- > 0;) {
        if (!std::equal(suffix.begin(), suffix.end(), history.begin() + start)) continue;
        const std::size_t from = start + n;  // what followed it; from < size
        const std::size_t count = std::min(max_tokens, size - from);
        draft.insert(draft.end(), history.begin() + from, history.begin() + from + count);
        return;
      }
    }
  }

 private:
  NgramSettings settings_;
};

}  // namespace smol
