// OpenAI's Responses API (POST /v1/responses: what Codex CLI and OpenAI's Agents SDK speak)
// as a third wire format over the Chat Completions engine, the way anthropic_messages.hpp
// is the second: a request is translated into the chat request it means (OpenAI's chat
// shapes, parsed by openai_request.hpp: one request model, one template path, one tool-call
// grammar, one set of field checks), and the reply written back as a response object of
// output items, or as the Responses API's events.
//
// The translation, field by field (the Responses API's names first):
//   instructions, and input messages of role system / developer -> the system prompt
//     (joined, in order: templates take one system prompt, first)
//   input "text"                               -> one user message
//   input message items (user, assistant;
//     input_text / output_text / refusal parts) -> user / assistant messages
//   function_call items {call_id, name, arguments} -> the assistant turn's tool_calls
//   function_call_output items {call_id, output}   -> tool messages
//   reasoning items (summary or reasoning_text)    -> the next assistant turn's reasoning
//   tools: function {name, description, parameters, strict} -> function tools; a
//     "namespace" of functions -> its functions, offered by their own names; any other
//     type (web_search, file_search, ...) is a tool the API's host runs, which smol has
//     none of: not offered to the model, and named in `dropped_tools` for the server's log
//   tool_choice "auto" / "none" / "required" / {type: function, name} -> the same
//   text.format {type: text | json_object | json_schema} -> response_format
//   reasoning.effort "none" -> enable_thinking false; any other effort -> true
//   max_output_tokens, temperature, top_p, top_k, stream, parallel_tool_calls: the same
// previous_response_id: the server prepends the conversation it stored under that id
// (ResponseStore); `store: false` stores nothing.
#pragma once

#include <cstddef>
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

namespace smol::serve::responses {

using Ordered = nlohmann::ordered_json;

// A Responses request read: what the translation and the server's store need.
struct ResponsesRequest {
  Ordered body;   // the request as sent (its key order kept)
  Ordered input;  // `input` as a list of items (a text: one user message)
  std::optional<std::string> previous_response_id;
  bool store = true;  // false: nothing kept for a later previous_response_id
  bool stream = false;
};

// The chat request a Responses request means, and the tools it could not offer.
struct Translation {
  std::string chat;                        // JSON text, OpenAI's chat shapes
  std::vector<std::string> dropped_tools;  // "tools[8]: web_search", for the log
};

namespace detail {

inline const Ordered* member(const Ordered& object, const char* name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

inline std::string string_member(const Ordered& object, const char* name, const std::string& at) {
  const Ordered* value = member(object, name);
  if (value == nullptr || !value->is_string()) {
    throw invalid_request(at + "." + name + " must be a string", at + "." + name);
  }
  return value->get<std::string>();
}

// A message's content: a string, or a list of text parts (input_text, output_text, text,
// refusal, reasoning_text, summary_text), joined. Images, files and audio are refused by
// name: smol reads text only.
inline std::string text_of(const Ordered& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw invalid_request(at + " must be a string or a list of parts", at);
  std::string text;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const Ordered& part = content[i];
    const std::string part_at = at + "[" + std::to_string(i) + "]";
    if (!part.is_object()) throw invalid_request(part_at + " must be an object", part_at);
    const std::string type = string_member(part, "type", part_at);
    if (type == "refusal") {
      text += string_member(part, "refusal", part_at);
    } else if (type == "input_text" || type == "output_text" || type == "text" ||
               type == "reasoning_text" || type == "summary_text") {
      text += string_member(part, "text", part_at);
    } else {
      throw invalid_request(
          part_at + " is an \"" + type + "\" part, which smol does not read (text only)",
          part_at + ".type");
    }
  }
  return text;
}

// The chat messages a list of items means, built item by item.
class Conversation {
 public:
  void add(const Ordered& item, const std::string& at) {
    if (!item.is_object()) throw invalid_request(at + " must be an object", at);
    const Ordered* type_field = member(item, "type");
    if (type_field != nullptr && !type_field->is_string())
      throw invalid_request(at + ".type must be a string", at + ".type");
    const std::string type = type_field ? type_field->get<std::string>() : "message";
    if (type == "message") {
      add_message(item, at);
    } else if (type == "function_call") {
      Ordered& turn = assistant_turn();
      if (!turn.contains("tool_calls")) turn["tool_calls"] = Ordered::array();
      turn["tool_calls"].push_back({{"id", string_member(item, "call_id", at)},
                                    {"type", "function"},
                                    {"function",
                                     {{"name", string_member(item, "name", at)},
                                      {"arguments", string_member(item, "arguments", at)}}}});
    } else if (type == "function_call_output") {
      const Ordered* output = member(item, "output");
      if (output == nullptr) throw invalid_request(at + ".output is required", at + ".output");
      messages_.push_back({{"role", "tool"},
                           {"tool_call_id", string_member(item, "call_id", at)},
                           {"content", text_of(*output, at + ".output")}});
    } else if (type == "reasoning") {
      // Its text, where the client sent it: the full text, or else the summary.
      std::string text;
      if (const Ordered* content = member(item, "content")) {
        text = text_of(*content, at + ".content");
      } else if (const Ordered* summary = member(item, "summary")) {
        text = text_of(*summary, at + ".summary");
      }
      pending_reasoning_ += text;
    } else {
      throw invalid_request(at + " is a \"" + type +
                                "\" item, which smol does not read (messages, function_call, "
                                "function_call_output and reasoning items only)",
                            at + ".type");
    }
  }

