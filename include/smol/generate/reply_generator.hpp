// ReplyGenerator: one reply of a chat, sampled token by token and streamed as pieces
// until a stop rule fires, with the timings a person and a benchmark want.
//
// The stop rules, in the order they are checked for each sampled token: the model
// ends its turn (an end-of-generation token), the text reaches a stop string, the
// token budget is spent, the context is full; between tokens, a cancel request.
// Pieces arrive tagged thinking or answer (see ReplyStream).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/generate/logits_source.hpp"
#include "smol/generate/prompt_cache.hpp"
#include "smol/generate/reply_stream.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/generate/speculative_decoder.hpp"
#include "smol/generate/stats.hpp"
#include "smol/generate/stop.hpp"
#include "smol/generate/token_constraints.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

struct ReplyOptions {
  std::size_t max_tokens = 0;  // 0: until the model ends its turn or the context is full
  std::vector<std::string> stop_strings = {};
  // Polled between tokens and, during the prompt, between layers: a cancelled prompt
  // takes its user message back (ChatSession::ask), a cancelled reply keeps what was
  // streamed.
  CancelCheck cancel = {};
  // Never pick an end-of-generation token (llama.cpp's --ignore-eos): for benchmarks
  // and tests that need a reply of a given length.
  bool ignore_eos = false;
  // Constrained decoding (grammar/): only tokens the grammar allows, ending only where
  // it may end. Null: unconstrained.
  std::shared_ptr<TokenMaskTable> grammar = {};
  PieceCallback on_piece = {};
  // Called with the whole prompt as tokens, before it is evaluated (smol-chat
  // --verbose shows it, so a user can see which text became control tokens).
  std::function<void(std::span<const TokenId>)> on_prompt = {};
};

struct Reply {
  // The message as kept in the conversation: thinking markers included, stop string
  // excluded. The streamed pieces concatenate to `thinking` and `answer`.
  std::string text;
  std::string thinking;
  std::string answer;
  StopReason stop = StopReason::end_of_generation;
  GenerationStats stats;
  std::size_t dropped_messages = 0;  // forgotten to make room (drop_oldest_turns)
};

class ReplyGenerator {
 public:
  using Clock = std::chrono::steady_clock;

  // Borrows what the reply is made with for as long as it is generated. With
  // `speculation`, tokens are drafted and verified several per pass (see
  // speculative_decoder.hpp); without, each is evaluated alone.
  ReplyGenerator(LogitsSource& source, PromptCache& cache, Sampler& sampler,
                 const Tokenizer& tokenizer, SpeculativeDecoder* speculation = nullptr)
      : source_(&source),
        cache_(&cache),
        sampler_(&sampler),
        tokenizer_(&tokenizer),
        speculation_(speculation) {}

  // Samples, streams and evaluates reply tokens from the prompt's `logits` until one of
  // the stop rules fires, filling `reply`'s text, stop reason and decode stats
  // (`started`: when the request came, for the time to the first token). The last
  // sampled token is never evaluated: it waits in the cache's tail for the next turn.
  void run(std::span<const float> logits, ThinkMarkers think, PieceKind first_kind,
           const ReplyOptions& options, Clock::time_point started, Reply& reply) {
    ReplyStream streamer(*tokenizer_, think, options.stop_strings, options.on_piece, first_kind);
    GenerationStats& stats = reply.stats;
    Clock::time_point first_token_at{};
    TokenConstraints constraints(options.ignore_eos, options.grammar);
    if (speculation_) speculation_->begin_reply();
    for (;;) {
      if (options.cancel.requested()) {
        reply.stop = StopReason::cancelled;
        break;
      }
      TokenId token = 0;
      if (const std::optional<StopReason> stop = sample(logits, constraints, token)) {
        reply.stop = *stop;  // the grammar leaves nothing to write
        break;
      }
      if (++stats.generated_tokens == 1) {
        first_token_at = Clock::now();
        stats.time_to_first_token = seconds_since(started);
      }
      if (const std::optional<StopReason> stop = stop_rule(token, streamer, options, stats)) {
        cache_->set_tail(token);
        reply.stop = *stop;
        break;
      }
      if (speculation_) {
        // stop_rule ended the reply at max_tokens, so some budget is left here.
        const std::size_t budget = options.max_tokens == 0
                                       ? std::numeric_limits<std::size_t>::max()
                                       : options.max_tokens - stats.generated_tokens;
        logits = speculation_->advance(*source_, *cache_, token, budget, stats);
      } else {
        logits = cache_->extend(*source_, token);
      }
    }
    streamer.finish();
    reply.text = streamer.text();
    reply.thinking = streamer.thinking();
    reply.answer = streamer.answer();
    if (stats.generated_tokens > 0) stats.decode_seconds = seconds_since(first_token_at);
  }

 private:
  static double seconds_since(Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  }

  // Streams `token` and says whether the reply ends with it, and why.
  std::optional<StopReason> stop_rule(TokenId token, ReplyStream& streamer,
                                      const ReplyOptions& options,
                                      const GenerationStats& stats) const {
    if (tokenizer_->is_end_of_generation(token)) return StopReason::end_of_generation;
    if (streamer.take(token)) return StopReason::stop_string;
    if (options.max_tokens != 0 && stats.generated_tokens >= options.max_tokens) {
      return StopReason::max_tokens;
    }
    if (cache_->size() >= source_->context_length()) return StopReason::context_full;
    return std::nullopt;
  }

  // Samples into `token`; a stop reason instead when no token may follow (see
  // TokenConstraints::mask) or the grammar cannot take the sampler's choice.
  std::optional<StopReason> sample(std::span<const float> logits, TokenConstraints& constraints,
                                   TokenId& token) {
    // A model may have more output rows than the tokenizer has tokens (padding).
    const ConstrainedRow row =
        constraints.mask(logits.first(std::min(logits.size(), tokenizer_->size())), *tokenizer_);
    if (row.stop) return row.stop;
    token =
        speculation_ ? speculation_->choose(*sampler_, row.logits) : sampler_->sample(row.logits);
    sampler_->accept(token);
    return constraints.accept(token);
  }

  LogitsSource* source_;
  PromptCache* cache_;
  Sampler* sampler_;
  const Tokenizer* tokenizer_;
  SpeculativeDecoder* speculation_;
};

}  // namespace smol
