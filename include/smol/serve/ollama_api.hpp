// ollama's API (POST /api/chat, /api/generate, /api/embed, the legacy /api/embeddings;
// GET /api/tags, /api/ps,
// /api/version; POST /api/show) as another wire format over the Chat Completions engine,
// so that ollama's clients (its npm and PyPI libraries, Open WebUI) talk to smol-server
// unchanged. As with Anthropic's Messages (anthropic_messages.hpp), a request is
// translated into the OpenAI request it means, parsed and checked by openai_request.hpp,
// and the reply is written back in ollama's shapes: one JSON object, or with `stream`
// (ollama's default: true) newline-delimited JSON, a chunk per piece and a last one with
// done: true, the done_reason and the counts and durations (nanoseconds).
//
// The translation, field by field (ollama's names first):
//   messages[i] {role, content, thinking, tool_calls, tool_name} -> the chat messages
//     (thinking: reasoning_content; tool_calls' arguments objects: JSON text, ids given
//     in order and the tool messages after them answer them in order)
//   prompt, system (/api/generate)      -> a system and a user message; raw: the prompt
//                                          as it is (/v1/completions' prompt)
//   tools                               -> tools (the same shape as OpenAI's)
//   format "json" | a JSON schema       -> response_format json_object | json_schema
//   think true | false | "high" ...     -> chat_template_kwargs.enable_thinking
//   options.num_predict                 -> max_tokens (negative: no limit)
//   options.temperature, top_p, top_k, min_p, seed, stop, repeat_penalty, repeat_last_n,
//     presence_penalty, frequency_penalty -> the same (other options, such as num_ctx
//     and num_thread, are the server's to choose: ignored, as ollama ignores unknown ones)
//   stream (default true), keep_alive (ignored: the model stays loaded)
// Images are refused by name (smol reads text only). Errors are {"error": message}.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "smol/generate/generation_request.hpp"
#include "smol/serve/api_error.hpp"
#include "smol/serve/openai_reply.hpp"
#include "smol/serve/openai_request.hpp"
#include "smol/serve/tool_call_reader.hpp"
#include "smol/serve/tool_calls.hpp"

