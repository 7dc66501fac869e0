// Tool calls in the Hermes format, for chat templates with a tool section of their own
// (Qwen2.5's, ChatFormat::chatml_tools; llama-server's "Hermes 2 Pro" format): the
// template itself describes the tools (each the client's tool object as JSON within
// <tools></tools>), writes earlier calls and tool results, and the model calls with
//
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
//
// one block per call. With tool_choice "required" or a named function a grammar forces
// one or more such blocks (one when parallel_tool_calls is false), each call's
// arguments valid against its function's `parameters`; with "auto" the reply is free
// text, read back afterwards: the blocks become `tool_calls`, the text before them the
// content, and a reply whose blocks do not parse (or that goes on in text after them)
// stays content, whole. A call's `arguments` are its object as JSON without whitespace,
// in the order the model wrote the members, streamed and sent whole alike.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/serve/structured_output.hpp"
#include "smol/serve/tool_calls.hpp"

namespace smol::serve {

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";

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

// A name in GBNF text renamed where it is a rule name (not inside a string literal or a
// character class): the schema grammar's root becomes a rule of the Hermes grammar.
inline std::string rename_gbnf_rule(std::string_view gbnf, std::string_view from,
                                    std::string_view to) {
  const auto name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  };
  std::string out;
  for (std::size_t i = 0; i < gbnf.size();) {
    const char c = gbnf[i];
    if (c == '"' || c == '[') {  // a literal or a class, escapes and all
      const char end = c == '"' ? '"' : ']';
      std::size_t j = i + 1;
      while (j < gbnf.size() && gbnf[j] != end) j += gbnf[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, gbnf.size());
      out += gbnf.substr(i, j - i);
      i = j;
    } else if (c == '#') {  // a comment, to the line's end
      const std::size_t j = std::min(gbnf.find('\n', i), gbnf.size());
      out += gbnf.substr(i, j - i);
      i = j;
    } else if (name_char(c)) {
      std::size_t j = i;
      while (j < gbnf.size() && name_char(gbnf[j])) ++j;
      const std::string_view word = gbnf.substr(i, j - i);
      out += word == from ? to : word;
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

inline bool json_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// One call block's text (between the tags) read as {"name", "arguments"}; nullopt when
// it is not a call of one of `tools`.
inline std::optional<ToolCall> hermes_call(std::string_view inner, const ToolRequest& tools) {
  OrderedJson json;
  if (too_deep(inner)) return std::nullopt;
  try {
    json = OrderedJson::parse(inner);
  } catch (const OrderedJson::exception&) {
    return std::nullopt;
  }
  if (!json.is_object()) return std::nullopt;
  const auto name = json.find("name");
  const auto arguments = json.find("arguments");
  if (name == json.end() || !name->is_string() || arguments == json.end() ||
      !arguments->is_object() || tools.find(name->get_ref<const std::string&>()) == nullptr) {
    return std::nullopt;
  }
  return ToolCall{"", name->get<std::string>(),
                  arguments->dump(-1, ' ', false, OrderedJson::error_handler_t::replace)};
}

}  // namespace detail

// `value` as Python's json.dumps writes it, which is what Hugging Face's `tojson` filter
// calls: ", " and ": " between items, members in their order, non-ASCII text as is.
inline std::string python_json(const OrderedJson& value) {
  std::string out;
  detail::python_json_to(value, out);
  return out;
}

// The grammar of a reply that must call (tool_choice "required" or a named function).
inline OutputGrammar hermes_tool_grammar(const ToolRequest& tools) {
  auto [call, defs] = tool_call_schema(tools);
  call["$defs"] = std::move(defs);
  const OutputGrammar json = detail::grammar_from_schema(call, "tools");
  // A schema's rules never end in "-json" (json_schema.hpp), so this name is free.
  std::string gbnf = detail::rename_gbnf_rule(json.gbnf, "root", "tool-call-json");
  const std::string block = R"("<tool_call>\n" tool-call-json "\n</tool_call>")";
  gbnf = "root ::= " + block + (tools.parallel ? " ( \"\\n\" " + block + " )*" : "") + "\n" + gbnf;
  return detail::grammar_from_gbnf(std::move(gbnf), "tools", /*generated=*/true);
}

// A Hermes reply read back (see the top of this file). `id_prefix`: call ids are the
// prefix and the call's index.
inline ToolReply parse_hermes_reply(std::string_view text, const ToolRequest& tools,
                                    const std::string& id_prefix) {
  ToolReply reply;
  const std::size_t first = text.find(kToolCallOpen);
  if (first == std::string_view::npos) {
    reply.content = std::string(text);
    return reply;
  }
  const auto as_text = [&] {
    ToolReply plain;
    plain.content = std::string(text);
    return plain;
  };
  std::size_t at = first;
  while (at < text.size()) {
    if (text.substr(at, kToolCallOpen.size()) != kToolCallOpen) return as_text();
    const std::size_t inner = at + kToolCallOpen.size();
    const std::size_t close = text.find(kToolCallClose, inner);
    if (close == std::string_view::npos) return as_text();
    std::optional<ToolCall> call = detail::hermes_call(text.substr(inner, close - inner), tools);
    if (!call) return as_text();
    call->id = id_prefix + std::to_string(reply.calls.size());
    reply.calls.push_back(std::move(*call));
    at = close + kToolCallClose.size();
    while (at < text.size() && detail::json_space(text[at])) ++at;
  }
  std::string_view before = text.substr(0, first);
  while (!before.empty() && detail::json_space(before.back())) before.remove_suffix(1);
  if (!before.empty()) reply.content = std::string(before);
  return reply;
}

// A Hermes reply read as it streams, in ToolReplyScanner's events: the text before the
// calls as content (whitespace in front of a call dropped, as parse_hermes_reply drops
// it), each call once its block is complete (its name, then its arguments whole).
class HermesReplyScanner {
 public:
  using Event = ToolReplyScanner::Event;
  using Kind = ToolReplyScanner::Kind;

  std::vector<Event> push(std::string_view text) {
    buffer_ += text;
    std::vector<Event> events;
    for (;;) {
      if (in_call_) {
        const std::size_t close = buffer_.find(kToolCallClose);
        if (close == std::string::npos) break;
        const std::string inner = buffer_.substr(0, close);
        buffer_.erase(0, close + kToolCallClose.size());
        in_call_ = false;
        if (const std::optional<ToolCall> call = detail::hermes_call(inner, *tools_)) {
          events.push_back({Kind::call, calls_, call->name});
          events.push_back({Kind::arguments, calls_, call->arguments});
          ++calls_;
        } else {  // not a call after all: what it said, as content
          content(std::string(kToolCallOpen) + inner + std::string(kToolCallClose), events);
        }
        continue;
      }
      const std::size_t open = buffer_.find(kToolCallOpen);
      if (open != std::string::npos) {
        content(buffer_.substr(0, open), events);
        held_.clear();  // the whitespace before a call
        buffer_.erase(0, open + kToolCallOpen.size());
        in_call_ = true;
        continue;
      }
      // Keep back what may be the start of a tag.
      std::size_t keep = std::min(buffer_.size(), kToolCallOpen.size() - 1);
      while (keep > 0 &&
             !kToolCallOpen.starts_with(std::string_view(buffer_).substr(buffer_.size() - keep))) {
        --keep;
      }
      content(buffer_.substr(0, buffer_.size() - keep), events);
      buffer_.erase(0, buffer_.size() - keep);
      break;
    }
    return events;
  }

  // The end of the reply: what was held back, unless calls were made.
  std::vector<Event> finish() {
    std::vector<Event> events;
    if (calls_ == 0) {
      std::string rest = held_ + (in_call_ ? std::string(kToolCallOpen) : "") + buffer_;
      if (!rest.empty()) events.push_back({Kind::content, 0, std::move(rest)});
    }
    held_.clear();
    buffer_.clear();
    return events;
  }

  explicit HermesReplyScanner(const ToolRequest& tools) : tools_(&tools) {}

 private:
  // Content, its trailing whitespace held back until more text follows.
  void content(std::string_view text, std::vector<Event>& events) {
    std::size_t end = text.size();
    while (end > 0 && detail::json_space(text[end - 1])) --end;
    if (end > 0) {
      std::string out = held_ + std::string(text.substr(0, end));
      held_.clear();
      if (!events.empty() && events.back().kind == Kind::content) {
        events.back().text += out;
      } else {
        events.push_back({Kind::content, 0, std::move(out)});
      }
    }
    held_ += text.substr(end);
  }

  const ToolRequest* tools_;  // the request's, which outlives the reply
  std::string buffer_, held_;
  bool in_call_ = false;
  std::size_t calls_ = 0;
};

// A reply with tools read back in the request's format: Hermes blocks or the generic JSON.
inline ToolReply read_tool_reply(std::string_view text, const ToolRequest& tools,
                                 const std::string& id_prefix) {
  return tools.hermes ? parse_hermes_reply(text, tools, id_prefix)
                      : parse_tool_reply(text, tools, id_prefix);
}

}  // namespace smol::serve
