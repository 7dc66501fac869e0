// A generation request as the batch scheduler takes it, and what it gives back: the
// words a server and the scheduler share, apart from the engine, so that code about
// requests (the OpenAI protocol, its fuzzer) needs no model headers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "smol/generate/draft_length.hpp"
#include "smol/generate/reply_stream.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/generate/stats.hpp"
#include "smol/generate/stop.hpp"
#include "smol/generate/token_constraints.hpp"
#include "smol/generate/token_logprobs.hpp"
#include "smol/grammar/token_mask_table.hpp"

namespace smol {

using RequestId = std::uint64_t;

struct GenerationResult {
  StopReason stop = StopReason::end_of_generation;
  std::string text, thinking, answer;  // as ReplyStream keeps them
  std::string stop_string;             // the one reached (stop == stop_string)
  std::vector<TokenId> tokens;         // the generated tokens
  // With GenerationRequest::logprobs: one per generated token but the end-of-generation
  // one (the tokens whose text makes the reply, reasoning included).
  std::vector<TokenLogprob> logprobs;
  GenerationStats stats;  // reused_tokens: the prompt cache's share
};

struct GenerationRequest {
  std::vector<TokenId> prompt;
  SamplerSettings sampling = {};
  std::size_t max_tokens = 0;  // 0: until the model ends its turn or the context is full
  std::vector<std::string> stop_strings = {};
  bool ignore_eos = false;  // never pick an end-of-generation token (benchmarks)
  // Constrained decoding: only tokens the grammar allows are sampled, and the reply
  // ends (end_of_generation) only where the grammar may end. The table is per grammar
  // and vocabulary and may be shared by many requests; null: unconstrained.
  std::shared_ptr<TokenMaskTable> grammar = {};
  // Set: the grammar is lazy, and applies from where the reply writes this trigger on.
  std::optional<GrammarTrigger> grammar_trigger = std::nullopt;
  // Control tokens whose text the reply shows (ReplyStream's `spelled`): the markers of
  // the template's tool-call syntax, which the reply is read back by.
  std::vector<TokenId> spelled_tokens = {};
  // Log-probabilities (token_logprobs.hpp): nullopt, none; n, each generated token's and
  // the n most likely at its position (n <= kMaxTopLogprobs), in GenerationResult::logprobs
  // and through on_logprob as they come.
  std::optional<std::size_t> logprobs = std::nullopt;
  // With `logprobs`: from the distribution the sampler draws from rather than the raw
  // row (llama-server's post_sampling_probs; token_logprobs.hpp).
  bool post_sampling_probs = false;
  // Speculative decoding inside the batch: the scheduler's drafter (prompt lookup, or a
  // draft model) guesses, the guesses join the sequence's step and are verified there,
  // the draft lengths adapting (draft_length.hpp: `max`, `min` and the rest). nullopt:
  // plain decoding. The reply is the same either way (greedy token for token, sampling
  // in distribution); only the steps it takes differ.
  std::optional<DraftLengthSettings> draft = std::nullopt;
  // Callbacks, on the engine thread: the pieces as they come, then the end (exactly once,
  // also when cancelled).
  PieceCallback on_piece = {};
  // With `logprobs`: each token's, before the pieces its text releases.
  std::function<void(const TokenLogprob&)> on_logprob = {};
  std::function<void(const GenerationResult&)> on_done = {};
};

}  // namespace smol