namespace smol::serve::ollama {

using Ordered = nlohmann::ordered_json;

// The version /api/version reports: the ollama API this server follows (its clients
// check for features by it).
inline constexpr std::string_view kApiVersion = "0.6.4";

namespace detail {

inline const Ordered* member(const Ordered& object, const char* name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

inline std::string string_member(const Ordered& object, const char* name, const std::string& at,
                                 bool required) {
  const Ordered* value = member(object, name);
  if (value == nullptr) {
    if (required) throw invalid_request(at + "." + name + " is required", at + "." + name);
    return {};
  }
  if (!value->is_string()) {
    throw invalid_request(at + "." + name + " must be a string", at + "." + name);
  }
  return value->get<std::string>();
}

inline void refuse_images(const Ordered& object, const std::string& at) {
  const Ordered* images = member(object, "images");
  if (images != nullptr && !(images->is_array() && images->empty())) {
    throw invalid_request(at + ".images: smol reads text only; images are not supported",
                          at + ".images");
  }
}

// The fields every ollama request shares: options, format, think, stream.
inline void add_common(Ordered& chat, const Ordered& request) {
  if (const Ordered* options = member(request, "options")) {
    if (!options->is_object()) throw invalid_request("options must be an object", "options");
    for (const char* same :
         {"temperature", "top_p", "top_k", "min_p", "seed", "stop", "repeat_penalty",
          "repeat_last_n", "presence_penalty", "frequency_penalty"}) {
      if (const Ordered* value = member(*options, same)) chat[same] = *value;
    }
    if (const Ordered* predict = member(*options, "num_predict")) {
      if (!predict->is_number_integer()) {
        throw invalid_request("options.num_predict must be an integer", "options.num_predict");
      }
      if (predict->get<std::int64_t>() >= 0) chat["max_tokens"] = *predict;
    }
  }
  if (const Ordered* format = member(request, "format")) {
    if (format->is_string() && *format == "json") {
      chat["response_format"] = {{"type", "json_object"}};
    } else if (format->is_object()) {
      chat["response_format"] = {{"type", "json_schema"},
                                 {"json_schema", {{"name", "format"}, {"schema", *format}}}};
    } else if (!(format->is_string() && format->get_ref<const std::string&>().empty())) {
      throw invalid_request("format must be \"json\" or a JSON schema object", "format");
    }
  }
  if (const Ordered* think = member(request, "think")) {
    // gpt-oss takes "low", "medium" or "high": each means thinking on.
    if (!think->is_boolean() && !think->is_string()) {
      throw invalid_request("think must be true, false or \"low\" | \"medium\" | \"high\"",
                            "think");
    }
    chat["chat_template_kwargs"] = {{"enable_thinking", think->is_string() || think->get<bool>()}};
  }
  const Ordered* stream = member(request, "stream");
  if (stream != nullptr && !stream->is_boolean()) {
    throw invalid_request("stream must be true or false", "stream");
  }
  chat["stream"] = stream == nullptr || stream->get<bool>();  // ollama streams by default
  chat["reasoning_format"] = "deepseek";                      // thinking apart
}

// An assistant turn's tool_calls, ollama's ({function: {name, arguments: {...}}}) in
// OpenAI's shape with ids; the ids go to `pending` for the tool messages after it.
inline Ordered tool_calls_of(const Ordered& calls, const std::string& at, std::size_t turn,
                             std::vector<std::string>& pending) {
  if (!calls.is_array()) throw invalid_request(at + " must be a list", at);
  Ordered out = Ordered::array();
  for (std::size_t k = 0; k < calls.size(); ++k) {
    const std::string here = at + "[" + std::to_string(k) + "]";
    const Ordered* function = calls[k].is_object() ? member(calls[k], "function") : nullptr;
    if (function == nullptr || !function->is_object()) {
      throw invalid_request(here + ".function must be an object", here + ".function");
    }
    const std::string name = string_member(*function, "name", here + ".function", true);
    const Ordered* arguments = member(*function, "arguments");
    const std::string id = "call_" + std::to_string(turn) + "_" + std::to_string(k);
    pending.push_back(id);
    out.push_back({{"id", id},
                   {"type", "function"},
                   {"function",
                    {{"name", name},
                     {"arguments", arguments == nullptr     ? std::string("{}")
                                   : arguments->is_string() ? arguments->get<std::string>()
                                                            : arguments->dump()}}}});
  }
  return out;
}

}  // namespace detail

// The chat request (JSON text, OpenAI's shapes) an /api/chat request means. Throws
// ApiError (400) naming the field at fault.
inline std::string chat_request_text(std::string_view body) {
  smol::serve::detail::parse_body(body);  // the size, depth and syntax checks, as for chat
  return smol::serve::detail::reading_json([&] {
    const Ordered request = Ordered::parse(body);
    if (!request.is_object()) throw invalid_request("the request body must be a JSON object");
    const Ordered* turns = detail::member(request, "messages");
    if (turns == nullptr || !turns->is_array() || turns->empty()) {
      throw invalid_request("messages must be a non-empty list", "messages");
    }
    Ordered messages = Ordered::array();
    std::vector<std::string> pending;  // ids of calls no tool message has answered yet
    std::size_t answered = 0;
    for (std::size_t i = 0; i < turns->size(); ++i) {
      const Ordered& turn = (*turns)[i];
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (!turn.is_object()) throw invalid_request(at + " must be an object", at);
      detail::refuse_images(turn, at);
      const std::string role = detail::string_member(turn, "role", at, true);
      Ordered message = {{"role", role},
                         {"content", detail::string_member(turn, "content", at, false)}};
      if (role == "assistant") {
        const std::string thinking = detail::string_member(turn, "thinking", at, false);
        if (!thinking.empty()) message["reasoning_content"] = thinking;
        if (const Ordered* calls = detail::member(turn, "tool_calls")) {
          message["tool_calls"] = detail::tool_calls_of(*calls, at + ".tool_calls", i, pending);
        }
      } else if (role == "tool") {
        if (answered >= pending.size()) {
          throw invalid_request(at + " answers no tool call of an earlier assistant message", at);
        }
        message["tool_call_id"] = pending[answered++];
      } else if (role != "system" && role != "user") {
        throw invalid_request(at + ".role \"" + role + "\" is not system, user, assistant or tool",
                              at + ".role");
      }
      messages.push_back(std::move(message));
    }
    Ordered chat = {{"messages", std::move(messages)}};
    if (const Ordered* tools = detail::member(request, "tools")) chat["tools"] = *tools;
    detail::add_common(chat, request);
    return chat.dump();
  });
}

// What an /api/generate request means: a chat request (its system and prompt as two
// messages, the template's rendering), or with raw: true a completion of the prompt as it
// is. Both as JSON text in OpenAI's shapes.
struct GenerateRequest {
  bool raw = false;
  std::string openai;  // the chat request's text, or the completion request's
};

inline GenerateRequest generate_request(std::string_view body) {
  smol::serve::detail::parse_body(body);
  return smol::serve::detail::reading_json([&] {
    const Ordered request = Ordered::parse(body);
    if (!request.is_object()) throw invalid_request("the request body must be a JSON object");
    detail::refuse_images(request, "request");
    const std::string prompt = detail::string_member(request, "prompt", "request", false);
    if (detail::member(request, "suffix") != nullptr) {
      throw invalid_request("suffix (fill-in-the-middle) is not supported", "suffix");
    }
    if (detail::member(request, "template") != nullptr) {
      throw invalid_request("template: smol renders the model's own chat template only",
                            "template");
    }
    GenerateRequest out;
    const Ordered* raw = detail::member(request, "raw");
    if (raw != nullptr && !raw->is_boolean()) throw invalid_request("raw must be a boolean", "raw");
    out.raw = raw != nullptr && raw->get<bool>();
    Ordered openai = Ordered::object();
    if (out.raw) {
      openai["prompt"] = prompt;
    } else {
      Ordered messages = Ordered::array();
      const std::string system = detail::string_member(request, "system", "request", false);
      if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
      messages.push_back({{"role", "user"}, {"content", prompt}});
      openai["messages"] = std::move(messages);
    }
    detail::add_common(openai, request);
    if (out.raw) openai.erase("reasoning_format");  // a completion has no reasoning apart
    out.openai = openai.dump();
    return out;
  });
}

// ollama's timestamps: RFC 3339 in UTC with nanoseconds, as Go writes them.
inline std::string timestamp(std::chrono::system_clock::time_point when) {
  const auto since = when.time_since_epoch();
  const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since).count();
  const long long nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(since).count() % 1'000'000'000LL;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, nanos);
  return text;
}

// Why a reply ended, in ollama's words.
inline std::string_view done_reason(StopReason stop) {
  return stop == StopReason::max_tokens || stop == StopReason::context_full ? "length" : "stop";
}

// The last chunk's (and the whole reply's) counts and durations, in nanoseconds; the
// model is loaded before the server listens, so it took no time to load.
inline void add_stats(Json& reply, const GenerationResult& result, double total_seconds) {
  const auto ns = [](double seconds) { return static_cast<std::int64_t>(seconds * 1e9); };
  reply["done_reason"] = done_reason(result.stop);
  reply["total_duration"] = ns(total_seconds);
  reply["load_duration"] = 0;
  reply["prompt_eval_count"] = result.stats.prompt_tokens + result.stats.reused_tokens;
  reply["prompt_eval_duration"] = ns(result.stats.prefill_seconds);
  reply["eval_count"] = result.stats.generated_tokens;
  reply["eval_duration"] = ns(result.stats.decode_seconds);
}

// A reply's tool calls in ollama's shape: {function: {name, arguments: {...}}}.
inline Json ollama_tool_calls(const std::vector<ToolCall>& calls) {
  Json out = Json::array();
  for (const ToolCall& call : calls) {
    out.push_back(
        {{"function", {{"name", call.name}, {"arguments", Json::parse(call.arguments)}}}});
  }
  return out;
}

// The assistant's message of a chat reply: content, thinking, tool calls.
inline Json message_json(const std::string& content, const std::string& thinking,
                         const std::vector<ToolCall>& calls) {
  Json message = {{"role", "assistant"}, {"content", content}};
  if (!thinking.empty()) message["thinking"] = thinking;
  if (!calls.empty()) message["tool_calls"] = ollama_tool_calls(calls);
  return message;
}

// A chat or generate reply, whole: {model, created_at, message | response, done: true,
// done_reason, counts, durations}. `tools`: the request's (null: none).
struct ReplyInfo {
  std::string model;
  std::string created_at;
  bool chat = true;  // /api/chat's message, else /api/generate's response
};

inline Json reply_json(const ReplyInfo& info, const ReplyText& text, const GenerationResult& result,
                       const ToolRequest* tools, double total_seconds) {
  Json reply = {{"model", info.model}, {"created_at", info.created_at}};
  std::string content = text.content();
  std::vector<ToolCall> calls;
  if (tools != nullptr) {
    ToolReply read = read_tool_reply(content, *tools, "call_");
    content = read.content.value_or("");
    calls = std::move(read.calls);
  }
  if (info.chat) {
    reply["message"] = message_json(content, text.reasoning(), calls);
  } else {
    reply["response"] = content;
    if (!text.reasoning().empty()) reply["thinking"] = text.reasoning();
  }
  reply["done"] = true;
  add_stats(reply, result, total_seconds);
  return reply;
}

// A streamed chat or generate reply: a JSON line per piece ({..., message: {role,
// content | thinking}, done: false}, or generate's response), then the last with done:
// true and the stats. With tools the reply is read whole at the end (its calls are
// only known then): one chunk with the content and the calls before the last.
class NdjsonStream {
 public:
  NdjsonStream(ReplyInfo info, std::shared_ptr<const ToolRequest> tools,
               std::chrono::steady_clock::time_point started)
      : info_(std::move(info)),
        text_(ReasoningFormat::separate),
        tools_(std::move(tools)),
        started_(started) {}

