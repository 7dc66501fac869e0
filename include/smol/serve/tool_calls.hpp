// Tool calls (OpenAI's `tools`, `tool_choice`, `parallel_tool_calls`): the request's
// functions read and checked, described to the model, its reply constrained to a call
// and parsed back into `tool_calls`.
//
// A template of a family with a tool syntax of its own (tool_call_formats.hpp: Hermes,
// Llama 3.x, Mistral, DeepSeek, ...) gets the tools, calls and results as data and
// writes them itself; replies are read by tool_call_reader.hpp. The others have none:
// SmolLM2's and plain ChatML have no tool section, and the SmolLM3 template GGUF files
// carry (Unsloth's edition, smollm3_template.hpp) dropped the original's `xml_tools`
// block; each ignores a `tools` variable (tests/chat_template/ checks that against
// jinja2). For such a template llama-server uses its "generic" format (common/chat.cpp),
// and so does smol, in its own words:
//  - the tools are described in the system prompt, as a JSON list of {name, description,
//    parameters}, with the reply format: a JSON object, {"tool_call": {"name",
//    "arguments"}} (or {"tool_calls": [...]} when parallel calls are allowed), or, unless
//    a call is required, {"response": "..."} to answer in text;
//  - the reply is constrained by a grammar (grammar/json_schema.hpp) to exactly that
//    JSON, for "auto" as well as "required" or a named function (llama-server's generic
//    format constrains "auto" the same way), so a reply that ends normally always
//    parses and every call's arguments validate against the function's `parameters`;
//  - earlier turns are written in the same format: an assistant message's `tool_calls`
//    as the JSON the model would have written, a `tool` message as
//    {"tool_response": {"tool_call_id", "content"}}.
// A call's `arguments` are the model's text of the arguments object less the whitespace
// between tokens, so that a stream (ToolReplyScanner, which sends each call's name once
// it is complete and its arguments as they are written, as OpenAI streams calls) adds up
// to the reply sent whole. A reply cut short (max_tokens) is not valid JSON: sent whole
// it comes back as plain content with finish_reason "length" (a stream has sent what
// it had read). tool_choice "none" describes no tools and constrains nothing.
// A constrained reply does not think (as with response_format).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/serve/api_error.hpp"
#include "smol/serve/structured_output.hpp"
#include "smol/serve/tool_call_formats.hpp"
#include "smol/template/chat_template.hpp"
#include "smol/text/unicode.hpp"

namespace smol::serve {

using OrderedJson = nlohmann::ordered_json;

struct ToolFunction {
  std::string name;
  std::string description;  // empty: none given
  OrderedJson parameters;   // a JSON schema, properties in the client's order
  // The constraints of `parameters` the grammar does not enforce (relaxed_parameters),
  // each as the converter's reason; `parameters` holds the schema as enforced.
  std::vector<std::string> unenforced;
};

enum class ToolChoice { none, automatic, required, named };

// The request's tools. `active()`: the model is told about them and must reply in the
// tool format.
struct ToolRequest {
  std::vector<ToolFunction> functions;
  ToolChoice choice = ToolChoice::automatic;
  std::string named;     // ToolChoice::named: the function to call
  bool parallel = true;  // parallel_tool_calls (OpenAI's default: true)
  // The family whose syntax the chat template writes calls in (tool_call_formats.hpp):
  // the template describes the tools and writes earlier calls itself, the reply is read
  // by tool_call_reader.hpp. Null: the generic format of this file.
  const ToolCallSyntax* syntax = nullptr;

