// OpenAI's chat and completions requests, parsed: request JSON in, the prompt's
// messages and the scheduler's settings out, or an ApiError (400) naming the field at
// fault. Unknown fields are ignored, as OpenAI's API does.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/generate/draft_length.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/generate/token_constraints.hpp"
#include "smol/generate/token_logprobs.hpp"
#include "smol/serve/api_error.hpp"
#include "smol/serve/structured_output.hpp"
#include "smol/serve/tool_call_formats.hpp"
#include "smol/serve/tool_call_grammar.hpp"
#include "smol/serve/tool_calls.hpp"
#include "smol/template/chat_template.hpp"

namespace smol::serve {

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
  // The family whose tool-call syntax the chat template writes (recognize_tool_call_syntax):
  // tools, calls and results go to the template as data, replies are read in that
  // syntax. Null: the generic format (tool_calls.hpp).
  const ToolCallSyntax* tool_syntax = nullptr;
  // --spec-type (ngram-simple, or draft with -md): drafting and its lengths; nullopt:
  // none. Which drafter guesses is the scheduler's.
  std::optional<DraftLengthSettings> draft;
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
  // Structured output (response_format, json_schema, grammar, tools): the grammar every
  // reply token must continue; nullopt: free text.
  std::optional<OutputGrammar> output;
  // Set: `output` is lazy (tools with tool_choice "auto"): the reply is free until it
  // writes this text, and from its first byte on follows the grammar.
  std::optional<GrammarTrigger> output_trigger;
  // logprobs: nullopt, none; n, each reply token's log-probability and the n most likely
  // at its position (chat: `logprobs: true` and `top_logprobs: n`; legacy: `logprobs: n`).
  std::optional<std::size_t> logprobs;
  // n: the choices to reply with, each sampled on its own from the one prompt (read
  // once: the others fork its K/V); with a seed, choice i samples with seed + i.
  std::size_t n = 1;
  // llama-server's post_sampling_probs: the logprobs from the distribution the sampler
  // draws from, reported on the chat endpoint as probabilities ("prob", "top_probs").
  bool post_sampling_probs = false;
  // Drafting (the server's default, tuned by llama-server's `speculative.n_max` and
  // `speculative.n_min`; n_max 0 turns it off); nullopt: none.
  std::optional<DraftLengthSettings> draft;
};

struct ChatCompletionRequest {
  CompletionParams params;
  std::vector<ChatMessage> messages;
  bool enable_thinking = true;
  // The tools the model is told about and replies with (tool_calls.hpp); null when the
  // request has none, or tool_choice "none".
  std::shared_ptr<const ToolRequest> tools;
  // With a template that writes tools itself (ChatOptions::tools): each the client's
  // tool object as the template's tojson writes it.
  std::vector<std::string> template_tools;
  // chat_template_kwargs: every member, as JSON text, for the template (ChatOptions).
  std::vector<std::pair<std::string, std::string>> template_kwargs;
};

struct TextCompletionRequest {
  CompletionParams params;
  std::string prompt;
};

