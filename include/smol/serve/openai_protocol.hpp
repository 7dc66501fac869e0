// The OpenAI API as plain functions: request JSON in, scheduler settings out; replies,
// stream chunks and errors back as JSON. No socket here, so every rule can be tested
// with a string (tests/test_serve_protocol.cpp) and fuzzed (tests/fuzz/).
//
// The shapes follow OpenAI's chat and completions APIs and, where OpenAI has nothing,
// llama.cpp's llama-server (which most local clients already speak): the reasoning as
// `reasoning_content` beside `content`, `timings` in the last chunk, top_k, min_p and
// repeat_penalty as extra fields, `chat_template_kwargs.enable_thinking`.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "smol/generate/generation_request.hpp"
#include "smol/generate/reply_stream.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/generate/stop.hpp"
#include "smol/text/chat_template.hpp"

namespace smol::serve {

using Json = nlohmann::json;

// An error the client gets as {"error": {"message", "type", "param", "code"}} with
// `status` as the HTTP status.
struct ApiError : std::runtime_error {
  ApiError(int status_, std::string message, std::string type_, std::string param_ = {})
      : std::runtime_error(std::move(message)),
        status(status_),
        type(std::move(type_)),
        param(std::move(param_)) {}
  int status;
  std::string type;   // OpenAI's: invalid_request_error, authentication_error, ...
  std::string param;  // the request field at fault, e.g. "messages[1].content"
};

inline ApiError invalid_request(std::string message, std::string param = {}) {
  return ApiError(400, std::move(message), "invalid_request_error", std::move(param));
}

// The type names OpenAI's clients expect for each status.
inline std::string_view error_type_for(int status) {
  switch (status) {
    case 400:
    case 404:
    case 413:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 503:
      return "unavailable_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

inline Json error_body(const ApiError& error) {
  return {{"error",
           {{"message", error.what()},
            {"type", error.type},
            {"param", error.param.empty() ? Json(nullptr) : Json(error.param)},
            {"code", error.status}}}};
}

// JSON text for the wire. Our own text is valid UTF-8 (ReplyStream guarantees it); the
// replacement handler only guards against a bug ever turning into a thrown exception.
inline std::string dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// One Server-Sent Event carrying `json`.
inline std::string sse_event(const Json& json) {
  return "data: " + dump(json) + "\n\n";
}
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// How the reasoning reaches the client: in its own `reasoning_content` field
// (llama-server's "deepseek" format, the default), or folded into `content` between
// <think> tags ("none"), for clients that show only content.
enum class ReasoningFormat { separate, folded };

inline std::optional<ReasoningFormat> parse_reasoning_format(std::string_view name) {
  if (name == "deepseek" || name == "auto" || name == "separate") {
    return ReasoningFormat::separate;
  }
  if (name == "none") return ReasoningFormat::folded;
  return std::nullopt;
}

// The server's defaults, which a request may override field by field.
struct RequestDefaults {
  SamplerSettings sampling;
  ReasoningFormat reasoning = ReasoningFormat::separate;
  bool enable_thinking = true;
};

// What both endpoints share.
struct CompletionParams {
  SamplerSettings sampling;
  std::size_t max_tokens = 0;  // 0: until the model stops or the context is full
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // llama-server's extension: generate past the end of turn
  ReasoningFormat reasoning = ReasoningFormat::separate;
};

struct ChatCompletionRequest {
  CompletionParams params;
  std::vector<ChatMessage> messages;
  bool enable_thinking = true;
};

struct TextCompletionRequest {
  CompletionParams params;
  std::string prompt;
};

namespace detail {

inline Json parse_body(std::string_view body) {
  try {
    Json json = Json::parse(body);
    if (!json.is_object()) throw invalid_request("the request body must be a JSON object");
    return json;
  } catch (const Json::exception& error) {
    // nlohmann names the byte offset and what it found, UTF-8 errors and numbers out of
    // range included.
    throw invalid_request(std::string("the request body is not valid JSON: ") + error.what());
  }
}

// A field that is absent or null reads as "not given".
inline const Json* field(const Json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

inline double number_in(const Json& body, const char* name, double low, double high,
                        double fallback) {
  const Json* value = field(body, name);
  if (value == nullptr) return fallback;
  if (!value->is_number()) throw invalid_request(std::string(name) + " must be a number", name);
  const double x = value->get<double>();
  if (!std::isfinite(x) || x < low || x > high) {
    const auto shown = [](double v) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", v);
      return std::string(text);
    };
    throw invalid_request(std::string(name) + " must be between " + shown(low) + " and " +
                              shown(high) + ", not " + value->dump(),
                          name);
  }
  return x;
}

inline std::int64_t integer_in(const Json& body, const char* name, std::int64_t low,
                               std::int64_t high, std::int64_t fallback) {
  const Json* value = field(body, name);
  if (value == nullptr) return fallback;
  if (!value->is_number_integer()) {
    throw invalid_request(std::string(name) + " must be an integer", name);
  }
  // Integers beyond int64 arrive as unsigned: out of range either way.
  if (value->is_number_unsigned() &&
      value->get<std::uint64_t>() > static_cast<std::uint64_t>(high)) {
    throw invalid_request(std::string(name) + " must be at most " + std::to_string(high), name);
  }
  const std::int64_t x = value->get<std::int64_t>();
  if (x < low || x > high) {
    throw invalid_request(std::string(name) + " must be between " + std::to_string(low) + " and " +
                              std::to_string(high) + ", not " + std::to_string(x),
                          name);
  }
  return x;
}

inline bool boolean(const Json& body, const char* name, bool fallback) {
  const Json* value = field(body, name);
  if (value == nullptr) return fallback;
  if (!value->is_boolean())
    throw invalid_request(std::string(name) + " must be true or false", name);
  return value->get<bool>();
}

inline constexpr std::int64_t kMaxTokensLimit = 1 << 24;  // smol's longest context
inline constexpr std::size_t kMaxStopStrings = 16;

// The fields both endpoints read; unknown fields are ignored, as OpenAI's API does for
// the many extras clients send (user, metadata, ...).
inline CompletionParams parse_params(const Json& body, const RequestDefaults& defaults) {
  CompletionParams p;
  p.sampling = defaults.sampling;
  p.reasoning = defaults.reasoning;
  SamplerSettings& s = p.sampling;
  s.temperature = static_cast<float>(number_in(body, "temperature", 0, 2, s.temperature));
  s.top_p = static_cast<float>(number_in(body, "top_p", 0, 1, s.top_p));
  s.min_p = static_cast<float>(number_in(body, "min_p", 0, 1, s.min_p));
  s.top_k = static_cast<int>(integer_in(body, "top_k", 0, 1 << 20, s.top_k));
  s.presence_penalty =
      static_cast<float>(number_in(body, "presence_penalty", -2, 2, s.presence_penalty));
  s.frequency_penalty =
      static_cast<float>(number_in(body, "frequency_penalty", -2, 2, s.frequency_penalty));
  s.repeat_penalty = static_cast<float>(number_in(body, "repeat_penalty", 0, 10, s.repeat_penalty));
  s.penalty_window =
      static_cast<int>(integer_in(body, "repeat_last_n", 0, 1 << 24, s.penalty_window));
  if (field(body, "seed") != nullptr) {
    s.seed = static_cast<std::uint64_t>(integer_in(body, "seed",
                                                   std::numeric_limits<std::int64_t>::min(),
                                                   std::numeric_limits<std::int64_t>::max(), 0));
  }

  // max_completion_tokens is the newer name; either may come, the newer wins.
  std::int64_t max_tokens = integer_in(body, "max_tokens", 1, kMaxTokensLimit, 0);
  max_tokens = integer_in(body, "max_completion_tokens", 1, kMaxTokensLimit, max_tokens);
  // llama.cpp's own name, -1 meaning no limit.
  if (max_tokens == 0)
    max_tokens = std::max<std::int64_t>(0, integer_in(body, "n_predict", -1, kMaxTokensLimit, 0));
  p.max_tokens = static_cast<std::size_t>(max_tokens);

  if (integer_in(body, "n", 1, std::numeric_limits<std::int64_t>::max(), 1) != 1) {
    throw invalid_request("n must be 1: smol returns one choice per request", "n");
  }
  if (const Json* stop = field(body, "stop")) {
    if (stop->is_string()) {
      p.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= kMaxStopStrings &&
               std::all_of(stop->begin(), stop->end(),
                           [](const Json& s) { return s.is_string(); })) {
      for (const Json& s : *stop) p.stop.push_back(s.get<std::string>());
    } else {
      throw invalid_request("stop must be a string or a list of at most " +
                                std::to_string(kMaxStopStrings) + " strings",
                            "stop");
    }
    std::erase(p.stop, std::string());
  }
  p.ignore_eos = boolean(body, "ignore_eos", false);
  p.stream = boolean(body, "stream", false);
  if (const Json* options = field(body, "stream_options")) {
    if (!p.stream) throw invalid_request("stream_options needs stream: true", "stream_options");
    if (!options->is_object())
      throw invalid_request("stream_options must be an object", "stream_options");
    p.include_usage = boolean(*options, "include_usage", false);
  }
  if (const Json* format = field(body, "reasoning_format")) {
    const auto parsed =
        format->is_string() ? parse_reasoning_format(format->get<std::string>()) : std::nullopt;
    if (!parsed) {
      throw invalid_request("reasoning_format must be \"deepseek\" (or \"auto\") or \"none\"",
                            "reasoning_format");
    }
    p.reasoning = *parsed;
  }
  if (boolean(body, "logprobs", false)) {
    throw invalid_request("logprobs are not supported yet", "logprobs");
  }
  if (field(body, "tools") != nullptr || field(body, "functions") != nullptr) {
    throw invalid_request("tools are not supported yet", "tools");
  }
  if (const Json* format = field(body, "response_format")) {
    if (!format->is_object() || format->value("type", "") != "text") {
      throw invalid_request("only response_format {\"type\": \"text\"} is supported",
                            "response_format");
    }
  }
  return p;
}

// A message's content: a string, or OpenAI's list of parts of which smol reads text.
inline std::string message_content(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    throw invalid_request(param + " must be a string or a list of text parts", param);
  }
  std::string text;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string at = param + "[" + std::to_string(i) + "]";
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      throw invalid_request(at + " must be a text part {\"type\": \"text\", \"text\": ...}; "
                                 "smol reads text only",
                            at);
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace detail

// POST /v1/chat/completions. Throws ApiError (400) naming the field at fault.
inline ChatCompletionRequest parse_chat_request(std::string_view body,
                                                const RequestDefaults& defaults = {}) {
  const Json json = detail::parse_body(body);
  ChatCompletionRequest request;
  request.params = detail::parse_params(json, defaults);

  const Json* messages = detail::field(json, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    throw invalid_request("messages must be a non-empty list", "messages");
  }
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!message.is_object()) throw invalid_request(at + " must be an object", at);
    const Json* role = detail::field(message, "role");
    if (role == nullptr || !role->is_string()) {
      throw invalid_request(at + ".role must be a string", at + ".role");
    }
    std::string name = role->get<std::string>();
    if (name == "developer") name = "system";  // OpenAI's newer name for it
    if (name != "system" && name != "user" && name != "assistant") {
      throw invalid_request(at + ".role \"" + role->get<std::string>() +
                                "\" is not one of system, developer, user, assistant",
                            at + ".role");
    }
    const Json* content = detail::field(message, "content");
    // An assistant turn may come without content (OpenAI allows null there).
    if (content == nullptr && name != "assistant") {
      throw invalid_request(at + ".content is missing", at + ".content");
    }
    std::string text = content ? detail::message_content(*content, at + ".content") : "";
    if (name == "system") {
      // Templates take one system prompt, first: leading ones are joined.
      if (!request.messages.empty() && request.messages.back().role != "system") {
        throw invalid_request(at + " is a system message after the conversation began",
                              at + ".role");
      }
      if (!request.messages.empty()) {
        request.messages.back().content += "\n\n" + text;
        continue;
      }
    }
    request.messages.push_back({std::move(name), std::move(text)});
  }
  if (request.messages.back().role == "system") {
    throw invalid_request("messages hold only a system prompt: add a user message", "messages");
  }
  request.enable_thinking = defaults.enable_thinking;
  if (const Json* kwargs = detail::field(json, "chat_template_kwargs")) {
    if (!kwargs->is_object()) {
      throw invalid_request("chat_template_kwargs must be an object", "chat_template_kwargs");
    }
    request.enable_thinking = detail::boolean(*kwargs, "enable_thinking", request.enable_thinking);
  }
  return request;
}

// POST /v1/completions: raw text continued, no template.
inline TextCompletionRequest parse_completion_request(std::string_view body,
                                                      const RequestDefaults& defaults = {}) {
  const Json json = detail::parse_body(body);
  TextCompletionRequest request;
  request.params = detail::parse_params(json, defaults);
  const Json* prompt = detail::field(json, "prompt");
  if (prompt != nullptr && prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    prompt = &(*prompt)[0];  // a list of one prompt, as some clients send it
  }
  if (prompt == nullptr || !prompt->is_string() || prompt->get<std::string>().empty()) {
    throw invalid_request("prompt must be a non-empty string", "prompt");
  }
  request.prompt = prompt->get<std::string>();
  return request;
}

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
