// The chat template flags smol-chat and smol-server share, spelled as llama-server's:
//
//   --jinja / --no-jinja          render with the template's Jinja (default) or with smol's
//                                 C++ renderer of the family it is recognized as
//   --chat-template NAME|TEXT     a template instead of the file's (chatml, smollm3, gemma,
//                                 qwen2.5, or Jinja text)
//   --chat-template-file FILE     a Jinja template file instead of the file's
//   --chat-template-kwargs JSON   more variables for the template, e.g.
//                                 '{"enable_thinking": false, "reasoning_effort": "low"}'
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/template/known_chat_templates.hpp"
#include "text_file.hpp"

namespace smol::cli {

struct ChatTemplateFlags {
  bool jinja = true;
  std::string chat_template;       // --chat-template
  std::string chat_template_file;  // --chat-template-file
  std::string kwargs;              // --chat-template-kwargs, a JSON object
};

inline void add_chat_template_flags(CLI::App& app, ChatTemplateFlags& flags) {
  app.add_flag("--jinja,!--no-jinja", flags.jinja,
               "render prompts with the chat template's own Jinja\n"
               "(default: on); --no-jinja uses smol's renderer of the\n"
               "family the template is recognized as");
  CLI::Option* text = app.add_option("--chat-template", flags.chat_template,
                                     "a chat template instead of the file's: chatml,\n"
                                     "smollm3, gemma, qwen2.5, or Jinja text")
                          ->type_name("NAME|TEXT");
  CLI::Option* file = app.add_option("--chat-template-file", flags.chat_template_file,
                                     "a Jinja chat template file instead of the file's")
                          ->type_name("FILE");
  text->excludes(file);
  file->excludes(text);
  app.add_option("--chat-template-kwargs", flags.kwargs,
                 "more variables for the template, a JSON object, e.g.\n"
                 "'{\"enable_thinking\": false}'")
      ->type_name("JSON");
}

// A JSON object's members as (name, JSON text), the form ChatOptions::template_kwargs
// takes; `what` names the flag or field in an error.
inline std::vector<std::pair<std::string, std::string>> template_kwargs(const std::string& json,
                                                                        const std::string& what) {
  std::vector<std::pair<std::string, std::string>> out;
  if (json.empty()) return out;
  const auto parsed = nlohmann::ordered_json::parse(json, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) fail(what, " must be a JSON object");
  for (const auto& [name, value] : parsed.items()) out.emplace_back(name, value.dump());
  return out;
}

inline ChatTemplateChoice chat_template_choice(const ChatTemplateFlags& flags) {
  ChatTemplateChoice choice;
  choice.jinja = flags.jinja;
  if (!flags.chat_template.empty()) choice.text = chat_template_argument(flags.chat_template);
  if (!flags.chat_template_file.empty()) {
    choice.text = read_text_file(flags.chat_template_file);
    if (choice.text.empty()) fail("--chat-template-file ", flags.chat_template_file, " is empty");
  }
  choice.kwargs = template_kwargs(flags.kwargs, "--chat-template-kwargs");
  if (!choice.jinja && !choice.text.empty()) {
    fail("--no-jinja renders smol's own layouts; it cannot run --chat-template's Jinja");
  }
  return choice;
}

}  // namespace smol::cli
