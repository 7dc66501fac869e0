// Chat templates: the prompt text a chat model expects around each message.
//
// GGUF files carry their template as Jinja (tokenizer.chat_template), and smol renders
// it with its own Jinja engine (jinja.hpp), as transformers' apply_chat_template would:
// the file's template is the prompt's layout, whatever the family. A ChatTemplate
// holds that compiled template, and a ChatFormat naming the family's layout for smol's
// own renderers (whether it trims message text), recognized from the template's text by
// known_chat_templates.hpp. (Which syntax its model calls tools in is the server's
// concern: serve/tool_call_formats.hpp.)
//
// The six C++ renderers below predate the engine: each reproduces one family's Jinja
// character for character (tests/chat_template/ proves both against jinja2). They
// render when there is no Jinja text to run (`--no-jinja`, a ChatTemplate built from a
// bare ChatFormat) and serve as the engine's oracle in the tests.
//
// The rendered text never includes the leading bos token: the tokenizer adds it when
// the vocabulary asks (add_bos), as llama.cpp does. Tokenize it with parse_special.
#pragma once

#include <algorithm>
#include <cstddef>
#include <ctime>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/template/chat_context.hpp"
#include "smol/template/jinja.hpp"
#include "smol/template/json_value.hpp"
#include "smol/text/unicode.hpp"

namespace smol {

enum class ChatFormat {
  smollm3,  // ChatML with SmolLM3's system block and /think, /no_think reasoning modes
  chatml,   // <|im_start|>role\n...<|im_end|>\n
  llama2,   // [INST] <<SYS>>...<</SYS>> ... [/INST]
  llama3,   // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  // ChatML with a default system prompt and a Hermes-style tool section (Qwen2.5's
  // template): the tools as JSON within <tools></tools> in the system turn, an
  // assistant's calls as <tool_call> JSON, tool results as <tool_response> in a user turn.
  chatml_tools,
  gemma,  // <start_of_turn>user\n...<end_of_turn>\n, the system prompt in the first turn
};

// A conversation a template refuses (its raise_exception: Gemma's turns must alternate
// user/assistant), or one it fails on (a message shape it does not expect). The server
// answers it with a 400.
class ChatTemplateError : public Error {
 public:
  using Error::Error;
};

// A template to render: its family's layout and the parameters its text sets.
struct ChatTemplate {
  // A bare layout is a template without parameters (what a caller names by hand).
  ChatTemplate(ChatFormat layout = ChatFormat::chatml) : format(layout) {}  // NOLINT: implicit

  ChatFormat format;
  // ChatML only: the system message the template puts first when the conversation
  // does not begin with one of its own (SmolLM2's "You are a helpful AI assistant
  // named SmolLM, ..."); none when the template adds nothing.
  std::optional<std::string> default_system;
  // The entry of the known templates whose exact text the file's template is; empty
  // when the template was not recognized and this layout is smol's best guess.
  std::string_view known_as;
  // The file's own template, compiled: when present, it renders every prompt, and the
  // fields above only name the family's conventions.
  std::shared_ptr<const jinja::Template> jinja;
  // The file's template for conversations with tools, when it names one apart
  // (tokenizer.chat_template.tool_use, as Command R's and Hermes' files do).
  std::shared_ptr<const jinja::Template> jinja_tool_use;
  // What the template sees as bos_token and eos_token (the vocabulary's spellings).
  std::string bos_token, eos_token;
  // Whether a bos_token the template writes first is dropped from the text: yes when
  // the tokenizer adds bos itself (add_bos), so the prompt does not begin with two.
  bool drops_leading_bos = false;
  // Variables every render gets (--chat-template-kwargs), as ChatOptions::template_kwargs.
  std::vector<std::pair<std::string, std::string>> template_kwargs;

