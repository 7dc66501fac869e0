// Each family's tool-call syntax (serve/tool_call_formats.hpp): recognized from its
// template, forced by its grammar, read back by its reader, streamed as read whole.
//
// The call texts below are what each family's own chat template writes for an
// assistant turn with one and with two calls, as Python's jinja2 renders the real
// template (llama.cpp's models/templates/, the corpus tests/chat_template/ fetches):
// what the model was trained to write, so what the grammar must allow and the reader
// must read. Granite 3.3's template writes no earlier calls; its text is the format its
// system prompt asks for.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/grammar/recognizer.hpp"
#include "smol/serve/openai_protocol.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_tool_call_formats {

namespace {

using smol::serve::ToolCallReader;
using smol::serve::ToolCallSyntax;
using smol::serve::ToolRequest;

struct FamilyCase {
  std::string_view family;
  std::string marker_text;  // template text that holds the family's markers
  std::string one, two;     // get_weather(Paris) alone; then get_time(CET) after it
};

// The two calls of every case (compact, as the reader gives arguments).
const std::vector<std::pair<std::string, std::string>> kCalls = {
    {"get_weather", R"({"city":"Paris"})"}, {"get_time", R"({"tz":"CET"})"}};

const std::vector<FamilyCase>& cases() {
  static const std::vector<FamilyCase> all = {
      {"Hermes", "{{- '<tool_call>\\n' }}",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\"}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
       "\"Paris\"}}\n</tool_call>"
       "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>"},
      {"Qwen3-Coder (XML parameters)", "<tool_call> <function= <parameter=",
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
       "</tool_call>",
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
       "</tool_call>\n<tool_call>\n<function=get_time>\n<parameter=tz>\nCET\n</parameter>\n"
       "</function>\n</tool_call>"},
      // Functionary: the generation prompt ends with ">>>", which the reply continues.
      {"Functionary v3.2", "{{ '>>>all\\n' + message['content'] }}",
       "get_weather\n{\"city\": \"Paris\"}",
       "get_weather\n{\"city\": \"Paris\"}>>>get_time\n{\"tz\": \"CET\"}"},
      {"Llama 3.x", "<|start_header_id|>ipython<|end_header_id|>",
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", ""},
      {"Mistral Nemo", "[TOOL_CALLS]",
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
       "\"abc123XYZ\"}]",
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
       "\"abc123XYZ\"}, {\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}, \"id\": "
       "\"def456ZWQ\"}]"},
      {"Mistral Small 3.2", "[TOOL_CALLS] [CALL_ID] [ARGS]",
       "[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{\"city\": \"Paris\"}",
       "[TOOL_CALLS]get_weather[CALL_ID]abc123XYZ[ARGS]{\"city\": \"Paris\"}"
       "[TOOL_CALLS]get_time[CALL_ID]def456ZWQ[ARGS]{\"tz\": \"CET\"}"},
      {"Mistral (Devstral, Ministral 3)", "[TOOL_CALLS] [ARGS]",
       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}",
       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{\"tz\": "
       "\"CET\"}"},
      {"DeepSeek R1", "<｜tool▁calls▁begin｜> ```json",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"
       "\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"
       "\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
       "get_time\n```json\n{\"tz\": \"CET\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {"DeepSeek V3.1", "<｜tool▁calls▁begin｜> <｜tool▁sep｜>",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": "
       "\"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": "
       "\"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"tz\": "
       "\"CET\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {"Command R7B", "<|END_THINKING|><|START_ACTION|> <|END_ACTION|>",
       "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", "
       "\"parameters\": {\"city\": \"Paris\"}}\n]<|END_ACTION|>",
       "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", "
       "\"parameters\": {\"city\": \"Paris\"}},\n    {\"tool_call_id\": \"1\", \"tool_name\": "
       "\"get_time\", \"parameters\": {\"tz\": \"CET\"}}\n]<|END_ACTION|>"},
      {"Granite 3", "<|tool_call|> {%- elif thinking %}",
       "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
       "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
       "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}]"},
      {"Kimi K2", "<|tool_calls_section_begin|><|tool_call_begin|>",
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_"
       "argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_"
       "argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions."
       "get_time:1<|tool_call_argument_begin|>{\"tz\": \"CET\"}<|tool_call_end|><|tool_calls_"
       "section_end|>"},
  };
  return all;
}

const std::string kTools = R"("tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
      "properties": {"tz": {"enum": ["UTC", "CET"]}}, "required": ["tz"],
      "additionalProperties": false}}}])";

