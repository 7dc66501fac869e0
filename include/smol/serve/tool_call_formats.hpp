// Each model family's tool-call syntax: how its chat template is recognized, and how its
// replies write calls. One table entry per family (as llama.cpp's common/chat detects
// them); the reader (tool_call_reader.hpp) and the grammar (tool_call_grammar.hpp) are
// built from an entry, so a new family is a new row here.
//
// Every family's calls fit one shape:
//
//   open  call  (separator call)*  close
//   call := call_open  body  call_close
//
// where the body is either a JSON object naming the function and holding its arguments
// (Hermes, Llama 3.x, Mistral Nemo, Granite, Command R7B) or the function's name written
// plainly, a delimiter, and the arguments object (DeepSeek, Kimi K2, the newer Mistral
// models). `trigger` is where the calls begin in a reply:
// the text before it is the answer's content, and in "auto" mode the grammar starts
// there (a lazy grammar). The literals are written exactly as the family's template
// writes earlier calls, which is what its model was trained to write; the reader is
// lenient about the whitespace around them.
//
// A template whose family is none of these gets the generic format (tool_calls.hpp):
// tools described in the system prompt, the reply one JSON object. Not here yet:
// GPT-OSS's harmony (its calls and reasoning are channels, which belongs with the model
// itself: issue 72) and GLM's <arg_key>/<arg_value> pairs.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "smol/template/chat_template.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol::serve {

// Where the call's name is written.
enum class CallBody {
  json_object,  // {"<name_key>": "NAME", "<arguments_key>": {...}} (with an id member)
  // NAME <name_close> then each argument as <parameter=KEY>\nVALUE\n</parameter>\n, a
  // string's value as it is, any other as JSON (Qwen3-Coder, Qwen3.5, Nemotron 3)
  xml_parameters,
  named,  // NAME <name_close> {...}
};

// A call id the family writes in its calls (and its template checks in earlier ones).
enum class CallId {
  none,
  mistral,  // nine letters or digits: an "id" member after the arguments, or after the name
  index,    // "tool_call_id": "0", "1", ... before the name (Command R7B)
};

struct ToolCallSyntax {
  std::string_view family = {};  // as error messages and logs name it
  // Text in the template's source that marks the family (all must occur), and text
  // that rules it out (a related family's).
  std::array<std::string_view, 2> markers = {};
  std::array<std::string_view, 2> excluded = {};
  std::string_view trigger = {};
  // The reply's calls start only at its beginning (Llama 3.x writes a bare JSON object:
  // a brace in the middle of prose is not a call).
  bool at_start = false;
  std::string_view open = {}, close = {}, call_open = {}, call_close = {}, separator = {};
  CallBody body = CallBody::json_object;
  std::string_view name_key = "name", arguments_key = "arguments";
  CallId id = CallId::none;
  std::string_view name_close = {};  // CallBody::named: between the name and the arguments
  std::string_view id_close = {};    // CallBody::named with an id: between it and the arguments
  bool indexed_name = false;         // NAME:<index> (Kimi K2's functions.get_weather:0)
  // Whether the family writes several calls in one turn (Llama 3.1's template refuses
  // more than one).
  bool parallel = true;
  // The generation prompt ends with call_open, so the reply begins inside a call (or
  // inside the `content_recipient`'s message: Functionary's ">>>all\n" is text).
  bool prompt_opens_call = false;
  std::string_view content_recipient = {};
};