  void add_system(const std::string& text) {
    if (text.empty()) return;
    system_ += system_.empty() ? text : "\n\n" + text;
  }

  Ordered messages() && {
    if (!system_.empty()) {
      messages_.insert(messages_.begin(), Ordered{{"role", "system"}, {"content", system_}});
    }
    return std::move(messages_);
  }

 private:
  void add_message(const Ordered& item, const std::string& at) {
    const std::string role = string_member(item, "role", at);
    const Ordered* content = member(item, "content");
    if (content == nullptr) throw invalid_request(at + ".content is required", at + ".content");
    const std::string text = text_of(*content, at + ".content");
    if (role == "system" || role == "developer") {
      add_system(text);
    } else if (role == "user") {
      messages_.push_back({{"role", "user"}, {"content", text}});
    } else if (role == "assistant") {
      Ordered& turn = assistant_turn();
      const Ordered* previous = member(turn, "content");
      turn["content"] = (previous != nullptr ? previous->get<std::string>() : "") + text;
    } else {
      throw invalid_request(
          at + ".role \"" + role + "\" is not user, assistant, system or developer", at + ".role");
    }
  }

  // The assistant turn the next assistant item belongs to: the last message, when it is
  // an assistant turn with no calls yet answered; else a new one. A function_call after
  // the turn's text joins that turn, as a chat message carries both.
  Ordered& assistant_turn() {
    if (messages_.empty() || messages_.back()["role"] != "assistant" ||
        !pending_reasoning_.empty()) {
      messages_.push_back({{"role", "assistant"}, {"content", nullptr}});
    }
    Ordered& turn = messages_.back();
    if (!pending_reasoning_.empty()) {
      turn["reasoning_content"] = std::move(pending_reasoning_);
      pending_reasoning_.clear();
    }
    return turn;
  }