  bool active() const { return !functions.empty() && choice != ToolChoice::none; }
  const ToolFunction* find(std::string_view name) const {
    for (const ToolFunction& f : functions) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }
};

// One call, as OpenAI sends it: `arguments` is JSON text.
struct ToolCall {
  std::string id, name, arguments;
};

// The id of a reply's call `index`: `prefix` and the index, or for a family whose
// template checks the ids it is given back (Mistral's: nine letters or digits) nine
// characters derived from them (FNV-1a), unique per reply as the prefix is.
inline std::string tool_call_id(const std::string& prefix, std::size_t index,
                                const ToolRequest& tools) {
  std::string id = prefix + std::to_string(index);
  if (tools.syntax == nullptr || tools.syntax->id != CallId::mistral) return id;
  std::uint64_t hash = 14695981039346656037ull;
  for (const char c : id) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  static constexpr std::string_view kDigits =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string short_id;
  for (int i = 0; i < 9; ++i, hash /= kDigits.size()) short_id += kDigits[hash % kDigits.size()];
  return short_id;
}

namespace detail {

// OpenAI's rule for function names: a-z, A-Z, 0-9, underscores and dashes, 1 to 64.
inline bool valid_function_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Whether `json` is an object whose "type" is the string `type`.
inline bool typed(const Json& json, std::string_view type) {
  if (!json.is_object()) return false;
  const auto it = json.find("type");
  return it != json.end() && it->is_string() && it->get_ref<const std::string&>() == type;
}

inline const Json* member(const Json& object, const char* name) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// A tool's parameters as a grammar can enforce them. Agents' tools carry schemas written
// for validators and for the model's eyes (Claude Code's: two regex patterns under one
// allOf, "format": "uri", a maxLength of 100000), and the model needs its calls made all
// the same: as llama.cpp does, what the converter cannot enforce is left unenforced, at
// the finest grain it can name. Each refusal names the subschema at fault (its "(at
// #/...)"), which becomes any value of its declared type (its description kept), and the
// conversion is tried again: at most kMaxRelaxations times, and never the schema's root
// (a root nothing can enforce stays the 400 it was). The model still reads the client's
// schema, in the prompt; the server logs each reason (`unenforced`). response_format's
// schemas are not relaxed: there the client asked for replies valid under the schema.
inline constexpr std::size_t kMaxRelaxations = 16;

// The subschema a converter's message points at ("... (at #/properties/to)"; a merged
// allOf's "/allOf" tail names the schema that holds it), if that path is a schema of
// `schema` other than its root: null otherwise (a path through a cut or escaped key, a
// value that is not a schema).
inline OrderedJson* refused_subschema(OrderedJson& schema, const std::string& message) {
  const std::size_t at = message.rfind("(at #");
  if (at == std::string::npos || message.back() != ')') return nullptr;
  std::string path = message.substr(at + 5, message.size() - at - 6);
  if (path.ends_with("/allOf")) path.resize(path.size() - 6);
  if (path.empty()) return nullptr;
  try {
    OrderedJson* found = &schema.at(OrderedJson::json_pointer(path));
    return found->is_object() ? found : nullptr;
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

inline void relax_parameters(ToolFunction& f, const std::string& param) {
  for (std::size_t tries = 0;; ++tries) {
    std::string reason;
    try {
      grammar_from_schema(f.parameters, param);
      return;
    } catch (const ApiError& error) {
      reason = error.what();
      OrderedJson* sub = refused_subschema(f.parameters, reason);
      if (sub == nullptr || tries == kMaxRelaxations) throw;
      OrderedJson loose = OrderedJson::object();
      if (sub->is_object()) {
        const auto type = sub->find("type");
        if (type != sub->end() && type->is_string() && *type != "null") loose["type"] = *type;
        const auto description = sub->find("description");
        if (description != sub->end()) loose["description"] = *description;
      }
      if (*sub == loose) throw;  // nothing left to relax there
      *sub = std::move(loose);
    }
    f.unenforced.push_back(reason.substr(reason.find(": ") + 2));
  }
}

// tools[i] (`at` names it), checked: its name (unique among `earlier`), description and
// parameters. `ordered_tools` is the request's `tools` with each object's keys in the
// client's order, parsed from `body_text` the first time a tool has parameters.
inline ToolFunction tool_function(const Json& tool, std::size_t i, const std::string& at,
                                  const ToolRequest& earlier, std::string_view body_text,
                                  OrderedJson& ordered_tools) {
  if (!typed(tool, "function")) {
    throw invalid_request(at + " must be {\"type\": \"function\", \"function\": {...}}", at);
  }
  const Json* function = member(tool, "function");
  if (function == nullptr || !function->is_object()) {
    throw invalid_request(at + ".function must be an object {\"name\", \"description\", "
                               "\"parameters\"}",
                          at + ".function");
  }
  ToolFunction f;
  const Json* name = member(*function, "name");
  if (name == nullptr || !name->is_string() ||
      !valid_function_name(name->get_ref<const std::string&>())) {
    throw invalid_request(at + ".function.name must be 1 to 64 letters, digits, _ or -",
                          at + ".function.name");
  }
  f.name = name->get<std::string>();
  if (earlier.find(f.name) != nullptr) {
    throw invalid_request(at + ".function.name \"" + f.name + "\" is given twice",
                          at + ".function.name");
  }
  if (const Json* description = member(*function, "description")) {
    if (!description->is_string()) {
      throw invalid_request(at + ".function.description must be a string",
                            at + ".function.description");
    }
    f.description = description->get<std::string>();
  }
  if (const Json* parameters = member(*function, "parameters")) {
    if (!parameters->is_object()) {
      throw invalid_request(at + ".function.parameters must be a JSON schema (an object)",
                            at + ".function.parameters");
    }
    if (ordered_tools.is_null()) ordered_tools = ordered_schema(body_text, "tools");
    f.parameters = ordered_tools.at(i).at("function").at("parameters");
  } else {
    // No parameters: a function that takes none.
    f.parameters = {{"type", "object"}, {"properties", OrderedJson::object()}};
  }
  // The schema as the grammar can enforce it: checked here, named by its tool.
  relax_parameters(f, at + ".function.parameters");
  return f;
}

// tool_choice: "none", "auto", "required" or a function of `request`'s by name.
inline void read_tool_choice(const Json& choice, ToolRequest& request) {
  static constexpr const char* kForms =
      "tool_choice must be \"none\", \"auto\", \"required\" or "
      "{\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (choice.is_string()) {
    const std::string& mode = choice.get_ref<const std::string&>();
    if (mode == "none") {
      request.choice = ToolChoice::none;
    } else if (mode == "auto") {
      request.choice = ToolChoice::automatic;
    } else if (mode == "required") {
      request.choice = ToolChoice::required;
    } else {
      throw invalid_request(kForms, "tool_choice");
    }
    return;
  }
  const Json* function = typed(choice, "function") ? member(choice, "function") : nullptr;
  const Json* name = function != nullptr ? member(*function, "name") : nullptr;
  if (name == nullptr || !name->is_string()) throw invalid_request(kForms, "tool_choice");
  if (request.find(name->get_ref<const std::string&>()) == nullptr) {
    throw invalid_request(
        "tool_choice names \"" + name->get<std::string>() + "\", which is not one of tools",
        "tool_choice.function.name");
  }
  request.choice = ToolChoice::named;
  request.named = name->get<std::string>();
}

}  // namespace detail

// `tools`, `tool_choice` and `parallel_tool_calls` of a chat request; nullopt when it has
// no tools. Throws a 400 naming the field at fault.
inline std::optional<ToolRequest> parse_tools(const Json& body, std::string_view body_text) {
  if (detail::member(body, "functions") != nullptr ||
      detail::member(body, "function_call") != nullptr) {
    throw invalid_request(
        "functions and function_call are OpenAI's deprecated forms: use tools "
        "and tool_choice",
        detail::member(body, "functions") ? "functions" : "function_call");
  }
  const Json* tools = detail::member(body, "tools");
  const Json* choice = detail::member(body, "tool_choice");
  const Json* parallel = detail::member(body, "parallel_tool_calls");
  if (tools == nullptr) {
    if (choice != nullptr) {
      throw invalid_request("tool_choice is only allowed when tools are given", "tool_choice");
    }
    if (parallel != nullptr) {
      throw invalid_request("parallel_tool_calls is only allowed when tools are given",
                            "parallel_tool_calls");
    }
    return std::nullopt;
  }
  if (!tools->is_array()) throw invalid_request("tools must be a list of functions", "tools");
  if (tools->size() > 128) throw invalid_request("tools may hold at most 128 functions", "tools");
  ToolRequest request;
  OrderedJson ordered_tools;  // `tools` with each object's keys in the client's order
  for (std::size_t i = 0; i < tools->size(); ++i) {
    request.functions.push_back(detail::tool_function(
        (*tools)[i], i, "tools[" + std::to_string(i) + "]", request, body_text, ordered_tools));
  }
  if (choice != nullptr) detail::read_tool_choice(*choice, request);
  if (parallel != nullptr) {
    if (!parallel->is_boolean()) {
      throw invalid_request("parallel_tool_calls must be true or false", "parallel_tool_calls");
    }
    request.parallel = parallel->get<bool>();
  }
  if (request.functions.empty() && request.choice == ToolChoice::required) {
    throw invalid_request("tool_choice \"required\" needs at least one tool in tools",
                          "tool_choice");
  }
  // A named function is one call.
  if (request.choice == ToolChoice::named) request.parallel = false;
  return request;
}

namespace detail {

inline void python_json_to(const OrderedJson& value, std::string& out) {
  if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, member] : value.items()) {
      if (!first) out += ", ";
      first = false;
      out += OrderedJson(key).dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
      out += ": ";
      python_json_to(member, out);
    }
    out += '}';
  } else if (value.is_array()) {
    out += '[';
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += ", ";
      python_json_to(value[i], out);
    }
    out += ']';
  } else {
    out += value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
  }
}

}  // namespace detail