smol::serve::ChatCompletionRequest request(const ToolCallSyntax* syntax, const std::string& more) {
  smol::serve::RequestDefaults defaults;
  defaults.tool_syntax = syntax;
  return smol::serve::parse_chat_request(
      R"({"messages": [{"role": "user", "content": "Hi"}], )" + kTools + more + "}", defaults);
}

bool grammar_accepts(const smol::serve::OutputGrammar& output, const std::string& text) {
  smol::GrammarRecognizer recognizer(output.grammar);
  smol::GrammarState state = recognizer.initial();
  return recognizer.advance(state, text) && smol::GrammarRecognizer::can_end(state);
}

// A reply read in pieces of `step` bytes, gathered as read_family_reply gathers them.
smol::serve::ToolReply streamed(const std::string& text, const ToolCallSyntax& syntax,
                                const ToolRequest& tools, std::size_t step) {
  ToolCallReader reader(syntax, tools);
  std::vector<ToolCallReader::Event> events;
  for (std::size_t at = 0; at < text.size(); at += step) {
    for (auto& e : reader.push(std::string_view(text).substr(at, step))) events.push_back(e);
  }
  for (auto& e : reader.finish()) events.push_back(e);
  smol::serve::ToolReply reply;
  for (const auto& e : events) {
    if (e.kind == ToolCallReader::Kind::content)
      reply.content = reply.content.value_or("") + e.text;
    if (e.kind == ToolCallReader::Kind::call) reply.calls.push_back({"", e.text, ""});
    if (e.kind == ToolCallReader::Kind::arguments) reply.calls.at(e.index).arguments += e.text;
  }
  return reply;
}

void check_calls(const smol::serve::ToolReply& reply, std::size_t count) {
  REQUIRE(reply.calls.size() == count);
  for (std::size_t i = 0; i < count; ++i) {
    CHECK(reply.calls[i].name == kCalls[i].first);
    CHECK(reply.calls[i].arguments == kCalls[i].second);
  }
}

}  // namespace