  Ordered messages_ = Ordered::array();
  std::string system_, pending_reasoning_;
};

// One function tool in the chat request's shape.
inline Ordered function_tool(const Ordered& tool, const std::string& at) {
  Ordered function = {{"name", string_member(tool, "name", at)}};
  for (const char* same : {"description", "parameters", "strict"}) {
    if (const Ordered* value = member(tool, same)) function[same] = *value;
  }
  return {{"type", "function"}, {"function", std::move(function)}};
}

inline Ordered tools_of(const Ordered& tools, std::vector<std::string>& dropped) {
  if (!tools.is_array()) throw invalid_request("tools must be a list", "tools");
  Ordered out = Ordered::array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const Ordered& tool = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) throw invalid_request(at + " must be an object", at);
    const std::string type = string_member(tool, "type", at);
    if (type == "function") {
      out.push_back(function_tool(tool, at));
    } else if (type == "namespace") {
      const Ordered* inner = member(tool, "tools");
      if (inner == nullptr || !inner->is_array())
        throw invalid_request(at + ".tools must be a list", at + ".tools");
      for (std::size_t j = 0; j < inner->size(); ++j) {
        const std::string inner_at = at + ".tools[" + std::to_string(j) + "]";
        const Ordered& f = (*inner)[j];
        if (!f.is_object() || string_member(f, "type", inner_at) != "function") {
          dropped.push_back(inner_at + ": not a function");
          continue;
        }
        out.push_back(function_tool(f, inner_at));
      }
    } else {
      dropped.push_back(at + ": " + type);
    }
  }
  return out;
}

inline Ordered tool_choice_of(const Ordered& choice) {
  if (choice.is_string()) return choice;  // auto, none, required: chat's own words
  const Ordered* type = choice.is_object() ? member(choice, "type") : nullptr;
  if (type != nullptr && *type == "function") {
    return {{"type", "function"},
            {"function", {{"name", string_member(choice, "name", "tool_choice")}}}};
  }
  throw invalid_request(
      "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
      "\"name\"} (smol runs function tools only)",
      "tool_choice");
}

