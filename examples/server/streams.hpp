// The streamed replies of the two completion endpoints: per choice, the SSE chunks of a
// chat reply (ChatStream, serve/openai_reply.hpp) or of a text completion, and the last
// chunk with the usage. answer() (completions.hpp) drives them.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "service.hpp"
#include "smol/serve/context_shift.hpp"

namespace server {

// A streamed chat reply of n choices: a ChatStream each.
class ChatStreams {
 public:
  ChatStreams(const smol::serve::ReplyHeader& header,
              const smol::serve::ChatCompletionRequest& chat,
              const smol::serve::ContextShift& shift = {})
      : header_(header), include_usage_(chat.params.include_usage) {
    for (std::size_t i = 0; i < chat.params.n; ++i) {
      choices_.emplace_back(header, chat.params.reasoning, chat.params.include_usage,
                            chat.params.logprobs.has_value(), chat.tools, i);
      if (shift.shifted()) {
        choices_.back().add_to_timings("context_shift", smol::serve::context_shift_json(shift));
      }
    }
  }
  std::string first() const {
    std::string out;
    for (const auto& choice : choices_) out += choice.first();
    return out;
  }
  void logprob(std::size_t i, const smol::TokenLogprob& token) { choices_[i].logprob(token); }
  std::string piece(std::size_t i, const smol::TextPiece& piece) {
    return choices_[i].piece(piece);
  }
  std::string finish(std::size_t i, const smol::GenerationResult& result) {
    return choices_[i].finish(result);
  }
  std::string close(const std::vector<smol::GenerationResult>& results) const {
    return smol::serve::ChatStream::close(header_, include_usage_, results);
  }

 private:
  smol::serve::ReplyHeader header_;
  bool include_usage_;
  std::vector<smol::serve::ChatStream> choices_;
};

// /v1/completions streams plain text: the pieces as they come, thinking or not, each
// with the logprobs of the tokens since the previous chunk when the request asked. One
// TextStream per choice.
class TextStream {
 public:
  TextStream(smol::serve::ReplyHeader header, bool include_usage, bool logprobs, std::size_t index)
      : header_(std::move(header)),
        include_usage_(include_usage),
        logprobs_(logprobs),
        index_(index) {}
  void logprob(const smol::TokenLogprob& token) { pending_.push_back(token); }
  std::string piece(const smol::TextPiece& piece) {
    return smol::serve::sse_event(smol::serve::text_completion_json(
        header_, std::string(piece.text), nullptr, nullptr, take_logprobs(), index_));
  }
  // The choice's last chunk; a reply of one choice carries the usage there.
  std::string finish(const smol::GenerationResult& result, bool alone) {
    Json last = smol::serve::text_completion_json(
        header_, "", smol::serve::finish_reason(result.stop),
        include_usage_ && alone ? &result : nullptr,
        pending_.empty() ? Json(nullptr) : take_logprobs(), index_);
    return smol::serve::sse_event(last);
  }

 private:
  Json take_logprobs() {
    if (!logprobs_) return nullptr;
    Json json = smol::serve::completion_logprobs_json(pending_, offset_);
    pending_.clear();
    return json;
  }

  smol::serve::ReplyHeader header_;
  bool include_usage_, logprobs_;
  std::size_t index_;
  std::vector<smol::TokenLogprob> pending_;
  std::size_t offset_ = 0;  // text_offset of the next token
};

// A streamed completions reply of n choices; with several, the usage (when asked) comes
// last in a chunk of its own, with no choices, as OpenAI sends it.
class TextStreams {
 public:
  TextStreams(const smol::serve::ReplyHeader& header, const smol::serve::CompletionParams& params)
      : header_(header), include_usage_(params.include_usage) {
    for (std::size_t i = 0; i < params.n; ++i) {
      choices_.emplace_back(header, params.include_usage, params.logprobs.has_value(), i);
    }
  }
  std::string first() const { return {}; }
  void logprob(std::size_t i, const smol::TokenLogprob& token) { choices_[i].logprob(token); }
  std::string piece(std::size_t i, const smol::TextPiece& piece) {
    return choices_[i].piece(piece);
  }
  std::string finish(std::size_t i, const smol::GenerationResult& result) {
    return choices_[i].finish(result, choices_.size() == 1);
  }
  std::string close(const std::vector<smol::GenerationResult>& results) const {
    std::string out;
    if (include_usage_ && choices_.size() > 1) {
      Json usage = smol::serve::text_completion_json(header_, "", nullptr, nullptr);
      usage["choices"] = Json::array();
      usage["usage"] = smol::serve::usage_json(results);
      out += smol::serve::sse_event(usage);
    }
    return out + std::string(smol::serve::kSseDone);
  }

 private:
  smol::serve::ReplyHeader header_;
  bool include_usage_;
  std::vector<TextStream> choices_;
};

}  // namespace server
