// OpenAI's replies: the non-streamed JSON, and the streamed one as Server-Sent Events,
// built from the scheduler's pieces and result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "smol/generate/generation_request.hpp"
#include "smol/generate/reply_stream.hpp"
#include "smol/serve/api_error.hpp"
#include "smol/serve/openai_request.hpp"

namespace smol::serve {

// One Server-Sent Event carrying `json`.
inline std::string sse_event(const Json& json) {
  return "data: " + dump(json) + "\n\n";
}
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// OpenAI's finish_reason for a StopReason ("length" when a limit cut the reply).
inline std::string_view finish_reason(StopReason stop) {
  switch (stop) {
    case StopReason::max_tokens:
    case StopReason::context_full:
      return "length";
    case StopReason::cancelled:
      return "cancelled";  // never sent: the client has gone
    case StopReason::end_of_generation:
    case StopReason::stop_string:
      return "stop";
  }
  return "stop";
}

// usage: the whole prompt (cached part included, as OpenAI counts it), the reply.
inline Json usage_json(const GenerationResult& result) {
  const std::size_t prompt = result.stats.prompt_tokens + result.stats.reused_tokens;
  const std::size_t completion = result.stats.generated_tokens;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", result.stats.reused_tokens}}}};
}

// llama-server's timings object, which its web page and clients show.
inline Json timings_json(const GenerationStats& stats) {
  const double prompt_ms = stats.prefill_seconds * 1e3;
  const double predicted_ms = stats.decode_seconds * 1e3;
  const auto per = [](double ms, std::size_t n) { return n > 0 ? ms / double(n) : 0.0; };
  return {{"cache_n", stats.reused_tokens},
          {"prompt_n", stats.prompt_tokens},
          {"prompt_ms", prompt_ms},
          {"prompt_per_token_ms", per(prompt_ms, stats.prompt_tokens)},
          {"prompt_per_second", stats.prefill_tokens_per_second()},
          {"predicted_n", stats.generated_tokens},
          {"predicted_ms", predicted_ms},
          {"predicted_per_token_ms",
           per(predicted_ms, stats.generated_tokens > 1 ? stats.generated_tokens - 1 : 0)},
          {"predicted_per_second", stats.decode_tokens_per_second()}};
}

// A reply's text as the client sees it, built piece by piece: the reasoning apart or
// folded into the content, the newlines between </think> and the answer dropped. The
// streamed deltas and the final message come from the same pieces, so they agree.
class ReplyText {
 public:
  explicit ReplyText(ReasoningFormat format) : format_(format) {}

  struct Delta {
    std::string content, reasoning;
  };

  Delta add(const TextPiece& piece) {
    Delta delta;
    if (piece.kind == PieceKind::thinking) {
      if (format_ == ReasoningFormat::separate) {
        delta.reasoning = piece.text;
      } else {
        if (!in_thinking_) delta.content = "<think>";
        delta.content += piece.text;
      }
      in_thinking_ = true;
    } else {
      if (in_thinking_ && format_ == ReasoningFormat::folded) delta.content = "</think>";
      in_thinking_ = false;
      std::string_view text = piece.text;
      if (!answer_started_) {
        while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
        answer_started_ = !text.empty();
      }
      delta.content += text;
    }
    content_ += delta.content;
    reasoning_ += delta.reasoning;
    return delta;
  }

  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }

 private:
  ReasoningFormat format_;
  bool in_thinking_ = false, answer_started_ = false;
  std::string content_, reasoning_;
};

// Who a reply is from: the fields every response and chunk repeats.
struct ReplyHeader {
  std::string id;  // chatcmpl-..., cmpl-...
  std::int64_t created = 0;
  std::string model;
};

// The non-streaming chat reply.
inline Json chat_completion_json(const ReplyHeader& header, const ReplyText& text,
                                 const GenerationResult& result) {
  Json message = {{"role", "assistant"}, {"content", text.content()}};
  if (!text.reasoning().empty()) message["reasoning_content"] = text.reasoning();
  return {{"id", header.id},
          {"object", "chat.completion"},
          {"created", header.created},
          {"model", header.model},
          {"system_fingerprint", "smol"},
          {"choices",
           {{{"index", 0},
             {"message", std::move(message)},
             {"logprobs", nullptr},
             {"finish_reason", finish_reason(result.stop)}}}},
          {"usage", usage_json(result)},
          {"timings", timings_json(result.stats)}};
}

// One streamed chat chunk; `choice` null gives the usage chunk's empty choices.
inline Json chat_chunk_json(const ReplyHeader& header, Json choices) {
  return {{"id", header.id},
          {"object", "chat.completion.chunk"},
          {"created", header.created},
          {"model", header.model},
          {"system_fingerprint", "smol"},
          {"choices", std::move(choices)}};
}

inline Json chat_delta_choice(Json delta, Json finish = nullptr) {
  return Json::array({{{"index", 0},
                       {"delta", std::move(delta)},
                       {"logprobs", nullptr},
                       {"finish_reason", std::move(finish)}}});
}

// A streamed chat reply as SSE text: first(), then piece() per TextPiece, then end().
class ChatStream {
 public:
  ChatStream(ReplyHeader header, ReasoningFormat format, bool include_usage)
      : header_(std::move(header)), text_(format), include_usage_(include_usage) {}

  std::string first() const {
    return sse_event(
        chat_chunk_json(header_, chat_delta_choice({{"role", "assistant"}, {"content", ""}})));
  }

  // Empty when the piece adds nothing the client sees.
  std::string piece(const TextPiece& piece) {
    const ReplyText::Delta delta = text_.add(piece);
    std::string out;
    if (!delta.reasoning.empty()) {
      out += sse_event(
          chat_chunk_json(header_, chat_delta_choice({{"reasoning_content", delta.reasoning}})));
    }
    if (!delta.content.empty()) {
      out += sse_event(chat_chunk_json(header_, chat_delta_choice({{"content", delta.content}})));
    }
    return out;
  }

  std::string end(const GenerationResult& result) const {
    Json last =
        chat_chunk_json(header_, chat_delta_choice(Json::object(), finish_reason(result.stop)));
    last["timings"] = timings_json(result.stats);
    std::string out = sse_event(last);
    if (include_usage_) {
      Json usage = chat_chunk_json(header_, Json::array());
      usage["usage"] = usage_json(result);
      out += sse_event(usage);
    }
    out += kSseDone;
    return out;
  }

 private:
  ReplyHeader header_;
  ReplyText text_;
  bool include_usage_;
};

// POST /v1/completions replies: the whole text, control tokens unshown.
inline Json text_completion_json(const ReplyHeader& header, const std::string& text, Json finish,
                                 const GenerationResult* result) {
  Json json = {{"id", header.id},
               {"object", "text_completion"},
               {"created", header.created},
               {"model", header.model},
               {"system_fingerprint", "smol"},
               {"choices",
                {{{"index", 0},
                  {"text", text},
                  {"logprobs", nullptr},
                  {"finish_reason", std::move(finish)}}}}};
  if (result != nullptr) {
    json["usage"] = usage_json(*result);
    json["timings"] = timings_json(result->stats);
  }
  return json;
}

}  // namespace smol::serve