// text.format -> response_format.
inline std::optional<Ordered> response_format_of(const Ordered& text) {
  if (!text.is_object()) throw invalid_request("text must be an object", "text");
  const Ordered* format = member(text, "format");
  if (format == nullptr) return std::nullopt;
  const Ordered* type = format->is_object() ? member(*format, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    throw invalid_request(
        "text.format must be {\"type\": \"text\" | \"json_object\" | \"json_schema\"}",
        "text.format");
  }
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") return Ordered{{"type", "json_object"}};
  if (*type != "json_schema") {
    throw invalid_request(
        "text.format.type " + type->dump() + " is not text, json_object or json_schema",
        "text.format.type");
  }
  Ordered schema = {{"name", string_member(*format, "name", "text.format")}};
  const Ordered* body = member(*format, "schema");
  if (body == nullptr || !body->is_object()) {
    throw invalid_request("text.format.schema must be a JSON schema object", "text.format.schema");
  }
  schema["schema"] = *body;
  if (const Ordered* strict = member(*format, "strict")) schema["strict"] = *strict;
  return Ordered{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

}  // namespace detail

// Reads a request: the size, depth and syntax checks as for chat, then the fields the
// server acts on before the translation. Throws ApiError (400) naming the field at fault.
inline ResponsesRequest read_request(std::string_view body) {
  smol::serve::detail::parse_body(body);
  return smol::serve::detail::reading_json([&] {
    ResponsesRequest request;
    request.body = Ordered::parse(body);
    const Ordered* input = detail::member(request.body, "input");
    if (input == nullptr) throw invalid_request("input is required", "input");
    if (input->is_string()) {
      request.input =
          Ordered::array({{{"type", "message"}, {"role", "user"}, {"content", *input}}});
    } else if (input->is_array()) {
      request.input = *input;
    } else {
      throw invalid_request("input must be a string or a list of items", "input");
    }
    if (const Ordered* previous = detail::member(request.body, "previous_response_id")) {
      if (!previous->is_string())
        throw invalid_request("previous_response_id must be a string", "previous_response_id");
      request.previous_response_id = previous->get<std::string>();
    }
    if (const Ordered* store = detail::member(request.body, "store")) {
      if (!store->is_boolean()) throw invalid_request("store must be true or false", "store");
      request.store = store->get<bool>();
    }
    if (const Ordered* stream = detail::member(request.body, "stream")) {
      if (!stream->is_boolean()) throw invalid_request("stream must be true or false", "stream");
      request.stream = stream->get<bool>();
    }
    return request;
  });
}

// The chat request a Responses request means, after `earlier`: the items of the
// conversation stored under previous_response_id (none without one).
inline Translation translate(const ResponsesRequest& request, const Ordered& earlier) {
  return smol::serve::detail::reading_json([&] {
    Translation out;
    const Ordered& body = request.body;
    detail::Conversation conversation;
    if (const Ordered* instructions = detail::member(body, "instructions")) {
      if (!instructions->is_string())
        throw invalid_request("instructions must be a string", "instructions");
      conversation.add_system(instructions->get<std::string>());
    }
    for (std::size_t i = 0; i < earlier.size(); ++i) {
      conversation.add(earlier[i], "previous_response_id's item " + std::to_string(i));
    }
    for (std::size_t i = 0; i < request.input.size(); ++i) {
      conversation.add(request.input[i], "input[" + std::to_string(i) + "]");
    }
    Ordered chat = Ordered::object();
    chat["messages"] = std::move(conversation).messages();
    if (chat["messages"].empty()) throw invalid_request("input has no messages", "input");
    if (const Ordered* max = detail::member(body, "max_output_tokens")) chat["max_tokens"] = *max;
    for (const char* same :
         {"temperature", "top_p", "top_k", "stream", "parallel_tool_calls", "seed"}) {
      if (const Ordered* value = detail::member(body, same)) chat[same] = *value;
    }
    if (const Ordered* tools = detail::member(body, "tools")) {
      Ordered offered = detail::tools_of(*tools, out.dropped_tools);
      if (!offered.empty()) chat["tools"] = std::move(offered);
    }
    if (const Ordered* choice = detail::member(body, "tool_choice");
        choice && chat.contains("tools"))
      chat["tool_choice"] = detail::tool_choice_of(*choice);
    if (const Ordered* text = detail::member(body, "text")) {
      if (std::optional<Ordered> format = detail::response_format_of(*text))
        chat["response_format"] = std::move(*format);
    }
    if (const Ordered* reasoning = detail::member(body, "reasoning")) {
      if (!reasoning->is_object())
        throw invalid_request("reasoning must be an object", "reasoning");
      if (const Ordered* effort = detail::member(*reasoning, "effort")) {
        if (!effort->is_string())
          throw invalid_request("reasoning.effort must be a string", "reasoning.effort");
        chat["chat_template_kwargs"] = {{"enable_thinking", *effort != "none"}};
      }
    }
    chat["reasoning_format"] = "deepseek";  // reasoning apart: reasoning items
    out.chat = chat.dump();
    return out;
  });
}

// ---- the reply ----

// Whether a reply finished ("completed") or was cut short ("incomplete", with the reason:
// "max_output_tokens" for the token limit and for a full context, the reasons OpenAI's
// clients know; a grammar that left nothing to write keeps Chat Completions' names).
inline std::string_view status(StopReason stop) {
  return stop == StopReason::end_of_generation || stop == StopReason::stop_string ? "completed"
                                                                                  : "incomplete";
}

inline Json incomplete_details(StopReason stop) {
  if (status(stop) == "completed") return nullptr;
  const bool limit = stop == StopReason::max_tokens || stop == StopReason::context_full;
  return {{"reason", limit ? std::string_view("max_output_tokens") : finish_reason(stop)}};
}

// usage: the whole prompt, its cached part apart; the reply, its reasoning apart.
inline Json usage_json(const GenerationResult& result, std::size_t reasoning_tokens) {
  const std::size_t input = result.stats.prompt_tokens + result.stats.reused_tokens;
  const std::size_t output = result.stats.generated_tokens;
  return {{"input_tokens", input},
          {"input_tokens_details", {{"cached_tokens", result.stats.reused_tokens}}},
          {"output_tokens", output},
          {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
          {"total_tokens", input + output}};
}

// The ids of a response's items: derived from the response's, so that a stream's events
// and its final response name the same items.
inline std::string message_item_id(const ReplyHeader& header) {
  return "msg_" + header.id;
}
inline std::string reasoning_item_id(const ReplyHeader& header) {
  return "rs_" + header.id;
}
inline std::string call_item_id(const ReplyHeader& header, std::size_t index) {
  return "fc_" + header.id + "_" + std::to_string(index);
}
inline std::string call_id_prefix(const ReplyHeader& header) {
  return "call_" + header.id + "_";
}

inline Json message_item(const ReplyHeader& header, const std::string& text, std::string_view st) {
  Json content = Json::array();
  if (!text.empty() || st == "completed") {
    content.push_back({{"type", "output_text"},
                       {"text", text},
                       {"annotations", Json::array()},
                       {"logprobs", Json::array()}});
  }
  return {{"type", "message"},
          {"id", message_item_id(header)},
          {"status", st},
          {"role", "assistant"},
          {"content", std::move(content)}};
}

inline Json reasoning_item(const ReplyHeader& header, const std::string& text) {
  Json content = Json::array();
  if (!text.empty()) content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"type", "reasoning"},
          {"id", reasoning_item_id(header)},
          {"summary", Json::array()},
          {"content", std::move(content)}};
}

