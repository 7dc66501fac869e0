// Drafter: guesses the tokens that come next, for speculative decoding.
//
// Decoding one token reads every weight once, so on a CPU a sequence's decode speed is
// capped by memory bandwidth. The model can check several guessed tokens in one pass over
// the weights (generate/speculative_decoder.hpp): a drafter supplies the guesses, cheaply,
// and the model keeps the longest prefix it agrees with. A drafter never changes what is
// generated, only how many forward passes it takes; a poor one only wastes work.
//
// Two kinds: NgramDrafter (the text so far repeats itself: prompt lookup) and
// ModelDrafter (a small model with the same vocabulary runs ahead greedily).
//
// The batch scheduler asks for many sequences' guesses at once (BatchDrafter): a draft
// model then advances every one of them in the same pass (batch_model_drafter.hpp), and
// a stateless drafter is simply asked for each in turn (EachSequenceDrafter).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"

#include "smol/text/vocabulary.hpp"

namespace smol {

class Drafter {
 public:
  virtual ~Drafter() = default;

  // Appends to `draft` up to `max_tokens` guesses for the tokens that follow `history`
  // (every token of the sequence so far: the prompt, the reply, the token just sampled).
  // Deterministic: the same history gives the same guesses, which is what makes the
  // acceptance rule of draft_verification.hpp keep the output distribution unchanged.
  virtual void draft(std::span<const TokenId> history, std::size_t max_tokens,
                     std::vector<TokenId>& draft) = 0;
};

// Guesses for several sequences at once: what the batch scheduler asks of its drafter at
// each step. A drafter may keep state per sequence between the steps (a draft model's
// K/V), named by the caller's `sequence`; forget() says a sequence has ended or lost its
// K/V (preempted), so that state can go.
class BatchDrafter {
 public:
  struct Ask {
    std::uint64_t sequence;  // the caller's name for it, the same at every step
    std::span<const TokenId> history;
    std::size_t max_tokens;
    std::vector<TokenId>* draft;  // appended to, as Drafter::draft does
  };

  virtual ~BatchDrafter() = default;
  // Appends each ask's guesses to its draft; same contract per ask as Drafter::draft.
  virtual void draft(std::span<const Ask> asks) = 0;
  virtual void forget(std::uint64_t sequence) = 0;
};

// A drafter without state of its own (NgramDrafter), asked for each sequence in turn.
class EachSequenceDrafter final : public BatchDrafter {
 public:
  explicit EachSequenceDrafter(std::unique_ptr<Drafter> drafter) : drafter_(std::move(drafter)) {
    if (!drafter_) fail("EachSequenceDrafter needs a drafter");
  }

  void draft(std::span<const Ask> asks) override {
    for (const Ask& ask : asks) drafter_->draft(ask.history, ask.max_tokens, *ask.draft);
  }
  void forget(std::uint64_t) override {}

 private:
  std::unique_ptr<Drafter> drafter_;
};

}  // namespace smol
