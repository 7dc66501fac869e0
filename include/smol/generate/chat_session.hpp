// ChatSession: a multi-turn conversation with a model, streamed piece by piece.
//
// Each reply renders the whole conversation with the chat template and tokenizes it,
// then evaluates only what the KV cache does not already hold: the tokens after the
// longest common prefix with what the cache contains. A second turn therefore costs
// only its own new tokens, never the history again.
//
// Generated tokens stay in the cache as generated, even where tokenizing the reply's
// text again would spell it with other tokens. So that the next turn still matches
// them, the rendered prompt is compared with the cache as text first: when the
// conversation text starts with the cached tokens' text, only the rest is tokenized.
//
// Pieces arrive tagged thinking or answer (see ReplyStream).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/core/error.hpp"
#include "smol/generate/logits_source.hpp"
#include "smol/generate/reply_stream.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/generate/stats.hpp"
#include "smol/generate/stop.hpp"
#include "smol/text/chat_prompt.hpp"
#include "smol/text/chat_template.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

// The conversation no longer fits the session's context.
class ContextFullError : public Error {
 public:
  using Error::Error;
};

enum class WhenContextFull {
  fail,               // throw ContextFullError; the caller decides (e.g. /reset)
  drop_oldest_turns,  // forget the oldest exchanges, keep the system prompt, re-prefill
};

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

struct ReplyOptions {
  std::size_t max_tokens = 0;  // 0: until the model ends its turn or the context is full
  std::vector<std::string> stop_strings = {};
  // Polled between tokens and, during the prompt, between layers: a cancelled prompt
  // takes its user message back (ask()), a cancelled reply keeps what was streamed.
  CancelCheck cancel = {};
  // Never pick an end-of-generation token (llama.cpp's --ignore-eos): for benchmarks
  // and tests that need a reply of a given length.
  bool ignore_eos = false;
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

class ChatSession {
 public:
  ChatSession(LogitsSource& source, const Tokenizer& tokenizer, ChatFormat format,
              ChatSettings settings = {})
      : source_(&source),
        tokenizer_(&tokenizer),
        format_(format),
        settings_(std::move(settings)),
        sampler_(settings_.sampling),
        prompt_encoder_(tokenizer) {
    think_ = ThinkMarkers::of(tokenizer);
  }

  // Sets the system prompt (the first message); an empty text removes it.
  void set_system_prompt(std::string text) {
    const bool has_system = !messages_.empty() && messages_.front().role == "system";
    if (text.empty()) {
      if (has_system) messages_.erase(messages_.begin());
    } else if (has_system) {
      messages_.front().content = std::move(text);
    } else {
      messages_.insert(messages_.begin(), ChatMessage{"system", std::move(text)});
    }
  }

  void add_message(std::string role, std::string content) {
    messages_.push_back(ChatMessage{std::move(role), std::move(content)});
  }

  // Adds a user message and replies to it. A message that does not fit the context
  // is taken back before the ContextFullError leaves, and so is one whose prompt was
  // cancelled before any reply token: the conversation is as it was before the call.
  Reply ask(std::string user_text, const ReplyOptions& options = {}) {
    add_message("user", std::move(user_text));
    try {
      Reply answer = reply(options);
      if (answer.stop == StopReason::cancelled && answer.stats.generated_tokens == 0) {
        messages_.pop_back();
      }
      return answer;
    } catch (const ContextFullError&) {
      messages_.pop_back();
      throw;
    }
  }

  // Forgets every message but the system prompt. The cache is kept: the next turn
  // reuses whatever prefix still matches (the system block).
  void reset() {
    const bool has_system = !messages_.empty() && messages_.front().role == "system";
    messages_.erase(messages_.begin() + (has_system ? 1 : 0), messages_.end());
    sampler_.reset_history();
  }

  void set_thinking(bool thinking) { settings_.thinking = thinking; }
  bool thinking() const { return settings_.thinking; }
  const std::vector<ChatMessage>& messages() const { return messages_; }
  // Tokens whose keys and values are in the cache.
  std::size_t cached_tokens() const { return cache_.size(); }
  std::size_t context_length() const { return source_->context_length(); }

  // Generates the assistant's reply to the conversation so far and appends it.
  Reply reply(const ReplyOptions& options = {}) {
    const auto started = Clock::now();
    Reply reply;
    const std::vector<TokenId> prompt = fit_prompt(options.max_tokens, reply.dropped_messages);
    if (prompt.empty()) fail("nothing to reply to: the prompt is empty");
    if (options.on_prompt) options.on_prompt(prompt);
    const auto logits = prefill(prompt, options, reply.stats);
    if (!logits) {
      reply.stop = StopReason::cancelled;
      return reply;  // nothing generated: the conversation is left unanswered
    }
    generate(*logits, think_.open_at_end(prompt), options, started, reply);
    messages_.push_back(ChatMessage{"assistant", reply.text});
    return reply;
  }

