// The grammar of a reply's calls in a family's syntax (tool_call_formats.hpp): the
// syntax's literals as its template writes them, each call one of the functions
// tool_choice allows with arguments valid against its `parameters`.
//
//   root   ::= open call (separator call)* close      (one call: no repetition)
//   call   ::= call-0 | call-1 | ...
//   call-i ::= call_open <the name and the members around the arguments> f<i>-root call_close
//
// Each function's schema is converted on its own (json_schema.hpp) and its rules renamed
// with a prefix, so that several schemas live in one grammar. With tool_choice
// "required" or a named function the grammar constrains the whole reply; with "auto" it
// is lazy: it starts where the reply writes the syntax's trigger (GenerationRequest's
// grammar_trigger), so the text before it stays free.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/grammar/gbnf_text.hpp"
#include "smol/serve/structured_output.hpp"
#include "smol/serve/tool_call_formats.hpp"
#include "smol/serve/tool_call_reader.hpp"
#include "smol/serve/tool_calls.hpp"

namespace smol::serve {

namespace detail {

inline bool gbnf_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

// GBNF text with every rule name (not the words inside string literals, character classes
// or comments) prefixed by `prefix`.
inline std::string prefix_gbnf_rules(std::string_view gbnf, std::string_view prefix) {
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
    } else if (gbnf_name_char(c) && !(c >= '0' && c <= '9')) {
      std::size_t j = i;
      while (j < gbnf.size() && gbnf_name_char(gbnf[j])) ++j;
      out += prefix;
      out += gbnf.substr(i, j - i);
      i = j;
    } else if (c >= '0' && c <= '9') {  // a repetition count: {2,5}
      std::size_t j = i;
      while (j < gbnf.size() && gbnf[j] >= '0' && gbnf[j] <= '9') ++j;
      out += gbnf.substr(i, j - i);
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// A literal, or nothing for an empty one. The syntax's literals are forced as the
// template writes them, whitespace included: the spelling the model was trained on
// (the reader is lenient, for replies written without the grammar).
inline std::string gbnf_literal(std::string_view text) {
  return text.empty() ? std::string() : " " + gbnf_text::literal(text);
}

// The grammar of one call of function `f`, its arguments the rule `arguments`; without
// its call_open when the prompt has written it (`opened`).
inline std::string call_rule(const ToolCallSyntax& syntax, const ToolFunction& f,
                             const std::string& arguments, bool opened = false) {
  std::string body;
  if (syntax.body == CallBody::xml_parameters) {
    body = gbnf_literal(f.name) + gbnf_literal(syntax.name_close) + arguments;
  } else if (syntax.body == CallBody::named) {
    body = gbnf_literal(f.name);
    if (syntax.indexed_name) body += " \":\" [0-9]{1,4}";
    body += gbnf_literal(syntax.name_close);
    if (syntax.id == CallId::mistral) body += " [a-zA-Z0-9]{9}" + gbnf_literal(syntax.id_close);
    body += arguments;
  } else {
    // The members as the template's tojson writes them: ", " and ": " between.
    const auto member = [](std::string_view key) { return "\"" + std::string(key) + "\": "; };
    std::string head = "{";
    if (syntax.id == CallId::index) {
      body = gbnf_literal(head + member("tool_call_id") + "\"") + " [0-9]{1,4}";
      head = "\", ";
    }
    head += member(syntax.name_key) + "\"" + f.name + "\", " + member(syntax.arguments_key);
    body += gbnf_literal(head) + arguments;
    if (syntax.id == CallId::mistral) {
      body += gbnf_literal(", " + member("id") + "\"") + " [a-zA-Z0-9]{9}" + gbnf_literal("\"}");
    } else {
      body += gbnf_literal("}");
    }
  }
  return (opened ? std::string() : gbnf_literal(syntax.call_open)) + body +
         gbnf_literal(syntax.call_close);
}

// A string parameter's value in the XML-like syntax, written as it is: its enum or const,
// a bounded run of characters without '<' when it has minLength or maxLength (such
// strings are names and codes), else any text short of "</p" (code may hold '<'; the
// parameter's closing tag may not). A pattern or format cannot be enforced on raw text.
inline std::string xml_string_rule(const OrderedJson& schema, const std::string& at) {
  if (const auto values = schema.find("enum"); values != schema.end() && values->is_array()) {
    std::string out;
    for (const OrderedJson& value : *values) {
      if (!value.is_string()) throw invalid_request(at + ": enum values must be strings", "tools");
      out += (out.empty() ? "( " : " | ") + gbnf_text::literal(value.get<std::string>());
    }
    return out.empty() ? "\"\"" : out + " )";
  }
  if (const auto value = schema.find("const"); value != schema.end() && value->is_string()) {
    return gbnf_text::literal(value->get<std::string>());
  }
  for (const char* keyword : {"pattern", "format"}) {
    if (schema.contains(keyword)) {
      throw invalid_request(at +
                                ": the template's tool-call syntax writes strings as plain text, "
                                "where \"" +
                                std::string(keyword) + "\" cannot be enforced",
                            "tools");
    }
  }
  const auto length = [&](const char* keyword) -> std::optional<std::uint64_t> {
    const auto it = schema.find(keyword);
    if (it == schema.end() || !it->is_number_unsigned()) return std::nullopt;
    return it->get<std::uint64_t>();
  };
  const std::optional<std::uint64_t> low = length("minLength"), high = length("maxLength");
  if (!low && !high) return "xml-text";
  if (high && *high > 4096) throw invalid_request(at + ": maxLength over 4096", "tools");
  return "[^<]{" + std::to_string(low.value_or(0)) + "," + (high ? std::to_string(*high) : "") +
         "}";
}

// The <parameter=...> elements of function `f`'s arguments, in its properties' order,
// the required ones mandatory; their rules added to `rules` under `prefix`.
inline std::string xml_arguments(const ToolFunction& f, const std::string& prefix,
                                 std::string& rules) {
  const OrderedJson& parameters = f.parameters;
  const auto properties = parameters.find("properties");
  if (properties == parameters.end() || !properties->is_object()) return {};
  std::vector<std::string> required;
  if (const auto list = parameters.find("required"); list != parameters.end() && list->is_array()) {
    for (const OrderedJson& name : *list) {
      if (name.is_string()) required.push_back(name.get<std::string>());
    }
  }
  std::string sequence;
  std::size_t index = 0;
  for (const auto& [key, schema] : properties->items()) {
    const std::string at = "the parameter " + key + " of " + f.name;
    if (key.find_first_of("<>\n") != std::string::npos) {
      throw invalid_request(at + ": the template's tool-call syntax cannot write this name",
                            "tools");
    }
    const std::string name = prefix + "p" + std::to_string(index++);
    std::string value;
    if (xml_string_valued(schema)) {
      value = xml_string_rule(schema, at);
    } else {
      // The property as a reference into the whole parameters schema, moved under $defs,
      // so that its references ("#", "#/$defs/...", "#/definitions/...") mean what they
      // meant there.
      OrderedJson moved = parameters;
      move_references(moved, "#/$defs/parameters");
      std::string pointer;  // the key as a JSON pointer token
      for (const char c : key) pointer += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
      const OrderedJson alone = {{"$defs", {{"parameters", std::move(moved)}}},
                                 {"$ref", "#/$defs/parameters/properties/" + pointer}};
      rules += prefix_gbnf_rules(grammar_from_schema(alone, "tools").gbnf, name + "-") + "\n";
      value = name + "-root";
    }
    rules += name + " ::=" + gbnf_literal("<parameter=" + key + ">\n") + " " + value +
             gbnf_literal("\n</parameter>\n") + "\n";
    const bool needed = std::find(required.begin(), required.end(), key) != required.end();
    sequence += " " + name + (needed ? "" : "?");
  }
  return sequence;
}

}  // namespace detail

// The grammar of a reply that calls (see the top of this file).
inline OutputGrammar tool_call_grammar(const ToolCallSyntax& syntax, const ToolRequest& tools) {
  std::string rules, alternatives, first_alternatives;
  for (std::size_t i = 0; i < tools.functions.size(); ++i) {
    const ToolFunction& f = tools.functions[i];
    if (tools.choice == ToolChoice::named && f.name != tools.named) continue;
    const std::string prefix = "f" + std::to_string(i) + "-";
    std::string arguments;
    if (syntax.body == CallBody::xml_parameters) {
      arguments = detail::xml_arguments(f, prefix, rules);
    } else {
      const OutputGrammar schema = detail::grammar_from_schema(f.parameters, "tools");
      rules += detail::prefix_gbnf_rules(schema.gbnf, prefix) + "\n";
      arguments = " " + prefix + "root";
    }
    const std::string name = "call-" + std::to_string(i);
    rules += name + " ::=" + detail::call_rule(syntax, f, arguments) + "\n";
    alternatives += (alternatives.empty() ? "" : " | ") + name;
    if (syntax.prompt_opens_call) {
      rules += name + "-opened ::=" + detail::call_rule(syntax, f, arguments, true) + "\n";
      first_alternatives += (first_alternatives.empty() ? "" : " | ") + name + "-opened";
    }
  }
  const bool several = syntax.parallel && tools.parallel;
  // The first call: its call_open already in the prompt (Functionary's ">>>").
  std::string root = "root ::=" + detail::gbnf_literal(syntax.open) +
                     (syntax.prompt_opens_call ? " first-call" : " call");
  if (several) root += " (" + detail::gbnf_literal(syntax.separator) + " call)*";
  root += detail::gbnf_literal(syntax.close) + "\n";
  if (syntax.prompt_opens_call) rules += "first-call ::= " + first_alternatives + "\n";
  if (syntax.body == CallBody::xml_parameters) {
    rules += "xml-text ::= ( [^<] | \"<\" [^/] | \"</\" [^p] )*\n";
  }
  return detail::grammar_from_gbnf(root + "call ::= " + alternatives + "\n" + rules, "tools",
                                   /*generated=*/true);
}

}  // namespace smol::serve