inline Json call_item(const ReplyHeader& header, std::size_t index, const std::string& call_id,
                      const std::string& name, const std::string& arguments, std::string_view st) {
  return {{"type", "function_call"}, {"id", call_item_id(header, index)},
          {"call_id", call_id},      {"name", name},
          {"arguments", arguments},  {"status", st}};
}

// The response object around `output`: the request's settings echoed as OpenAI's does.
inline Json response_json(const ReplyHeader& header, const ResponsesRequest& request,
                          std::string_view st, Json output, Json usage, Json incomplete) {
  const auto echo = [&](const char* name, Json fallback) -> Json {
    const Ordered* value = detail::member(request.body, name);
    return value != nullptr ? Json::parse(value->dump()) : fallback;
  };
  return {{"id", header.id},
          {"object", "response"},
          {"created_at", header.created},
          {"status", st},
          {"error", nullptr},
          {"incomplete_details", std::move(incomplete)},
          {"instructions", echo("instructions", nullptr)},
          {"max_output_tokens", echo("max_output_tokens", nullptr)},
          {"model", header.model},
          {"output", std::move(output)},
          {"parallel_tool_calls", echo("parallel_tool_calls", true)},
          {"previous_response_id", echo("previous_response_id", nullptr)},
          {"reasoning", echo("reasoning", {{"effort", nullptr}, {"summary", nullptr}})},
          {"store", request.store},
          {"temperature", echo("temperature", 1.0)},
          {"text", echo("text", {{"format", {{"type", "text"}}}})},
          {"tool_choice", echo("tool_choice", "auto")},
          {"tools", echo("tools", Json::array())},
          {"top_p", echo("top_p", 1.0)},
          {"truncation", "disabled"},
          {"usage", std::move(usage)},
          {"metadata", echo("metadata", Json::object())}};
}

// The finished response: reasoning, then the message, then each call, as output items.
inline Json finished_response(const ReplyHeader& header, const ResponsesRequest& request,
                              const ReplyText& text, const GenerationResult& result,
                              const ToolRequest* tools, std::size_t reasoning_tokens) {
  const std::string_view st = status(result.stop);
  Json output = Json::array();
  if (!text.reasoning().empty()) output.push_back(reasoning_item(header, text.reasoning()));
  std::optional<std::string> content = text.content();
  std::vector<ToolCall> calls;
  if (tools != nullptr) {
    ToolReply reply = read_tool_reply(text.content(), *tools, call_id_prefix(header));
    content = std::move(reply.content);
    calls = std::move(reply.calls);
  }
  if ((content && !content->empty()) || (calls.empty() && output.empty())) {
    output.push_back(message_item(header, content.value_or(""), st));
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    output.push_back(call_item(header, i, calls[i].id, calls[i].name, calls[i].arguments, st));
  }
  return response_json(header, request, st, std::move(output), usage_json(result, reasoning_tokens),
                       incomplete_details(result.stop));
}

