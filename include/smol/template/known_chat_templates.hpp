// Which chat template a program renders with, and which family a template is.
//
// By default the file's own template (tokenizer.chat_template) is compiled and run by
// smol's Jinja engine (file_chat_template). The table below says which family a
// template is, by its exact text (save for the holes an entry marks, kDefaultSystemHole:
// a default system prompt, read from the file), else by its markers (guess_layout): the
// family's conventions (trimming) and, with --no-jinja, the C++
// renderer that reproduces it (a guessed layout says so in a warning).
//
// tests/chat_template/ proves each entry's renderer against jinja2.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/template/chat_template.hpp"
#include "smol/template/smollm3_template.hpp"
#include "smol/text/vocabulary.hpp"
#include "smol/text/warning.hpp"

namespace smol {

// Where an entry's text holds the default system prompt. It is no Jinja syntax, so it
// never occurs in a real template.
inline constexpr std::string_view kDefaultSystemHole = "@default_system@";

// ChatML with a default system prompt: SmolLM2's template (all its Instruct sizes).
// The newlines are real ones inside the string literals, as the files carry them.
inline constexpr std::string_view kChatMLWithDefaultSystemTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\n@default_system@<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// Plain ChatML, as Hugging Face's former default template wrote it.
inline constexpr std::string_view kChatMLTemplate =
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// Qwen2.5 Instruct's template: ChatML with a default system prompt and a Hermes-style
// tool section (ChatFormat::chatml_tools). A raw literal: the text holds Jinja's own
// escapes (backslash n) and quotes; the default system prompt is the hole, twice.
inline constexpr std::string_view kQwen25Template = R"qwen({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- '@default_system@' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\n@default_system@<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)qwen";

// Gemma 3's instruct template (google/gemma-3-*-it, as their GGUF files carry it, with
// one more newline at the end: Jinja drops a template's final newline, so either text
// is this entry). The content-list branches (images) never run: smol's messages are
// strings.
inline constexpr std::string_view kGemma3ChatTemplate =
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n"
    "\n"
    "' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n"
    "\n"
    "' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate "
    "user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n"
    "' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\n"
    "' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\n"
    "'}}\n"
    "{%- endif -%}";

struct KnownChatTemplate {
  std::string_view name;   // whose template it is, for messages
  std::string_view jinja;  // the exact text, with kDefaultSystemHole where it has one
  ChatFormat format;       // the renderer that reproduces it
};

inline constexpr KnownChatTemplate kKnownChatTemplates[] = {
    {"SmolLM3 (Unsloth's edition)", kSmolLM3ChatTemplate, ChatFormat::smollm3},
    {"ChatML with a default system prompt (SmolLM2)", kChatMLWithDefaultSystemTemplate,
     ChatFormat::chatml},
    {"ChatML", kChatMLTemplate, ChatFormat::chatml},
    {"Qwen2.5 Instruct (ChatML with Hermes-style tools)", kQwen25Template,
     ChatFormat::chatml_tools},
    {"Gemma 3", kGemma3ChatTemplate, ChatFormat::gemma},
};

// The template a family's instruct models carry, for a file of that family that has none
// (general.architecture names the family). Gemma 3 files converted without their
// tokenizer's template exist (the 270M of the real-model tests is one); llama.cpp falls
// back to ChatML there, a layout Gemma was never trained on.
struct FamilyChatTemplate {
  std::string_view architecture;
  std::string_view jinja;
};

inline constexpr FamilyChatTemplate kFamilyChatTemplates[] = {
    {"gemma3", kGemma3ChatTemplate},
};

namespace detail {

// Whether `text`, spelled inside a Jinja string literal, means itself: Jinja decodes
// backslash escapes and normalizes \r\n, and a quote would end the literal, so text
// holding any of them is left unrecognized rather than decoded half right.
inline bool literal_means_itself(std::string_view text) {
  return text.find_first_of("\\'\"\r") == std::string_view::npos;
}

// `jinja` as the entry `known`, or nothing when its text is not the entry's.
inline std::optional<ChatTemplate> match_known_template(const KnownChatTemplate& known,
                                                        std::string_view jinja) {
  // Jinja renders a template without its final newline (keep_trailing_newline is off
  // in Hugging Face's environment as in Jinja's default), so one is no difference.
  if (jinja.ends_with('\n') && !known.jinja.ends_with('\n')) jinja.remove_suffix(1);
  ChatTemplate matched(known.format);
  matched.known_as = known.name;
  const std::size_t hole = known.jinja.find(kDefaultSystemHole);
  if (hole == std::string_view::npos) {
    if (jinja != known.jinja) return std::nullopt;
    return matched;
  }
  // The hole's value runs from the text before it to the first occurrence of the text
  // after it; the entry with that value filled in must then be the whole template.
  const std::string_view head = known.jinja.substr(0, hole);
  std::string_view next = known.jinja.substr(hole + kDefaultSystemHole.size());
  next = next.substr(0, next.find(kDefaultSystemHole));
  if (next.empty() || !jinja.starts_with(head)) return std::nullopt;
  const std::size_t end = jinja.find(next, head.size());
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view value = jinja.substr(head.size(), end - head.size());
  if (!literal_means_itself(value)) return std::nullopt;
  std::string expected(known.jinja);
  replace_all(expected, kDefaultSystemHole, value);
  if (jinja != expected) return std::nullopt;
  matched.default_system = std::string(value);
  return matched;
}

}  // namespace detail

// The file's template as one smol renders exactly, or nothing.
inline std::optional<ChatTemplate> recognize_template(std::string_view jinja) {
  for (const KnownChatTemplate& known : kKnownChatTemplates) {
    if (auto matched = detail::match_known_template(known, jinja)) return matched;
  }
  return std::nullopt;
}

// The family a template's markers suggest, when it is not one of the known texts: the
// layout smol's own renderers would use (`--no-jinja`), and the conventions (trimming,
// tool calls) of a file whose template the engine renders.
struct LayoutGuess {
  ChatFormat format;
  std::string_view name;
};

inline LayoutGuess guess_layout(std::string_view jinja) {
  const auto has = [&](std::string_view marker) {
    return jinja.find(marker) != std::string_view::npos;
  };
  if (has("<|im_start|>") && has("Reasoning Mode"))
    return {ChatFormat::smollm3, "SmolLM3's layout"};
  if (has("<|im_start|>")) return {ChatFormat::chatml, "plain ChatML (no default system prompt)"};
  if (has("<|start_header_id|>")) return {ChatFormat::llama3, "Llama 3's layout"};
  if (has("<start_of_turn>")) return {ChatFormat::gemma, "Gemma's layout"};
  if (has("[INST]")) return {ChatFormat::llama2, "Llama 2's layout"};
  return {ChatFormat::chatml, "plain ChatML"};
}

// The template to render a file's chat with by smol's own renderers (`--no-jinja`): the
// recognized one, else a guess from the template's markers (or ChatML), with a warning
// saying that prompts may differ from what the file's template would give.
// `architecture` (general.architecture) picks the family's template when `jinja` is empty.
inline ChatTemplate detect_template(std::string_view jinja, const WarningHandler& warn = {},
                                    std::string_view architecture = {}) {
  if (auto known = recognize_template(jinja)) return *known;
  if (jinja.empty()) {
    for (const FamilyChatTemplate& family : kFamilyChatTemplates) {
      if (family.architecture != architecture) continue;
      report_warning(warn, "the model has no chat template; using its family's (" +
                               std::string(architecture) + ")");
      return *recognize_template(family.jinja);
    }
    report_warning(warn, "the model has no chat template; using ChatML");
    return ChatFormat::chatml;
  }
  const LayoutGuess guess = guess_layout(jinja);
  const std::string message = "the model's chat template is not one smol knows exactly; " +
                              ("rendering prompts as " + std::string(guess.name)) +
                              ", which may differ from what the template itself gives";
  report_warning(warn, message);
  return guess.format;
}

// Which template a program renders with (llama-server's flags): the file's own (the
// default), a Jinja text the user gives (--chat-template-file, --chat-template TEXT) or
// names (--chat-template chatml), run by the Jinja engine; or with `jinja` off
// (--no-jinja), smol's C++ renderer of the family the template is recognized as.
struct ChatTemplateChoice {
  bool jinja = true;
  std::string text;  // the template to use instead of the file's; empty: the file's
  std::vector<std::pair<std::string, std::string>> kwargs;  // ChatTemplate::template_kwargs
};

// The names --chat-template takes, each a known template's text.
inline std::optional<std::string_view> named_chat_template(std::string_view name) {
  if (name == "chatml") return kChatMLTemplate;
  if (name == "smollm3") return kSmolLM3ChatTemplate;
  if (name == "gemma" || name == "gemma3") return kGemma3ChatTemplate;
  if (name == "qwen2.5") return kQwen25Template;
  return std::nullopt;
}

// --chat-template's value: a name above, else Jinja text (it has a {{ or {%).
inline std::string chat_template_argument(std::string_view value) {
  if (auto named = named_chat_template(value)) return std::string(*named);
  if (value.find("{{") == std::string_view::npos && value.find("{%") == std::string_view::npos) {
    fail("--chat-template '", value,
         "' is neither a template text nor one of the names "
         "chatml, smollm3, gemma, qwen2.5");
  }
  return std::string(value);
}

// `text` compiled into a ChatTemplate for `vocabulary`; `tool_use`, when not empty, is the
// file's named template for conversations with tools (tokenizer.chat_template.tool_use).
// `where` names the template's origin in an error.
inline ChatTemplate jinja_chat_template(std::string_view text, const Vocabulary& vocabulary,
                                        std::string_view where, std::string_view tool_use = {}) {
  ChatTemplate chat = recognize_template(text).value_or(ChatTemplate(guess_layout(text).format));
  const auto compile = [&](std::string_view source, std::string_view name) {
    try {
      return std::make_shared<const jinja::Template>(source);
    } catch (const jinja::TemplateError& error) {
      fail(name, " cannot be rendered: ", error.what(),
           " (give another with --chat-template-file, or --no-jinja for smol's own layouts)");
    }
  };
  chat.jinja = compile(text, where);
  if (!tool_use.empty()) chat.jinja_tool_use = compile(tool_use, cat(where, ".tool_use"));
  const auto spelling = [&](std::optional<TokenId> id) {
    return id && static_cast<std::size_t>(*id) < vocabulary.tokens.size()
               ? vocabulary.tokens[static_cast<std::size_t>(*id)]
               : std::string();
  };
  chat.bos_token = spelling(vocabulary.bos_id);
  chat.eos_token = spelling(vocabulary.eos_id);
  chat.drops_leading_bos = vocabulary.add_bos;
  return chat;
}

// The template of a model file: its tokenizer.chat_template (or its family's when it has
// none), as `choice` says.
inline ChatTemplate file_chat_template(const gguf::GgufFile& file, const Vocabulary& vocabulary,
                                       const WarningHandler& warn = {},
                                       const ChatTemplateChoice& choice = {}) {
  const std::string architecture =
      file.get_optional<std::string>("general.architecture").value_or("");
  std::string text = choice.text.empty()
                         ? file.get_optional<std::string>("tokenizer.chat_template").value_or("")
                         : choice.text;
  if (!choice.jinja) return detect_template(text, warn, architecture);
  ChatTemplate chat;
  if (text.empty()) {
    for (const FamilyChatTemplate& family : kFamilyChatTemplates) {
      if (family.architecture == architecture) text = family.jinja;
    }
    report_warning(warn, text.empty() ? "the model has no chat template; using ChatML"
                                      : "the model has no chat template; using its family's (" +
                                            architecture + ")");
    if (text.empty()) text = kChatMLTemplate;
  }
  const std::string tool_use =
      choice.text.empty()
          ? file.get_optional<std::string>("tokenizer.chat_template.tool_use").value_or("")
          : std::string();
  chat = jinja_chat_template(text, vocabulary,
                             choice.text.empty() ? "the model's chat template" : "--chat-template",
                             tool_use);
  chat.template_kwargs = choice.kwargs;
  return chat;
}

}  // namespace smol
