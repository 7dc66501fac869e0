// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens: what Claude Code
// and Anthropic's SDKs speak) as a second wire format over the Chat Completions engine.
// A request is translated into the chat request it means (OpenAI's shapes, parsed by
// openai_request.hpp, so one request model, one template path, one tool-call grammar and
// one set of field checks serve both); the reply is written back in Anthropic's shapes:
// content blocks (thinking, text, tool_use), its stop reasons, its usage, its events.
//
// The translation, field by field (Anthropic's names first):
//   system (a string or text blocks)        -> the system message
//   messages[i] user, text blocks           -> a user message (the blocks' text joined)
//   messages[i] user, tool_result blocks    -> tool messages, before the user's text
//   messages[i] assistant, text / tool_use /
//     thinking blocks                       -> content / tool_calls / reasoning_content
//   tools [{name, description, input_schema}] -> function tools (input_schema: parameters)
//   tool_choice auto / any / tool / none    -> "auto" / "required" / the function / "none"
//     (disable_parallel_tool_use: parallel_tool_calls false)
//   max_tokens, stop_sequences, temperature, top_p, top_k, stream: the same meaning
//   messages[i] system (Claude Code's reminders) -> joined to the system prompt
//   thinking {type: enabled | disabled}     -> chat_template_kwargs.enable_thinking
//     (adaptive: the server's default)
// The translated request keeps the client's key order (ordered_json): a schema's property
// order decides the order its grammar writes them in. Images and documents are refused by
// name (smol reads text only), as are Anthropic's server tools (web search and the like).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
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