TEST_CASE("each family: recognized, forced, read back, streamed as read whole") {
  for (const FamilyCase& c : cases()) {
    CAPTURE(c.family);
    const ToolCallSyntax* syntax = smol::serve::tool_call_syntax_named(c.family);
    REQUIRE(syntax != nullptr);
    CHECK(smol::serve::recognize_tool_call_syntax(c.marker_text) == syntax);

    // required: the template's own text for one call (and two, where the family has
    // several per turn); nothing else.
    const auto required = request(syntax, R"(, "tool_choice": "required")");
    REQUIRE(required.params.output.has_value());
    CHECK_FALSE(required.params.output_trigger.has_value());
    CHECK(grammar_accepts(*required.params.output, c.one));
    if (!c.two.empty()) CHECK(grammar_accepts(*required.params.output, c.two));
    CHECK_FALSE(grammar_accepts(*required.params.output, "Hello"));
    CHECK_FALSE(grammar_accepts(*required.params.output, ""));
    std::string wrong_city = c.one;  // city must be a string, and is required
    if (const std::size_t quoted = wrong_city.find("\"Paris\""); quoted != std::string::npos) {
      wrong_city.replace(quoted, 7, "7");
    } else {
      const std::string element = "<parameter=city>\nParis\n</parameter>\n";
      wrong_city.erase(wrong_city.find(element), element.size());
    }
    CHECK_FALSE(grammar_accepts(*required.params.output, wrong_city));
    std::string unknown = c.one;
    unknown.replace(unknown.find("get_weather"), 11, "get_whether");
    CHECK_FALSE(grammar_accepts(*required.params.output, unknown));
    // One call only: parallel_tool_calls false, or a named function.
    const auto single =
        request(syntax, R"(, "tool_choice": "required", "parallel_tool_calls": false)");
    CHECK(grammar_accepts(*single.params.output, c.one));
    if (!c.two.empty()) CHECK_FALSE(grammar_accepts(*single.params.output, c.two));
    const auto named = request(
        syntax, R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}})");
    CHECK_FALSE(grammar_accepts(*named.params.output, c.one));

    // auto: a lazy grammar from the trigger, which the calls begin with.
    const auto automatic = request(syntax, "");
    if (syntax->prompt_opens_call) {
      // A reply that begins inside a call has no trigger to wait for: free, read back.
      CHECK_FALSE(automatic.params.output.has_value());
    } else {
      REQUIRE(automatic.params.output_trigger.has_value());
      CHECK(automatic.params.output_trigger->text == syntax->trigger);
      CHECK(c.one.starts_with(syntax->trigger));
      CHECK(grammar_accepts(*automatic.params.output, c.one));
    }
    CHECK(automatic.enable_thinking);  // the reasoning stays free

    // Read back, whole and in pieces alike.
    const ToolRequest& tools = *automatic.tools;
    REQUIRE(tools.syntax == syntax);
    for (const std::string& text : {c.one, c.two}) {
      if (text.empty()) continue;
      const std::size_t count = text == c.one ? 1 : 2;
      const smol::serve::ToolReply whole = smol::serve::read_tool_reply(text, tools, "id_");
      check_calls(whole, count);
      CHECK(whole.content == std::nullopt);
      // Ids: ours, or nine letters and digits where the family's template checks them.
      if (syntax->id == smol::serve::CallId::mistral) {
        CHECK(whole.calls[0].id.size() == 9);
        CHECK(whole.calls[0].id.find_first_not_of(
                  "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") ==
              std::string::npos);
        if (count == 2) CHECK(whole.calls[1].id != whole.calls[0].id);
      } else {
        CHECK(whole.calls[0].id == "id_0");
      }
      for (const std::size_t step : {1, 2, 5, 13}) {
        CAPTURE(step);
        const smol::serve::ToolReply pieces = streamed(text, *syntax, tools, step);
        check_calls(pieces, count);
        CHECK(pieces.content == whole.content);
      }
      // The end-of-generation marker some families write after their calls is no text.
      check_calls(smol::serve::read_tool_reply(text + "\n", tools, "id_"), count);
    }
    if (syntax->prompt_opens_call) {
      // Text is the "all" recipient's message, before or between calls.
      const smol::serve::ToolReply with_text =
          smol::serve::read_tool_reply("all\nLet me look.\n>>>" + c.one, tools, "id_");
      check_calls(with_text, 1);
      CHECK(with_text.content == "Let me look.");
      const smol::serve::ToolReply answer =
          smol::serve::read_tool_reply("all\nJust an answer.", tools, "id_");
      CHECK(answer.calls.empty());
      CHECK(answer.content == "Just an answer.");
    } else if (!syntax->at_start) {
      // Text before the calls is the content.
      const smol::serve::ToolReply with_text =
          smol::serve::read_tool_reply("Let me look.\n\n" + c.one, tools, "id_");
      check_calls(with_text, 1);
      CHECK(with_text.content == "Let me look.");
    }
    // Not a call of the request's tools, cut short inside its arguments (a reply that
    // ends after them, its closing marker missing, is a call: some families end the
    // generation with it), or plain text: content, whole.
    for (const std::string& text : {unknown, c.one.substr(0, c.one.find("Paris") + 3),
                                    std::string("Just {\"text\"} [here]")}) {
      CAPTURE(text);
      const smol::serve::ToolReply plain = smol::serve::read_tool_reply(text, tools, "id_");
      CHECK(plain.calls.empty());
      CHECK(plain.content == text);
      const smol::serve::ToolReply pieces = streamed(text, *syntax, tools, 3);
      CHECK(pieces.calls.empty());
      CHECK(pieces.content == text);
    }
  }
}

