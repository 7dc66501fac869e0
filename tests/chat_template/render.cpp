// Renders a table of conversations with smol's chat templates, for the comparison with
// jinja2 (compare_with_jinja.py).
//
//   render_chat_template TEMPLATE CONVERSATIONS
//
// TEMPLATE is a GGUF file (its tokenizer.chat_template) or a text file holding the
// Jinja text itself; CONVERSATIONS is the table (conversations.json). Prints JSON:
// {"known_as": the known template it was recognized as, or null; "warnings": [...];
// "renders": {case name: prompt text, or null when the template refuses it}}. A
// template smol does not recognize is still rendered (with its warning), so the
// comparison can show how far the guess is off.
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "smol/core/error.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/serve/tool_calls.hpp"
#include "smol/template/chat_template.hpp"
#include "smol/template/known_chat_templates.hpp"
#include "smol/text/gguf_vocabulary.hpp"

namespace {

std::string read_template(const std::string& path) {
  if (path.ends_with(".gguf")) {
    return smol::gguf::GgufFile::open(path).get<std::string>("tokenizer.chat_template");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) smol::fail(path, ": cannot open");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Read in the file's order: a tool's JSON (and a call's arguments) is written in the
// order its members came, as Python keeps them.
std::vector<smol::ChatMessage> messages_of(const nlohmann::ordered_json& conversation) {
  std::vector<smol::ChatMessage> messages;
  for (const auto& message : conversation.at("messages")) {
    smol::ChatMessage m{
        message.at("role").get<std::string>(),
        message.at("content").is_null() ? std::string() : message.at("content").get<std::string>()};
    if (message.contains("tool_calls")) {
      for (const auto& call : message.at("tool_calls")) {
        const auto& function = call.at("function");
        m.tool_calls.push_back({function.at("name").get<std::string>(),
                                smol::serve::python_json(function.at("arguments"))});
      }
    }
    messages.push_back(std::move(m));
  }
  return messages;
}

std::vector<std::string> tools_of(const nlohmann::ordered_json& conversation) {
  std::vector<std::string> tools;
  if (conversation.contains("tools")) {
    for (const auto& tool : conversation.at("tools")) {
      tools.push_back(smol::serve::python_json(tool));
    }
  }
  return tools;
}

}  // namespace

int main(int argc, char** argv) {
  const bool engine = argc >= 4 && std::string_view(argv[3]) == "--jinja";
  if (argc != 3 && !(engine && (argc == 4 || argc == 6))) {
    std::fprintf(stderr, "usage: %s TEMPLATE CONVERSATIONS [--jinja [BOS EOS]]\n", argv[0]);
    return 2;
  }
  try {
    std::vector<std::string> warnings;
    const std::string text = read_template(argv[1]);
    smol::ChatTemplate chat_template = smol::detect_template(
        text, [&](std::string_view warning) { warnings.emplace_back(warning); });
    if (engine) {
      // The same conversations through the Jinja engine, as a program renders a file's
      // template: the file's vocabulary, or one of just the given bos and eos.
      smol::Vocabulary vocabulary;
      if (std::string_view(argv[1]).ends_with(".gguf")) {
        vocabulary = smol::load_vocabulary(smol::gguf::GgufFile::open(argv[1]));
      } else {
        vocabulary.tokens = {argc == 6 ? argv[4] : "<s>", argc == 6 ? argv[5] : "</s>"};
        vocabulary.bos_id = 0;
        vocabulary.eos_id = 1;
        // compare_with_jinja.py drops the bos of templates that begin by writing it;
        // ChatTemplate drops it when the tokenizer adds one (add_bos, as llama.cpp).
        vocabulary.add_bos = text.starts_with("{{ bos_token }}");
      }
      const std::string_view known_as = chat_template.known_as;
      chat_template = smol::jinja_chat_template(text, vocabulary, argv[1]);
      chat_template.known_as = known_as;
      warnings.clear();
    }

    nlohmann::json out;
    out["known_as"] = chat_template.known_as.empty()
                          ? nlohmann::json(nullptr)
                          : nlohmann::json(std::string(chat_template.known_as));
    out["warnings"] = warnings;
    out["renders"] = nlohmann::json::object();
    std::ifstream cases(argv[2], std::ios::binary);
    if (!cases) smol::fail(argv[2], ": cannot open");
    const auto table = nlohmann::ordered_json::parse(cases);
    for (const auto& conversation : table.at("conversations")) {
      const smol::ChatOptions options{
          .add_generation_prompt = conversation.at("add_generation_prompt").get<bool>(),
          .enable_thinking = conversation.value("enable_thinking", true),
          .tools = tools_of(conversation)};
      nlohmann::json& render = out["renders"][conversation.at("name").get<std::string>()];
      try {
        render = smol::render_chat(chat_template, messages_of(conversation), options);
      } catch (const smol::ChatTemplateError&) {
        render = nullptr;  // refused, as the template's Jinja refuses it
      }
    }
    std::cout << out.dump(1, ' ', /*ensure_ascii=*/true) << '\n';
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "render_chat_template: %s\n", error.what());
    return 1;
  }
}