namespace smol::serve::anthropic {

using Ordered = nlohmann::ordered_json;

namespace detail {

inline const Ordered* member(const Ordered& object, const char* name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

inline std::string block_type(const Ordered& block, const std::string& at) {
  const Ordered* type = block.is_object() ? member(block, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    throw invalid_request(at + " must be a content block with a \"type\"", at + ".type");
  }
  return type->get<std::string>();
}

inline std::string string_member(const Ordered& object, const char* name, const std::string& at) {
  const Ordered* value = member(object, name);
  if (value == nullptr || !value->is_string()) {
    throw invalid_request(at + "." + name + " must be a string", at + "." + name);
  }
  return value->get<std::string>();
}

// A text block's text; any other block is refused, naming it.
inline std::string text_of(const Ordered& block, const std::string& type, const std::string& at) {
  if (type != "text") {
    throw invalid_request(
        at + " is a \"" + type + "\" block, which smol does not read here (text only)",
        at + ".type");
  }
  return string_member(block, "text", at);
}

// A string, or a list of text blocks, joined (system prompts, tool results).
inline std::string plain_text(const Ordered& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw invalid_request(at + " must be a string or a list of text blocks", at);
  std::string text;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const std::string block_at = at + "[" + std::to_string(i) + "]";
    text += text_of(content[i], block_type(content[i], block_at), block_at);
  }
  return text;
}

// One user turn: its tool results as tool messages, then its text as a user message.
inline void add_user(Ordered& out, const Ordered& content, const std::string& at) {
  if (content.is_string()) {
    out.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  std::string text;
  bool has_text = false;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const Ordered& block = content[i];
    const std::string block_at = at + "[" + std::to_string(i) + "]";
    const std::string type = block_type(block, block_at);
    if (type == "tool_result") {
      std::string result;
      if (const Ordered* inner = member(block, "content"))
        result = plain_text(*inner, block_at + ".content");
      const Ordered* is_error = member(block, "is_error");
      if (is_error != nullptr && is_error->is_boolean() && is_error->get<bool>()) {
        result = "Error: " + result;
      }
      out.push_back({{"role", "tool"},
                     {"tool_call_id", string_member(block, "tool_use_id", block_at)},
                     {"content", std::move(result)}});
      continue;
    }
    if (type == "tool_use" || type == "thinking" || type == "redacted_thinking") {
      throw invalid_request(
          block_at + " is a \"" + type + "\" block, which belongs to assistant turns",
          block_at + ".type");
    }
    text += text_of(block, type, block_at);
    has_text = true;
  }
  if (has_text) out.push_back({{"role", "user"}, {"content", std::move(text)}});
}

// One assistant turn: text, tool calls and reasoning.
inline void add_assistant(Ordered& out, const Ordered& content, const std::string& at) {
  Ordered message = {{"role", "assistant"}};
  if (content.is_string()) {
    message["content"] = content;
    out.push_back(std::move(message));
    return;
  }
  std::string text, reasoning;
  Ordered calls = Ordered::array();
  for (std::size_t i = 0; i < content.size(); ++i) {
    const Ordered& block = content[i];
    const std::string block_at = at + "[" + std::to_string(i) + "]";
    const std::string type = block_type(block, block_at);
    if (type == "tool_use") {
      const Ordered* input = member(block, "input");
      if (input == nullptr || !input->is_object()) {
        throw invalid_request(block_at + ".input must be an object", block_at + ".input");
      }
      calls.push_back(
          {{"id", string_member(block, "id", block_at)},
           {"type", "function"},
           {"function",
            {{"name", string_member(block, "name", block_at)}, {"arguments", input->dump()}}}});
    } else if (type == "thinking") {
      reasoning += string_member(block, "thinking", block_at);
    } else if (type == "redacted_thinking") {
      // Another server's encrypted reasoning: nothing a template could show.
    } else if (type == "tool_result") {
      throw invalid_request(block_at + " is a \"tool_result\" block, which belongs to user turns",
                            block_at + ".type");
    } else {
      text += text_of(block, type, block_at);
    }
  }
  message["content"] = calls.empty() || !text.empty() ? Ordered(text) : Ordered(nullptr);
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  if (!reasoning.empty()) message["reasoning_content"] = std::move(reasoning);
  out.push_back(std::move(message));
}

inline Ordered tools_of(const Ordered& tools) {
  if (!tools.is_array()) throw invalid_request("tools must be a list", "tools");
  Ordered out = Ordered::array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const Ordered& tool = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) throw invalid_request(at + " must be an object", at);
    if (const Ordered* type = member(tool, "type"); type != nullptr && *type != "custom") {
      throw invalid_request(at + " is a \"" + type->dump() +
                                "\" tool: smol runs the client's own tools only (name, "
                                "description, input_schema)",
                            at + ".type");
    }
    Ordered function = {{"name", string_member(tool, "name", at)}};
    if (const Ordered* description = member(tool, "description"))
      function["description"] = *description;
    const Ordered* schema = member(tool, "input_schema");
    if (schema == nullptr || !schema->is_object()) {
      throw invalid_request(at + ".input_schema must be a JSON schema object",
                            at + ".input_schema");
    }
    function["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

inline void add_tool_choice(Ordered& chat, const Ordered& choice) {
  const Ordered* type = choice.is_object() ? member(choice, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    throw invalid_request(
        "tool_choice must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}", "tool_choice");
  }
  const std::string name = type->get<std::string>();
  if (name == "auto") {
    chat["tool_choice"] = "auto";
  } else if (name == "any") {
    chat["tool_choice"] = "required";
  } else if (name == "none") {
    chat["tool_choice"] = "none";
  } else if (name == "tool") {
    chat["tool_choice"] = {{"type", "function"},
                           {"function", {{"name", string_member(choice, "name", "tool_choice")}}}};
  } else {
    throw invalid_request("tool_choice.type \"" + name + "\" is not auto, any, tool or none",
                          "tool_choice.type");
  }
  const Ordered* serial = member(choice, "disable_parallel_tool_use");
  if (serial != nullptr && serial->is_boolean() && serial->get<bool>()) {
    chat["parallel_tool_calls"] = false;
  }
}

}  // namespace detail

// The chat request (JSON text, OpenAI's shapes) a Messages request means; `count_only`:
// /v1/messages/count_tokens, which needs no max_tokens. Throws ApiError (400) naming the
// field at fault.
inline std::string chat_request_text(std::string_view body, bool count_only = false) {
  smol::serve::detail::parse_body(body);  // the size, depth and syntax checks, as for chat
  return smol::serve::detail::reading_json([&] {
    const Ordered request = Ordered::parse(body);
    if (!request.is_object()) throw invalid_request("the request body must be a JSON object");
    Ordered chat = Ordered::object();
    Ordered messages = Ordered::array();
    std::string system;
    if (const Ordered* top = detail::member(request, "system")) {
      system = detail::plain_text(*top, "system");
    }
    const Ordered* turns = detail::member(request, "messages");
    if (turns == nullptr || !turns->is_array() || turns->empty()) {
      throw invalid_request("messages must be a non-empty list", "messages");
    }
    for (std::size_t i = 0; i < turns->size(); ++i) {
      const Ordered& turn = (*turns)[i];
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (!turn.is_object()) throw invalid_request(at + " must be an object", at);
      const std::string role = detail::string_member(turn, "role", at);
      const Ordered* content = detail::member(turn, "content");
      if (content == nullptr || !(content->is_string() || content->is_array())) {
        throw invalid_request(at + ".content must be a string or a list of content blocks",
                              at + ".content");
      }
      if (role == "system") {
        // Claude Code sends reminders as system turns among the messages; templates take
        // one system prompt, first, so they join the top one.
        const std::string text = detail::plain_text(*content, at + ".content");
        system += system.empty() || text.empty() ? text : "\n\n" + text;
      } else if (role == "user") {
        detail::add_user(messages, *content, at + ".content");
      } else if (role == "assistant") {
        detail::add_assistant(messages, *content, at + ".content");
      } else {
        throw invalid_request(at + ".role \"" + role + "\" is not user, assistant or system",
                              at + ".role");
      }
    }
    if (!system.empty())
      messages.insert(messages.begin(), Ordered::object({{"role", "system"}, {"content", system}}));
    chat["messages"] = std::move(messages);
    const Ordered* max_tokens = detail::member(request, "max_tokens");
    if (max_tokens != nullptr) {
      chat["max_tokens"] = *max_tokens;
    } else if (!count_only) {
      throw invalid_request("max_tokens is required", "max_tokens");
    }
    for (const char* same : {"temperature", "top_p", "top_k", "stream"}) {
      if (const Ordered* value = detail::member(request, same)) chat[same] = *value;
    }
    if (const Ordered* stop = detail::member(request, "stop_sequences")) chat["stop"] = *stop;
    if (const Ordered* tools = detail::member(request, "tools"))
      chat["tools"] = detail::tools_of(*tools);
    if (const Ordered* choice = detail::member(request, "tool_choice")) {
      detail::add_tool_choice(chat, *choice);
    }
    if (const Ordered* thinking = detail::member(request, "thinking")) {
      const Ordered* type = thinking->is_object() ? detail::member(*thinking, "type") : nullptr;
      if (type == nullptr || (*type != "enabled" && *type != "disabled" && *type != "adaptive")) {
        throw invalid_request(
            "thinking must be {\"type\": \"enabled\" | \"disabled\" | \"adaptive\"}",
            "thinking.type");
      }
      // adaptive: the model's own choice, so the server's default (--no-think or not).
      if (*type != "adaptive") {
        chat["chat_template_kwargs"] = {{"enable_thinking", *type == "enabled"}};
      }
    }
    chat["reasoning_format"] = "deepseek";  // reasoning apart: thinking blocks
    return chat.dump();
  });
}

// The error body Anthropic's clients read: {"type": "error", "error": {"type", "message"}}.
inline std::string_view error_type(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

inline Json error_body(const ApiError& error) {
  return {{"type", "error"},
          {"error", {{"type", error_type(error.status)}, {"message", error.what()}}}};
}

// Why a message ended, in Anthropic's words ("tool_use" when it calls tools and ended on
// its own); a grammar that left nothing to write keeps the names Chat Completions gives it.
inline std::string_view stop_reason(StopReason stop, bool calls_tools) {
  switch (stop) {
    case StopReason::end_of_generation:
      return calls_tools ? "tool_use" : "end_turn";
    case StopReason::stop_string:
      return calls_tools ? "tool_use" : "stop_sequence";
    case StopReason::max_tokens:
      return "max_tokens";
    case StopReason::context_full:
      return "model_context_window_exceeded";
    case StopReason::cancelled:
    case StopReason::grammar_dead_end:
    case StopReason::grammar_budget:
      return finish_reason(stop);
  }
  return "end_turn";
}

inline Json stop_sequence(const GenerationResult& result) {
  return result.stop == StopReason::stop_string ? Json(result.stop_string) : Json(nullptr);
}

// usage: the prompt's tokens read from the prompt cache apart, as Anthropic counts them
// (input_tokens + cache_read_input_tokens is the whole prompt).
inline Json usage_json(const GenerationResult& result) {
  return {{"input_tokens", result.stats.prompt_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", result.stats.reused_tokens},
          {"output_tokens", result.stats.generated_tokens}};
}

// A reply's calls' ids (toolu_ as Anthropic's, unique per message).
inline std::string tool_use_id_prefix(const ReplyHeader& header) {
  return "toolu_" + header.id + "_";
}

// The non-streaming reply: a message of content blocks.
inline Json message_json(const ReplyHeader& header, const ReplyText& text,
                         const GenerationResult& result, const ToolRequest* tools) {
  Json content = Json::array();
  if (!text.reasoning().empty()) {
    content.push_back({{"type", "thinking"}, {"thinking", text.reasoning()}, {"signature", ""}});
  }
  bool calls_tools = false;
  if (tools != nullptr) {
    const ToolReply reply = read_tool_reply(text.content(), *tools, tool_use_id_prefix(header));
    if (reply.content && !reply.content->empty()) {
      content.push_back({{"type", "text"}, {"text", *reply.content}});
    }
    for (const ToolCall& call : reply.calls) {
      content.push_back({{"type", "tool_use"},
                         {"id", call.id},
                         {"name", call.name},
                         {"input", Json::parse(call.arguments)}});
    }
    calls_tools = !reply.calls.empty();
  } else if (!text.content().empty()) {
    content.push_back({{"type", "text"}, {"text", text.content()}});
  }
  return {{"id", header.id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", header.model},
          {"content", std::move(content)},
          {"stop_reason", stop_reason(result.stop, calls_tools)},
          {"stop_sequence", stop_sequence(result)},
          {"usage", anthropic::usage_json(result)}};
}

// One server-sent event as Anthropic's clients read it: the event's name twice, in the
// `event:` line and the data's "type".
inline std::string event(std::string_view name, Json data) {
  data["type"] = name;
  return "event: " + std::string(name) + "\ndata: " + dump(data) + "\n\n";
}

// A streamed message: message_start; per content block content_block_start, its deltas
// (thinking_delta, text_delta, input_json_delta) and content_block_stop; message_delta
// with the stop reason and usage; message_stop. Blocks open as the reply changes kind:
// reasoning, text, and each tool call (read as it comes, as ChatStream reads them:
// ToolCallReader in a template family's syntax, ToolReplyScanner in the generic format).
class MessageStream {
 public:
  MessageStream(ReplyHeader header, std::size_t prompt_tokens,
                std::shared_ptr<const ToolRequest> tools)
      : header_(std::move(header)),
        prompt_tokens_(prompt_tokens),
        text_(ReasoningFormat::separate),
        tools_(std::move(tools)) {
    if (tools_ && tools_->syntax) reader_.emplace(*tools_->syntax, *tools_);
  }

  std::string first() const {
    return event("message_start", {{"message",
                                    {{"id", header_.id},
                                     {"type", "message"},
                                     {"role", "assistant"},
                                     {"model", header_.model},
                                     {"content", Json::array()},
                                     {"stop_reason", nullptr},
                                     {"stop_sequence", nullptr},
                                     {"usage",
                                      {{"input_tokens", prompt_tokens_},
                                       {"cache_creation_input_tokens", 0},
                                       {"cache_read_input_tokens", 0},
                                       {"output_tokens", 0}}}}}});
  }

  std::string piece(const TextPiece& piece) {
    const ReplyText::Delta delta = text_.add(piece);
    std::string out;
    if (!delta.reasoning.empty()) {
      out += open(Block::thinking, {{"type", "thinking"}, {"thinking", ""}});
      out += event("content_block_delta",
                   {{"index", index_},
                    {"delta", {{"type", "thinking_delta"}, {"thinking", delta.reasoning}}}});
    }
    if (tools_) {
      return out +
             tool_events(reader_ ? reader_->push(delta.content) : scanner_.push(delta.content));
    }
    if (!delta.content.empty()) out += text_event(delta.content);
    return out;
  }

  std::string finish(const GenerationResult& result) {
    std::string out;
    bool calls_tools = false;
    if (tools_) {
      if (reader_) out += tool_events(reader_->finish());
      calls_tools =
          !read_tool_reply(text_.content(), *tools_, tool_use_id_prefix(header_)).calls.empty();
    }
    out += close();
    out += event("message_delta", {{"delta",
                                    {{"stop_reason", stop_reason(result.stop, calls_tools)},
                                     {"stop_sequence", stop_sequence(result)}}},
                                   {"usage", anthropic::usage_json(result)}});
    return out + event("message_stop", Json::object());
  }

  static std::string error(const ApiError& error) {
    return event("error", anthropic::error_body(error));
  }

 private:
  enum class Block { none, thinking, text, tool_use };

  // Opens a block of `kind` (closing the open one), unless one is open already.
  std::string open(Block kind, Json content_block) {
    if (open_ == kind && kind != Block::tool_use) return {};
    std::string out = close();
    ++index_;
    open_ = kind;
    return out + event("content_block_start",
                       {{"index", index_}, {"content_block", std::move(content_block)}});
  }
  std::string close() {
    if (open_ == Block::none) return {};
    open_ = Block::none;
    return event("content_block_stop", {{"index", index_}});
  }
  std::string text_event(const std::string& text) {
    std::string out = open(Block::text, {{"type", "text"}, {"text", ""}});  // first: the index
    return out + event("content_block_delta",
                       {{"index", index_}, {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }

  std::string tool_events(const std::vector<ToolReplyScanner::Event>& events) {
    std::string out;
    for (const ToolReplyScanner::Event& e : events) {
      switch (e.kind) {
        case ToolReplyScanner::Kind::content:
          if (!e.text.empty()) out += text_event(e.text);
          break;
        case ToolReplyScanner::Kind::call:
          out += open(Block::tool_use,
                      {{"type", "tool_use"},
                       {"id", tool_call_id(tool_use_id_prefix(header_), e.index, *tools_)},
                       {"name", e.text},
                       {"input", Json::object()}});
          break;
        case ToolReplyScanner::Kind::arguments:
          out += event("content_block_delta",
                       {{"index", index_},
                        {"delta", {{"type", "input_json_delta"}, {"partial_json", e.text}}}});
          break;
      }
    }
    return out;
  }

  ReplyHeader header_;
  std::size_t prompt_tokens_;
  ReplyText text_;
  std::shared_ptr<const ToolRequest> tools_;
  ToolReplyScanner scanner_;
  std::optional<ToolCallReader> reader_;
  Block open_ = Block::none;
  long index_ = -1;  // the open (or last) block's
};

}  // namespace smol::serve::anthropic
