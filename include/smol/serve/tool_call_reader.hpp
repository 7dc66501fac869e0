// A reply in a family's tool-call syntax (tool_call_formats.hpp) read back into OpenAI's
// tool_calls, as it streams: the text before the calls is content, each call is sent once
// it is complete (its name, then its arguments whole), and whatever does not read as a
// call of the request's tools stays content, as written. The reply sent whole is read by
// the same reader, so a stream adds up to it exactly.
//
// The reader is lenient where models are: whitespace around the syntax's literals may
// differ from the template's, a call's closing literal may be missing at the very end
// (GPT-OSS's <|call|> and others end the generation), and a call may follow text or
// text a call. A call's `arguments` are its object as compact JSON, members in the order
// the model wrote them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/serve/tool_call_formats.hpp"
#include "smol/serve/tool_calls.hpp"

namespace smol::serve {

namespace detail {

inline bool json_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

inline std::string_view trim_json_space(std::string_view text) {
  while (!text.empty() && json_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && json_space(text.back())) text.remove_suffix(1);
  return text;
}

// The end of the JSON object or list starting at `at` (one past its closing bracket);
// npos while it is incomplete. Strings and escapes are skipped, so brackets inside them
// do not count.
inline std::size_t json_container_end(std::string_view text, std::size_t at) {
  std::size_t depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = at; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// Whether a parameter's schema takes only strings, which the XML-like syntax writes as
// they are: "type": "string", or no type and an enum or const of strings.
inline bool xml_string_valued(const OrderedJson& schema) {
  if (!schema.is_object()) return false;
  if (const auto type = schema.find("type"); type != schema.end()) return *type == "string";
  if (const auto values = schema.find("enum"); values != schema.end() && values->is_array()) {
    bool strings = !values->empty();
    for (const OrderedJson& value : *values) strings = strings && value.is_string();
    return strings;
  }
  const auto value = schema.find("const");
  return value != schema.end() && value->is_string();
}

inline bool function_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

}  // namespace detail

class ToolCallReader {
 public:
  using Event = ToolReplyScanner::Event;
  using Kind = ToolReplyScanner::Kind;

  ToolCallReader(const ToolCallSyntax& syntax, const ToolRequest& tools)
      : syntax_(&syntax), tools_(&tools) {
    // The reply continues the prompt's call_open: read as if it were written, never shown.
    if (syntax.prompt_opens_call) {
      buffer_ = syntax.call_open;
      hidden_ = buffer_.size();
    }
  }

  std::vector<Event> push(std::string_view text) {
    buffer_ += text;
    std::vector<Event> events;
    // A call waiting for its end is read again only when a character that can end one of
    // its parts arrives (every literal and JSON value ends in one of these): a long call
    // is then read a number of times bounded by those characters, not by its pieces.
    if (state_ == State::calls && text.find_first_of("}]>\n") == std::string_view::npos) {
      return events;
    }
    advance(events, /*end=*/false);
    return events;
  }

  // The end of the reply: what was held back.
  std::vector<Event> finish() {
    std::vector<Event> events;
    advance(events, /*end=*/true);
    content(buffer_, events);
    buffer_.clear();
    if (calls_ == 0 && !held_.empty()) append_content(held_, events);
    held_.clear();
    return events;
  }

 private:
  enum class Match { yes, more, no };
  // text: content, watching for the trigger; calls: reading calls; prose: the rest of
  // the reply is content (a family whose calls may only come first).
  enum class State { text, calls, prose };

  // Moves through the buffer as far as it can decide; `end`: no more text will come.
  void advance(std::vector<Event>& events, bool end) {
    for (;;) {
      if (state_ == State::prose) {
        content(buffer_, events);
        buffer_.clear();
        return;
      }
      if (state_ == State::text) {
        if (!find_trigger(events, end)) return;
        continue;
      }
      if (!read_calls(events, end)) return;
    }
  }

