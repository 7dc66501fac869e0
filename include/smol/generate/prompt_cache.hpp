// PromptCache: the tokens whose keys and values a LogitsSource holds, and how the
// next prompt reuses them.
//
// Each reply renders the whole conversation and tokenizes it, then evaluates only what
// the cache does not already hold: the tokens after the longest common prefix with
// what it contains. A second turn therefore costs only its own new tokens, never the
// history again.
//
// Generated tokens stay in the cache as generated, even where tokenizing the reply's
// text again would spell it with other tokens. So that the next turn still matches
// them, the rendered prompt is compared with the cache as text first: when the
// conversation text starts with the cached tokens' text, only the rest is tokenized.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/core/error.hpp"
#include "smol/generate/logits_source.hpp"
#include "smol/generate/stats.hpp"
#include "smol/template/chat_prompt.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol {

class PromptCache {
 public:
  // Tokens whose keys and values the source holds.
  std::size_t size() const noexcept { return tokens_.size(); }

  // The prompt tokens of `rendered` (a conversation's text, see Conversation::render),
  // continuing the cached tokens and the last sampled one wherever the text still
  // starts with them.
  std::vector<TokenId> tokenize(const Tokenizer& tokenizer, const ChatPromptEncoder& encoder,
                                const ChatPromptEncoder::Rendered& rendered, bool raw) const {
    const std::string& text = rendered.text;
    std::vector<TokenId> known = tokens_;
    // Raw text has no end-of-turn markup, so a final eos is not part of it.
    if (tail_ && !(raw && tokenizer.is_end_of_generation(*tail_))) known.push_back(*tail_);
    const Vocabulary& vocabulary = tokenizer.vocabulary();
    const bool bos_first =
        !known.empty() && vocabulary.bos_id && known.front() == *vocabulary.bos_id;
    const std::string known_text = tokenizer.decode(
        std::span<const TokenId>(known).subspan(bos_first ? 1 : 0), {.render_special = true});
    // SentencePiece puts a space in front of every text it starts, so its pieces
    // cannot be tokenized on their own: it takes the slow path below.
    const bool can_continue = vocabulary.model != "llama";
    if (can_continue && !known.empty() && bos_first == vocabulary.add_bos &&
        std::string_view(text).starts_with(known_text) &&
        (raw || encoder.at_fragment_boundary(known.back(), text, known_text.size()))) {
      encoder.encode_from(text, known_text.size(), rendered.plain, known);
      return known;
    }
    std::vector<TokenId> tokens;
    if (vocabulary.add_bos) {
      if (!vocabulary.bos_id) fail("the vocabulary asks for bos but has none");
      tokens.push_back(*vocabulary.bos_id);
    }
    encoder.encode_from(text, 0, rendered.plain, tokens);
    return tokens;
  }

  // Evaluates the part of `prompt` the cache does not hold, at least its last token
  // (whose logits choose the first reply token), in chunks of `chunk_size` tokens.
  // Fills the stats' prompt side. Empty when cancelled; the stats then count the tokens
  // evaluated and those left, and the cache holds the chunks done.
  std::optional<std::span<const float>> prefill(LogitsSource& source,
                                                std::span<const TokenId> prompt,
                                                std::size_t chunk_size, const CancelCheck& cancel,
                                                GenerationStats& stats) {
    const std::size_t reused = std::min(common_prefix(tokens_, prompt), prompt.size() - 1);
    stats.reused_tokens = reused;
    tokens_.resize(reused);
    tail_.reset();
    ahead_.clear();

    const auto started = std::chrono::steady_clock::now();
    const auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    };
    chunk_size = std::max<std::size_t>(chunk_size, 1);
    std::span<const float> logits;
    for (std::size_t begin = reused; begin < prompt.size(); begin += chunk_size) {
      const auto chunk = prompt.subspan(begin, std::min(chunk_size, prompt.size() - begin));
      try {
        cancel.throw_if_requested();
        logits = source.evaluate(chunk, begin, cancel);
      } catch (const Cancelled&) {
        stats.prompt_tokens = begin - reused;
        stats.prompt_tokens_left = prompt.size() - begin;
        stats.prefill_seconds = seconds();
        return std::nullopt;
      }
      tokens_.insert(tokens_.end(), chunk.begin(), chunk.end());
    }
    stats.prompt_tokens = prompt.size() - reused;
    stats.prefill_seconds = seconds();
    return logits;
  }

  // Evaluates one sampled token after the cached ones; its logits pick the next.
  std::span<const float> extend(LogitsSource& source, TokenId token) {
    const TokenId next[] = {token};
    std::span<const float> logits = source.evaluate(next, tokens_.size());
    tokens_.push_back(token);
    ahead_.clear();
    return logits;
  }

  // The tokens whose keys and values the source holds, in order.
  std::span<const TokenId> tokens() const noexcept { return tokens_; }

  // Speculative decoding's verification (generate/speculative_decoder.hpp): evaluates
  // `tokens` after the cached ones in one pass and returns every one's logits row. Only
  // the first (the sampled token) joins the cache; the others (a draft) join one by one
  // through confirm() as they are accepted. The source holds the rest until the next
  // evaluation from an earlier position overwrites them: a rejected draft needs no undo.
  std::span<const float> extend_ahead(LogitsSource& source, std::span<const TokenId> tokens) {
    std::span<const float> rows = source.evaluate_all(tokens, tokens_.size());
    tokens_.push_back(tokens.front());
    ahead_.assign(tokens.begin() + 1, tokens.end());
    confirmed_ = 0;
    return rows;
  }

  // The next token evaluated ahead by extend_ahead() is accepted: it joins the cache.
  void confirm(TokenId token) {
    if (confirmed_ >= ahead_.size() || ahead_[confirmed_] != token) {
      fail("prompt cache: ", token, " was not evaluated ahead at position ", tokens_.size());
    }
    ++confirmed_;
    tokens_.push_back(token);
  }

  // Declares that the source already holds `tokens` at positions [0, tokens.size())
  // (a session restored from a file, see model/session_file.hpp): the next prompt
  // reuses their longest common prefix as if this cache had evaluated them.
  void assume_evaluated(std::vector<TokenId> tokens) {
    tokens_ = std::move(tokens);
    tail_.reset();
    ahead_.clear();
  }

  // The reply's last sampled token, never evaluated: it waits for the next turn,
  // whose prompt starts with it (tokenize() counts it as known).
  void set_tail(TokenId token) { tail_ = token; }
  std::optional<TokenId> tail() const noexcept { return tail_; }

 private:
  static std::size_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b) {
    const auto mismatch = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    return static_cast<std::size_t>(mismatch.first - a.begin());
  }

  std::vector<TokenId> tokens_;  // the tokens whose K/V the source holds, in order
  std::optional<TokenId> tail_;  // the last sampled token, never evaluated
  // extend_ahead()'s draft tokens, the source holds them after tokens_; confirm() takes
  // them in order.
  std::vector<TokenId> ahead_;
  std::size_t confirmed_ = 0;
};

}  // namespace smol
