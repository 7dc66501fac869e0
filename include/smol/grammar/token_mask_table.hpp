// TokenMaskTable: the allowed-token masks of one grammar over one vocabulary, computed
// once per grammar state and then reused, shared by every request with that grammar.
//
// Why hand-written: no C++ library packaged by Debian computes exact grammar token masks
// (llama.cpp's sampler is not a library one can link apart from llama.cpp, and XGrammar
// and Outlines are Python/CUDA projects), and the mask must be exact both ways: a token
// is allowed if and only if its bytes continue a text the grammar accepts.
//
// How it is fast. The naive mask runs the recognizer over every token of the vocabulary
// at every step (milliseconds for 128K tokens). Here three things are cached:
//  1. The recognizer's states are interned and each byte transition is memoized: the
//     grammar becomes a DFA over bytes, built lazily as text visits it. A transition
//     already seen costs one array read instead of expanding stacks.
//  2. A mask is one walk of the vocabulary's byte trie (TokenTrie) through that DFA:
//     tokens sharing a prefix share its transitions, and a byte the grammar refuses
//     prunes every token below it.
//  3. Each state's mask is kept (as a TokenSet: an id list or a bitset, whichever is
//     smaller). Generation revisits the same states constantly (every character of a JSON
//     string leads back to the "inside a string" state; every object of an array to the
//     same "after a comma" state), so after the first visit a mask costs a lookup.
// The state is the whole stack set, so a cached mask is exact, never an approximation of
// a context-dependent answer. A grammar with unbounded nesting (any JSON value) meets a
// new state per nesting depth; the masks it caches are capped (mask_memory_limit), and
// over the cap they are dropped and computed again on demand.
//
// Bounded (grammar_limits.hpp): each call's work (the recognizer's expansions and the
// trie nodes a mask walks) has a budget, and so has the table's memory; a call over
// either throws GrammarLimitError, and the table stays usable for the states it has.
// compile() does a grammar's first state and first mask up front, with a cancel check
// and a deadline, so that a server pays a grammar's costliest part on the requesting
// connection's thread, where it can be abandoned, and not on the engine thread.
//
// Thread-safe: every call takes the table's mutex (requests of one scheduler all run on
// its engine thread, so it is uncontended there).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/core/error.hpp"
#include "smol/grammar/grammar.hpp"
#include "smol/grammar/grammar_limits.hpp"
#include "smol/grammar/recognizer.hpp"
#include "smol/grammar/token_set.hpp"
#include "smol/grammar/token_trie.hpp"

namespace smol {

using GrammarStateId = std::int32_t;

class TokenMaskTable {
 public:
  static constexpr std::size_t kDefaultMaskMemoryLimit = std::size_t{256} << 20;

  // The grammar's first state is computed here, within limits.max_step_work.
  TokenMaskTable(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 std::size_t mask_memory_limit = kDefaultMaskMemoryLimit,
                 const GrammarLimits& limits = {})
      : TokenMaskTable(std::move(grammar), std::move(trie), mask_memory_limit, limits, nullptr,
                       std::nullopt) {}

  // A table with its first state and that state's mask computed, the whole within
  // `limits` (compile_seconds included), polling `cancel` as it goes. Throws
  // GrammarLimitError over a budget, Cancelled, and smol::Error when no token of the
  // vocabulary can begin a text of the grammar (a request with it could never write
  // anything, so it is refused before it starts).
  static std::shared_ptr<TokenMaskTable> compile(
      std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
      const GrammarLimits& limits = {}, const CancelCheck& cancel = {},
      std::size_t mask_memory_limit = kDefaultMaskMemoryLimit) {
    const auto seconds = std::chrono::duration<double>(limits.compile_seconds);
    const auto deadline = GrammarWork::Clock::now() +
                          std::chrono::duration_cast<GrammarWork::Clock::duration>(seconds);
    return compile_until(std::move(grammar), std::move(trie), limits, cancel, deadline,
                         mask_memory_limit);
  }

  // The same, with the deadline given (a caller that parsed the grammar under it too).
  static std::shared_ptr<TokenMaskTable> compile_until(
      std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
      const GrammarLimits& limits, const CancelCheck& cancel,
      GrammarWork::Clock::time_point deadline,
      std::size_t mask_memory_limit = kDefaultMaskMemoryLimit) {
    cancel.throw_if_requested();
    auto table = std::shared_ptr<TokenMaskTable>(new TokenMaskTable(
        std::move(grammar), std::move(trie), mask_memory_limit, limits, &cancel, deadline));
    std::lock_guard lock(table->mutex_);
    table->work_.watch(&cancel, deadline, limits.compile_seconds);
    try {
      table->work_.start(limits.max_step_work);
      const std::shared_ptr<const TokenSet> first = table->mask_of(table->initial_);
      if (first->empty()) {
        fail("grammar: no token of the model's vocabulary can begin a text it accepts (",
             table->grammar_->describe_position(table->some_position(table->initial_)),
             "): a reply could write nothing");
      }
    } catch (...) {
      table->work_.unwatch();
      throw;
    }
    table->work_.unwatch();
    return table;
  }