  std::string piece(const TextPiece& piece) {
    const ReplyText::Delta delta = text_.add(piece);
    if (tools_ && delta.reasoning.empty()) return {};
    const std::string content = tools_ ? std::string() : delta.content;
    if (content.empty() && delta.reasoning.empty()) return {};
    return line(chunk(content, delta.reasoning, {}));
  }

  std::string finish(const GenerationResult& result) {
    std::string out;
    if (tools_) {
      ToolReply read = read_tool_reply(text_.content(), *tools_, "call_");
      const std::string content = read.content.value_or("");
      if (!content.empty() || !read.calls.empty()) out += line(chunk(content, {}, read.calls));
    }
    Json last = chunk({}, {}, {});
    last["done"] = true;
    add_stats(last, result,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
    return out + line(last);
  }

  static std::string error(const ApiError& error) { return line({{"error", error.what()}}); }

 private:
  static std::string line(const Json& object) { return dump(object) + "\n"; }

  Json chunk(const std::string& content, const std::string& thinking,
             const std::vector<ToolCall>& calls) const {
    Json out = {{"model", info_.model},
                {"created_at", timestamp(std::chrono::system_clock::now())}};
    if (info_.chat) {
      out["message"] = message_json(content, thinking, calls);
    } else {
      out["response"] = content;
      if (!thinking.empty()) out["thinking"] = thinking;
    }
    out["done"] = false;
    return out;
  }

  ReplyInfo info_;
  ReplyText text_;
  std::shared_ptr<const ToolRequest> tools_;
  std::chrono::steady_clock::time_point started_;
};

// The embeddings an /api/embed request asks for: `input` a string or a list of strings
// (its `truncate`, `dimensions`, `options`, `keep_alive` as in ollama's).
struct EmbedRequest {
  std::vector<std::string> inputs;
  std::optional<std::size_t> dimensions;
};

inline EmbedRequest embed_request(std::string_view body) {
  const Json json = smol::serve::detail::parse_body(body);
  return smol::serve::detail::reading_json([&] {
    EmbedRequest out;
    const Json* input = smol::serve::detail::field(json, "input");
    if (input != nullptr && input->is_string()) {
      out.inputs.push_back(input->get<std::string>());
    } else if (input != nullptr && input->is_array() && !input->empty()) {
      for (std::size_t i = 0; i < input->size(); ++i) {
        if (!(*input)[i].is_string()) {
          throw invalid_request("input[" + std::to_string(i) + "] must be a string", "input");
        }
        out.inputs.push_back((*input)[i].get<std::string>());
      }
    } else {
      throw invalid_request("input must be a string or a non-empty list of strings", "input");
    }
    for (std::size_t i = 0; i < out.inputs.size(); ++i) {
      if (out.inputs[i].empty()) {
        throw invalid_request("input[" + std::to_string(i) + "] is empty", "input");
      }
    }
    if (smol::serve::detail::field(json, "dimensions") != nullptr) {
      out.dimensions = static_cast<std::size_t>(
          smol::serve::detail::integer_in(json, "dimensions", 1, 1 << 20, 1));
    }
    return out;
  });
}

// The prompt of a legacy /api/embeddings request ({model, prompt}: one text, its vector
// as the model pools it, unnormalized, as ollama's legacy endpoint gives it).
inline std::string legacy_embedding_prompt(std::string_view body) {
  const Json json = smol::serve::detail::parse_body(body);
  const Json* prompt = smol::serve::detail::field(json, "prompt");
  if (prompt == nullptr || !prompt->is_string() || prompt->get_ref<const std::string&>().empty()) {
    throw invalid_request("prompt must be a non-empty string", "prompt");
  }
  return prompt->get<std::string>();
}

// An error as ollama's clients read it: {"error": message}.
inline Json error_body(const ApiError& error) {
  return {{"error", error.what()}};
}

}  // namespace smol::serve::ollama
