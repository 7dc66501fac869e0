// TokenSet: the tokens a grammar allows next, in whichever form is smaller: a sorted
// list of ids when few are allowed (after `{` in JSON: a quote, a brace, some
// whitespace), a bitset when many are (inside a string: nearly all). Applying it to a
// row of logits sets every other token to -infinity, which the sampler then never picks.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/vocabulary.hpp"

namespace smol {

class TokenSet {
 public:
  TokenSet() = default;

  // From a bitset over `universe` tokens (bit i of word i / 64 is token i).
  static TokenSet from_bits(std::vector<std::uint64_t> bits, std::size_t universe) {
    TokenSet set;
    set.universe_ = universe;
    for (const std::uint64_t word : bits)
      set.count_ += static_cast<std::size_t>(std::popcount(word));
    // A list costs 4 bytes a token, the bitset 1/8 byte a token of the vocabulary.
    if (set.count_ * 32 < universe) {
      set.ids_.reserve(set.count_);
      for (std::size_t w = 0; w < bits.size(); ++w) {
        for (std::uint64_t word = bits[w]; word != 0; word &= word - 1) {
          set.ids_.push_back(
              static_cast<TokenId>(w * 64 + static_cast<std::size_t>(std::countr_zero(word))));
        }
      }
    } else {
      set.bits_ = std::move(bits);
      set.dense_ = true;
    }
    return set;
  }

  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  std::size_t universe() const { return universe_; }
  bool is_bitset() const { return dense_; }

  bool contains(TokenId id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= universe_) return false;
    const auto i = static_cast<std::size_t>(id);
    if (dense_) return (bits_[i / 64] >> (i % 64)) & 1u;
    return std::binary_search(ids_.begin(), ids_.end(), id);
  }

  template <class Visit>
  void for_each(Visit&& visit) const {
    if (!dense_) {
      for (const TokenId id : ids_) visit(id);
      return;
    }
    for (std::size_t w = 0; w < bits_.size(); ++w) {
      for (std::uint64_t word = bits_[w]; word != 0; word &= word - 1) {
        visit(static_cast<TokenId>(w * 64 + static_cast<std::size_t>(std::countr_zero(word))));
      }
    }
  }

  std::vector<TokenId> ids() const {
    std::vector<TokenId> out;
    out.reserve(count_);
    for_each([&](TokenId id) { out.push_back(id); });
    return out;
  }

  // Sets the logit of every token outside the set to -infinity. `logits` may be longer
  // than the vocabulary (padded output rows); the extra rows are never allowed.
  void apply(std::span<float> logits) const {
    constexpr float kNever = -std::numeric_limits<float>::infinity();
    if (dense_) {
      const std::size_t n = std::min(logits.size(), universe_);
      for (std::size_t w = 0; w * 64 < n; ++w) {
        const std::size_t base = w * 64;
        std::uint64_t banned = ~bits_[w];
        if (n - base < 64) banned &= (std::uint64_t{1} << (n - base)) - 1;
        for (; banned != 0; banned &= banned - 1) {
          logits[base + static_cast<std::size_t>(std::countr_zero(banned))] = kNever;
        }
      }
    } else {
      std::vector<float> kept(ids_.size());
      for (std::size_t i = 0; i < ids_.size(); ++i) {
        const auto id = static_cast<std::size_t>(ids_[i]);
        kept[i] = id < logits.size() ? logits[id] : kNever;
      }
      std::fill(logits.begin(),
                logits.begin() + static_cast<std::ptrdiff_t>(std::min(logits.size(), universe_)),
                kNever);
      for (std::size_t i = 0; i < ids_.size(); ++i) {
        const auto id = static_cast<std::size_t>(ids_[i]);
        if (id < logits.size()) logits[id] = kept[i];
      }
    }
    for (std::size_t i = universe_; i < logits.size(); ++i) logits[i] = kNever;
  }

  std::size_t memory_bytes() const {
    return bits_.capacity() * sizeof(std::uint64_t) + ids_.capacity() * sizeof(TokenId);
  }

 private:
  std::size_t universe_ = 0;
  std::size_t count_ = 0;
  bool dense_ = false;
  std::vector<std::uint64_t> bits_;  // dense_
  std::vector<TokenId> ids_;         // !dense_, sorted
};

}  // namespace smol
