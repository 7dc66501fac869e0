// TokenMaskCache: the server's TokenMaskTables, one per grammar text, compiled on the
// requesting connection's thread and the most recently used kept.
//
// A table caches the allowed-token mask of every grammar state it has met, so a schema
// that comes back (clients send the same one with every request) costs a lookup per
// token from its second request on. The vocabulary's byte trie that each table walks is
// built once, here, for the server's model.
//
// Compiling (TokenMaskTable::compile: the first state and its mask, within the
// grammar's budgets) runs on the thread that asks, never under the cache's lock: other
// requests, with other grammars or none, go on meanwhile, and the engine thread never
// waits for a compilation. Requests that bring the same grammar while it compiles wait
// for that one compilation, each polling its own cancel check; when the compiling
// request is cancelled (its client left), one of them compiles it instead. A grammar
// that fails its budgets is not kept: each request with it gets the same 400.
//
// Bounded: at most `tables` grammars and `bytes` of tables are kept (the least recently
// used go first, weighed again at every use since tables grow; a table pushed out lives
// on in the requests that hold it), each table holds at most
// GrammarLimits::max_table_bytes of states and `mask_bytes` of masks (a grammar with
// unbounded nesting meets new states forever), and at most `compilations` compile at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <future>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <semaphore>
#include <string>
#include <utility>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/grammar/grammar_limits.hpp"
#include "smol/grammar/token_mask_table.hpp"
#include "smol/grammar/token_trie.hpp"
#include "smol/serve/structured_output.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol::serve {

struct TokenMaskCacheOptions {
  std::size_t tables = 8;
  std::size_t bytes = std::size_t{512} << 20;
  std::size_t mask_bytes = std::size_t{32} << 20;  // per table
  // Compilations at once: each may take a table's budget of memory, so a burst of
  // hostile grammars cannot take that many times over; the others wait their turn.
  std::ptrdiff_t compilations = 2;
  GrammarLimits limits{};
  // Control tokens that match their spelling in grammars (TokenTrie's `spelled`).
  std::vector<TokenId> spelled_tokens = {};
};

class TokenMaskCache {
 public:
  explicit TokenMaskCache(const Tokenizer& tokenizer, TokenMaskCacheOptions options = {})
      : trie_(std::make_shared<const TokenTrie>(tokenizer, options.spelled_tokens)),
        options_(options),
        compiling_(options.compilations) {}

  // The compiled table for `output`'s grammar: the cached one for the same text, else
  // one compiled here. Throws what TokenMaskTable::compile throws: GrammarLimitError, a
  // smol::Error for a grammar no token can begin, Cancelled when `cancel` fires.
  std::shared_ptr<TokenMaskTable> table(const OutputGrammar& output,
                                        const CancelCheck& cancel = {}) {
    for (;;) {
      std::shared_future<Table> pending;
      std::promise<Table> promise;
      Entries::iterator mine;
      {
        std::lock_guard lock(mutex_);
        auto found = find(output.gbnf);
        // A table half through its memory budget is left to the requests that hold it:
        // new ones get a fresh table, rather than one that will soon refuse new states.
        if (found != entries_.end() && found->ready && found->table.get()->filling()) {
          entries_.erase(found);
          found = entries_.end();
        }
        if (found != entries_.end()) {
          entries_.splice(entries_.begin(), entries_, found);  // now the most recent
          pending = found->table;
          if (found->ready) evict(found);  // kept tables grow as requests use them
        } else {
          entries_.push_front({output.gbnf, promise.get_future().share(), false});
          mine = entries_.begin();
        }
      }
      if (pending.valid()) {
        while (pending.wait_for(kWaitPoll) != std::future_status::ready) {
          cancel.throw_if_requested();
        }
        try {
          return pending.get();
        } catch (const Cancelled&) {
          cancel.throw_if_requested();
          continue;  // its compiler's request was cancelled, not this one: compile it here
        }
      }
      Table table;
      try {
        const CompileTurn turn(compiling_, cancel);
        started_.fetch_add(1, std::memory_order_relaxed);
        table = TokenMaskTable::compile(output.grammar, trie_, options_.limits, cancel,
                                        options_.mask_bytes);
      } catch (...) {
        {
          // Out of the cache before the waiters hear: one that retries compiles anew.
          std::lock_guard lock(mutex_);
          entries_.erase(mine);  // pending entries are never evicted: `mine` is still there
        }
        promise.set_exception(std::current_exception());
        throw;
      }
      promise.set_value(table);
      std::lock_guard lock(mutex_);
      mine->ready = true;
      evict(mine);
      return table;
    }
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

  // Compilations begun so far (a grammar met for the first time, or again after its
  // table was dropped or its compilation failed or was cancelled).
  std::size_t compilations() const { return started_.load(std::memory_order_relaxed); }

  // The bytes of the compiled tables kept.
  std::size_t bytes() const {
    std::lock_guard lock(mutex_);
    return kept_bytes();
  }

 private:
  using Table = std::shared_ptr<TokenMaskTable>;
  static constexpr auto kWaitPoll = std::chrono::milliseconds(20);

  // A place among the compilations allowed at once, waited for while polling `cancel`.
  class CompileTurn {
   public:
    CompileTurn(std::counting_semaphore<>& places, const CancelCheck& cancel) : places_(places) {
      while (!places_.try_acquire_for(kWaitPoll)) cancel.throw_if_requested();
    }
    ~CompileTurn() { places_.release(); }
    CompileTurn(const CompileTurn&) = delete;
    CompileTurn& operator=(const CompileTurn&) = delete;

   private:
    std::counting_semaphore<>& places_;
  };

  struct Entry {
    std::string gbnf;
    std::shared_future<Table> table;
    bool ready = false;  // compiled: only such entries are weighed and evicted
  };
  using Entries = std::list<Entry>;  // the most recently used first

  Entries::iterator find(const std::string& gbnf) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->gbnf == gbnf) return it;
    }
    return entries_.end();
  }

  std::size_t kept_bytes() const {
    std::size_t total = 0;
    for (const Entry& e : entries_) total += e.ready ? e.table.get()->memory_bytes() : 0;
    return total;
  }

  // Drops the least recently used compiled tables, never `keep`, while the cache holds
  // too many or too much.
  void evict(Entries::iterator keep) {
    while (entries_.size() > options_.tables || kept_bytes() > options_.bytes) {
      auto victim = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->ready && it != keep) victim = it;  // the last such: the least recent
      }
      if (victim == entries_.end()) return;
      entries_.erase(victim);
    }
  }

  std::shared_ptr<const TokenTrie> trie_;
  TokenMaskCacheOptions options_;
  std::counting_semaphore<> compiling_;
  std::atomic<std::size_t> started_{0};
  mutable std::mutex mutex_;
  Entries entries_;
};

}  // namespace smol::serve
