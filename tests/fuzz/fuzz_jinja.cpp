// libFuzzer target: bytes as a Jinja chat template (smol/template/jinja.hpp).
//
// The input is the template's source; it is parsed, then rendered twice against a small
// fixed chat context (three messages with a tool call whose arguments are a dict, a tool
// list, add_generation_prompt, bos and eos, raise_exception and strftime_now at a fixed
// instant, and a string that is not UTF-8) under tight budgets. Every input must end in
// a rendered text or a smol::Error (TemplateError, TemplateRaised): never a crash, an
// out-of-bounds read, another exception, a leak, a hang (-timeout) or a runaway
// allocation (-rss_limit_mb). A rendering must also keep within its output budget and
// come out the same both times.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "smol/core/error.hpp"
#include "smol/template/chat_context.hpp"
#include "smol/template/jinja.hpp"

namespace {

namespace jinja = smol::jinja;

jinja::Dict dict(std::initializer_list<std::pair<const char*, jinja::Value>> entries) {
  jinja::Dict out;
  for (const auto& [key, value] : entries) out.set(key, value);
  return out;
}

jinja::Dict make_context() {
  const jinja::Value call = dict(
      {{"id", "call_1"},
       {"type", "function"},
       {"function", dict({{"name", "get_weather"},
                          {"arguments", dict({{"city", "Paris"},
                                              {"days", 3},
                                              {"units", jinja::List{"C", jinja::None{}}}})}})}});
  jinja::List messages{
      dict({{"role", "system"}, {"content", "You are terse.\n"}}),
      dict({{"role", "user"}, {"content", "Weather in Paris? \"é\" <b>&</b>"}}),
      dict({{"role", "assistant"},
            {"content", jinja::None{}},
            {"reasoning_content", "Call the tool."},
            {"tool_calls", jinja::List{call}}}),
  };
  const jinja::Value parameters = dict(
      {{"type", "object"},
       {"properties", dict({{"city", dict({{"type", "string"}, {"description", "A city"}})},
                            {"days", dict({{"type", "integer"}})}})},
       {"required", jinja::List{"city"}}});
  jinja::List tools{dict(
      {{"type", "function"},
       {"function", dict({{"name", "get_weather"},
                          {"description", "Forecast"},
                          {"parameters", parameters}})}})};
  jinja::Dict context;
  context.set("messages", messages);
  context.set("tools", tools);
  context.set("add_generation_prompt", true);
  context.set("enable_thinking", false);
  context.set("bos_token", "<s>");
  context.set("eos_token", "</s>");
  context.set("documents", jinja::None{});
  // The template is checked for UTF-8, but a caller's strings are not: a cut sequence,
  // a stray byte, an encoded surrogate.
  context.set("invalid_utf8", "a\xff\xc3\xa9\xed\xa0\x80z\xc3");
  smol::add_transformers_globals(context, std::time_t{1700000000});
  return context;
}

const jinja::Dict& context() {
  static const jinja::Dict instance = make_context();
  return instance;
}

constexpr jinja::RenderLimits kLimits{
    .max_steps = 200'000, .max_output_bytes = 1u << 20, .max_call_depth = 50};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  context();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  std::optional<jinja::Template> chat;
  std::string first;
  try {
    chat.emplace(source);
    first = chat->render(context(), kLimits);
  } catch (const smol::Error&) {
    return 0;  // a syntax error, a runtime error, an exceeded budget, a raise_exception
  }
  if (first.size() > kLimits.max_output_bytes) __builtin_trap();
  // Rendering leaves the parsed template as it was: the same context, the same text. A
  // second render that throws where the first did not escapes as a finding too.
  if (chat->render(context(), kLimits) != first) __builtin_trap();
  return 0;
}