// `value` as Python's json.dumps writes it, which is what Hugging Face's `tojson` filter
// calls: ", " and ": " between items, members in their order, non-ASCII text as is.
inline std::string python_json(const OrderedJson& value) {
  std::string out;
  detail::python_json_to(value, out);
  return out;
}

// The schema of the reply the model must write (see the top of this file).
namespace detail {

// A schema's local references ("#", "#/$defs/X", any "#/..." pointer) made to point
// under `prefix` ("#/$defs/tool0"), where the schema is moved.
inline void move_references(OrderedJson& node, const std::string& prefix) {
  if (node.is_array()) {
    for (OrderedJson& item : node) move_references(item, prefix);
    return;
  }
  if (!node.is_object()) return;
  for (auto& [key, value] : node.items()) {
    if (key == "$ref" && value.is_string()) {
      const std::string target = value.get<std::string>();
      if (target == "#") value = prefix;
      if (target.starts_with("#/")) value = prefix + target.substr(1);
    } else {
      move_references(value, prefix);
    }
  }
}

}  // namespace detail

// The schema of one call: {"name": <a function's name>, "arguments": <its parameters>}
// for the functions tool_choice allows (one, or anyOf them), and the `$defs` its
// references need. Each function's parameters go under those $defs, their references
// moved with them (a schema's "#/$defs/..." means its own root: Pydantic writes such
// schemas), and each call's arguments refer to them there.
struct ToolCallSchema {
  OrderedJson call;
  OrderedJson defs;
};

