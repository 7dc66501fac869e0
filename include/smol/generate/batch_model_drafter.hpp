// BatchModelDrafter: a draft model with the target's vocabulary guesses for every
// drafting sequence of the batch scheduler at once (llama-server's -md).
//
// The draft model runs on a BatchTransformer of its own, with its own KvPool: a draft
// sequence per target sequence, holding the K/V of the tokens the draft model has seen
// of it. At each step, every sequence that wants guesses first catches up on what its
// draft sequence lacks (the whole prompt the first time; after that the token just
// chosen, or the accepted tokens after a rejection, which rolls the draft sequence back
// to the last token both agree on), all in one pass; then the drafts grow by one greedy
// guess per sequence per pass, k one-token-per-sequence passes for k guesses. The
// weights of the small model are read once per pass for all sequences, as the target's
// are for all their tokens.
//
// Pages: what an ask needs is reserved before its passes. When the pool runs short, the
// draft sequences of sequences not asking now are dropped first (least recently used
// first; they catch up again when they next ask), then asks go without guesses: a
// drafter may always propose nothing, and the reply is the same either way.
//
// The engine should be batch-invariant (BatchOptions::invariant, the default): a
// sequence's guesses are then a function of its history alone, whatever else shares the
// draft model's passes, which is Drafter's contract.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "smol/generate/drafter.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/model/batch_transformer.hpp"

namespace smol {

class BatchModelDrafter final : public BatchDrafter {
 public:
  // Borrows the draft model's engine. `vocabulary_size`: the tokenizer's, which a model's
  // logits rows may exceed (padding rows are never guessed).
  BatchModelDrafter(BatchTransformer& engine, std::size_t vocabulary_size)
      : engine_(&engine), vocabulary_size_(vocabulary_size) {}

  void draft(std::span<const Ask> asks) override {
    ++clock_;
    KvPool& pool = engine_->pool();
    const std::size_t limit = std::min(engine_->max_sequence_length(), pool.capacity());
    std::vector<Work> work;
    for (const Ask& ask : asks) {
      if (ask.history.empty() || ask.max_tokens == 0) continue;
      // Guess i (from 0) is evaluated at position history.size() + i when a guess is
      // wanted after it; every position must fit the draft model's context and pool.
      if (ask.history.size() >= limit) continue;
      auto [it, added] = states_.try_emplace(ask.sequence);
      State& state = it->second;
      if (added) state.sequence = pool.add();
      state.used = clock_;
      // Re-evaluate at least the last token: its logits give the first guess. What the
      // draft sequence holds past the common prefix (rejected guesses, or guesses the
      // scheduler had no room for) is forgotten.
      const std::size_t reused =
          std::min(common_prefix(state.held, ask.history), ask.history.size() - 1);
      state.held.resize(reused);
      pool.truncate(state.sequence, reused);
      work.push_back({&ask, &state, std::min(ask.max_tokens, limit - ask.history.size())});
    }
    if (work.empty()) return;
    reserve_pages(work);
    if (work.empty()) return;

    // The catch-up pass: each sequence's missing tokens, logits for its last.
    std::vector<BatchEntry> batch;
    for (const Work& w : work) {
      const std::span<const TokenId> history = w.ask->history;
      for (std::size_t p = w.state->held.size(); p < history.size(); ++p) {
        batch.push_back({.sequence = w.state->sequence,
                         .token = history[p],
                         .position = p,
                         .logits = p + 1 == history.size()});
      }
      w.state->held.assign(history.begin(), history.end());
    }
    // Then one guess per sequence per pass, for as long as a sequence wants more.
    for (;;) {
      const std::span<const float> logits = engine_->forward(batch);
      const std::size_t row_width = engine_->model().config().n_vocab;
      const std::size_t width = std::min(row_width, vocabulary_size_);
      batch.clear();
      for (std::size_t i = 0; i < work.size(); ++i) {
        Work& w = work[i];
        const TokenId guess = greedy_token(logits.subspan(i * row_width, width));
        w.ask->draft->push_back(guess);
        if (++w.made < w.wanted) {
          batch.push_back({.sequence = w.state->sequence,
                           .token = guess,
                           .position = w.state->held.size(),
                           .logits = true});
          w.state->held.push_back(guess);
        }
      }
      if (batch.empty()) break;
      // Sequences that have all their guesses leave the pass; rows follow the entries.
      std::erase_if(work, [](const Work& w) { return w.made >= w.wanted; });
    }
  }

  void forget(std::uint64_t sequence) override {
    const auto it = states_.find(sequence);
    if (it == states_.end()) return;
    engine_->pool().remove(it->second.sequence);
    states_.erase(it);
  }

  // Sequences whose K/V the draft model holds.
  std::size_t sequences() const noexcept { return states_.size(); }

 private:
  struct State {
    KvPool::SequenceId sequence = 0;
    std::vector<TokenId> held;  // the tokens whose K/V the draft sequence holds, in order
    std::uint64_t used = 0;     // the draft() call that last asked for it
  };
  struct Work {
    const Ask* ask;
    State* state;
    std::size_t wanted;    // guesses to make
    std::size_t made = 0;  // guesses made
  };

  // Pages for every ask's catch-up and guesses; frees the draft sequences not asked for
  // now, least recently used first, then drops asks from the back, until they fit.
  void reserve_pages(std::vector<Work>& work) {
    KvPool& pool = engine_->pool();
    const auto needed = [&] {
      std::size_t pages = 0;
      for (const Work& w : work) {
        const std::size_t held = w.state->held.size();
        // Positions held..history.size() - 1, then one per guess but the last.
        const std::size_t count = w.ask->history.size() - held + w.wanted - 1;
        pages += pool.pages_needed(w.state->sequence, held, count);
      }
      return pages;
    };
    while (needed() > pool.free_pages()) {
      auto idle = states_.end();
      for (auto it = states_.begin(); it != states_.end(); ++it) {
        if (it->second.used != clock_ &&
            (idle == states_.end() || it->second.used < idle->second.used)) {
          idle = it;
        }
      }
      if (idle != states_.end()) {
        pool.remove(idle->second.sequence);
        states_.erase(idle);  // the works point at asked states only: still valid
      } else {
        work.pop_back();
      }
    }
  }

  static std::size_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b) {
    const auto mismatch = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    return static_cast<std::size_t>(mismatch.first - a.begin());
  }

  BatchTransformer* engine_;
  std::size_t vocabulary_size_;
  std::unordered_map<std::uint64_t, State> states_;
  std::uint64_t clock_ = 0;  // draft() calls so far
};

}  // namespace smol