// The table. Order matters: the first entry whose markers all occur (and none of whose
// exclusions does) wins, so a family whose markers contain another's comes first. The
// markers are llama.cpp's where it has them.
inline constexpr std::array kToolCallSyntaxes = {
    // Kimi K2: functions.NAME:INDEX inside a section of calls.
    ToolCallSyntax{.family = "Kimi K2",
                   .markers = {"<|tool_calls_section_begin|>", "<|tool_call_begin|>"},
                   .trigger = "<|tool_calls_section_begin|>",
                   .open = "<|tool_calls_section_begin|>",
                   .close = "<|tool_calls_section_end|>",
                   .call_open = "<|tool_call_begin|>functions.",
                   .call_close = "<|tool_call_end|>",
                   .body = CallBody::named,
                   .name_close = "<|tool_call_argument_begin|>",
                   .indexed_name = true},
    // DeepSeek R1 (and its distills): the name after "function", the arguments fenced
    // as a JSON code block.
    ToolCallSyntax{.family = "DeepSeek R1",
                   .markers = {"<｜tool▁calls▁begin｜>", "```json"},
                   .trigger = "<｜tool▁calls▁begin｜>",
                   .open = "<｜tool▁calls▁begin｜>",
                   .close = "<｜tool▁calls▁end｜>",
                   .call_open = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
                   .call_close = "\n```<｜tool▁call▁end｜>",
                   .separator = "\n",
                   .body = CallBody::named,
                   .name_close = "\n```json\n"},
    // DeepSeek V3.1: the name, then the arguments as they are.
    ToolCallSyntax{.family = "DeepSeek V3.1",
                   .markers = {"<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>"},
                   .trigger = "<｜tool▁calls▁begin｜>",
                   .open = "<｜tool▁calls▁begin｜>",
                   .close = "<｜tool▁calls▁end｜>",
                   .call_open = "<｜tool▁call▁begin｜>",
                   .call_close = "<｜tool▁call▁end｜>",
                   .body = CallBody::named,
                   .name_close = "<｜tool▁sep｜>"},
    // Command R7B: a JSON list of calls between action markers, each numbered.
    ToolCallSyntax{.family = "Command R7B",
                   .markers = {"<|END_THINKING|><|START_ACTION|>", "<|END_ACTION|>"},
                   .trigger = "<|START_ACTION|>",
                   .open = "<|START_ACTION|>[\n    ",
                   .close = "\n]<|END_ACTION|>",
                   .separator = ",\n    ",
                   .name_key = "tool_name",
                   .arguments_key = "parameters",
                   .id = CallId::index},
    // Mistral Small 3.2: NAME[CALL_ID]ID[ARGS]{...} after each [TOOL_CALLS].
    ToolCallSyntax{.family = "Mistral Small 3.2",
                   .markers = {"[TOOL_CALLS]", "[CALL_ID]"},
                   .trigger = "[TOOL_CALLS]",
                   .call_open = "[TOOL_CALLS]",
                   .body = CallBody::named,
                   .id = CallId::mistral,
                   .name_close = "[CALL_ID]",
                   .id_close = "[ARGS]"},
    // Devstral, Ministral 3, Magistral: NAME[ARGS]{...} after each [TOOL_CALLS].
    ToolCallSyntax{.family = "Mistral (Devstral, Ministral 3)",
                   .markers = {"[TOOL_CALLS]", "[ARGS]"},
                   .trigger = "[TOOL_CALLS]",
                   .call_open = "[TOOL_CALLS]",
                   .body = CallBody::named,
                   .name_close = "[ARGS]"},
    // Mistral Nemo: a JSON list of calls, each with a nine-character id.
    ToolCallSyntax{.family = "Mistral Nemo",
                   .markers = {"[TOOL_CALLS]", "[TOOL_CALLS]"},
                   .trigger = "[TOOL_CALLS]",
                   .open = "[TOOL_CALLS][",
                   .close = "]",
                   .separator = ", ",
                   .id = CallId::mistral},
    // Granite 3.x: a JSON list after <|tool_call|> (Granite 4 is Hermes).
    ToolCallSyntax{.family = "Granite 3",
                   .markers = {"<|tool_call|>", "elif thinking"},
                   .trigger = "<|tool_call|>",
                   .open = "<|tool_call|>[",
                   .close = "]",
                   .separator = ", "},
    // Qwen3-Coder, Qwen3.5, Nemotron 3 Nano: <tool_call> blocks whose arguments are
    // <parameter=...> elements.
    ToolCallSyntax{.family = "Qwen3-Coder (XML parameters)",
                   .markers = {"<tool_call>", "<parameter="},
                   .excluded = {"<arg_key>", "<arg_key>"},
                   .trigger = "<tool_call>",
                   .call_open = "<tool_call>\n<function=",
                   .call_close = "</function>\n</tool_call>",
                   .separator = "\n",
                   .body = CallBody::xml_parameters,
                   .name_close = ">\n"},
    // Hermes 2 Pro, Qwen 2.5, Qwen 3, Granite 4 and many fine-tunes: one <tool_call>
    // block of JSON per call. Not GLM's blocks (<arg_key>), which get the generic format.
    ToolCallSyntax{.family = "Hermes",
                   .markers = {"<tool_call>", "<tool_call>"},
                   .excluded = {"<function=", "<arg_key>"},
                   .trigger = "<tool_call>",
                   .call_open = "<tool_call>\n",
                   .call_close = "\n</tool_call>",
                   .separator = "\n"},
    // Functionary v3.2: messages ">>>RECIPIENT\n...", "all" the user's (text), any other
    // a call of that function with JSON arguments; the generation prompt ends with ">>>".
    ToolCallSyntax{.family = "Functionary v3.2",
                   .markers = {">>>all", ">>>all"},
                   .trigger = ">>>",
                   .call_open = ">>>",
                   .body = CallBody::named,
                   .name_close = "\n",
                   .prompt_opens_call = true,
                   .content_recipient = "all"},
    // Llama 3.1, 3.2, 3.3: one bare JSON object, its arguments named "parameters", at the
    // start of the reply (the template refuses more than one call).
    ToolCallSyntax{.family = "Llama 3.x",
                   .markers = {"<|start_header_id|>ipython<|end_header_id|>",
                               "<|start_header_id|>ipython<|end_header_id|>"},
                   .excluded = {"<function=", "<function="},
                   .trigger = "{\"",
                   .at_start = true,
                   .arguments_key = "parameters",
                   .parallel = false},
};