inline ToolCallSchema tool_call_schema(const ToolRequest& tools) {
  OrderedJson defs = OrderedJson::object();
  OrderedJson calls = OrderedJson::array();
  for (std::size_t i = 0; i < tools.functions.size(); ++i) {
    const ToolFunction& f = tools.functions[i];
    if (tools.choice == ToolChoice::named && f.name != tools.named) continue;
    const std::string name = "tool" + std::to_string(i);
    OrderedJson parameters = f.parameters;
    detail::move_references(parameters, "#/$defs/" + name);
    defs[name] = std::move(parameters);
    calls.push_back(
        {{"type", "object"},
         {"properties",
          {{"name", {{"const", f.name}}}, {"arguments", {{"$ref", "#/$defs/" + name}}}}},
         {"required", {"name", "arguments"}},
         {"additionalProperties", false}});
  }
  OrderedJson call = calls.size() == 1 ? calls[0] : OrderedJson{{"anyOf", calls}};
  return {std::move(call), std::move(defs)};
}

inline OrderedJson tool_reply_schema(const ToolRequest& tools) {
  auto [call, defs] = tool_call_schema(tools);
  const OrderedJson calling =
      tools.parallel
          ? OrderedJson{{"type", "object"},
                        {"properties",
                         {{"tool_calls", {{"type", "array"}, {"items", call}, {"minItems", 1}}}}},
                        {"required", {"tool_calls"}},
                        {"additionalProperties", false}}
          : OrderedJson{{"type", "object"},
                        {"properties", {{"tool_call", call}}},
                        {"required", {"tool_call"}},
                        {"additionalProperties", false}};
  OrderedJson schema = calling;
  if (tools.choice == ToolChoice::automatic) {
    const OrderedJson answering = {{"type", "object"},
                                   {"properties", {{"response", {{"type", "string"}}}}},
                                   {"required", {"response"}},
                                   {"additionalProperties", false}};
    schema = {{"anyOf", {calling, answering}}};
  }
  schema["$defs"] = std::move(defs);
  return schema;
}

inline OutputGrammar tool_grammar(const ToolRequest& tools) {
  return detail::grammar_from_schema(tool_reply_schema(tools), "tools");
}

