// ReplyStream: sampled tokens in, text pieces out.
//
// A reply is streamed as it is generated, but not token by token: a token may end in
// the middle of a UTF-8 character, and text that could still become a stop string
// must be held back until it cannot (it is never shown when it does). Pieces are
// tagged thinking or answer: SmolLM3 writes its reasoning between the <think> and
// </think> tokens (found by their spelling in the vocabulary), which, like every
// control token, are kept in the reply's text but never shown. Used by ChatSession
// for one conversation and by the batch scheduler for each of its requests.
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/generate/stop.hpp"
#include "smol/text/tokenizer.hpp"
#include "smol/text/utf8_stream_decoder.hpp"

namespace smol {

enum class PieceKind { thinking, answer };

struct TextPiece {
  std::string_view text;  // valid UTF-8
  PieceKind kind;
};

using PieceCallback = std::function<void(const TextPiece&)>;

// The tokens that open and close a reasoning block, where the vocabulary has them.
struct ThinkMarkers {
  std::optional<TokenId> open, close;

  static ThinkMarkers of(const Tokenizer& tokenizer) {
    return {tokenizer.find_token("<think>"), tokenizer.find_token("</think>")};
  }
  // Whether a prompt leaves the model inside a <think> block (a template that opens
  // one in its generation prompt).
  bool open_at_end(std::span<const TokenId> prompt) const {
    if (!open) return false;
    for (std::size_t i = prompt.size(); i-- > 0;) {
      if (prompt[i] == *open) return true;
      if (close && prompt[i] == *close) return false;
    }
    return false;
  }
};

class ReplyStream {
 public:
  // `spelled`: control tokens shown as text all the same (a tool-call syntax's markers,
  // which the reply is read back by).
  ReplyStream(const Tokenizer& tokenizer, ThinkMarkers markers,
              const std::vector<std::string>& stop_strings, PieceCallback on_piece,
              PieceKind first_kind = PieceKind::answer, std::vector<TokenId> spelled = {})
      : tokenizer_(&tokenizer),
        markers_(markers),
        matcher_(stop_strings),
        on_piece_(std::move(on_piece)),
        kind_(first_kind),
        spelled_(std::move(spelled)) {}

  // Takes the next sampled token; true when a stop string was reached (the text up to
  // it has been released, the stop string itself never is).
  bool take(TokenId token) {
    const bool opens = token == markers_.open, closes = token == markers_.close;
    if (tokenizer_->is_control(token) &&
        std::find(spelled_.begin(), spelled_.end(), token) != spelled_.end()) {
      return stopped(matcher_.push(tokenizer_->token_to_piece(token, {.render_special = true})));
    }
    if (opens || closes || tokenizer_->is_control(token)) {
      // Markers are part of the message but never shown; whatever text was held back
      // before them can no longer become a stop string across them.
      release(matcher_.flush());
      emit(decoder_.flush());
      text_ += tokenizer_->token_to_piece(token, {.render_special = true});
      if (opens) kind_ = PieceKind::thinking;
      if (closes) kind_ = PieceKind::answer;
      return false;
    }
    return stopped(matcher_.push(tokenizer_->token_to_piece(token)));
  }

  // Releases what was held back (the reply ended without a stop string).
  void finish() {
    release(matcher_.flush());
    emit(decoder_.flush());
  }

  // The message as kept in a conversation: markers included, stop string excluded.
  const std::string& text() const noexcept { return text_; }
  // The streamed pieces, concatenated by kind.
  const std::string& thinking() const noexcept { return thinking_; }
  const std::string& answer() const noexcept { return answer_; }
  // The stop string the reply reached (take() returned true), else empty.
  const std::string& stop_string() const noexcept { return stop_string_; }

 private:
  bool stopped(const StopStringMatcher::Result& result) {
    release(result.released);
    if (result.matched) stop_string_ = result.stop;
    return result.matched;
  }

  void release(const std::string& bytes) {
    if (bytes.empty()) return;
    text_ += bytes;
    emit(decoder_.push(bytes));
  }

  void emit(const std::string& text) {
    if (text.empty()) return;
    (kind_ == PieceKind::thinking ? thinking_ : answer_) += text;
    if (on_piece_) on_piece_(TextPiece{text, kind_});
  }

  const Tokenizer* tokenizer_;
  ThinkMarkers markers_;
  StopStringMatcher matcher_;
  Utf8StreamDecoder decoder_;
  PieceCallback on_piece_;
  PieceKind kind_;
  std::vector<TokenId> spelled_;
  std::string stop_string_;
  std::string text_, thinking_, answer_;
};

}  // namespace smol