  // In text: content up to the trigger, then the calls. False when undecided.
  bool find_trigger(std::vector<Event>& events, bool end) {
    const std::string_view trigger = syntax_->trigger;
    if (syntax_->at_start) {
      std::size_t at = 0;
      while (at < buffer_.size() && detail::json_space(buffer_[at])) ++at;
      const std::string_view rest = std::string_view(buffer_).substr(at);
      if (rest.starts_with(trigger) && calls_ == 0) {
        state_ = State::calls;
        return true;
      }
      if (!end && trigger.starts_with(rest)) return false;  // not enough to tell
      state_ = State::prose;
      return true;
    }
    const std::size_t found = buffer_.find(trigger);
    if (found == std::string::npos) {
      // Keep back what may be the start of the trigger.
      std::size_t keep = end ? 0 : std::min(buffer_.size(), trigger.size() - 1);
      while (keep > 0 &&
             !trigger.starts_with(std::string_view(buffer_).substr(buffer_.size() - keep))) {
        --keep;
      }
      content(std::string_view(buffer_).substr(0, buffer_.size() - keep), events);
      buffer_.erase(0, buffer_.size() - keep);
      return false;
    }
    content(std::string_view(buffer_).substr(0, found), events);
    buffer_.erase(0, found);
    state_ = State::calls;
    section_calls_ = 0;
    return true;
  }

  // In calls: the section's opening with its first call, then separators and calls,
  // then its closing. False when undecided.
  bool read_calls(std::vector<Event>& events, bool end) {
    if (!syntax_->content_recipient.empty()) {
      // Functionary's ">>>all\n": a message of text, up to the next call.
      std::size_t at = 0;
      const std::string text_message =
          std::string(syntax_->content_recipient) + std::string(syntax_->name_close);
      if (expect(syntax_->call_open, at, end) == Match::yes) {
        const std::string_view rest = std::string_view(buffer_).substr(at);
        if (rest.starts_with(text_message)) {
          buffer_.erase(0, at + text_message.size());
          hidden_ = 0;
          leave_calls();
          return true;
        }
        if (!end && std::string_view(text_message).starts_with(rest)) return false;
      }
    }
    std::size_t at = 0;
    Match match = Match::yes;
    if (section_calls_ == 0) {
      match = expect(syntax_->open, at, end);
    } else {
      // The section's end, or another call.
      if (!syntax_->close.empty()) {
        std::size_t closing = at;
        const Match closed = expect(syntax_->close, closing, end);
        if (closed == Match::yes) {
          buffer_.erase(0, closing);
          leave_calls();
          return true;
        }
        if (closed == Match::more) return false;
      }
      match = expect(syntax_->separator, at, end);
    }
    std::optional<ToolCall> call;
    if (match == Match::yes) match = read_call(at, end, call);
    if (match == Match::more) return false;
    if (match == Match::no) {
      if (section_calls_ == 0) {
        // Not a call after all: the trigger is text, and the search goes on after it.
        content(std::string_view(buffer_).substr(0, syntax_->trigger.size()), events);
        buffer_.erase(0, syntax_->trigger.size());
      }
      leave_calls();
      return true;
    }
    held_.clear();  // the whitespace before a call is no content
    events.push_back({Kind::call, calls_, call->name});
    events.push_back({Kind::arguments, calls_, call->arguments});
    ++calls_;
    ++section_calls_;
    buffer_.erase(0, at);
    hidden_ = 0;
    return true;
  }

  void leave_calls() {
    state_ = syntax_->at_start ? State::prose : State::text;
    section_calls_ = 0;
  }

  // One call at `at`: its opening, body and closing (which may be missing at the end).
  Match read_call(std::size_t& at, bool end, std::optional<ToolCall>& call) {
    Match match = expect(syntax_->call_open, at, end);
    if (match != Match::yes) return match;
    switch (syntax_->body) {
      case CallBody::json_object:
        match = read_json_call(at, end, call);
        break;
      case CallBody::named:
        match = read_named_call(at, end, call);
        break;
      case CallBody::xml_parameters:
        match = read_xml_call(at, end, call);
        break;
    }
    if (match != Match::yes) return match;
    std::size_t closing = at;
    match = expect(syntax_->call_close, closing, end);
    if (match == Match::yes) {
      at = closing;
      return Match::yes;
    }
    if (end && skip_space(closing) == buffer_.size()) return Match::yes;  // cut off at the end
    if (end) return Match::no;
    return match;
  }

  // {"name": ..., "arguments": {...}}, in the family's member names.
  Match read_json_call(std::size_t& at, bool end, std::optional<ToolCall>& call) {
    at = skip_space(at);
    if (at == buffer_.size()) return end ? Match::no : Match::more;
    if (buffer_[at] != '{') return Match::no;
    const std::size_t close = detail::json_container_end(buffer_, at);
    if (close == std::string::npos) return end ? Match::no : Match::more;
    const std::optional<OrderedJson> json = parse(std::string_view(buffer_).substr(at, close - at));
    at = close;
    if (!json || !json->is_object()) return Match::no;
    const auto name = json->find(syntax_->name_key);
    const auto arguments = json->find(syntax_->arguments_key);
    if (name == json->end() || !name->is_string() || arguments == json->end()) return Match::no;
    return make_call(name->get<std::string>(), *arguments, call);
  }

