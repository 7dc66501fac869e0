// HostPromptCache: the K/V of prompts evicted from the KV pool, kept in host memory
// (llama-server's --cache-ram), so that a conversation that comes back after other
// conversations took its pages has its prefix copied back instead of computed again.
//
// The pool is sized for the sequences running at once; an agent's server sees more
// conversations than slots, each resending a long history. The scheduler (scheduler.hpp)
// hands an evicted cached sequence's tokens and pages here (KvPool::copy_out: its bytes
// exactly, in the pool's own key and value types, so nothing is lost and a copy back is a
// memcpy); when a request's prompt shares more with an entry here than with anything in
// the pool, the entry's pages are copied back into the pool (KvPool::copy_in) and forked
// as any cached sequence is. Copying is many times faster than computing: a page of 256
// positions is one memcpy of its bytes, against a forward pass over the weights.
//
// Bounded by bytes: least recently used first out; an entry larger than the whole budget
// is not kept. An entry whose tokens begin another's is dropped for the longer one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <list>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "smol/text/vocabulary.hpp"

namespace smol {

class HostPromptCache {
 public:
  struct Entry {
    std::vector<TokenId> tokens;  // those whose K/V `pages` hold
    std::vector<std::byte> pages;
  };

  explicit HostPromptCache(std::size_t max_bytes = 0) : max_bytes_(max_bytes) {}

  bool enabled() const noexcept { return max_bytes_ > 0; }
  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t size() const noexcept { return entries_.size(); }

  // Keeps `entry` as the most recently used.
  void keep(Entry entry) {
    if (!enabled() || entry.tokens.empty() || entry.pages.size() > max_bytes_) return;
    for (auto it = entries_.begin(); it != entries_.end();) {
      const std::size_t common = common_prefix(it->tokens, entry.tokens);
      if (common == entry.tokens.size()) return;  // held already, as long or longer
      if (common == it->tokens.size()) {          // a shorter copy of the same: replaced
        bytes_ -= it->pages.size();
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
    bytes_ += entry.pages.size();
    entries_.push_back(std::move(entry));
    while (bytes_ > max_bytes_) {
      bytes_ -= entries_.front().pages.size();
      entries_.pop_front();
    }
  }

  // The entry that shares the longest prefix with `prompt`, more than `at_least` tokens,
  // taken out of the cache (the pool holds it next); nullopt when none does.
  std::optional<Entry> take_longest(std::span<const TokenId> prompt, std::size_t at_least) {
    auto best = entries_.end();
    std::size_t longest = at_least;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      const std::size_t common = common_prefix(it->tokens, prompt);
      if (common > longest) {
        longest = common;
        best = it;
      }
    }
    if (best == entries_.end()) return std::nullopt;
    Entry entry = std::move(*best);
    bytes_ -= entry.pages.size();
    entries_.erase(best);
    return entry;
  }

  static std::size_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b) {
    const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    return static_cast<std::size_t>(std::distance(a.begin(), ia));
  }

 private:
  std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  std::list<Entry> entries_;  // least recently used first
};

}  // namespace smol