namespace detail {

inline Json parse_body(std::string_view body) {
  if (const auto at = too_deep(body)) {
    throw invalid_request("the request body nests more than " + std::to_string(kMaxJsonDepth) +
                          " levels deep (at byte " + std::to_string(*at) + ")");
  }
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
  if (value->is_number_float()) {
    // Integers past 64 bits arrive as floating point: whole numbers out of range all
    // the same (2^64 is as much too large as 2^64 - 1), not "not an integer".
    const double x = value->get<double>();
    if (std::isfinite(x) && std::floor(x) == x && (x < double(low) || x > double(high))) {
      throw invalid_request(
          std::string(name) + (x > double(high) ? " must be at most " + std::to_string(high)
                                                : " must be at least " + std::to_string(low)),
          name);
    }
  }
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

// Whether `json` is an object whose "type" is the string `type`.
inline bool has_type(const Json& json, std::string_view type) {
  if (!json.is_object()) return false;
  const auto it = json.find("type");
  return it != json.end() && it->is_string() && it->get_ref<const std::string&>() == type;
}

inline constexpr std::int64_t kMaxTokensLimit = 1 << 24;  // smol's longest context
inline constexpr std::size_t kMaxStopStrings = 16;
// Choices per request (OpenAI allows 128; each holds a slot, so smol keeps it small).
inline constexpr std::int64_t kMaxChoices = 16;
inline constexpr std::int64_t kMaxDraftTokens = 1024;  // as smol-chat's --draft-max
inline constexpr std::size_t kMaxLogitBiases = 1024;

// logit_bias: OpenAI's {"token id": bias} or llama.cpp's [[id, bias], ...], a bias a
// number from -100 to 100 (OpenAI's range) or false (the token banned, as llama.cpp
// reads it). Whether each id is the model's is checked where the vocabulary is known.
inline std::vector<std::pair<TokenId, float>> parse_logit_bias(const Json& value) {
  static constexpr const char* kForm =
      "logit_bias must be {\"token id\": bias} or [[token id, bias], ...], each bias -100 to "
      "100 or false, at most 1024 of them";
  std::vector<std::pair<TokenId, float>> out;
  const auto add = [&](const Json& id, const Json& bias) {
    std::int64_t token = -1;
    if (id.is_number_integer()) {
      token = id.get<std::int64_t>();
    } else if (id.is_string()) {
      const std::string& text = id.get_ref<const std::string&>();
      if (!text.empty() && text.size() <= 10 &&
          std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        token = std::stoll(text);
      }
    }
    if (token < 0 || token > std::numeric_limits<TokenId>::max()) {
      throw invalid_request(kForm, "logit_bias");
    }
    float amount = 0.0f;
    if (bias.is_boolean() && !bias.get<bool>()) {
      amount = -std::numeric_limits<float>::infinity();
    } else if (bias.is_number() && bias.get<double>() >= -100 && bias.get<double>() <= 100) {
      amount = bias.get<float>();
    } else {
      throw invalid_request(kForm, "logit_bias");
    }
    out.emplace_back(static_cast<TokenId>(token), amount);
  };
  if (value.is_object() && value.size() <= kMaxLogitBiases) {
    for (const auto& [id, bias] : value.items()) add(Json(id), bias);
  } else if (value.is_array() && value.size() <= kMaxLogitBiases) {
    for (const Json& pair : value) {
      if (!pair.is_array() || pair.size() != 2) throw invalid_request(kForm, "logit_bias");
      add(pair[0], pair[1]);
    }
  } else {
    throw invalid_request(kForm, "logit_bias");
  }
  return out;
}

// llama-server's `speculative.n_max` and `speculative.n_min`, over the server's default.
// They tune drafting where the server drafts (--spec-type); they are checked either way,
// and do not turn drafting on where it does not (llama-server's rule too).
inline std::optional<DraftLengthSettings> parse_draft(const Json& body,
                                                      std::optional<DraftLengthSettings> draft) {
  const DraftLengthSettings base = draft.value_or(DraftLengthSettings{});
  const auto n_max = static_cast<std::size_t>(
      integer_in(body, "speculative.n_max", 0, kMaxDraftTokens, std::int64_t(base.max)));
  const auto n_min = static_cast<std::size_t>(
      integer_in(body, "speculative.n_min", 0, kMaxDraftTokens, std::int64_t(base.min)));
  if (!draft || n_max == 0) return std::nullopt;
  draft->max = n_max;
  draft->min = std::min(n_min, n_max);  // llama-server clamps it so too
  return draft;
}

// The fields both endpoints read; unknown fields are ignored, as OpenAI's API does for
// the many extras clients send (user, metadata, ...). `body_text` is the text `body` was
// parsed from (a schema's property order is read from it).
inline CompletionParams parse_params(const Json& body, std::string_view body_text,
                                     const RequestDefaults& defaults) {
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
  if (s.repeat_penalty <= 0) {  // it divides the logits: 1 is off, as in llama.cpp
    throw invalid_request("repeat_penalty must be above 0 (1 turns it off)", "repeat_penalty");
  }
  // -1: the whole context (llama-server's meaning; the server resolves it).
  s.penalty_window =
      static_cast<int>(integer_in(body, "repeat_last_n", -1, 1 << 24, s.penalty_window));
  // A negative seed is llama-server's "random" (-1); OpenAI's seeds are non-negative.
  if (field(body, "seed") != nullptr) {
    const std::int64_t seed = integer_in(body, "seed", std::numeric_limits<std::int64_t>::min(),
                                         std::numeric_limits<std::int64_t>::max(), 0);
    s.seed =
        seed < 0 ? std::nullopt : std::optional<std::uint64_t>(static_cast<std::uint64_t>(seed));
  }

  // max_completion_tokens is the newer name; either may come, the newer wins.
  std::int64_t max_tokens = integer_in(body, "max_tokens", 1, kMaxTokensLimit, 0);
  max_tokens = integer_in(body, "max_completion_tokens", 1, kMaxTokensLimit, max_tokens);
  // llama.cpp's own name, -1 meaning no limit.
  if (max_tokens == 0)
    max_tokens = std::max<std::int64_t>(0, integer_in(body, "n_predict", -1, kMaxTokensLimit, 0));
  p.max_tokens = static_cast<std::size_t>(max_tokens);

  p.n = static_cast<std::size_t>(integer_in(body, "n", 1, kMaxChoices, 1));
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
  if (const Json* bias = field(body, "logit_bias")) s.logit_bias = parse_logit_bias(*bias);
  p.ignore_eos = boolean(body, "ignore_eos", false);
  p.post_sampling_probs = boolean(body, "post_sampling_probs", false);
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
  p.output = parse_output_grammar(body, body_text);
  p.draft = parse_draft(body, defaults.draft);
  return p;
}

// Chat: `logprobs` (true or false) and `top_logprobs` (0 to 20), which needs
// `logprobs: true` (as OpenAI answers without it: a 400).
inline std::optional<std::size_t> chat_logprobs(const Json& body) {
  const Json* wanted = field(body, "logprobs");
  if (wanted != nullptr && !wanted->is_boolean()) {
    throw invalid_request("logprobs must be true or false on the chat endpoint", "logprobs");
  }
  const bool on = wanted != nullptr && wanted->get<bool>();
  if (field(body, "top_logprobs") != nullptr && !on) {
    throw invalid_request("top_logprobs needs logprobs: true", "top_logprobs");
  }
  if (!on) return std::nullopt;
  return static_cast<std::size_t>(
      integer_in(body, "top_logprobs", 0, static_cast<std::int64_t>(kMaxTopLogprobs), 0));
}

// Legacy completions: `logprobs` is the number of most likely tokens to list per position
// (OpenAI allows 0 to 5, llama-server more; smol up to 20, as on the chat endpoint).
inline std::optional<std::size_t> completion_logprobs(const Json& body) {
  const Json* wanted = field(body, "logprobs");
  if (wanted == nullptr) return std::nullopt;
  if (wanted->is_boolean() && !wanted->get<bool>()) return std::nullopt;
  return static_cast<std::size_t>(
      integer_in(body, "logprobs", 0, static_cast<std::int64_t>(kMaxTopLogprobs), 0));
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
    if (!has_type(part, "text") || !part.contains("text") || !part["text"].is_string()) {
      throw invalid_request(at + " must be a text part {\"type\": \"text\", \"text\": ...}; "
                                 "smol reads text only",
                            at);
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// An assistant message's `tool_calls`: [{"id", "type": "function", "function": {"name",
// "arguments"}}], the arguments JSON text of an object.
inline std::vector<ToolCall> tool_calls_of(const Json& calls, const std::string& param) {
  if (!calls.is_array()) throw invalid_request(param + " must be a list of calls", param);
  std::vector<ToolCall> out;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const Json& call = calls[i];
    const std::string at = param + "[" + std::to_string(i) + "]";
    const Json* function = has_type(call, "function") ? field(call, "function") : nullptr;
    if (function == nullptr || !function->is_object()) {
      throw invalid_request(at + " must be {\"id\", \"type\": \"function\", \"function\": "
                                 "{\"name\", \"arguments\"}}",
                            at);
    }
    const Json* id = field(call, "id");
    if (id != nullptr && !id->is_string()) {
      throw invalid_request(at + ".id must be a string", at + ".id");
    }
    const Json* name = field(*function, "name");
    if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      throw invalid_request(at + ".function.name must be a non-empty string",
                            at + ".function.name");
    }
    const Json* arguments = field(*function, "arguments");
    bool object = false;
    if (arguments != nullptr && arguments->is_string() &&
        too_deep(arguments->get_ref<const std::string&>())) {
      throw invalid_request(at + ".function.arguments nests more than " +
                                std::to_string(kMaxJsonDepth) + " levels deep",
                            at + ".function.arguments");
    }
    if (arguments != nullptr && arguments->is_string()) {
      try {
        object = Json::parse(arguments->get_ref<const std::string&>()).is_object();
      } catch (const Json::exception&) {
      }
    }
    if (!object) {
      throw invalid_request(at + ".function.arguments must be a JSON object as text",
                            at + ".function.arguments");
    }
    out.push_back({id ? id->get<std::string>() : "", name->get<std::string>(),
                   arguments->get<std::string>()});
  }
  return out;
}

// Runs a parse; a JSON type error that a check above missed becomes a 400 all the
// same, never a 500 or an escaped exception.
template <class Parse>
auto reading_json(Parse parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const Json::exception& error) {
    throw invalid_request(std::string("the request has a field of the wrong type: ") +
                          error.what());
  }
}

// A message's role, checked; "developer" (OpenAI's newer name for it) becomes "system".
inline std::string message_role(const Json& message, const std::string& at) {
  const Json* role = detail::field(message, "role");
  if (role == nullptr || !role->is_string()) {
    throw invalid_request(at + ".role must be a string", at + ".role");
  }
  std::string name = role->get<std::string>();
  if (name == "developer") name = "system";
  if (name != "system" && name != "user" && name != "assistant" && name != "tool") {
    throw invalid_request(at + ".role \"" + role->get<std::string>() +
                              "\" is not one of system, developer, user, assistant, tool",
                          at + ".role");
  }
  return name;
}

// A tool message's tool_call_id: the id of the call it answers.
inline std::string answered_call_id(const Json& message, const std::string& at) {
  const Json* id = detail::field(message, "tool_call_id");
  if (id == nullptr || !id->is_string()) {
    throw invalid_request(at + ".tool_call_id must be a string: the id of the call answered",
                          at + ".tool_call_id");
  }
  return id->get<std::string>();
}

// An assistant message's tool_calls: for a template that writes calls itself, as its
// calls; else written into `text` in the generic format.
inline void read_tool_calls(const Json& calls, const std::string& role, const std::string& at,
                            const RequestDefaults& defaults, std::string& text,
                            std::vector<ChatToolCall>& template_calls) {
  if (role != "assistant") {
    throw invalid_request(at + ".tool_calls belong to assistant messages only", at + ".tool_calls");
  }
  const std::vector<ToolCall> parsed = detail::tool_calls_of(calls, at + ".tool_calls");
  if (defaults.tool_syntax != nullptr) {
    for (const ToolCall& call : parsed) {
      template_calls.push_back(
          {call.name, python_json(OrderedJson::parse(call.arguments)), call.id});
    }
  } else {
    text = render_tool_calls(parsed, text);
  }
}

// An assistant message's reasoning_content (absent or null: none).
inline std::optional<std::string> reasoning_of(const Json& message, const std::string& role,
                                               const std::string& at) {
  const Json* field = detail::field(message, "reasoning_content");
  if (field == nullptr || field->is_null()) return std::nullopt;
  if (!field->is_string() || role != "assistant") {
    throw invalid_request(at + ".reasoning_content must be a string, in an assistant message",
                          at + ".reasoning_content");
  }
  return field->get<std::string>();
}

// Adds one client message (`at` names it) to `messages`.
inline void add_message(std::vector<ChatMessage>& messages, const Json& message,
                        const std::string& at, const RequestDefaults& defaults) {
  if (!message.is_object()) throw invalid_request(at + " must be an object", at);
  std::string name = message_role(message, at);
  const Json* content = detail::field(message, "content");
  // An assistant turn may come without content (OpenAI allows null there).
  if (content == nullptr && name != "assistant") {
    throw invalid_request(at + ".content is missing", at + ".content");
  }
  std::string text = content ? detail::message_content(*content, at + ".content") : "";
  std::vector<ChatToolCall> template_calls;
  std::string tool_call_id;
  if (name == "tool") {
    tool_call_id = answered_call_id(message, at);
    if (defaults.tool_syntax == nullptr) text = render_tool_result(tool_call_id, text);
  }
  if (const Json* calls = detail::field(message, "tool_calls")) {
    read_tool_calls(*calls, name, at, defaults, text, template_calls);
  }
  if (name == "system") {
    // Templates take one system prompt, first: leading ones are joined.
    if (!messages.empty() && messages.back().role != "system") {
      throw invalid_request(at + " is a system message after the conversation began", at + ".role");
    }
    if (!messages.empty()) {
      messages.back().content += "\n\n" + text;
      return;
    }
  }
  std::optional<std::string> reasoning = reasoning_of(message, name, at);
  // Null content stays None for the template, as transformers gives it (the generic
  // format has written any calls into the text).
  const bool content_null = content == nullptr && text.empty();
  messages.push_back({std::move(name), std::move(text), std::move(template_calls),
                      std::move(reasoning), std::move(tool_call_id), content_null});
}

// The request's tools, if any are active: the reply constrained to calls, and the tools
// given to the template (one that writes them itself) or written into the system prompt.
inline void add_tools(ChatCompletionRequest& request, const Json& json, std::string_view text,
                      const RequestDefaults& defaults) {
  std::optional<ToolRequest> tools = parse_tools(json, text);
  if (!tools || !tools->active()) return;
  if (request.params.output) {
    throw invalid_request(
        "tools and " + request.params.output->param + " both constrain the reply: give one",
        "tools");
  }
  if (defaults.tool_syntax != nullptr) {
    tools->syntax = defaults.tool_syntax;
    // Calls in the family's syntax: forced, or with "auto" from the syntax's trigger on
    // (a reply that begins inside a call, Functionary's, has no trigger to wait for: its
    // "auto" stays free and is read back).
    const bool lazy = tools->choice == ToolChoice::automatic;
    if (!lazy || !tools->syntax->prompt_opens_call) {
      request.params.output = tool_call_grammar(*tools->syntax, *tools);
    }
    if (lazy && request.params.output) {
      request.params.output_trigger =
          GrammarTrigger{std::string(tools->syntax->trigger), tools->syntax->at_start};
    }
    const OrderedJson ordered = detail::ordered_schema(text, "tools");
    for (const OrderedJson& tool : ordered) request.template_tools.push_back(python_json(tool));
  } else {
    request.params.output = tool_grammar(*tools);
    add_tools_to_system(request.messages, *tools);
  }
  request.tools = std::make_shared<const ToolRequest>(std::move(*tools));
}

// chat_template_kwargs: enable_thinking, and every other member for the template.
inline void add_template_kwargs(ChatCompletionRequest& request, const Json& json) {
  const Json* kwargs = detail::field(json, "chat_template_kwargs");
  if (kwargs == nullptr) return;
  if (!kwargs->is_object()) {
    throw invalid_request("chat_template_kwargs must be an object", "chat_template_kwargs");
  }
  request.enable_thinking = detail::boolean(*kwargs, "enable_thinking", request.enable_thinking);
  for (const auto& [name, value] : kwargs->items()) {
    // What the server itself gives the template is not the client's to replace: the
    // messages (whose user text is kept plain by ChatPromptEncoder), the tools, the
    // special tokens and the functions.
    for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt",
                                 "bos_token", "eos_token", "raise_exception", "strftime_now"}) {
      if (name == reserved) {
        throw invalid_request("chat_template_kwargs." + name + " is set by the server",
                              "chat_template_kwargs." + name);
      }
    }
    if (name != "enable_thinking") request.template_kwargs.emplace_back(name, value.dump());
  }
}

