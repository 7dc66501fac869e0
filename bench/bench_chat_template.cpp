// How long the Jinja engine takes to render a long conversation with tools, the work a
// server does for every chat request before tokenizing.
//
//   qwen3_render        Qwen3's template (llama.cpp's models/templates copy, from the
//                       test corpus: build the tests or run fetch_template_corpus.py),
//                       50 messages (user, assistant, tool calls and results), 10 tools
//   qwen3_parse         compiling that template (once per model load)
//   qwen25_render       Qwen2.5's template on the same conversation, by the engine
//   qwen25_cxx_render   the same prompt by smol's C++ renderer of that family, the
//                       yardstick the engine is compared with in the same run
// The corpus folder is SMOL_BENCH_TEMPLATE_CORPUS, or $SMOL_TEMPLATE_CORPUS.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/template/chat_template.hpp"
#include "smol/template/jinja.hpp"
#include "smol/template/known_chat_templates.hpp"

namespace bench_chat_template {

std::string read_corpus_template(const std::string& name) {
  const char* folder = std::getenv("SMOL_TEMPLATE_CORPUS");
  const std::string path = std::string(folder ? folder : SMOL_BENCH_TEMPLATE_CORPUS) + "/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) smol::fail(path, ": cannot open (build the tests, or run fetch_template_corpus.py)");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> tools() {
  std::vector<std::string> out;
  for (int i = 0; i < 10; ++i) {
    const std::string n = std::to_string(i);
    out.push_back(
        R"({"type": "function", "function": {"name": "tool_)" + n +
        R"(", "description": "Looks something up in source )" + n +
        R"( and returns what it found, with its date.", "parameters": {"type": "object", )"
        R"("properties": {"query": {"type": "string", "description": "what to look for"}, )"
        R"("limit": {"type": "integer", "description": "how many results", "default": 5}, )"
        R"("units": {"type": "string", "enum": ["metric", "imperial"]}}, )"
        R"("required": ["query"]}}})");
  }
  return out;
}

std::vector<smol::ChatMessage> conversation() {
  std::vector<smol::ChatMessage> messages{
      {"system", "You are a careful assistant. Answer briefly and cite your tools."}};
  const std::string question =
      "Could you tell me what the weather will be like in Paris tomorrow, and whether I "
      "should take an umbrella with me when I go out in the afternoon?";
  const std::string answer =
      "Tomorrow Paris expects light rain in the afternoon, around 14 degrees, so an "
      "umbrella is a good idea; the morning should stay dry.";
  while (messages.size() < 50) {
    messages.push_back({"user", question});
    if (messages.size() % 8 == 2) {
      messages.push_back(
          {"assistant", "", {{"tool_3", R"({"query": "Paris weather tomorrow", "limit": 3})"}}});
      messages.push_back({"tool", R"({"forecast": "light rain", "high": 14, "low": 8})"});
    }
    messages.push_back({"assistant", answer});
  }
  messages.resize(49);
  messages.push_back({"user", question});
  return messages;
}

smol::ChatTemplate engine_template(const std::string& text) {
  smol::Vocabulary vocabulary;
  vocabulary.tokens = {"<|endoftext|>", "<|im_end|>"};
  vocabulary.eos_id = 1;
  return smol::jinja_chat_template(text, vocabulary, "the benchmark's template");
}

void render(benchmark::State& state, const smol::ChatTemplate& chat) {
  const std::vector<smol::ChatMessage> messages = conversation();
  const smol::ChatOptions options{.tools = tools(), .now = 1768478400};
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string prompt = smol::render_chat(chat, messages, options);
    bytes = prompt.size();
    benchmark::DoNotOptimize(prompt.data());
  }
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
  state.counters["messages"] = static_cast<double>(messages.size());
}

void qwen3_render(benchmark::State& state) {
  render(state, engine_template(read_corpus_template("Qwen-Qwen3-0.6B.jinja")));
}

void qwen3_parse(benchmark::State& state) {
  const std::string text = read_corpus_template("Qwen-Qwen3-0.6B.jinja");
  for (auto _ : state) {
    smol::jinja::Template compiled(text);
    benchmark::DoNotOptimize(&compiled);
  }
}

void qwen25_render(benchmark::State& state) {
  render(state, engine_template(read_corpus_template("Qwen-Qwen2.5-7B-Instruct.jinja")));
}

void qwen25_cxx_render(benchmark::State& state) {
  const auto known =
      smol::recognize_template(read_corpus_template("Qwen-Qwen2.5-7B-Instruct.jinja"));
  if (!known) smol::fail("Qwen2.5's template is not the known one");
  render(state, *known);
}

BENCHMARK(qwen3_render)->Unit(benchmark::kMicrosecond);
BENCHMARK(qwen3_parse)->Unit(benchmark::kMicrosecond);
BENCHMARK(qwen25_render)->Unit(benchmark::kMicrosecond);
BENCHMARK(qwen25_cxx_render)->Unit(benchmark::kMicrosecond);

}  // namespace bench_chat_template