// The items a stored response adds to its conversation: the request's input, then the
// response's output (Json to the store's ordered items).
inline Ordered conversation_items(const Ordered& earlier, const ResponsesRequest& request,
                                  const Json& response) {
  Ordered items = earlier;
  for (const Ordered& item : request.input) items.push_back(item);
  for (const Json& item : response["output"]) items.push_back(Ordered::parse(item.dump()));
  return items;
}

// One server-sent event as the Responses API's clients read it: its type in the `event:`
// line and the data's "type", and the stream's running sequence number.
inline std::string event(std::string_view type, Json data, std::size_t sequence) {
  data["type"] = type;
  data["sequence_number"] = sequence;
  return "event: " + std::string(type) + "\ndata: " + dump(data) + "\n\n";
}

// A streamed response: response.created, response.in_progress; per output item
// output_item.added, its deltas (reasoning_text.delta; content_part.added and
// output_text.delta; function_call_arguments.delta) and their .done events, and
// output_item.done; then response.completed (or response.incomplete) with the whole
// response, as finished_response() builds it for the same reply. Calls are read as they
// come, as ChatStream reads them (ToolCallReader in a template family's syntax,
// ToolReplyScanner in the generic format).
class ResponseStream {
 public:
  ResponseStream(ReplyHeader header, std::shared_ptr<const ResponsesRequest> request,
                 std::shared_ptr<const ToolRequest> tools)
      : header_(std::move(header)),
        request_(std::move(request)),
        text_(ReasoningFormat::separate),
        tools_(std::move(tools)) {
    if (tools_ && tools_->syntax) reader_.emplace(*tools_->syntax, *tools_);
  }

  std::string first() {
    const Json created =
        response_json(header_, *request_, "in_progress", Json::array(), nullptr, nullptr);
    std::string out = next("response.created", {{"response", created}});
    return out + next("response.in_progress", {{"response", created}});
  }

  std::string piece(const TextPiece& piece) {
    const ReplyText::Delta delta = text_.add(piece);
    std::string out;
    if (piece.kind == PieceKind::thinking) ++reasoning_tokens_;
    if (!delta.reasoning.empty()) {
      out += open(Item::reasoning);
      reasoning_ += delta.reasoning;
      out += next("response.reasoning_text.delta", {{"item_id", reasoning_item_id(header_)},
                                                    {"output_index", output_index_},
                                                    {"content_index", 0},
                                                    {"delta", delta.reasoning}});
    }
    if (tools_) {
      return out +
             tool_events(reader_ ? reader_->push(delta.content) : scanner_.push(delta.content));
    }
    if (!delta.content.empty()) out += text_event(delta.content);
    return out;
  }

  // The last events; `response` is set to the finished response (for the store).
  std::string finish(const GenerationResult& result, Json& response) {
    std::string out;
    if (reader_) out += tool_events(reader_->finish());
    out += close();
    response =
        finished_response(header_, *request_, text_, result, tools_.get(), reasoning_tokens_);
    const std::string_view st = status(result.stop);
    return out + next(st == "completed" ? "response.completed" : "response.incomplete",
                      {{"response", response}});
  }

  static std::string error(const ApiError& error) {
    return event("error",
                 {{"code", error.type},
                  {"message", error.what()},
                  {"param", error.param.empty() ? Json(nullptr) : Json(error.param)}},
                 0);
  }

 private:
  enum class Item { none, reasoning, message, call };

  std::string next(std::string_view type, Json data) {
    return event(type, std::move(data), sequence_++);
  }