  bool operator==(const ChatTemplate&) const = default;
};

// A call an assistant message made, for templates that write calls themselves.
struct ChatToolCall {
  std::string name;
  std::string arguments;  // the arguments object as the template's `tojson` writes it
  std::string id = {};    // the client's id for it (Mistral's templates write it)
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  std::vector<ChatToolCall> tool_calls = {};  // assistant only; for templates that write calls
  // An assistant turn's reasoning, apart from its content, as clients send it back (Qwen3's
  // and DeepSeek's templates write it in <think> for the last turn); Jinja templates only.
  std::optional<std::string> reasoning_content = std::nullopt;
  // A tool message: the id of the call it answers (empty: none given).
  std::string tool_call_id = {};
  // The client sent no content (an assistant turn of calls: OpenAI's null): the
  // template sees None, as transformers gives it, unless it fails on None
  // (render_jinja_chat then gives it the empty text).
  bool content_null = false;
};

struct ChatOptions {
  bool add_generation_prompt = true;  // end with the opening of the assistant's turn
  bool enable_thinking = true;        // the templates' enable_thinking (SmolLM3, Qwen3, ...);
                                      // SmolLM3's /think or /no_think in the system
                                      // message overrides it
  // The tools, each as the template's `tojson` writes the client's tool object; a
  // template with a tool section renders them (of the C++ renderers, chatml_tools), the
  // others ignore them as their Jinja does.
  std::vector<std::string> tools = {};
  // More variables for a Jinja template, as llama-server's chat_template_kwargs: each a
  // name and its value as JSON text ({"reasoning_effort": "\"low\""}); they override
  // the ones above.
  std::vector<std::pair<std::string, std::string>> template_kwargs = {};
  // The instant strftime_now formats, in UTC; absent, the local time now.
  std::optional<std::time_t> now = std::nullopt;
};

namespace detail {

inline void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (std::size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) {
    text.replace(at, from.size(), to);
  }
}

// Python's str.strip()/rstrip() (what Jinja's filters call): Unicode whitespace plus
// the four ASCII separators U+001C..U+001F that Python also counts.
inline bool python_space(char32_t c) {
  return unicode::is_whitespace(c) || (c >= 0x1C && c <= 0x1F);
}

inline std::string_view rstrip(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    const auto decoded = unicode::decode_utf8(text, start);
    if (decoded.status != unicode::Utf8Status::valid || start + decoded.length != end ||
        !python_space(decoded.codepoint)) {
      break;
    }
    end = start;
  }
  return text.substr(0, end);
}

inline std::string_view lstrip(std::string_view text) {
  std::size_t start = 0;
  while (start < text.size()) {
    const auto decoded = unicode::decode_utf8(text, start);
    if (decoded.status != unicode::Utf8Status::valid || !python_space(decoded.codepoint)) break;
    start += decoded.length;
  }
  return text.substr(start);
}

inline std::string_view strip(std::string_view text) {
  return lstrip(rstrip(text));
}

inline std::string_view lstrip_newlines(std::string_view text) {
  const std::size_t start = text.find_first_not_of('\n');
  return start == std::string_view::npos ? std::string_view() : text.substr(start);
}

// The texts of SmolLM3's template (Unsloth's edition, as in SmolLM3 GGUF files).
inline constexpr std::string_view kSmolLM3DefaultInstructions =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face.";
inline constexpr std::string_view kSmolLM3ThinkingInstructions =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as"
    " an assistant involves thoroughly exploring questions through a systematic thinking"
    " process before providing the final precise and accurate solutions. This requires"
    " engaging in a comprehensive cycle of analysis, summarizing, exploration,"
    " reassessment, reflection, backtracking, and iteration to develop well-considered"
    " thinking process. Please structure your response into two main sections: Thought"
    " and Solution using the specified format: <think> Thought section </think> Solution"
    " section. In the Thought section, detail your reasoning process in steps. Each step"
    " should include detailed considerations such as analysing questions, summarizing"
    " relevant findings, brainstorming new ideas, verifying the accuracy of the current"
    " steps, refining any errors, and revisiting previous steps. In the Solution section,"
    " based on various attempts, explorations, and reflections from the Thought section,"
    " systematically present the final solution that you deem correct. The Solution"
    " section should be logical, accurate, and concise and detail necessary steps needed"
    " to reach the conclusion.";
inline constexpr std::string_view kEmptyThinking = "<think>\n\n</think>\n";