// What the system prompt says about the tools (see the top of this file).
inline std::string tools_system_prompt(const ToolRequest& tools) {
  OrderedJson list = OrderedJson::array();
  for (const ToolFunction& f : tools.functions) {
    OrderedJson entry = {{"name", f.name}};
    if (!f.description.empty()) entry["description"] = f.description;
    entry["parameters"] = f.parameters;
    list.push_back(std::move(entry));
  }
  std::string text = "You can call these tools (functions), described as JSON Schema:\n" +
                     list.dump(-1, ' ', false, OrderedJson::error_handler_t::replace) + "\n\n";
  const std::string one =
      R"({"tool_call": {"name": "<the tool's name>", "arguments": {<its arguments>}}})";
  const std::string several =
      R"({"tool_calls": [{"name": "<the tool's name>", "arguments": {<its arguments>}}, ...]})";
  text += "Reply with one JSON object and nothing else: ";
  text += tools.parallel ? several + " to call one or more tools" : one + " to call a tool";
  if (tools.choice == ToolChoice::automatic) {
    text += R"(, or {"response": "<your answer>"} to answer the user directly)";
  }
  text += ".";
  if (tools.choice == ToolChoice::required) text += " You must call a tool.";
  if (tools.choice == ToolChoice::named) text += " You must call \"" + tools.named + "\".";
  return text;
}

// An earlier assistant turn's calls, written as the model writes them (its `content`, if
// any, kept in front as text).
inline std::string render_tool_calls(const std::vector<ToolCall>& calls,
                                     const std::string& content) {
  OrderedJson list = OrderedJson::array();
  for (const ToolCall& call : calls) {
    OrderedJson arguments;
    try {
      arguments = OrderedJson::parse(call.arguments);
    } catch (const OrderedJson::exception&) {
      arguments = call.arguments;  // as the client sent it (validated before: never here)
    }
    list.push_back({{"name", call.name}, {"arguments", std::move(arguments)}});
  }
  const OrderedJson json =
      list.size() == 1 ? OrderedJson{{"tool_call", list[0]}} : OrderedJson{{"tool_calls", list}};
  const std::string text = json.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
  return content.empty() ? text : content + "\n" + text;
}