  std::string open(Item kind, Json item = nullptr) {
    if (open_ == kind && kind != Item::call) return {};
    std::string out = close();
    ++output_index_;
    open_ = kind;
    if (kind == Item::reasoning) {
      item = reasoning_item(header_, "");
    } else if (kind == Item::message) {
      item = message_item(header_, "", "in_progress");
      item["content"] = Json::array();
    }
    const std::string id = item["id"];
    out += next("response.output_item.added", {{"output_index", output_index_}, {"item", item}});
    if (kind == Item::message) {
      out +=
          next("response.content_part.added",
               {{"item_id", id},
                {"output_index", output_index_},
                {"content_index", 0},
                {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}}});
    }
    return out;
  }

  std::string close() {
    std::string out;
    const Item kind = open_;
    open_ = Item::none;
    switch (kind) {
      case Item::none:
        return {};
      case Item::reasoning:
        out += next("response.reasoning_text.done", {{"item_id", reasoning_item_id(header_)},
                                                     {"output_index", output_index_},
                                                     {"content_index", 0},
                                                     {"text", reasoning_}});
        return out +
               next("response.output_item.done", {{"output_index", output_index_},
                                                  {"item", reasoning_item(header_, reasoning_)}});
      case Item::message: {
        const Json part = {{"type", "output_text"},
                           {"text", message_},
                           {"annotations", Json::array()},
                           {"logprobs", Json::array()}};
        const std::string id = message_item_id(header_);
        out += next("response.output_text.done", {{"item_id", id},
                                                  {"output_index", output_index_},
                                                  {"content_index", 0},
                                                  {"text", message_},
                                                  {"logprobs", Json::array()}});
        out += next("response.content_part.done", {{"item_id", id},
                                                   {"output_index", output_index_},
                                                   {"content_index", 0},
                                                   {"part", part}});
        return out + next("response.output_item.done",
                          {{"output_index", output_index_},
                           {"item", message_item(header_, message_, "completed")}});
      }
      case Item::call: {
        const std::string id = call_item_id(header_, call_index_);
        out += next("response.function_call_arguments.done", {{"item_id", id},
                                                              {"output_index", output_index_},
                                                              {"name", call_name_},
                                                              {"arguments", arguments_}});
        return out + next("response.output_item.done",
                          {{"output_index", output_index_},
                           {"item", call_item(header_, call_index_, call_id_, call_name_,
                                              arguments_, "completed")}});
      }
    }
    return out;
  }

  std::string text_event(const std::string& text) {
    std::string out = open(Item::message);
    message_ += text;
    return out + next("response.output_text.delta", {{"item_id", message_item_id(header_)},
                                                     {"output_index", output_index_},
                                                     {"content_index", 0},
                                                     {"delta", text},
                                                     {"logprobs", Json::array()}});
  }

  std::string tool_events(const std::vector<ToolReplyScanner::Event>& events) {
    std::string out;
    for (const ToolReplyScanner::Event& e : events) {
      switch (e.kind) {
        case ToolReplyScanner::Kind::content:
          if (!e.text.empty()) out += text_event(e.text);
          break;
        case ToolReplyScanner::Kind::call:
          out += close();
          call_index_ = e.index;
          call_id_ = tool_call_id(call_id_prefix(header_), e.index, *tools_);
          call_name_ = e.text;
          arguments_.clear();
          out += open(Item::call,
                      call_item(header_, e.index, call_id_, call_name_, "", "in_progress"));
          break;
        case ToolReplyScanner::Kind::arguments:
          arguments_ += e.text;
          out += next("response.function_call_arguments.delta",
                      {{"item_id", call_item_id(header_, call_index_)},
                       {"output_index", output_index_},
                       {"delta", e.text}});
          break;
      }
    }
    return out;
  }

  ReplyHeader header_;
  std::shared_ptr<const ResponsesRequest> request_;
  ReplyText text_;
  std::shared_ptr<const ToolRequest> tools_;
  ToolReplyScanner scanner_;
  std::optional<ToolCallReader> reader_;
  Item open_ = Item::none;
  long output_index_ = -1;  // the open (or last) item's
  std::size_t sequence_ = 0, reasoning_tokens_ = 0, call_index_ = 0;
  std::string reasoning_, message_, call_id_, call_name_, arguments_;
};

}  // namespace smol::serve::responses