 private:
  using Clock = std::chrono::steady_clock;

  static double seconds_since(Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  }

  static bool cancelled(const ReplyOptions& options) { return options.cancel.requested(); }

  // Evaluates the part of `prompt` the cache does not hold, at least its last token
  // (whose logits choose the first reply token). Empty when cancelled; the stats then
  // count the tokens evaluated and those left, and the cache holds the chunks done.
  std::optional<std::span<const float>> prefill(std::span<const TokenId> prompt,
                                                const ReplyOptions& options,
                                                GenerationStats& stats) {
    const std::size_t reused = std::min(common_prefix(cache_, prompt), prompt.size() - 1);
    stats.reused_tokens = reused;
    cache_.resize(reused);
    tail_.reset();

    const auto started = Clock::now();
    const std::size_t chunk_size = std::max<std::size_t>(settings_.prefill_chunk, 1);
    std::span<const float> logits;
    for (std::size_t begin = reused; begin < prompt.size(); begin += chunk_size) {
      const auto chunk = prompt.subspan(begin, std::min(chunk_size, prompt.size() - begin));
      try {
        options.cancel.throw_if_requested();
        logits = source_->evaluate(chunk, begin, options.cancel);
      } catch (const Cancelled&) {
        stats.prompt_tokens = begin - reused;
        stats.prompt_tokens_left = prompt.size() - begin;
        stats.prefill_seconds = seconds_since(started);
        return std::nullopt;
      }
      cache_.insert(cache_.end(), chunk.begin(), chunk.end());
    }
    stats.prompt_tokens = prompt.size() - reused;
    stats.prefill_seconds = seconds_since(started);
    // The penalties' history takes the prompt only once it is really in the cache.
    for (const TokenId token : prompt.subspan(reused)) sampler_.accept(token);
    return logits;
  }

  // Samples, streams and evaluates reply tokens until one of the stop rules fires.
  // The last sampled token is never evaluated: it waits in tail_ for the next turn.
  void generate(std::span<const float> logits, bool thinking, const ReplyOptions& options,
                Clock::time_point started, Reply& reply) {
    ReplyStream streamer(*tokenizer_, think_, options.stop_strings, options.on_piece,
                         thinking ? PieceKind::thinking : PieceKind::answer);
    GenerationStats& stats = reply.stats;
    Clock::time_point first_token_at{};
    for (;;) {
      if (cancelled(options)) {
        reply.stop = StopReason::cancelled;
        break;
      }
      const TokenId token = sample(logits, options.ignore_eos);
      if (++stats.generated_tokens == 1) {
        first_token_at = Clock::now();
        stats.time_to_first_token = seconds_since(started);
      }
      std::optional<StopReason> stop;
      if (tokenizer_->is_end_of_generation(token)) {
        stop = StopReason::end_of_generation;
      } else if (streamer.take(token)) {
        stop = StopReason::stop_string;
      } else if (options.max_tokens != 0 && stats.generated_tokens >= options.max_tokens) {
        stop = StopReason::max_tokens;
      } else if (cache_.size() >= source_->context_length()) {
        stop = StopReason::context_full;
      }
      if (stop) {
        tail_ = token;
        reply.stop = *stop;
        break;
      }
      const TokenId next[] = {token};
      logits = source_->evaluate(next, cache_.size());
      cache_.push_back(token);
    }
    streamer.finish();
    reply.text = streamer.text();
    reply.thinking = streamer.thinking();
    reply.answer = streamer.answer();
    if (stats.generated_tokens > 0) stats.decode_seconds = seconds_since(first_token_at);
  }

  TokenId sample(std::span<const float> logits, bool ignore_eos) {
    // A model may have more output rows than the tokenizer has tokens (padding).
    std::span<const float> row = logits.first(std::min(logits.size(), tokenizer_->size()));
    if (ignore_eos) {
      masked_.assign(row.begin(), row.end());
      for (const TokenId id : tokenizer_->end_of_generation_ids()) {
        if (static_cast<std::size_t>(id) < masked_.size()) {
          masked_[static_cast<std::size_t>(id)] = -std::numeric_limits<float>::infinity();
        }
      }
      row = masked_;
    }
    const TokenId token = sampler_.sample(row);
    sampler_.accept(token);
    return token;
  }

  static std::size_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b) {
    const auto mismatch = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    return static_cast<std::size_t>(mismatch.first - a.begin());
  }

