// ChatSession: a multi-turn conversation with a model, streamed piece by piece.
//
// The facade over the parts of a chat, each in its own header: the messages and
// turns (Conversation), fitting them into the context (fit_to_context), the tokens
// the model already holds and their reuse from turn to turn (PromptCache), and one
// streamed reply with its stop rules and stats (ReplyGenerator). A reply renders the
// whole conversation, fits it, evaluates what the cache lacks and streams the answer.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/generate/context_fit.hpp"
#include "smol/generate/conversation.hpp"
#include "smol/generate/logits_source.hpp"
#include "smol/generate/prompt_cache.hpp"
#include "smol/generate/reply_generator.hpp"
#include "smol/generate/reply_stream.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/generate/speculative_decoder.hpp"
#include "smol/generate/stop.hpp"
#include "smol/template/chat_prompt.hpp"
#include "smol/template/chat_template.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

struct ChatSettings {
  SamplerSettings sampling = {};
  bool thinking = true;  // the reasoning mode of templates that have one (SmolLM3)
  // No template: the messages' texts are simply concatenated and continued, with a
  // bos first when the vocabulary asks for one. For base models.
  bool raw = false;
  WhenContextFull when_full = WhenContextFull::fail;
  // A long prompt is evaluated in chunks of this many tokens (each one's work is
  // bounded; a cancel request is also noticed inside a chunk, between layers).
  std::size_t prefill_chunk = 512;
};

class ChatSession {
 public:
  ChatSession(LogitsSource& source, const Tokenizer& tokenizer, ChatTemplate chat_template,
              ChatSettings settings = {})
      : source_(&source),
        tokenizer_(&tokenizer),
        template_(std::move(chat_template)),
        settings_(std::move(settings)),
        sampler_(settings_.sampling),
        think_(ThinkMarkers::of(tokenizer)),
        prompt_encoder_(tokenizer) {}

  // Sets the system prompt (the first message); an empty text removes it.
  void set_system_prompt(std::string text) { conversation_.set_system_prompt(std::move(text)); }

  void add_message(std::string role, std::string content) {
    conversation_.add(std::move(role), std::move(content));
  }

  // Adds a user message and replies to it. A message that does not fit the context
  // is taken back before the ContextFullError leaves, and so is one whose prompt was
  // cancelled before any reply token: the conversation is as it was before the call.
  Reply ask(std::string user_text, const ReplyOptions& options = {}) {
    add_message("user", std::move(user_text));
    try {
      Reply answer = reply(options);
      if (answer.stop == StopReason::cancelled && answer.stats.generated_tokens == 0) {
        conversation_.take_back_last();
      }
      return answer;
    } catch (const ContextFullError&) {
      conversation_.take_back_last();
      throw;
    }
  }

  // Forgets every message but the system prompt. The cache is kept: the next turn
  // reuses whatever prefix still matches (the system block).
  void reset() {
    conversation_.reset();
    sampler_.reset_history();
  }

  // The source holds `tokens` already (a session file restored into it): the next
  // reply evaluates only what follows their common prefix with its prompt.
  void restore_cached_tokens(std::vector<TokenId> tokens) {
    cache_.assume_evaluated(std::move(tokens));
    // Those tokens never passed through the sampler, so the penalties' history
    // takes the next prompt whole, as an uninterrupted session's would have.
    history_lacks_cache_ = true;
  }

  // Replies from now on draft with `drafter` and verify its guesses several per pass
  // (speculative_decoder.hpp). For output equal to plain decoding, the source must run
  // one token on the batch-invariant kernels (TransformerOptions::one_token).
  void enable_speculation(std::unique_ptr<Drafter> drafter, DraftLengthSettings settings = {}) {
    speculation_.emplace(std::move(drafter), settings);
  }

  void set_thinking(bool thinking) { settings_.thinking = thinking; }
  bool thinking() const { return settings_.thinking; }
  const std::vector<ChatMessage>& messages() const { return conversation_.messages(); }
  // Tokens whose keys and values are in the cache.
  std::size_t cached_tokens() const { return cache_.size(); }
  std::size_t context_length() const { return source_->context_length(); }

  // Generates the assistant's reply to the conversation so far and appends it.
  Reply reply(const ReplyOptions& options = {}) {
    const auto started = ReplyGenerator::Clock::now();
    Reply reply;
    FittedPrompt fitted =
        fit_to_context(conversation_, source_->context_length(), settings_.when_full,
                       options.max_tokens, [&] { return tokenize_conversation(); });
    reply.dropped_messages = fitted.dropped_messages;
    const std::span<const TokenId> prompt = fitted.tokens;
    if (prompt.empty()) fail("nothing to reply to: the prompt is empty");
    if (options.on_prompt) options.on_prompt(prompt);

    const std::optional<std::span<const float>> logits =
        cache_.prefill(*source_, prompt, settings_.prefill_chunk, options.cancel, reply.stats);
    if (!logits) {
      reply.stop = StopReason::cancelled;
      return reply;  // nothing generated: the conversation is left unanswered
    }
    // The penalties' history takes the prompt only once it is really in the cache.
    const std::size_t first_new =
        std::exchange(history_lacks_cache_, false) ? 0 : reply.stats.reused_tokens;
    for (const TokenId token : prompt.subspan(first_new)) sampler_.accept(token);

    const PieceKind first_kind =
        think_.open_at_end(prompt) ? PieceKind::thinking : PieceKind::answer;
    ReplyGenerator(*source_, cache_, sampler_, *tokenizer_, speculation_ ? &*speculation_ : nullptr)
        .run(*logits, think_, first_kind, options, started, reply);
    conversation_.add("assistant", reply.text);
    return reply;
  }

 private:
  std::vector<TokenId> tokenize_conversation() const {
    return cache_.tokenize(
        *tokenizer_, prompt_encoder_,
        conversation_.render(prompt_encoder_, template_, settings_.raw, settings_.thinking),
        settings_.raw);
  }

  LogitsSource* source_;
  const Tokenizer* tokenizer_;
  ChatTemplate template_;
  ChatSettings settings_;
  Sampler sampler_;
  ThinkMarkers think_;
  ChatPromptEncoder prompt_encoder_;
  Conversation conversation_;
  PromptCache cache_;
  std::optional<SpeculativeDecoder> speculation_;
  bool history_lacks_cache_ = false;  // see restore_cached_tokens
};

}  // namespace smol