// Every row has a trigger: the reader and lazy grammars search for it.
static_assert(std::all_of(kToolCallSyntaxes.begin(), kToolCallSyntaxes.end(),
                          [](const ToolCallSyntax& syntax) { return !syntax.trigger.empty(); }));

// The family of a template's source; nullptr: none (the generic format).
inline const ToolCallSyntax* recognize_tool_call_syntax(std::string_view template_source) {
  for (const ToolCallSyntax& syntax : kToolCallSyntaxes) {
    bool all = true;
    for (const std::string_view marker : syntax.markers) {
      all = all && template_source.find(marker) != std::string_view::npos;
    }
    for (const std::string_view marker : syntax.excluded) {
      all = all && (marker.empty() || template_source.find(marker) == std::string_view::npos);
    }
    if (all) return &syntax;
  }
  return nullptr;
}

// The control tokens of `tokenizer` that spell one of `syntax`'s markers ([TOOL_CALLS] and
// [ARGS] in Mistral's vocabulary, <|tool_call_begin|> in Kimi's, ...), as llama.cpp's
// preserved tokens: a reply shows them (ReplyStream) and grammars match them (TokenTrie),
// or the calls could be neither read back nor forced as the model writes them. None
// without a syntax; end-of-generation tokens stay what they are.
inline std::vector<TokenId> syntax_marker_tokens(const Tokenizer& tokenizer,
                                                 const ToolCallSyntax* syntax) {
  std::vector<TokenId> markers;
  if (syntax == nullptr) return markers;
  const std::array literals = {syntax->trigger,    syntax->open,       syntax->close,
                               syntax->call_open,  syntax->call_close, syntax->separator,
                               syntax->name_close, syntax->id_close};
  for (std::size_t i = 0; i < tokenizer.size(); ++i) {
    const auto id = static_cast<TokenId>(i);
    if (!tokenizer.is_control(id) || tokenizer.is_end_of_generation(id)) continue;
    const std::string& spelling = tokenizer.vocabulary().tokens[i];
    if (spelling.size() < 3) continue;  // no stray one- or two-character piece
    for (const std::string_view literal : literals) {
      if (literal.find(spelling) != std::string_view::npos) {
        markers.push_back(id);
        break;
      }
    }
  }
  return markers;
}

inline const ToolCallSyntax* tool_call_syntax_named(std::string_view family) {
  for (const ToolCallSyntax& syntax : kToolCallSyntaxes) {
    if (syntax.family == family) return &syntax;
  }
  return nullptr;
}

// The family of the template a program renders with: its Jinja source's (the file's
// tool_use template's first, which is the one conversations with tools render with),
// or with --no-jinja its C++ renderer's (Qwen2.5's layout writes Hermes calls).
inline const ToolCallSyntax* tool_call_syntax_of(const ChatTemplate& chat) {
  if (chat.jinja_tool_use) {
    if (const ToolCallSyntax* syntax = recognize_tool_call_syntax(chat.jinja_tool_use->source())) {
      return syntax;
    }
  }
  if (chat.jinja) return recognize_tool_call_syntax(chat.jinja->source());
  return renders_hermes_tools(chat.format) ? tool_call_syntax_named("Hermes") : nullptr;
}

}  // namespace smol::serve