inline ChatCompletionRequest parse_chat(const Json& json, std::string_view text,
                                        const RequestDefaults& defaults) {
  ChatCompletionRequest request;
  request.params = detail::parse_params(json, text, defaults);
  request.params.logprobs = chat_logprobs(json);

  const Json* messages = detail::field(json, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    throw invalid_request("messages must be a non-empty list", "messages");
  }
  for (std::size_t i = 0; i < messages->size(); ++i) {
    add_message(request.messages, (*messages)[i], "messages[" + std::to_string(i) + "]", defaults);
  }
  if (request.messages.back().role == "system") {
    throw invalid_request("messages hold only a system prompt: add a user message", "messages");
  }
  add_tools(request, json, text, defaults);
  request.enable_thinking = defaults.enable_thinking;
  add_template_kwargs(request, json);
  // A constrained reply cannot think: the grammar admits no <think> block, and the
  // reasoning would otherwise swallow the whole reply. The answer is the grammar's text.
  // A lazy grammar leaves the reasoning free (its trigger counts outside it).
  if (request.params.output && !request.params.output_trigger) request.enable_thinking = false;
  return request;
}

inline TextCompletionRequest parse_completion(const Json& json, std::string_view text,
                                              const RequestDefaults& defaults) {
  TextCompletionRequest request;
  request.params = detail::parse_params(json, text, defaults);
  request.params.logprobs = completion_logprobs(json);
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

}  // namespace detail

// POST /v1/chat/completions. Throws ApiError (400) naming the field at fault.
inline ChatCompletionRequest parse_chat_request(std::string_view body,
                                                const RequestDefaults& defaults = {}) {
  return detail::reading_json(
      [&] { return detail::parse_chat(detail::parse_body(body), body, defaults); });
}

// POST /v1/completions: raw text continued, no template.
inline TextCompletionRequest parse_completion_request(std::string_view body,
                                                      const RequestDefaults& defaults = {}) {
  return detail::reading_json(
      [&] { return detail::parse_completion(detail::parse_body(body), body, defaults); });
}

}  // namespace smol::serve