  GrammarStateId initial_state() const { return initial_; }

  // The state after `bytes`; nullopt when the grammar refuses them. Throws
  // GrammarLimitError when a new state needs more than the budgets.
  // `work`, when given, gets the step's work added (a request's total has a budget too:
  // GrammarMatcher).
  std::optional<GrammarStateId> advance(GrammarStateId state, std::string_view bytes,
                                        std::size_t* work = nullptr) {
    std::lock_guard lock(mutex_);
    work_.start(limits_.max_step_work);
    const WorkTally tally{work_, work};
    for (const char c : bytes) {
      state = step(state, static_cast<std::uint8_t>(c));
      if (state < 0) return std::nullopt;
    }
    return state;
  }

  // The tokens allowed in `state`; the same object for as long as the mask stays cached.
  // Throws GrammarLimitError when computing it needs more than the budgets.
  std::shared_ptr<const TokenSet> allowed(GrammarStateId state, std::size_t* work = nullptr) {
    std::lock_guard lock(mutex_);
    work_.start(limits_.max_step_work);
    const WorkTally tally{work_, work};
    return mask_of(state);
  }

  const GrammarLimits& limits() const { return limits_; }

  // What the table holds now: states, transitions, stack frames and masks. Read without
  // the lock (a server's cache of tables weighs them while the engine uses them).
  std::size_t memory_bytes() const { return published_bytes_.load(std::memory_order_relaxed); }

  // Half its memory budget spent: a cache should compile the grammar afresh for new
  // requests rather than hand them a table that will soon refuse new states (the
  // requests holding this one keep it).
  bool filling() const { return memory_bytes() * 2 > limits_.max_table_bytes; }

  bool can_end(GrammarStateId state) const {
    std::lock_guard lock(mutex_);
    return GrammarRecognizer::can_end(states_[static_cast<std::size_t>(state)]);
  }
  bool exhausted(GrammarStateId state) const {
    std::lock_guard lock(mutex_);
    return GrammarRecognizer::exhausted(states_[static_cast<std::size_t>(state)]);
  }

  const TokenTrie& vocabulary() const { return *trie_; }
  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }

  struct Stats {
    std::size_t states = 0, cached_masks = 0, mask_bytes = 0, stack_nodes = 0;
    std::size_t peak_step_work = 0;  // the most work one call took (GrammarLimits::max_step_work)
  };
  Stats stats() const {
    std::lock_guard lock(mutex_);
    Stats s{states_.size(), 0, mask_bytes_, recognizer_.stacks().size(), work_.peak()};
    for (const auto& m : masks_) s.cached_masks += m ? 1 : 0;
    return s;
  }

 private:
  static constexpr GrammarStateId kUnknown = -1, kDead = -2;

  // Adds a call's recognizer work to the caller's total when the call ends, by return or
  // by throw.
  struct WorkTally {
    const GrammarWork& work;
    std::size_t* total;
    ~WorkTally() {
      if (total != nullptr) *total += work.recognizer_units();
    }
  };

  struct KeyHash {
    std::size_t operator()(const std::vector<std::uint32_t>& key) const {
      std::uint64_t h = 0xcbf29ce484222325ull;
      for (const std::uint32_t v : key) h = (h ^ v) * 0x100000001b3ull;
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };

  // The first state, under the cancel check and the deadline when compile() gives them.
  TokenMaskTable(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                 std::size_t mask_memory_limit, const GrammarLimits& limits,
                 const CancelCheck* cancel, std::optional<GrammarWork::Clock::time_point> deadline)
      : grammar_(grammar),
        recognizer_(std::move(grammar)),
        trie_(std::move(trie)),
        mask_limit_(mask_memory_limit),
        limits_(limits) {
    if (!trie_) fail("grammar: no vocabulary");
    recognizer_.meter(&work_);
    work_.track_memory([this] { return structure_bytes(); }, limits_.max_table_bytes);
    depth_states_.resize(trie_->max_depth() + 1);
    work_.watch(cancel, deadline, limits.compile_seconds);
    work_.start(limits_.max_step_work);
    initial_ = intern(recognizer_.initial());
    work_.unwatch();
  }

  std::shared_ptr<const TokenSet> mask_of(GrammarStateId state) {
    std::shared_ptr<const TokenSet>& cached = masks_[static_cast<std::size_t>(state)];
    if (cached) return cached;
    auto mask = std::make_shared<const TokenSet>(compute_mask(state));
    mask_bytes_ += mask->memory_bytes();
    if (mask_bytes_ > mask_limit_) {
      for (auto& m : masks_) m.reset();
      mask_bytes_ = mask->memory_bytes();
    }
    masks_[static_cast<std::size_t>(state)] = mask;
    publish_bytes();
    return mask;
  }