  // NAME <name_close> {...}
  Match read_named_call(std::size_t& at, bool end, std::optional<ToolCall>& call) {
    at = skip_space(at);
    const std::size_t name_start = at;
    while (at < buffer_.size() && detail::function_name_char(buffer_[at])) ++at;
    if (at == buffer_.size()) return end || at - name_start > 64 ? Match::no : Match::more;
    const std::string name = buffer_.substr(name_start, at - name_start);
    if (syntax_->indexed_name) {
      if (buffer_[at] != ':') return Match::no;
      const std::size_t digits = ++at;
      while (at < buffer_.size() && buffer_[at] >= '0' && buffer_[at] <= '9') ++at;
      if (at == buffer_.size()) return end ? Match::no : Match::more;
      if (at == digits) return Match::no;
    }
    Match match = expect(syntax_->name_close, at, end);
    if (match != Match::yes) return match;
    if (syntax_->id != CallId::none) {  // the call's id, which the client gets its own for
      const std::size_t id_start = at;
      while (at < buffer_.size() && detail::function_name_char(buffer_[at])) ++at;
      if (at == buffer_.size()) return end || at - id_start > 64 ? Match::no : Match::more;
      if (at == id_start) return Match::no;
      match = expect(syntax_->id_close, at, end);
      if (match != Match::yes) return match;
    }
    at = skip_space(at);
    if (at == buffer_.size()) return end ? Match::no : Match::more;
    if (buffer_[at] != '{') return Match::no;
    const std::size_t close = detail::json_container_end(buffer_, at);
    if (close == std::string::npos) return end ? Match::no : Match::more;
    const std::optional<OrderedJson> arguments =
        parse(std::string_view(buffer_).substr(at, close - at));
    at = close;
    if (!arguments) return Match::no;
    return make_call(name, *arguments, call);
  }

  // NAME <name_close> (<parameter=KEY>\nVALUE\n</parameter>\n)*, up to the call's close.
  Match read_xml_call(std::size_t& at, bool end, std::optional<ToolCall>& call) {
    static constexpr std::string_view kOpen = "<parameter=", kClose = "</parameter>";
    at = skip_space(at);
    const std::size_t name_start = at;
    while (at < buffer_.size() && detail::function_name_char(buffer_[at])) ++at;
    if (at == buffer_.size()) return end || at - name_start > 64 ? Match::no : Match::more;
    const std::string name = buffer_.substr(name_start, at - name_start);
    const ToolFunction* function = tools_->find(name);
    if (function == nullptr) return Match::no;
    Match match = expect(syntax_->name_close, at, end);
    if (match != Match::yes) return match;
    OrderedJson arguments = OrderedJson::object();
    for (;;) {
      std::size_t next = at;
      match = expect(kOpen, next, end);
      if (match == Match::more) return match;
      if (match == Match::no) break;  // the call's close, checked by the caller
      const std::size_t key_end = buffer_.find('>', next);
      if (key_end == std::string::npos) return end ? Match::no : Match::more;
      const std::string key = buffer_.substr(next, key_end - next);
      const std::size_t value_end = buffer_.find(kClose, key_end + 1);
      if (value_end == std::string::npos) return end ? Match::no : Match::more;
      std::string_view value =
          std::string_view(buffer_).substr(key_end + 1, value_end - key_end - 1);
      if (value.starts_with('\n')) value.remove_prefix(1);  // the template's own newlines
      if (value.ends_with('\n')) value.remove_suffix(1);
      arguments[key] = xml_value(function->parameters, key, value);
      at = value_end + kClose.size();
    }
    return make_call(name, arguments, call);
  }

  // A parameter's text as its schema reads it: a string as written, any other type as
  // JSON (Python's True, False and None too, which templates' `| string` writes).
  static OrderedJson xml_value(const OrderedJson& parameters, const std::string& key,
                               std::string_view text) {
    const OrderedJson* schema = nullptr;
    if (const auto properties = parameters.find("properties");
        properties != parameters.end() && properties->is_object()) {
      if (const auto it = properties->find(key); it != properties->end()) schema = &*it;
    }
    if (schema != nullptr && detail::xml_string_valued(*schema)) return std::string(text);
    if (text == "True") return true;
    if (text == "False") return false;
    if (text == "None") return nullptr;
    if (std::optional<OrderedJson> json = parse(text)) return *std::move(json);
    return std::string(text);
  }

