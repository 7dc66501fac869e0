// render_jinja_template: renders a table of conversations with smol's Jinja engine, for
// compare_corpus.py to compare with jinja2's renderings; or a table of small templates,
// each with its own context, for compare_snippets.py.
//
//   render_jinja_template --template FILE --cases JSON --bos TEXT --eos TEXT --now EPOCH
//   render_jinja_template --snippets JSON [--now EPOCH]
//
// Prints {"renders": {name: text or null}, "errors": {name: {"kind", "message"}}}; a
// template that does not parse is a message on stderr and exit status 1. The context is
// what transformers' apply_chat_template gives: messages (each assistant tool call's
// `arguments` string parsed into an object, as llama-server does), add_generation_prompt,
// bos_token, eos_token, tools (None when the case has none) and documents (None), as
// transformers passes them, and the case's kwargs.
//
// --snippets reads {"snippets": [{"name", "template", "context": {...}}]} and prints the
// same JSON, one entry per snippet; the context is the snippet's, as it is, with
// raise_exception and strftime_now (at EPOCH, 2026-01-15 12:00:00 UTC unless given). A
// snippet whose template does not parse is an error of kind "error", not exit status 1.
#include <cstdio>
#include <ctime>
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "smol/template/chat_context.hpp"
#include "smol/template/jinja.hpp"

namespace {

using Json = nlohmann::ordered_json;

smol::jinja::Value to_value(const Json& json) {
  switch (json.type()) {
    case Json::value_t::null:
      return smol::jinja::None{};
    case Json::value_t::boolean:
      return json.get<bool>();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return json.get<std::int64_t>();
    case Json::value_t::number_float:
      return json.get<double>();
    case Json::value_t::string:
      return json.get<std::string>();
    case Json::value_t::array: {
      smol::jinja::List list;
      for (const Json& item : json) list.push_back(to_value(item));
      return list;
    }
    case Json::value_t::object: {
      smol::jinja::Dict dict;
      for (const auto& [key, item] : json.items()) dict.set(key, to_value(item));
      return dict;
    }
    default:
      return smol::jinja::None{};
  }
}

std::string read_file(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw std::runtime_error("cannot open " + path);
  std::string text;
  char buffer[65536];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
  std::fclose(file);
  return text;
}

// What one render gave: the text, or the error as {"kind", "message"}.
template <typename Render>
void record(const std::string& name, Json& renders, Json& errors, Render&& render) {
  try {
    renders[name] = render();
  } catch (const smol::jinja::TemplateRaised& e) {
    renders[name] = nullptr;
    errors[name] = {{"kind", "raised"}, {"message", e.what()}};
  } catch (const smol::Error& e) {
    renders[name] = nullptr;
    errors[name] = {{"kind", "error"}, {"message", e.what()}};
  }
}

int render_snippets(const std::string& path, std::time_t now) {
  const Json table = Json::parse(read_file(path));
  Json renders = Json::object(), errors = Json::object();
  for (const Json& snippet : table["snippets"]) {
    const std::string name = snippet["name"];
    const std::string source = snippet["template"];
    smol::jinja::Dict context;
    if (snippet.contains("context")) {
      for (const auto& [key, value] : snippet["context"].items()) {
        context.set(key, to_value(value));
      }
    }
    smol::add_transformers_globals(context, now);
    // The template is parsed inside: a parse error is this snippet's error.
    record(name, renders, errors, [&] { return smol::jinja::Template(source).render(context); });
  }
  std::cout << Json{{"renders", renders}, {"errors", errors}}.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string template_path, cases_path, snippets_path, bos = "<s>", eos = "</s>";
  std::time_t now = 1768478400;  // 2026-01-15 12:00:00 UTC
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--template")
      template_path = value;
    else if (flag == "--cases")
      cases_path = value;
    else if (flag == "--snippets")
      snippets_path = value;
    else if (flag == "--bos")
      bos = value;
    else if (flag == "--eos")
      eos = value;
    else if (flag == "--now")
      now = static_cast<std::time_t>(std::stoll(value));
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (!snippets_path.empty()) {
    try {
      return render_snippets(snippets_path, now);
    } catch (const std::exception& e) {
      std::cerr << snippets_path << ": " << e.what() << "\n";
      return 1;
    }
  }
  try {
    const smol::jinja::Template chat(read_file(template_path));
    const Json cases = Json::parse(read_file(cases_path));
    Json renders = Json::object(), errors = Json::object();
    for (const Json& conversation : cases["conversations"]) {
      const std::string name = conversation["name"];
      Json messages = conversation["messages"];
      for (Json& message : messages) {
        if (!message.contains("tool_calls")) continue;
        for (Json& call : message["tool_calls"]) {
          Json& arguments = call["function"]["arguments"];
          if (arguments.is_string()) arguments = Json::parse(arguments.get<std::string>());
        }
      }
      smol::jinja::Dict context;
      context.set("messages", to_value(messages));
      context.set("add_generation_prompt", conversation.value("add_generation_prompt", true));
      context.set("bos_token", bos);
      context.set("eos_token", eos);
      // transformers passes tools and documents always, None when there are none.
      context.set("tools", conversation.contains("tools")
                               ? to_value(conversation["tools"])
                               : smol::jinja::Value(smol::jinja::None{}));
      context.set("documents", smol::jinja::None{});
      if (conversation.contains("kwargs")) {
        for (const auto& [key, value] : conversation["kwargs"].items()) {
          context.set(key, to_value(value));
        }
      }
      smol::add_transformers_globals(context, now);
      record(name, renders, errors, [&] { return chat.render(context); });
    }
    std::cout << Json{{"renders", renders}, {"errors", errors}}.dump() << "\n";
  } catch (const std::exception& e) {
    std::cerr << template_path << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