  // Where one of a state's readings waits, for a message.
  std::uint32_t some_position(GrammarStateId state) const {
    const GrammarState& s = states_[static_cast<std::size_t>(state)];
    for (const StackId stack : s.stacks) {
      if (stack != kEmptyStack) return recognizer_.stacks().node(stack).position;
    }
    return grammar_->rules()[grammar_->root()].alternatives.front();
  }

  // A state's own bytes: its stacks, its key in `ids_` (with the map's node), its row of
  // byte transitions and its mask slot.
  static std::size_t state_bytes(const GrammarState& state) {
    return sizeof(GrammarState) + 2 * state.stacks.size() * sizeof(StackId) + 64 +
           256 * sizeof(GrammarStateId) + sizeof(std::shared_ptr<const TokenSet>);
  }
  std::size_t structure_bytes() const { return states_bytes_ + recognizer_.memory_bytes(); }
  void publish_bytes() {
    published_bytes_.store(structure_bytes() + mask_bytes_, std::memory_order_relaxed);
  }

  GrammarStateId intern(GrammarState state) {
    key_.clear();
    key_.push_back(state.partial.value);
    key_.push_back(state.partial.remaining | (std::uint32_t{state.partial.length} << 8));
    key_.insert(key_.end(), state.stacks.begin(), state.stacks.end());
    const auto found = ids_.find(key_);
    if (found != ids_.end()) return found->second;
    const std::size_t bytes = state_bytes(state);
    if (structure_bytes() + bytes > limits_.max_table_bytes) {
      const std::uint32_t position = state.stacks.empty() || state.stacks.back() == kEmptyStack
                                         ? 0
                                         : recognizer_.stacks().node(state.stacks.back()).position;
      throw GrammarLimitError(
          GrammarLimitError::Budget::table_bytes,
          cat("grammar: its tables need more than ", shown_bytes(limits_.max_table_bytes), ", at ",
              grammar_->describe_position(position), " (", states_.size(), " states so far)"));
    }
    const auto id = static_cast<GrammarStateId>(states_.size());
    ids_.emplace(key_, id);
    states_bytes_ += bytes;
    states_.push_back(std::move(state));
    transitions_.resize(transitions_.size() + 256, kUnknown);
    masks_.emplace_back();
    publish_bytes();
    return id;
  }

  // One byte through the lazily built DFA.
  GrammarStateId step(GrammarStateId state, std::uint8_t byte) {
    const std::size_t slot = static_cast<std::size_t>(state) * 256 + byte;
    GrammarStateId next = transitions_[slot];
    if (next != kUnknown) return next;
    next = recognizer_.advance(states_[static_cast<std::size_t>(state)], byte, scratch_)
               ? intern(scratch_)
               : kDead;
    transitions_[slot] = next;  // after intern: it may have grown the table
    return next;
  }

  TokenSet compute_mask(GrammarStateId state) {
    const std::size_t n = trie_->vocabulary_size();
    std::vector<std::uint64_t> bits((n + 63) / 64, 0);
    const auto& nodes = trie_->nodes();
    const auto& ids = trie_->token_ids();
    depth_states_[0] = state;
    for (std::size_t i = 0; i < nodes.size();) {
      const TokenTrie::Node& node = nodes[i];
      if (work_.charge(1, /*walk=*/true)) {
        work_.poll([&] { return grammar_->describe_position(some_position(state)); });
      }
      const GrammarStateId next = step(depth_states_[node.depth - 1u], node.byte);
      if (next < 0) {
        i = node.subtree_end;  // no token with this prefix can continue the grammar
        continue;
      }
      depth_states_[node.depth] = next;
      for (std::uint32_t t = node.tokens_begin; t < node.tokens_begin + node.tokens_count; ++t) {
        const auto id = static_cast<std::size_t>(ids[t]);
        bits[id / 64] |= std::uint64_t{1} << (id % 64);
      }
      ++i;
    }
    if (GrammarRecognizer::can_end(states_[static_cast<std::size_t>(state)])) {
      for (const TokenId id : trie_->end_of_generation()) {
        const auto i = static_cast<std::size_t>(id);
        bits[i / 64] |= std::uint64_t{1} << (i % 64);
      }
    }
    return TokenSet::from_bits(std::move(bits), n);
  }

  mutable std::mutex mutex_;
  std::shared_ptr<const Grammar> grammar_;
  GrammarRecognizer recognizer_;
  std::shared_ptr<const TokenTrie> trie_;
  std::size_t mask_limit_;
  GrammarLimits limits_;
  GrammarWork work_;
  std::size_t mask_bytes_ = 0;
  std::size_t states_bytes_ = 0;
  std::atomic<std::size_t> published_bytes_{0};
  GrammarStateId initial_ = 0;
  std::vector<GrammarState> states_;
  std::unordered_map<std::vector<std::uint32_t>, GrammarStateId, KeyHash> ids_;
  std::vector<GrammarStateId> transitions_;  // states_.size() x 256
  std::vector<std::shared_ptr<const TokenSet>> masks_;
  std::vector<GrammarStateId> depth_states_;
  std::vector<std::uint32_t> key_;
  GrammarState scratch_;
};

}  // namespace smol