  // The prompt for the next reply; drops old turns or throws when it cannot fit.
  std::vector<TokenId> fit_prompt(std::size_t max_tokens, std::size_t& dropped) {
    const std::size_t context = source_->context_length();
    const bool may_drop = settings_.when_full == WhenContextFull::drop_oldest_turns;
    // When turns may be dropped, leave the reply some room rather than one position.
    const std::size_t room =
        may_drop ? std::clamp<std::size_t>(max_tokens != 0 ? max_tokens : context / 4, 1,
                                           std::max<std::size_t>(context / 4, 1))
                 : 1;
    std::vector<TokenId> prompt = tokenize_conversation();
    if (prompt.size() + room <= context) return prompt;
    if (!may_drop) {
      throw ContextFullError(cat("the conversation needs ", prompt.size(),
                                 " tokens but the context holds ", context,
                                 "; start over (/reset) or use a larger context (-c)"));
    }
    while (prompt.size() + room > context && drop_oldest_turn(dropped)) {
      prompt = tokenize_conversation();
    }
    if (prompt.size() >= context) {
      throw ContextFullError(cat("the last message alone needs ", prompt.size(),
                                 " tokens but the context holds ", context));
    }
    return prompt;
  }

  // Drops the oldest exchange after the system prompt: a user message and the replies
  // up to the next user message. The newest message is never dropped.
  bool drop_oldest_turn(std::size_t& dropped) {
    const std::size_t first = !messages_.empty() && messages_.front().role == "system" ? 1 : 0;
    if (messages_.size() <= first + 1) return false;
    std::size_t end = first + 1;
    while (end + 1 < messages_.size() && messages_[end].role != "user") ++end;
    dropped += end - first;
    messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(first),
                    messages_.begin() + static_cast<std::ptrdiff_t>(end));
    return true;
  }

  std::vector<TokenId> tokenize_conversation() const {
    std::string text;
    std::vector<ChatPromptEncoder::TextRange> user_ranges;
    if (settings_.raw) {
      for (const ChatMessage& message : messages_) text += message.content;
      user_ranges.push_back({0, text.size()});  // nothing in raw text is special
    } else {
      ChatPromptEncoder::Rendered rendered = prompt_encoder_.render(
          format_, messages_,
          {.add_generation_prompt = true, .enable_thinking = settings_.thinking});
      text = std::move(rendered.text);
      user_ranges = std::move(rendered.plain);
    }

    // The cache as text; when the conversation still starts with it, only the rest
    // is tokenized, so generated tokens match even where they are not canonical.
    std::vector<TokenId> known = cache_;
    // Raw text has no end-of-turn markup, so a final eos is not part of it.
    if (tail_ && !(settings_.raw && tokenizer_->is_end_of_generation(*tail_))) {
      known.push_back(*tail_);
    }
    const bool bos_first = !known.empty() && tokenizer_->vocabulary().bos_id &&
                           known.front() == *tokenizer_->vocabulary().bos_id;
    const std::string known_text = tokenizer_->decode(
        std::span<const TokenId>(known).subspan(bos_first ? 1 : 0), {.render_special = true});
    // SentencePiece puts a space in front of every text it starts, so its pieces
    // cannot be tokenized on their own: it takes the slow path below.
    const bool can_continue = tokenizer_->vocabulary().model != "llama";
    if (can_continue && !known.empty() && bos_first == tokenizer_->vocabulary().add_bos &&
        std::string_view(text).starts_with(known_text) &&
        (settings_.raw ||
         prompt_encoder_.at_fragment_boundary(known.back(), text, known_text.size()))) {
      prompt_encoder_.encode_from(text, known_text.size(), user_ranges, known);
      return known;
    }
    std::vector<TokenId> tokens;
    if (tokenizer_->vocabulary().add_bos) {
      if (!tokenizer_->vocabulary().bos_id) fail("the vocabulary asks for bos but has none");
      tokens.push_back(*tokenizer_->vocabulary().bos_id);
    }
    prompt_encoder_.encode_from(text, 0, user_ranges, tokens);
    return tokens;
  }

  LogitsSource* source_;
  const Tokenizer* tokenizer_;
  ChatFormat format_;
  ChatSettings settings_;
  Sampler sampler_;
  ThinkMarkers think_;
  ChatPromptEncoder prompt_encoder_;
  std::vector<ChatMessage> messages_;
  std::vector<TokenId> cache_;   // the tokens whose K/V the source holds, in order
  std::optional<TokenId> tail_;  // the last sampled token, never evaluated
  std::vector<float> masked_;    // logits with end-of-generation ruled out (ignore_eos)
};

}  // namespace smol