inline std::string render_smollm3(std::span<const ChatMessage> messages,
                                  const ChatOptions& options) {
  bool thinking = options.enable_thinking;
  std::string custom_instructions;
  if (!messages.empty() && messages.front().role == "system") {
    const std::string& system = messages.front().content;
    // A message with both markers gets /no_think: the template tests it first.
    if (system.find("/no_think") != std::string::npos) {
      thinking = false;
    } else if (system.find("/think") != std::string::npos) {
      thinking = true;
    }
    custom_instructions = system;
    replace_all(custom_instructions, "/no_think", "");
    replace_all(custom_instructions, "/think", "");
    custom_instructions = std::string(rstrip(custom_instructions));
  }

  std::string out = "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\n";
  out += thinking ? "Reasoning Mode: /think\n\n" : "Reasoning Mode: /no_think\n\n";
  out += "## Custom Instructions\n\n";
  if (!custom_instructions.empty()) {
    out += custom_instructions;
  } else {
    out += thinking ? kSmolLM3ThinkingInstructions : kSmolLM3DefaultInstructions;
  }
  out += "\n\n<|im_end|>\n";

  for (const ChatMessage& message : messages) {
    if (message.role == "user" || message.role == "tool") {  // tool results speak as user
      out += "<|im_start|>user\n";
      out += message.content;
      out += "<|im_end|>\n";
    } else if (message.role == "assistant") {
      // Earlier answers are kept as written, thinking included; with thinking off
      // each gets the same empty think block as the generation prompt.
      out += "<|im_start|>assistant\n";
      if (!thinking) out += kEmptyThinking;
      out += lstrip_newlines(message.content);
      out += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!thinking) out += kEmptyThinking;
  }
  return out;
}