// A `tool` message's content as the model reads it.
inline std::string render_tool_result(const std::string& tool_call_id, const std::string& content) {
  const OrderedJson json = {
      {"tool_response", {{"tool_call_id", tool_call_id}, {"content", content}}}};
  return json.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

// The system message that describes the tools, merged into the conversation's first
// message when that is the system's.
inline void add_tools_to_system(std::vector<ChatMessage>& messages, const ToolRequest& tools) {
  const std::string prompt = tools_system_prompt(tools);
  if (!messages.empty() && messages.front().role == "system") {
    messages.front().content += "\n\n" + prompt;
  } else {
    messages.insert(messages.begin(), ChatMessage{"system", prompt});
  }
}

// A tool reply read as it streams (the text in any pieces), saying what a client can be
// sent so far: the answer's text (the "response" string, unescaped), a call's start once
// its name is complete, and its arguments as they come: the model's text of the
// arguments object without the whitespace between tokens (which the grammar lets the
// model write), so that the streamed pieces add up to the `arguments` of the complete
// reply (parse_tool_reply takes them from here too). It expects the format of the top of
// this file, which the grammar guarantees; on anything else it reports what it has seen.
class ToolReplyScanner {
 public:
  enum class Kind { content, call, arguments };
  struct Event {
    Kind kind;
    std::size_t index = 0;  // the call's (call, arguments)
    std::string text;       // content or arguments text, or the call's name
  };

  // The events `text` completes, consecutive pieces of one kind merged.
  std::vector<Event> push(std::string_view text) {
    std::vector<Event> events;
    for (const char c : text) step(c, events);
    return events;
  }

 private:
  enum class Container { object, array };
  struct Frame {
    Container container;
    std::string key;  // object: the key whose value is being read
    bool expecting_key = true;
  };
  enum class StringRole { none, key, response, name, other };

  void emit(std::vector<Event>& events, Kind kind, std::size_t index, std::string_view text) {
    if (text.empty() && kind != Kind::call) return;
    if (kind != Kind::call && !events.empty() && events.back().kind == kind &&
        events.back().index == index) {
      events.back().text += text;
      return;
    }
    events.push_back({kind, index, std::string(text)});
  }

  // The depth (stack size) at which a call object sits, once known: 2 for "tool_call",
  // 3 for the items of "tool_calls".
  bool in_call_object() const { return call_depth_ != 0 && stack_.size() == call_depth_; }

  void step(char c, std::vector<Event>& events) {
    // Inside the arguments value: every character but whitespace outside strings is
    // part of its text.
    const bool in_arguments = arguments_depth_ != 0 && stack_.size() >= arguments_depth_;
    if (in_string_) {
      if (in_arguments) emit(events, Kind::arguments, calls_ - 1, std::string_view(&c, 1));
      string_char(c, events);
      return;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return;
    if (arguments_pending_ && c != '{' && c != '[') arguments_pending_ = false;  // not an object
    if (in_arguments || arguments_pending_) {
      if (arguments_pending_) {
        arguments_pending_ = false;
        arguments_depth_ = stack_.size() + 1;
      }
      emit(events, Kind::arguments, calls_ - 1, std::string_view(&c, 1));
    }
    switch (c) {
      case '"':
        begin_string();
        return;
      case '{':
      case '[':
        open(c == '{' ? Container::object : Container::array);
        return;
      case '}':
      case ']':
        close();
        return;
      case ':':
        if (!stack_.empty()) stack_.back().expecting_key = false;
        value_started();
        return;
      case ',':
        if (!stack_.empty() && stack_.back().container == Container::object) {
          stack_.back().expecting_key = true;
        }
        return;
      default:
        return;  // a number or literal's characters
    }
  }

  // What the value about to start is, from the keys around it.
  void value_started() {
    if (stack_.empty()) return;
    const Frame& frame = stack_.back();
    if (stack_.size() == 1 && frame.key == "tool_call") {
      pending_call_depth_ = 2;
    } else if (stack_.size() == 1 && frame.key == "tool_calls") {
      pending_call_depth_ = 3;  // its items
    } else if (in_call_object() && frame.key == "arguments" && calls_ > 0) {
      arguments_pending_ = true;
    }
  }

  void open(Container container) {
    stack_.push_back({container, {}, container == Container::object});
    if (container == Container::object && pending_call_depth_ == stack_.size()) {
      call_depth_ = stack_.size();
      name_seen_ = false;
    }
  }

  void close() {
    if (stack_.empty()) return;
    if (arguments_depth_ != 0 && stack_.size() == arguments_depth_) arguments_depth_ = 0;
    stack_.pop_back();
  }

  void begin_string() {
    in_string_ = true;
    escape_.clear();
    decoded_.clear();
    role_ = StringRole::other;
    if (stack_.empty()) return;
    Frame& frame = stack_.back();
    if (frame.container == Container::object && frame.expecting_key) {
      role_ = StringRole::key;
    } else if (stack_.size() == 1 && frame.key == "response") {
      role_ = StringRole::response;
    } else if (in_call_object() && frame.key == "name" && !name_seen_) {
      role_ = StringRole::name;
    }
  }

  void string_char(char c, std::vector<Event>& events) {
    if (escape_.empty() && c == '"') {
      in_string_ = false;
      end_string(events);
      return;
    }
    if (escape_.empty() && c != '\\') {
      take(std::string_view(&c, 1), events);
      return;
    }
    escape_ += c;
    if (escape_.size() == 2 && escape_[1] != 'u') {
      const char simple = escape_[1];
      const char out = simple == 'n'   ? '\n'
                       : simple == 't' ? '\t'
                       : simple == 'r' ? '\r'
                       : simple == 'b' ? '\b'
                       : simple == 'f' ? '\f'
                                       : simple;  // \" \\ \/
      escape_.clear();
      take(std::string_view(&out, 1), events);
    } else if (escape_.size() == 6) {
      char32_t unit = 0;
      for (std::size_t i = 2; i < 6; ++i) {
        const char h = escape_[i];
        const int digit = h >= '0' && h <= '9'   ? h - '0'
                          : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                 : 0;  // not JSON: the grammar never writes it
        unit = unit * 16 + static_cast<char32_t>(digit);
      }
      escape_.clear();
      if (unit >= 0xD800 && unit < 0xDC00) {
        high_surrogate_ = unit;
        return;
      }
      char32_t code = unit;
      if (unit >= 0xDC00 && unit < 0xE000 && high_surrogate_ != 0) {
        code = 0x10000 + ((high_surrogate_ - 0xD800) << 10) + (unit - 0xDC00);
      }
      high_surrogate_ = 0;
      if (code >= 0xD800 && code < 0xE000) code = 0xFFFD;  // a lone surrogate (not JSON's)
      take(unicode::to_utf8(code), events);
    }
  }

  // A decoded piece of the current string.
  void take(std::string_view piece, std::vector<Event>& events) {
    if (role_ == StringRole::response) {
      emit(events, Kind::content, 0, piece);
    } else if (role_ == StringRole::key || role_ == StringRole::name) {
      decoded_ += piece;
    }
  }

  void end_string(std::vector<Event>& events) {
    if (role_ == StringRole::key) {
      stack_.back().key = decoded_;
    } else if (role_ == StringRole::name) {
      name_seen_ = true;
      emit(events, Kind::call, calls_++, decoded_);
    }
    role_ = StringRole::none;
  }

  std::vector<Frame> stack_;
  bool in_string_ = false;
  StringRole role_ = StringRole::none;
  std::string escape_, decoded_;
  char32_t high_surrogate_ = 0;
  std::size_t pending_call_depth_ = 0, call_depth_ = 0, arguments_depth_ = 0, calls_ = 0;
  bool name_seen_ = false, arguments_pending_ = false;
};

// A reply read back: the calls it makes and the text it answers with (nullopt: none).
struct ToolReply {
  std::vector<ToolCall> calls;
  std::optional<std::string> content;
};

// Parses a reply in the tool format. Anything else (a reply cut short, or one written
// without the grammar) is returned whole as content, with no calls. `id_prefix`: call
// ids are the prefix and the call's index.
inline ToolReply parse_tool_reply(std::string_view text, const ToolRequest& tools,
                                  const std::string& id_prefix) {
  ToolReply reply;
  // Not a reply of the format: what a stream of it has sent (ToolReplyScanner), so that
  // both agree: the answer's text read so far when the reply was cut short inside its
  // "response", else the text as written.
  const auto as_text = [&] {
    ToolReply plain;
    std::string answer;
    bool answered = false, called = false;
    for (const ToolReplyScanner::Event& event : ToolReplyScanner().push(text)) {
      answered = answered || event.kind == ToolReplyScanner::Kind::content;
      called = called || event.kind != ToolReplyScanner::Kind::content;
      if (event.kind == ToolReplyScanner::Kind::content) answer += event.text;
    }
    plain.content = answered && !called ? answer : std::string(text);
    return plain;
  };
  OrderedJson json;
  if (too_deep(text)) return as_text();  // the grammar bounds no depth: the model may nest
  try {
    json = OrderedJson::parse(text);
  } catch (const OrderedJson::exception&) {
    return as_text();
  }
  if (!json.is_object() || json.size() != 1) return as_text();
  if (const auto it = json.find("response"); it != json.end()) {
    if (!it->is_string()) return as_text();
    reply.content = it->get<std::string>();
    return reply;
  }
  std::vector<const OrderedJson*> calls;
  if (const auto it = json.find("tool_call"); it != json.end()) {
    calls.push_back(&*it);
  } else if (const auto many = json.find("tool_calls"); many != json.end() && many->is_array()) {
    for (const OrderedJson& call : *many) calls.push_back(&call);
  }
  if (calls.empty()) return as_text();
  // The arguments as the model wrote them, less the whitespace between tokens: what the
  // stream sent (ToolReplyScanner).
  std::vector<std::string> written;
  for (const ToolReplyScanner::Event& event : ToolReplyScanner().push(text)) {
    if (event.kind == ToolReplyScanner::Kind::arguments) {
      if (written.size() <= event.index) written.resize(event.index + 1);
      written[event.index] += event.text;
    }
  }
  for (const OrderedJson* call : calls) {
    if (!call->is_object()) return as_text();
    const auto name = call->find("name");
    const auto arguments = call->find("arguments");
    if (name == call->end() || !name->is_string() || arguments == call->end() ||
        !arguments->is_object() || tools.find(name->get_ref<const std::string&>()) == nullptr) {
      return as_text();
    }
    const std::size_t index = reply.calls.size();
    reply.calls.push_back(
        {id_prefix + std::to_string(index), name->get<std::string>(),
         index < written.size()
             ? written[index]
             : arguments->dump(-1, ' ', false, OrderedJson::error_handler_t::replace)});
  }
  return reply;
}

}  // namespace smol::serve