  // A call of one of the request's functions with an object of arguments (or a string
  // holding one, as some models write it).
  Match make_call(const std::string& name, const OrderedJson& arguments,
                  std::optional<ToolCall>& call) const {
    if (tools_->find(name) == nullptr) return Match::no;
    std::optional<OrderedJson> object = arguments;
    if (arguments.is_string()) object = parse(arguments.get_ref<const std::string&>());
    if (!object || !object->is_object()) return Match::no;
    call = ToolCall{"", name, object->dump(-1, ' ', false, OrderedJson::error_handler_t::replace)};
    return Match::yes;
  }

  static std::optional<OrderedJson> parse(std::string_view text) {
    if (too_deep(text)) return std::nullopt;  // the grammar bounds no depth: models may nest
    try {
      return OrderedJson::parse(text);
    } catch (const OrderedJson::exception&) {
      return std::nullopt;
    }
  }

  std::size_t skip_space(std::size_t at) const {
    while (at < buffer_.size() && detail::json_space(buffer_[at])) ++at;
    return at;
  }

  // The literal at `at`, whitespace around it as the model pleases; a literal of only
  // whitespace matches any (or none).
  Match expect(std::string_view literal, std::size_t& at, bool end) const {
    const std::string_view word = detail::trim_json_space(literal);
    std::size_t from = skip_space(at);
    if (word.empty()) {
      at = from;
      return Match::yes;
    }
    const std::string_view rest = std::string_view(buffer_).substr(from);
    if (rest.starts_with(word)) {
      at = from + word.size();
      return Match::yes;
    }
    if (!end && word.starts_with(rest)) return Match::more;
    return Match::no;
  }

  // Content, its trailing whitespace held back until more text follows (dropped when a
  // call comes next).
  void content(std::string_view text, std::vector<Event>& events) {
    const std::size_t unseen = std::min(hidden_, text.size());  // the prompt's, not the reply's
    text.remove_prefix(unseen);
    hidden_ -= unseen;
    std::size_t end = text.size();
    while (end > 0 && detail::json_space(text[end - 1])) --end;
    if (end > 0) {
      append_content(held_ + std::string(text.substr(0, end)), events);
      held_.clear();
    }
    held_ += text.substr(end);
  }

  static void append_content(std::string text, std::vector<Event>& events) {
    if (!events.empty() && events.back().kind == Kind::content) {
      events.back().text += text;
    } else {
      events.push_back({Kind::content, 0, std::move(text)});
    }
  }

  const ToolCallSyntax* syntax_;
  const ToolRequest* tools_;  // the request's, which outlives the reply
  State state_ = State::text;
  std::string buffer_, held_;
  std::size_t calls_ = 0, section_calls_ = 0;
  std::size_t hidden_ = 0;  // bytes at the buffer's front the model did not write
};

// A reply read whole in `syntax`: the reader's events gathered. `id_prefix`: call ids
// are the prefix and the call's index.
inline ToolReply read_family_reply(std::string_view text, const ToolCallSyntax& syntax,
                                   const ToolRequest& tools, const std::string& id_prefix) {
  ToolCallReader reader(syntax, tools);
  std::vector<ToolCallReader::Event> events = reader.push(text);
  for (ToolCallReader::Event& event : reader.finish()) events.push_back(std::move(event));
  ToolReply reply;
  for (const ToolCallReader::Event& event : events) {
    switch (event.kind) {
      case ToolCallReader::Kind::content:
        reply.content = reply.content.value_or("") + event.text;
        break;
      case ToolCallReader::Kind::call:
        reply.calls.push_back({tool_call_id(id_prefix, event.index, tools), event.text, ""});
        break;
      case ToolCallReader::Kind::arguments:
        reply.calls.at(event.index).arguments += event.text;
        break;
    }
  }
  return reply;
}

// A reply with tools read back in the request's format: its family's, or the generic JSON.
inline ToolReply read_tool_reply(std::string_view text, const ToolRequest& tools,
                                 const std::string& id_prefix) {
  return tools.syntax != nullptr ? read_family_reply(text, *tools.syntax, tools, id_prefix)
                                 : parse_tool_reply(text, tools, id_prefix);
}

}  // namespace smol::serve