// ChatML; with a default system prompt, a conversation whose first message is not
// the system's gets that one in front (SmolLM2's template tests `loop.first and
// messages[0]['role'] != 'system'`, so an empty conversation gets none).
inline std::string render_chatml(std::span<const ChatMessage> messages,
                                 const std::optional<std::string>& default_system,
                                 const ChatOptions& options) {
  std::string out;
  if (default_system && !messages.empty() && messages.front().role != "system") {
    out += "<|im_start|>system\n" + *default_system + "<|im_end|>\n";
  }
  for (const ChatMessage& message : messages) {
    out += "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n";
  }
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Qwen2.5's template: ChatML, the first system message (or the default one) in the
// system turn, followed by the tool section when there are tools; an assistant turn with
// calls writes its text (if any) and each call as <tool_call> JSON; consecutive tool
// results share one user turn.
inline std::string render_chatml_tools(std::span<const ChatMessage> messages,
                                       const std::optional<std::string>& default_system,
                                       const ChatOptions& options) {
  const bool system_first = !messages.empty() && messages.front().role == "system";
  const std::string system =
      system_first ? messages.front().content : default_system.value_or(std::string());
  std::string out = "<|im_start|>system\n" + system;
  if (!options.tools.empty()) {
    out +=
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const std::string& tool : options.tools) out += "\n" + tool;
    out +=
        "\n</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
        "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
  }
  out += "<|im_end|>\n";
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i > 0) ||
        (m.role == "assistant" && m.tool_calls.empty())) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      out += "<|im_start|>assistant";
      if (!m.content.empty()) out += "\n" + m.content;
      for (const ChatToolCall& call : m.tool_calls) {
        out += "\n<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": " + call.arguments +
               "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

inline std::string render_llama3(std::span<const ChatMessage> messages,
                                 const ChatOptions& options) {
  std::string out;
  for (const ChatMessage& message : messages) {
    out += "<|start_header_id|>" + message.role + "<|end_header_id|>\n\n";
    out += strip(message.content);
    out += "<|eot_id|>";
  }
  if (options.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Meta's Llama-2 chat format: the system prompt folds into the first user turn,
// and every turn after the first opens with its own "<s>".
inline std::string render_llama2(std::span<const ChatMessage> messages) {
  std::string out;
  std::string pending_system;
  bool first_turn = true;
  for (const ChatMessage& message : messages) {
    if (message.role == "system") {
      pending_system = "<<SYS>>\n" + std::string(strip(message.content)) + "\n<</SYS>>\n\n";
    } else if (message.role == "assistant") {
      out += " ";
      out += strip(message.content);
      out += " </s>";
    } else {
      out += first_turn ? "[INST] " : "<s>[INST] ";
      out += pending_system;
      out += strip(message.content);
      out += " [/INST]";
      pending_system.clear();
      first_turn = false;
    }
  }
  return out;
}

// Gemma 3's template: no system turn (a leading system message is prepended to the
// first turn, untrimmed, followed by a blank line), "model" for the assistant's role,
// every message trimmed. Its Jinja raises unless the turns after the system message
// alternate user, assistant, user, ...; so does this (the check is the template's own:
// a turn at an even index must be the user's and one at an odd index must not be).
inline std::string render_gemma(std::span<const ChatMessage> messages, const ChatOptions& options) {
  // Its Jinja reads messages[0] unguarded: an empty conversation is an error there.
  if (messages.empty()) throw ChatTemplateError("Gemma's chat template needs a message");
  std::string first_user_prefix;
  if (messages.front().role == "system") {
    first_user_prefix = messages.front().content + "\n\n";
    messages = messages.subspan(1);
  }
  std::string out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    if ((message.role == "user") != (i % 2 == 0)) {
      throw ChatTemplateError(
          "Gemma's chat template needs the roles to alternate user/assistant/user/... "
          "after an optional first system message; message " +
          std::to_string(i + (first_user_prefix.empty() ? 0 : 1)) + " is the " + message.role +
          "'s");
    }
    out += "<start_of_turn>";
    out += message.role == "assistant" ? std::string_view("model") : message.role;
    out += "\n";
    if (i == 0) out += first_user_prefix;
    out += strip(message.content);
    out += "<end_of_turn>\n";
  }
  if (options.add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

}  // namespace detail

// Whether `format` has a tool section of its own, with Hermes-style <tool_call> replies
// (llama-server detects such templates by that marker and uses its Hermes 2 Pro format).
inline bool renders_hermes_tools(ChatFormat format) {
  return format == ChatFormat::chatml_tools;
}

// Whether `format` strips the whitespace around a message's text (Jinja's `| trim`), as
// the Llama formats do; SmolLM3's and ChatML's keep it as written.
inline bool trims_message_text(ChatFormat format) {
  return format == ChatFormat::llama2 || format == ChatFormat::llama3 ||
         format == ChatFormat::gemma;
}

// The context a Jinja chat template renders with, as transformers' apply_chat_template
// and llama-server give it: the messages (a tool call's arguments as an object),
// tools (None when there are none), documents (None), add_generation_prompt,
// enable_thinking, bos_token, eos_token, raise_exception, strftime_now, then the kwargs.
// `arguments_as_text`: each call's arguments as their JSON text, for a template that
// concatenates them (Functionary v3.2's).
inline jinja::Dict chat_context(const ChatTemplate& chat_template,
                                std::span<const ChatMessage> messages, const ChatOptions& options,
                                bool arguments_as_text = false) {
  // JSON the client sent that does not parse stays a string, as it was given.
  const auto object = [](const std::string& json) -> jinja::Value {
    try {
      return jinja::parse_json(json);
    } catch (const Error&) {
      return json;
    }
  };
  jinja::List list;
  for (const ChatMessage& message : messages) {
    jinja::Dict entry;
    entry.set("role", message.role);
    entry.set("content", message.content_null ? jinja::Value(jinja::None{}) : message.content);
    if (message.reasoning_content) entry.set("reasoning_content", *message.reasoning_content);
    if (!message.tool_call_id.empty()) entry.set("tool_call_id", message.tool_call_id);
    if (!message.tool_calls.empty()) {
      jinja::List calls;
      for (const ChatToolCall& call : message.tool_calls) {
        jinja::Dict function;
        function.set("name", call.name);
        function.set("arguments",
                     arguments_as_text ? jinja::Value(call.arguments) : object(call.arguments));
        jinja::Dict wrapped;
        if (!call.id.empty()) wrapped.set("id", call.id);
        wrapped.set("type", "function");
        wrapped.set("function", std::move(function));
        calls.emplace_back(std::move(wrapped));
      }
      entry.set("tool_calls", std::move(calls));
    }
    list.emplace_back(std::move(entry));
  }
  jinja::Dict context;
  context.set("messages", std::move(list));
  if (options.tools.empty()) {
    context.set("tools", jinja::None{});
  } else {
    jinja::List tools;
    for (const std::string& tool : options.tools) tools.push_back(object(tool));
    context.set("tools", std::move(tools));
  }
  context.set("documents", jinja::None{});
  context.set("add_generation_prompt", options.add_generation_prompt);
  context.set("enable_thinking", options.enable_thinking);
  context.set("bos_token", chat_template.bos_token);
  context.set("eos_token", chat_template.eos_token);
  add_transformers_globals(context, options.now);
  for (const auto* kwargs : {&chat_template.template_kwargs, &options.template_kwargs}) {
    for (const auto& [name, json] : *kwargs) {
      try {
        context.set(name, jinja::parse_json(json));
      } catch (const Error& error) {
        throw ChatTemplateError(cat("chat_template_kwargs '", name, "': ", error.what()));
      }
    }
  }
  return context;
}

inline std::string render_jinja_chat(const ChatTemplate& chat_template,
                                     std::span<const ChatMessage> messages,
                                     const ChatOptions& options) {
  std::string text;
  const jinja::Template& chosen = !options.tools.empty() && chat_template.jinja_tool_use
                                      ? *chat_template.jinja_tool_use
                                      : *chat_template.jinja;
  // A template that fails on what transformers gives it may take what llama.cpp gives
  // templates that need it (its probed capabilities): a null content as an empty text
  // (Qwen3's tests `'</think>' in content`), then also a call's arguments as JSON text
  // (Functionary v3.2 concatenates them). Each is tried only where it changes something;
  // the first failure is the one reported.
  const auto null = [](const ChatMessage& m) { return m.content_null; };
  const auto calls = [](const ChatMessage& m) { return !m.tool_calls.empty(); };
  const bool has_null = std::any_of(messages.begin(), messages.end(), null);
  const bool has_calls = std::any_of(messages.begin(), messages.end(), calls);
  std::vector<ChatMessage> filled;
  if (has_null) {
    filled.assign(messages.begin(), messages.end());
    for (ChatMessage& message : filled) message.content_null = false;
  }
  const std::span<const ChatMessage> texts =
      has_null ? std::span<const ChatMessage>(filled) : messages;
  try {
    try {
      text = chosen.render(chat_context(chat_template, messages, options));
    } catch (const jinja::TemplateRaised&) {
      throw;
    } catch (const jinja::TemplateError&) {
      if (!has_null && !has_calls) throw;
      std::exception_ptr first = std::current_exception();
      bool done = false;
      for (const bool arguments_as_text : {false, true}) {
        if ((!arguments_as_text && !has_null) || (arguments_as_text && !has_calls)) continue;
        try {
          text = chosen.render(chat_context(chat_template, texts, options, arguments_as_text));
          done = true;
          break;
        } catch (const jinja::TemplateRaised&) {
          throw;
        } catch (const jinja::TemplateError&) {
        }
      }
      if (!done) std::rethrow_exception(first);
    }
  } catch (const jinja::TemplateRaised& raised) {
    throw ChatTemplateError(cat("the chat template refused the conversation: ", raised.what()));
  } catch (const jinja::TemplateError& error) {
    throw ChatTemplateError(cat("the chat template failed at ", error.what()));
  }
  if (chat_template.drops_leading_bos && !chat_template.bos_token.empty() &&
      text.starts_with(chat_template.bos_token)) {
    text.erase(0, chat_template.bos_token.size());
  }
  return text;
}

// The prompt text for `messages` in `chat_template`.
inline std::string render_chat(const ChatTemplate& chat_template,
                               std::span<const ChatMessage> messages,
                               const ChatOptions& options = {}) {
  if (chat_template.jinja) return render_jinja_chat(chat_template, messages, options);
  switch (chat_template.format) {
    case ChatFormat::smollm3:
      return detail::render_smollm3(messages, options);
    case ChatFormat::chatml:
      return detail::render_chatml(messages, chat_template.default_system, options);
    case ChatFormat::llama3:
      return detail::render_llama3(messages, options);
    case ChatFormat::llama2:
      return detail::render_llama2(messages);
    case ChatFormat::chatml_tools:
      return detail::render_chatml_tools(messages, chat_template.default_system, options);
    case ChatFormat::gemma:
      return detail::render_gemma(messages, options);
  }
  return detail::render_chatml(messages, chat_template.default_system, options);
}

}  // namespace smol