TEST_CASE("XML parameters: a parameter's references mean what they meant in its function") {
  const ToolCallSyntax* xml = smol::serve::tool_call_syntax_named("Qwen3-Coder (XML parameters)");
  REQUIRE(xml != nullptr);
  smol::serve::RequestDefaults defaults;
  defaults.tool_syntax = xml;
  // Pydantic v1's "definitions", a pointer into the properties, and "#" itself.
  const auto r = smol::serve::parse_chat_request(
      R"({"messages": [{"role": "user", "content": "Hi"}], "tool_choice": "required",
          "tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "required": ["loc"],
            "properties": {"loc": {"$ref": "#/definitions/Loc"},
                           "near": {"type": "array", "items": {"$ref": "#/properties/loc"}},
                           "again": {"$ref": "#"}},
            "definitions": {"Loc": {"type": "object", "properties": {"x": {"type": "integer"}},
                                    "required": ["x"], "additionalProperties": false}}}}}]})",
      defaults);
  REQUIRE(r.params.output.has_value());
  const auto call = [](const std::string& parameters) {
    return "<tool_call>\n<function=f>\n" + parameters + "</function>\n</tool_call>";
  };
  const std::string loc = "<parameter=loc>\n{\"x\": 1}\n</parameter>\n";
  CHECK(grammar_accepts(*r.params.output, call(loc)));
  CHECK_FALSE(
      grammar_accepts(*r.params.output, call("<parameter=loc>\n{\"y\": 1}\n</parameter>\n")));
  CHECK(grammar_accepts(*r.params.output,
                        call(loc + "<parameter=near>\n[{\"x\": 2}]\n</parameter>\n")));
  CHECK(grammar_accepts(*r.params.output,
                        call(loc + "<parameter=again>\n{\"loc\": {\"x\": 3}}\n</parameter>\n")));
  CHECK_FALSE(grammar_accepts(*r.params.output,
                              call(loc + "<parameter=again>\n{\"near\": []}\n</parameter>\n")));
  const smol::serve::ToolReply reply = smol::serve::read_tool_reply(
      call(loc + "<parameter=near>\n[{\"x\": 2}]\n</parameter>\n"), *r.tools, "id_");
  REQUIRE(reply.calls.size() == 1);
  CHECK(reply.calls[0].arguments == R"({"loc":{"x":1},"near":[{"x":2}]})");
}

TEST_CASE("recognition: the generic format for templates without a known syntax") {
  CHECK(smol::serve::recognize_tool_call_syntax("{{ messages }}") == nullptr);
  // A <function=...> block without <parameter=...> elements is no Hermes JSON, nor are
  // GLM's <arg_key> pairs.
  CHECK(smol::serve::recognize_tool_call_syntax("<tool_call>\n<function=x>") == nullptr);
  CHECK(smol::serve::recognize_tool_call_syntax("<tool_call><arg_key>") == nullptr);
  // Functionary v3.1 writes <function=...> inside a Llama 3 template.
  CHECK(smol::serve::recognize_tool_call_syntax(
            "<|start_header_id|>ipython<|end_header_id|> <function=") == nullptr);
}

TEST_CASE("a syntax's marker tokens: the vocabulary's control tokens that spell its literals") {
  const smol::gguf::GgufFile file =
      smol::gguf::GgufFile::open(std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf");
  const smol::Tokenizer tokenizer(smol::load_vocabulary(file));
  const std::optional<smol::TokenId> start = tokenizer.find_token("<|im_start|>");
  const std::optional<smol::TokenId> end = tokenizer.find_token("<|im_end|>");
  REQUIRE(start.has_value());
  REQUIRE(end.has_value());
  REQUIRE(tokenizer.is_end_of_generation(*end));
  // A syntax spelled with the fixture's control tokens (the real families' markers are
  // control tokens of their own vocabularies, which this one lacks).
  const ToolCallSyntax syntax{.family = "test",
                              .trigger = "<|im_start|>",
                              .call_open = "<|im_start|>call ",
                              .call_close = "<|im_end|>"};
  CHECK(smol::serve::syntax_marker_tokens(tokenizer, &syntax) ==
        std::vector<smol::TokenId>{*start});  // not the end-of-generation token
  CHECK(smol::serve::syntax_marker_tokens(tokenizer, nullptr).empty());
  // The real families' markers are plain text in this vocabulary: none.
  for (const ToolCallSyntax& family : smol::serve::kToolCallSyntaxes) {
    CAPTURE(family.family);
    CHECK(smol::serve::syntax_marker_tokens(tokenizer, &family).empty());
  }
}

}  // namespace test_tool_call_formats
