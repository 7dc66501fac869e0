// TokenMaskCache: the server's TokenMaskTables, one per grammar text, the most recently
// used kept.
//
// A table caches the allowed-token mask of every grammar state it has met, so a schema
// that comes back (clients send the same one with every request) costs a lookup per
// token from its second request on. The vocabulary's byte trie that each table walks is
// built once, here, for the server's model. Connections' threads call table(); the
// engine thread uses the tables (each locks its own mutex).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "smol/grammar/token_mask_table.hpp"
#include "smol/grammar/token_trie.hpp"
#include "smol/serve/structured_output.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol::serve {

class TokenMaskCache {
 public:
  // At most `tables` grammars are kept, each with at most `mask_bytes` of masks (a
  // grammar with unbounded nesting meets new states forever; over the cap its table
  // drops masks and computes them again), so the cache is bounded by their product.
  explicit TokenMaskCache(const Tokenizer& tokenizer, std::size_t tables = 8,
                          std::size_t mask_bytes = std::size_t{32} << 20)
      : trie_(std::make_shared<const TokenTrie>(tokenizer)),
        capacity_(tables),
        mask_bytes_(mask_bytes) {}

  // The table for `output`'s grammar: the cached one for the same text, else a new one.
  // A table pushed out of the cache lives on in the requests that hold it.
  std::shared_ptr<TokenMaskTable> table(const OutputGrammar& output) {
    std::lock_guard lock(mutex_);
    for (auto it = recent_.begin(); it != recent_.end(); ++it) {
      if (it->first == output.gbnf) {
        recent_.splice(recent_.begin(), recent_, it);  // now the most recent
        return recent_.front().second;
      }
    }
    auto table = std::make_shared<TokenMaskTable>(output.grammar, trie_, mask_bytes_);
    recent_.emplace_front(output.gbnf, table);
    if (recent_.size() > capacity_) recent_.pop_back();
    return table;
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return recent_.size();
  }

 private:
  std::shared_ptr<const TokenTrie> trie_;
  std::size_t capacity_, mask_bytes_;
  mutable std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<TokenMaskTable>>> recent_;  // newest first
};

}  // namespace smol::serve
