// GrammarMatcher: one request's place in a grammar. Small and cheap to make: the work
// lives in the shared TokenMaskTable; the matcher holds a state id, and the work the
// table did for it, which has a budget (GrammarLimits::max_request_work): past it, the
// next call throws GrammarLimitError and the reply ends (StopReason::grammar_budget).
//
//   auto table = std::make_shared<TokenMaskTable>(parse_gbnf(text), trie);  // per grammar
//   GrammarMatcher matcher(table);                                         // per request
//   for (;;) {
//     matcher.allowed_tokens()->apply(logits);  // others -> -inf
//     TokenId t = sample(logits);
//     matcher.accept(t);                         // an end-of-generation token ends it
//   }
#pragma once

#include <memory>
#include <string_view>
#include <utility>

#include "smol/core/error.hpp"
#include "smol/grammar/grammar_limits.hpp"
#include "smol/grammar/token_mask_table.hpp"
#include "smol/grammar/token_set.hpp"

namespace smol {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<TokenMaskTable> table)
      : table_(std::move(table)), state_(table_->initial_state()) {}

  // The tokens that may come next: those whose bytes continue the grammar, plus the
  // end-of-generation tokens where the grammar may end. Empty once ended.
  std::shared_ptr<const TokenSet> allowed_tokens() {
    if (ended_) return std::make_shared<const TokenSet>(empty_set());
    check_work();
    return table_->allowed(state_, &work_);
  }

  // Moves past a sampled token; false (and no change) when the grammar does not allow
  // it there.
  bool accept(TokenId token) {
    if (ended_) return false;
    const TokenTrie& vocabulary = table_->vocabulary();
    if (token < 0 || static_cast<std::size_t>(token) >= vocabulary.vocabulary_size()) return false;
    if (vocabulary.is_end_of_generation(token)) {
      if (!table_->can_end(state_)) return false;
      ended_ = true;
      return true;
    }
    const std::string_view piece = vocabulary.piece(token);
    if (piece.empty()) return false;
    return accept_bytes(piece);
  }

  // Moves past text written outside the sampler (a forced prefix); false and no
  // change when the grammar refuses it.
  bool accept_bytes(std::string_view bytes) {
    if (ended_) return false;
    check_work();
    const auto next = table_->advance(state_, bytes, &work_);
    if (!next) return false;
    state_ = *next;
    return true;
  }

  bool can_end() const { return !ended_ && table_->can_end(state_); }
  // The grammar is complete and nothing may follow: only ending is left.
  bool exhausted() const { return ended_ || table_->exhausted(state_); }
  bool ended() const { return ended_; }
  GrammarStateId state() const { return state_; }
  void reset() {
    state_ = table_->initial_state();
    ended_ = false;
    work_ = 0;
  }
  const TokenMaskTable& table() const { return *table_; }
  // The table's work this request has caused (states and masks computed for it).
  std::size_t work() const { return work_; }

 private:
  // Throws when this request's steps together have spent their budget.
  void check_work() const {
    const std::size_t limit = table_->limits().max_request_work;
    if (work_ > limit) {
      throw GrammarLimitError(
          GrammarLimitError::Budget::request_work,
          cat("grammar: this reply's steps needed more than ", limit, " expansions together"));
    }
  }

  TokenSet empty_set() const {
    const std::size_t n = table_->vocabulary().vocabulary_size();
    return TokenSet::from_bits(std::vector<std::uint64_t>((n + 63) / 64, 0), n);
  }

  std::shared_ptr<TokenMaskTable> table_;
  GrammarStateId state_;
  bool ended_ = false;
  std::size_t work_ = 0;
};

}  // namespace smol
