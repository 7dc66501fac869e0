// The OpenAI protocol without a socket: requests parsed field by field with their
// errors naming the field, replies and stream chunks in OpenAI's shapes, the reasoning
// apart or folded, and streamed deltas that add up to the non-streamed message.
#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

#include "smol/grammar/recognizer.hpp"
#include "smol/serve/anthropic_messages.hpp"
#include "smol/serve/context_shift.hpp"
#include "smol/serve/openai_protocol.hpp"
#include "smol/serve/openai_responses.hpp"
#include "smol/serve/rerank.hpp"
#include "smol/serve/response_store.hpp"
#include "smol/template/chat_template.hpp"
#include "smol/testing/synthetic_vocabulary.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_serve_protocol {

namespace {

using smol::serve::ApiError;
using smol::serve::Json;
using smol::serve::parse_chat_request;

const std::string kHi = R"("messages": [{"role": "user", "content": "Hi"}])";

std::string body(const std::string& fields) {
  return "{" + kHi + (fields.empty() ? "" : ", " + fields) + "}";
}

// The ApiError `parse` throws for `text` (each wire format's parser).
template <class Parse>
ApiError refusal_of(Parse parse, const std::string& text) {
  try {
    parse(text);
  } catch (const ApiError& error) {
    return error;
  }
  FAIL("accepted: " << text);
  return ApiError(0, "", "");
}

// The 400 a body gets, as (param, message).
ApiError rejection(const std::string& text) {
  return refusal_of([](const std::string& t) { parse_chat_request(t); }, text);
}

// The JSON of each `data:` event of an SSE text, [DONE] as a string.
std::vector<Json> events_of(const std::string& sse) {
  std::vector<Json> events;
  std::size_t at = 0;
  while ((at = sse.find("data: ", at)) != std::string::npos) {
    const std::size_t end = sse.find("\n\n", at);
    REQUIRE(end != std::string::npos);
    const std::string data = sse.substr(at + 6, end - at - 6);
    events.push_back(data == "[DONE]" ? Json("[DONE]") : Json::parse(data));
    at = end + 2;
  }
  return events;
}

smol::GenerationResult result_of(smol::StopReason stop) {
  smol::GenerationResult result;
  result.stop = stop;
  result.stats.prompt_tokens = 7;
  result.stats.reused_tokens = 5;
  result.stats.generated_tokens = 3;
  result.stats.prefill_seconds = 0.5;
  result.stats.decode_seconds = 0.25;
  return result;
}

}  // namespace

TEST_CASE("a minimal chat request takes the server's defaults") {
  smol::serve::RequestDefaults defaults;
  defaults.sampling.temperature = 0.6f;
  defaults.enable_thinking = false;
  const auto request = parse_chat_request(body(""), defaults);
  REQUIRE(request.messages.size() == 1);
  CHECK(request.messages[0].role == "user");
  CHECK(request.messages[0].content == "Hi");
  CHECK(request.params.sampling.temperature == doctest::Approx(0.6));
  CHECK_FALSE(request.enable_thinking);
  CHECK_FALSE(request.params.stream);
  CHECK(request.params.max_tokens == 0);
  CHECK(request.params.reasoning == smol::serve::ReasoningFormat::separate);
}

TEST_CASE("every honoured field reaches the request") {
  const auto r = parse_chat_request(R"({"messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "system", "content": "Be kind."},
      {"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]},
      {"role": "assistant", "content": null},
      {"role": "user", "content": "again"}],
    "temperature": 0.2, "top_p": 0.5, "top_k": 7, "min_p": 0.1, "seed": 42,
    "presence_penalty": 0.5, "frequency_penalty": -0.5, "repeat_penalty": 1.1,
    "max_tokens": 50, "max_completion_tokens": 20, "stop": "END", "n": 1,
    "stream": true, "stream_options": {"include_usage": true}, "reasoning_format": "none",
    "chat_template_kwargs": {"enable_thinking": false}, "user": "ignored", "model": "x"})");
  REQUIRE(r.messages.size() == 4);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[0].content == "Be brief.\n\nBe kind.");
  CHECK(r.messages[1].content == "Hello");
  CHECK(r.messages[2].role == "assistant");
  CHECK(r.messages[2].content.empty());
  const auto& s = r.params.sampling;
  CHECK(s.temperature == doctest::Approx(0.2));
  CHECK(s.top_p == doctest::Approx(0.5));
  CHECK(s.top_k == 7);
  CHECK(s.min_p == doctest::Approx(0.1));
  CHECK(s.seed == 42u);
  CHECK(s.presence_penalty == doctest::Approx(0.5));
  CHECK(s.frequency_penalty == doctest::Approx(-0.5));
  CHECK(s.repeat_penalty == doctest::Approx(1.1));
  CHECK(r.params.max_tokens == 20);  // the newer name wins
  CHECK(r.params.stop == std::vector<std::string>{"END"});
  CHECK(r.params.stream);
  CHECK(r.params.include_usage);
  CHECK(r.params.reasoning == smol::serve::ReasoningFormat::folded);
  CHECK_FALSE(r.enable_thinking);

  CHECK(parse_chat_request(body(R"("stop": ["a", "", "b"])")).params.stop ==
        std::vector<std::string>{"a", "b"});
  CHECK(parse_chat_request(body(R"("max_tokens": null)")).params.max_tokens == 0);
  CHECK(parse_chat_request(body(R"("n_predict": -1)")).params.max_tokens == 0);
  // llama-server's conventions: seed -1 is random, repeat_last_n -1 the whole context.
  CHECK_FALSE(parse_chat_request(body(R"("seed": -1)")).params.sampling.seed.has_value());
  CHECK(parse_chat_request(body(R"("repeat_last_n": -1)")).params.sampling.penalty_window == -1);
  CHECK_NOTHROW(parse_chat_request(body(R"("logprobs": false)")));
  CHECK_NOTHROW(smol::serve::parse_completion_request(R"({"prompt": "x", "logprobs": 0})"));
}

// {"type": "object", "properties": {"a": ...}} `levels` deep.
std::string nested_schema(int levels) {
  std::string text;
  for (int i = 0; i < levels; ++i) text += R"({"type": "object", "properties": {"a": )";
  text += R"({"type": "string"})";
  for (int i = 0; i < levels; ++i) text += "}}";
  return text;
}

TEST_CASE("bad requests get a 400 that names the field") {
  struct Case {
    std::string body, param, says;
  };
  const std::vector<Case> cases = {
      {"{", "", "not valid JSON"},
      {"[1, 2]", "", "must be a JSON object"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}", "", "not valid JSON"},
      {"{}", "messages", "non-empty list"},
      {R"({"messages": []})", "messages", "non-empty list"},
      {R"({"messages": {"role": "user"}})", "messages", "non-empty list"},
      {R"({"messages": ["hi"]})", "messages[0]", "must be an object"},
      {R"({"messages": [{"content": "hi"}]})", "messages[0].role", "must be a string"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].tool_call_id",
       "must be a string"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role", "not one of"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content", "missing"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content",
       "string or a list"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0]", "text only"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]})",
       "messages[1].role", "after the conversation began"},
      {R"({"messages": [{"role": "system", "content": "b"}]})", "messages", "only a system prompt"},
      {body(R"("temperature": 3)"), "temperature", "between 0 and 2"},
      {body(R"("temperature": "hot")"), "temperature", "must be a number"},
      {body(R"("temperature": 1e400)"), "", "not valid JSON"},
      {body(R"("top_p": -0.1)"), "top_p", "between"},
      {body(R"("top_k": 1.5)"), "top_k", "integer"},
      {body(R"("max_tokens": 0)"), "max_tokens", "between 1 and"},
      {body(R"("max_tokens": -5)"), "max_tokens", "between 1 and"},
      // Whole numbers past 64 bits are out of range, as 2^64 - 1 is.
      {body(R"("max_tokens": 99999999999999999999999)"), "max_tokens", "at most"},
      {body(R"("seed": 18446744073709551616)"), "seed", "at most"},
      {body(R"("seed": -99999999999999999999999)"), "seed", "at least"},
      {body(R"("max_tokens": 1.5e30)"), "max_tokens", "at most"},
      {body(R"("max_tokens": 18446744073709551615)"), "max_tokens", "at most"},
      {body(R"("max_completion_tokens": "ten")"), "max_completion_tokens", "integer"},
      {body(R"("post_sampling_probs": 1)"), "post_sampling_probs", "true or false"},
      {body(R"("n": 0)"), "n", "between 1 and 16"},
      {body(R"("n": 17)"), "n", "at most 16"},
      {body(R"("n": 1.5)"), "n", "integer"},
      {body(R"("seed": "x")"), "seed", "integer"},
      {body(R"("stop": 5)"), "stop", "list of at most"},
      {body(R"("stop": [1])"), "stop", "list of at most"},
      {body(
           R"("stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"])"),
       "stop", "at most 16"},
      {body(R"("stream": "yes")"), "stream", "true or false"},
      {body(R"("stream_options": {"include_usage": true})"), "stream_options", "needs stream"},
      {body(R"("logprobs": 3)"), "logprobs", "true or false"},
      {body(R"("logprobs": "yes")"), "logprobs", "true or false"},
      {body(R"("top_logprobs": 2)"), "top_logprobs", "needs logprobs: true"},
      {body(R"("logprobs": false, "top_logprobs": 2)"), "top_logprobs", "needs logprobs: true"},
      {body(R"("logprobs": true, "top_logprobs": 21)"), "top_logprobs", "at most 20"},
      {body(R"("logprobs": true, "top_logprobs": -1)"), "top_logprobs", "between 0 and 20"},
      {body(R"("logprobs": true, "top_logprobs": 1.5)"), "top_logprobs", "integer"},
      {R"({"messages": [{"role": "user", "content": [{"type": 5, "text": "x"}]}]})",
       "messages[0].content[0]", "text only"},
      {body(R"("response_format": {"type": 5})"), "response_format", "must be"},
      {body(R"("response_format": {"type": "xml"})"), "response_format", "json_schema"},
      {body(R"("response_format": {"type": "json_schema"})"), "response_format.json_schema",
       "must be an object"},
      {body(R"("response_format": {"type": "json_schema", "json_schema": {"name": 5}})"),
       "response_format.json_schema.name", "string"},
      {body(R"("response_format": {"type": "json_schema", "json_schema": {"strict": "yes"}})"),
       "response_format.json_schema.strict", "true or false"},
      // The schema keyword at fault and where it is.
      {body(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
           "schema": {"type": "object",
                      "properties": {"a": {"type": "string", "contentMediaType": "x"}}}}})"),
       "response_format.json_schema.schema", "contentMediaType"},
      {body(R"("response_format": {"type": "json_schema", "json_schema": {"schema": 5}})"),
       "response_format.json_schema.schema", "must be a JSON schema"},
      {body(R"("response_format": {"type": "json_object", "schema": {"type": "tuple"}})"),
       "response_format.schema", "tuple"},
      {body(R"("json_schema": {"type": "object", "propertyNames": {"maxLength": 2}})"),
       "json_schema", "propertyNames"},
      {body(R"("json_schema": "{}")"), "json_schema", "must be a JSON schema"},
      // A grammar's mistake with its line and column.
      {body(R"("grammar": "root ::= \"a\"\nb ::= [a-")"), "grammar", "line 2, column"},
      {body(R"("grammar": "root ::= undefined-rule")"), "grammar", "undefined-rule"},
      {body(R"("grammar": 5)"), "grammar", "GBNF text"},
      {body(R"("grammar": "root ::= \"a\"", "json_schema": {})"), "grammar", "give one"},
      {body(R"("response_format": {"type": "json_object"}, "json_schema": {})"), "json_schema",
       "both constrain"},
      {body(R"("repeat_last_n": -2)"), "repeat_last_n", "between -1 and"},
      {body(R"("tools": {})"), "tools", "list of functions"},
      {body(R"("tools": [{"type": "code_interpreter"}])"), "tools[0]", "\"function\""},
      {body(R"("tools": [{"type": "function"}])"), "tools[0].function", "must be an object"},
      {body(R"("tools": [{"type": "function", "function": {"name": "a b"}}])"),
       "tools[0].function.name", "1 to 64"},
      {body(R"("tools": [{"type": "function", "function": {"name": "f"}},
                         {"type": "function", "function": {"name": "f"}}])"),
       "tools[1].function.name", "twice"},
      {body(R"("tools": [{"type": "function", "function": {"name": "f", "description": 1}}])"),
       "tools[0].function.description", "string"},
      {body(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": 5}}])"),
       "tools[0].function.parameters", "JSON schema"},
      {body(R"("tools": [{"type": "function", "function": {"name": "f",
           "parameters": {"type": "object", "unevaluatedProperties": false}}}])"),
       "tools[0].function.parameters", "unevaluatedProperties"},
      {body(R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "any")"),
       "tool_choice", "\"required\""},
      {body(R"("tools": [{"type": "function", "function": {"name": "f"}}],
               "tool_choice": {"type": "function", "function": {"name": "g"}})"),
       "tool_choice.function.name", "\"g\""},
      {body(R"("tool_choice": "auto")"), "tool_choice", "only allowed when tools"},
      {body(R"("parallel_tool_calls": true)"), "parallel_tool_calls", "only allowed when tools"},
      {body(R"("tools": [{"type": "function", "function": {"name": "f"}}],
               "parallel_tool_calls": "yes")"),
       "parallel_tool_calls", "true or false"},
      {body(R"("functions": [])"), "functions", "use tools"},
      {body(R"("tools": [{"type": "function", "function": {"name": "f"}}],
               "response_format": {"type": "json_object"})"),
       "tools", "both constrain"},
      {R"({"messages": [{"role": "user", "content": "a"},
                        {"role": "assistant", "tool_calls": {}}]})",
       "messages[1].tool_calls", "list of calls"},
      {R"({"messages": [{"role": "user", "content": "a"},
                        {"role": "assistant", "tool_calls": [{"type": "function",
                         "function": {"name": "f", "arguments": "[1]"}}]}]})",
       "messages[1].tool_calls[0].function.arguments", "JSON object as text"},
      {R"({"messages": [{"role": "user", "content": "a"},
                        {"role": "assistant", "tool_calls": [{"type": "function",
                         "function": {"arguments": "{}"}}]}]})",
       "messages[1].tool_calls[0].function.name", "non-empty string"},
      {R"({"messages": [{"role": "user", "content": "a", "tool_calls": []}]})",
       "messages[0].tool_calls", "assistant messages only"},
      {body(R"("reasoning_format": "xml")"), "reasoning_format", "deepseek"},
      {body(R"("chat_template_kwargs": [])"), "chat_template_kwargs", "object"},
      {body(R"("chat_template_kwargs": {"enable_thinking": "no"})"), "enable_thinking",
       "true or false"},
      // What the server gives the template itself is not the client's to replace.
      {body(R"("chat_template_kwargs": {"messages": []})"), "chat_template_kwargs.messages",
       "set by the server"},
      {body(R"("chat_template_kwargs": {"bos_token": "<s>"})"), "chat_template_kwargs.bos_token",
       "set by the server"},
      {body(R"("speculative.n_max": -1)"), "speculative.n_max", "between 0 and 1024"},
      {body(R"("speculative.n_min": "4")"), "speculative.n_min", "integer"},
      {body(R"("repeat_penalty": 0)"), "repeat_penalty", "above 0"},
      {body(R"("tools": [], "tool_choice": "required")"), "tool_choice", "at least one tool"},
      // Nesting: the body, a schema inside it, a call's arguments text.
      {body("\"metadata\": " + std::string(300, '[') + std::string(300, ']')), "",
       "nests more than 256 levels deep (at byte"},
      {body("\"json_schema\": " + nested_schema(65)), "json_schema",
       "nested more than 64 levels deep (at #/properties/a/properties/a"},
      {R"({"messages": [{"role": "user", "content": "a"},
                        {"role": "assistant", "tool_calls": [{"type": "function",
                         "function": {"name": "f", "arguments": ")" +
           std::string(300, '[') + std::string(300, ']') + R"("}}]}]})",
       "messages[1].tool_calls[0].function.arguments", "nests more than 256"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.body);
    const ApiError error = rejection(c.body);
    CHECK(error.status == 400);
    CHECK(error.type == "invalid_request_error");
    CHECK(error.param == c.param);
    CHECK(std::string(error.what()).find(c.says) != std::string::npos);
    const Json shown = smol::serve::error_body(error);
    CHECK(shown["error"]["message"] == error.what());
    CHECK(shown["error"]["code"] == 400);
    CHECK(shown["error"]["param"] == (c.param.empty() ? Json(nullptr) : Json(c.param)));
  }
}

TEST_CASE("structured output: response_format, json_schema and grammar become one grammar") {
  CHECK_FALSE(parse_chat_request(body("")).params.output.has_value());
  CHECK_FALSE(parse_chat_request(body(R"("response_format": {"type": "text"})")).params.output);
  CHECK_FALSE(parse_chat_request(body(R"("grammar": "")")).params.output);  // llama-server's none

  const auto object = parse_chat_request(body(R"("response_format": {"type": "json_object"})"));
  REQUIRE(object.params.output.has_value());
  CHECK(object.params.output->gbnf == smol::json_object_gbnf());
  CHECK(object.params.output->param == "response_format");
  CHECK(object.params.output->grammar != nullptr);
  // A constrained reply cannot think: the grammar has no room for a <think> block.
  CHECK_FALSE(object.enable_thinking);

  // The schema's properties keep the client's order ("z" before "a"), which a std::map
  // json would have sorted: the model writes them in this order.
  const std::string schema =
      R"({"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "string"}},
          "required": ["z", "a"], "additionalProperties": false})";
  const auto strict = parse_chat_request(body(R"("response_format": {"type": "json_schema",
      "json_schema": {"name": "pair", "strict": true, "schema": )" +
                                              schema + "}}"));
  REQUIRE(strict.params.output.has_value());
  CHECK(strict.params.output->gbnf == smol::json_schema_to_gbnf(schema));
  CHECK(strict.params.output->param == "response_format.json_schema.schema");
  const std::string& gbnf = strict.params.output->gbnf;
  REQUIRE(gbnf.find(R"("\x22a\x22")") != std::string::npos);
  CHECK(gbnf.find(R"("\x22z\x22")") < gbnf.find(R"("\x22a\x22")"));

  // llama-server's own fields; the completions endpoint reads them too.
  const auto plain = parse_chat_request(body(R"("json_schema": )" + schema));
  REQUIRE(plain.params.output.has_value());
  CHECK(plain.params.output->gbnf == strict.params.output->gbnf);
  CHECK(plain.params.output->param == "json_schema");
  const auto gbnf_request = smol::serve::parse_completion_request(
      R"({"prompt": "x", "grammar": "root ::= \"yes\" | \"no\""})");
  REQUIRE(gbnf_request.params.output.has_value());
  CHECK(gbnf_request.params.output->gbnf == "root ::= \"yes\" | \"no\"");
  CHECK(gbnf_request.params.output->param == "grammar");
  // No schema in json_schema: any JSON value.
  CHECK(parse_chat_request(
            body(R"("response_format": {"type": "json_schema", "json_schema": {"name": "any"}})"))
            .params.output.has_value());
}

TEST_CASE("completion requests take a prompt string") {
  const auto r = smol::serve::parse_completion_request(R"({"prompt": "Once", "max_tokens": 3})");
  CHECK(r.prompt == "Once");
  CHECK(r.params.max_tokens == 3);
  CHECK(smol::serve::parse_completion_request(R"({"prompt": ["Once"]})").prompt == "Once");
  for (const char* bad :
       {R"({})", R"({"prompt": ""})", R"({"prompt": 5})", R"({"prompt": ["a", "b"]})"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(smol::serve::parse_completion_request(bad), ApiError);
  }
}

TEST_CASE("the reasoning goes apart or folded, and the answer loses its leading newlines") {
  using smol::PieceKind;
  smol::serve::ReplyText apart(smol::serve::ReasoningFormat::separate);
  apart.add({"Let me think.", PieceKind::thinking});
  apart.add({"\n\n", PieceKind::answer});
  apart.add({"\nHello", PieceKind::answer});
  apart.add({"\n", PieceKind::answer});
  CHECK(apart.reasoning() == "Let me think.");
  CHECK(apart.content() == "Hello\n");

  smol::serve::ReplyText folded(smol::serve::ReasoningFormat::folded);
  folded.add({"Hm", PieceKind::thinking});
  folded.add({".", PieceKind::thinking});
  const auto delta = folded.add({"\nYes", PieceKind::answer});
  CHECK(delta.content == "</think>Yes");
  CHECK(folded.reasoning().empty());
  CHECK(folded.content() == "<think>Hm.</think>Yes");
}

TEST_CASE("a streamed chat reply: role first, deltas, the finish with timings, usage, [DONE]") {
  using smol::PieceKind;
  const smol::serve::ReplyHeader header{"chatcmpl-1", 1700000000, "m"};
  smol::serve::ChatStream stream(header, smol::serve::ReasoningFormat::separate, true);
  std::string sse = stream.first();
  sse += stream.piece({"Think", PieceKind::thinking});
  sse += stream.piece({"\n\n", PieceKind::answer});  // nothing to show yet
  sse += stream.piece({"Hi!", PieceKind::answer});
  sse += stream.end(result_of(smol::StopReason::max_tokens));
  const std::vector<Json> events = events_of(sse);
  REQUIRE(events.size() == 6);
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(events[i]["object"] == "chat.completion.chunk");
    CHECK(events[i]["id"] == "chatcmpl-1");
    CHECK(events[i]["model"] == "m");
  }
  CHECK(events[0]["choices"][0]["delta"]["role"] == "assistant");
  CHECK(events[1]["choices"][0]["delta"]["reasoning_content"] == "Think");
  CHECK(events[2]["choices"][0]["delta"]["content"] == "Hi!");
  CHECK(events[2]["choices"][0]["finish_reason"].is_null());
  CHECK(events[3]["choices"][0]["finish_reason"] == "length");
  CHECK(events[3]["choices"][0]["delta"].empty());
  CHECK(events[3]["timings"]["predicted_n"] == 3);
  CHECK(events[3]["timings"]["cache_n"] == 5);
  CHECK(events[4]["choices"].empty());
  CHECK(events[4]["usage"]["prompt_tokens"] == 12);  // evaluated and cached
  CHECK(events[4]["usage"]["completion_tokens"] == 3);
  CHECK(events[4]["usage"]["total_tokens"] == 15);
  CHECK(events[4]["usage"]["prompt_tokens_details"]["cached_tokens"] == 5);
  CHECK(events[5] == "[DONE]");

  smol::serve::ChatStream no_usage(header, smol::serve::ReasoningFormat::separate, false);
  CHECK(events_of(no_usage.end(result_of(smol::StopReason::end_of_generation))).size() == 2);
}

TEST_CASE("the non-streamed chat reply, and the finish reasons") {
  smol::serve::ReplyText text(smol::serve::ReasoningFormat::separate);
  text.add({"Hello", smol::PieceKind::answer});
  Json reply = smol::serve::chat_completion_json({"id", 1, "m"}, text,
                                                 result_of(smol::StopReason::stop_string));
  CHECK(reply["object"] == "chat.completion");
  CHECK(reply["choices"][0]["message"]["role"] == "assistant");
  CHECK(reply["choices"][0]["message"]["content"] == "Hello");
  CHECK_FALSE(reply["choices"][0]["message"].contains("reasoning_content"));
  CHECK(reply["choices"][0]["finish_reason"] == "stop");
  CHECK(reply["usage"]["total_tokens"] == 15);

  text.add({"x", smol::PieceKind::thinking});
  reply = smol::serve::chat_completion_json({"id", 1, "m"}, text,
                                            result_of(smol::StopReason::context_full));
  CHECK(reply["choices"][0]["message"]["reasoning_content"] == "x");
  CHECK(reply["choices"][0]["finish_reason"] == "length");
  CHECK(smol::serve::finish_reason(smol::StopReason::end_of_generation) == "stop");
  CHECK(smol::serve::finish_reason(smol::StopReason::max_tokens) == "length");
}

TEST_CASE("n choices: parsed, each its own choice index, usage summing the completions") {
  CHECK(parse_chat_request(body("")).params.n == 1);
  CHECK(parse_chat_request(body(R"("n": 16)")).params.n == 16);
  CHECK(smol::serve::parse_completion_request(R"({"prompt": "x", "n": 3})").params.n == 3);

  const smol::serve::ReplyHeader header{"chatcmpl-1", 1, "m"};
  std::vector<smol::serve::ReplyText> texts(2, smol::serve::ReplyText({}));
  texts[0].add({"one", smol::PieceKind::answer});
  texts[1].add({"two", smol::PieceKind::answer});
  std::vector<smol::GenerationResult> results = {result_of(smol::StopReason::stop_string),
                                                 result_of(smol::StopReason::max_tokens)};
  results[1].stats.generated_tokens = 4;
  results[1].stats.prompt_tokens = 1;  // forked the first one's prompt
  results[1].stats.reused_tokens = 11;
  const Json reply = smol::serve::chat_completion_json(header, texts, results);
  REQUIRE(reply["choices"].size() == 2);
  CHECK(reply["choices"][0]["index"] == 0);
  CHECK(reply["choices"][0]["message"]["content"] == "one");
  CHECK(reply["choices"][0]["finish_reason"] == "stop");
  CHECK(reply["choices"][1]["index"] == 1);
  CHECK(reply["choices"][1]["message"]["content"] == "two");
  CHECK(reply["choices"][1]["finish_reason"] == "length");
  CHECK(reply["usage"]["prompt_tokens"] == 12);  // once
  CHECK(reply["usage"]["completion_tokens"] == 7);
  CHECK(reply["usage"]["total_tokens"] == 19);
  CHECK(reply["timings"]["prompt_n"] == 8);  // every token evaluated, by either choice
  CHECK(reply["timings"]["predicted_n"] == 7);

  // Streamed: each choice's chunks carry its index; usage and [DONE] once, at the end.
  smol::serve::ChatStream a(header, {}, true, false, nullptr, 0),
      b(header, {}, true, false, nullptr, 1);
  std::string sse = a.first() + b.first() + b.piece({"x", smol::PieceKind::answer}) +
                    a.piece({"y", smol::PieceKind::answer}) + b.finish(results[1]) +
                    a.finish(results[0]) + smol::serve::ChatStream::close(header, true, results);
  const std::vector<Json> events = events_of(sse);
  REQUIRE(events.size() == 8);
  CHECK(events[1]["choices"][0]["index"] == 1);
  CHECK(events[2]["choices"][0]["index"] == 1);
  CHECK(events[2]["choices"][0]["delta"]["content"] == "x");
  CHECK(events[3]["choices"][0]["index"] == 0);
  CHECK(events[4]["choices"][0]["finish_reason"] == "length");
  CHECK(events[4]["choices"][0]["index"] == 1);
  CHECK(events[5]["choices"][0]["finish_reason"] == "stop");
  CHECK(events[6]["usage"]["completion_tokens"] == 7);
  CHECK(events[7] == "[DONE]");

  // Tool call ids stay unique across choices.
  CHECK(smol::serve::tool_call_id_prefix(header, 0) != smol::serve::tool_call_id_prefix(header, 1));

  const std::vector<std::string> plain = {"p", "q"};
  const std::vector<Json> no_logprobs(2);
  const Json text = smol::serve::text_completion_json(header, plain, results, no_logprobs);
  REQUIRE(text["choices"].size() == 2);
  CHECK(text["choices"][1]["index"] == 1);
  CHECK(text["choices"][1]["text"] == "q");
  CHECK(text["choices"][1]["finish_reason"] == "length");
  CHECK(text["usage"]["completion_tokens"] == 7);
}

TEST_CASE("logprobs: chat's logprobs and top_logprobs, the legacy endpoint's count") {
  CHECK_FALSE(parse_chat_request(body("")).params.logprobs);
  CHECK_FALSE(parse_chat_request(body(R"("logprobs": false)")).params.logprobs);
  CHECK(parse_chat_request(body(R"("logprobs": true)")).params.logprobs == 0u);
  CHECK(parse_chat_request(body(R"("logprobs": true, "top_logprobs": 20)")).params.logprobs == 20u);
  CHECK(parse_chat_request(body(R"("logprobs": true, "top_logprobs": null)")).params.logprobs ==
        0u);
  using smol::serve::parse_completion_request;
  CHECK_FALSE(parse_completion_request(R"({"prompt": "a"})").params.logprobs);
  CHECK_FALSE(parse_completion_request(R"({"prompt": "a", "logprobs": null})").params.logprobs);
  CHECK(parse_completion_request(R"({"prompt": "a", "logprobs": 0})").params.logprobs == 0u);
  CHECK(parse_completion_request(R"({"prompt": "a", "logprobs": 5})").params.logprobs == 5u);
  for (const char* bad :
       {R"({"prompt": "a", "logprobs": 21})", R"({"prompt": "a", "logprobs": -1})",
        R"({"prompt": "a", "logprobs": "3"})", R"({"prompt": "a", "logprobs": true})"}) {
    CAPTURE(bad);
    try {
      parse_completion_request(bad);
      FAIL("accepted");
    } catch (const ApiError& error) {
      CHECK(error.status == 400);
      CHECK(error.param == "logprobs");
    }
  }
}

namespace {

smol::TokenLogprob logprob_of(std::string bytes, float lp,
                              std::vector<smol::TokenChoiceLogprob> top) {
  return {{7, lp, std::move(bytes)}, std::move(top)};
}

}  // namespace

TEST_CASE("logprobs in OpenAI's shapes: chat content entries, bytes exact, the legacy lists") {
  const float inf = std::numeric_limits<float>::infinity();
  smol::GenerationResult result = result_of(smol::StopReason::end_of_generation);
  // "\xc3" is half of "é": the token's text is lossy, its bytes exact.
  result.logprobs = {logprob_of("Hi", -0.25f, {{7, -0.25f, "Hi"}, {8, -2.0f, "\xc3"}}),
                     logprob_of("\xc3", -1.5f, {{9, -0.5f, "!"}, {10, -inf, "?"}})};
  smol::serve::ReplyText text(smol::serve::ReasoningFormat::separate);
  text.add({"Hi\xc3\xa9", smol::PieceKind::answer});
  const Json reply = Json::parse(smol::serve::dump(
      smol::serve::chat_completion_json({"id", 1, "m"}, text, result, /*logprobs=*/true)));
  const Json& logprobs = reply["choices"][0]["logprobs"];
  CHECK(logprobs["refusal"].is_null());
  REQUIRE(logprobs["content"].size() == 2);
  const Json& first = logprobs["content"][0];
  CHECK(first["token"] == "Hi");
  CHECK(first["logprob"] == doctest::Approx(-0.25));
  CHECK(first["bytes"] == Json::array({72, 105}));
  REQUIRE(first["top_logprobs"].size() == 2);
  CHECK(first["top_logprobs"][1]["token"] == "\xef\xbf\xbd");  // U+FFFD
  CHECK(first["top_logprobs"][1]["bytes"] == Json::array({0xc3}));
  CHECK_FALSE(first["top_logprobs"][1].contains("top_logprobs"));
  CHECK(logprobs["content"][1]["bytes"] == Json::array({0xc3}));
  CHECK(logprobs["content"][1]["top_logprobs"][1]["logprob"] == -9999.0);  // -inf
  // Not asked: null.
  CHECK(smol::serve::chat_completion_json({"id", 1, "m"}, text, result)["choices"][0]["logprobs"]
            .is_null());

  std::size_t offset = 0;
  const Json legacy = smol::serve::completion_logprobs_json(result.logprobs, offset);
  CHECK(legacy["tokens"].size() == 2);
  CHECK(legacy["token_logprobs"][0] == doctest::Approx(-0.25));
  CHECK(legacy["top_logprobs"][0]["Hi"] == doctest::Approx(-0.25));
  CHECK(legacy["top_logprobs"][1]["!"] == doctest::Approx(-0.5));
  CHECK(legacy["text_offset"] == Json::array({0, 2}));
  CHECK(offset == 3);
}

TEST_CASE("a streamed reply's chunks carry the logprobs of the tokens they show") {
  using smol::PieceKind;
  const smol::serve::ReplyHeader header{"chatcmpl-1", 1700000000, "m"};
  smol::serve::ChatStream stream(header, smol::serve::ReasoningFormat::separate, false,
                                 /*logprobs=*/true);
  std::string sse = stream.first();
  stream.logprob(logprob_of("\n", -1, {}));
  sse += stream.piece({"\n", PieceKind::answer});  // nothing shown: the token waits
  stream.logprob(logprob_of("Hi", -2, {}));
  sse += stream.piece({"Hi", PieceKind::answer});
  stream.logprob(logprob_of("!", -3, {}));  // held back (a possible stop string)
  sse += stream.end(result_of(smol::StopReason::stop_string));
  const std::vector<Json> events = events_of(sse);
  REQUIRE(events.size() == 4);
  CHECK(events[0]["choices"][0]["logprobs"].is_null());
  const Json& shown = events[1]["choices"][0];
  CHECK(shown["delta"]["content"] == "Hi");
  REQUIRE(shown["logprobs"]["content"].size() == 2);
  CHECK(shown["logprobs"]["content"][0]["token"] == "\n");
  CHECK(shown["logprobs"]["content"][1]["logprob"] == -2.0);
  CHECK(events[2]["choices"][0]["logprobs"]["content"].size() == 1);
  CHECK(events[2]["choices"][0]["finish_reason"] == "stop");
}

namespace {

const std::string kWeatherTool = R"({"type": "function", "function": {"name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                   "days": {"type": "integer"}}, "required": ["city"]}}})";
const std::string kTimeTool = R"({"type": "function", "function": {"name": "get_time"}})";

std::string tools_body(const std::string& fields) {
  return body(R"("tools": [)" + kWeatherTool + ", " + kTimeTool + "]" +
              (fields.empty() ? "" : ", " + fields));
}

// Whether `text` is in the language of `grammar` (a whole reply).
bool grammar_accepts(const smol::serve::OutputGrammar& output, const std::string& text) {
  smol::GrammarRecognizer recognizer(output.grammar);
  smol::GrammarState state = recognizer.initial();
  return recognizer.advance(state, text) && smol::GrammarRecognizer::can_end(state);
}

}  // namespace

TEST_CASE("tools: parsed, described in the system prompt, the reply constrained") {
  const auto r = parse_chat_request(tools_body(""));
  REQUIRE(r.tools != nullptr);
  CHECK(r.tools->choice == smol::serve::ToolChoice::automatic);
  CHECK(r.tools->parallel);
  REQUIRE(r.tools->functions.size() == 2);
  CHECK(r.tools->functions[0].name == "get_weather");
  // The client's property order is kept.
  CHECK(r.tools->functions[0].parameters["properties"].begin().key() == "city");
  CHECK(r.tools->functions[1].parameters["type"] == "object");  // none given: takes none
  REQUIRE(r.params.output);
  CHECK(r.params.output->param == "tools");
  CHECK_FALSE(r.enable_thinking);  // a constrained reply does not think
  // A system message in front, with the tools and the reply format.
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[0].content.find("\"name\":\"get_weather\"") != std::string::npos);
  CHECK(r.messages[0].content.find("\"tool_calls\"") != std::string::npos);
  CHECK(r.messages[0].content.find("\"response\"") != std::string::npos);

  // A system prompt of the client's own gets the tools after it.
  const auto with_system = parse_chat_request(
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
          "tools": [)" +
      kWeatherTool + "]}");
  REQUIRE(with_system.messages.size() == 2);
  CHECK(with_system.messages[0].content.rfind("Be brief.\n\nYou can call", 0) == 0);

  // tool_choice none: no tools described, nothing constrained.
  const auto none = parse_chat_request(tools_body(R"("tool_choice": "none")"));
  CHECK(none.tools == nullptr);
  CHECK_FALSE(none.params.output);
  CHECK(none.messages.size() == 1);

  const smol::serve::OutputGrammar& automatic = *r.params.output;
  CHECK(grammar_accepts(automatic, R"({"response":"Hello"})"));
  CHECK(grammar_accepts(automatic,
                        R"({"tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}},)"
                        R"({"name":"get_time","arguments":{}}]})"));
  CHECK_FALSE(grammar_accepts(automatic, R"({"tool_calls":[]})"));
  CHECK_FALSE(
      grammar_accepts(automatic, R"({"tool_calls":[{"name":"get_weather","arguments":{}}]})"));
  CHECK_FALSE(grammar_accepts(automatic, R"({"tool_calls":[{"name":"rm","arguments":{}}]})"));
  CHECK_FALSE(grammar_accepts(automatic, "Hello"));

  const auto required =
      parse_chat_request(tools_body(R"("tool_choice": "required", "parallel_tool_calls": false)"));
  CHECK(required.tools->choice == smol::serve::ToolChoice::required);
  CHECK(required.messages[0].content.find("\"response\"") == std::string::npos);
  CHECK(grammar_accepts(*required.params.output,
                        R"({"tool_call":{"name":"get_time","arguments":{}}})"));
  CHECK_FALSE(grammar_accepts(*required.params.output, R"({"response":"Hello"})"));
  CHECK_FALSE(grammar_accepts(*required.params.output,
                              R"({"tool_calls":[{"name":"get_time","arguments":{}}]})"));

  const auto named = parse_chat_request(
      tools_body(R"("tool_choice": {"type": "function", "function": {"name": "get_weather"}})"));
  CHECK(named.tools->choice == smol::serve::ToolChoice::named);
  CHECK_FALSE(named.tools->parallel);
  CHECK(grammar_accepts(
      *named.params.output,
      R"({"tool_call":{"name":"get_weather","arguments":{"city":"Oslo","days":2}}})"));
  CHECK_FALSE(
      grammar_accepts(*named.params.output, R"({"tool_call":{"name":"get_time","arguments":{}}})"));
}

TEST_CASE("tools: earlier calls and their results are written into the conversation") {
  const auto r = parse_chat_request(R"({"messages": [
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
      {"role": "user", "content": "Thanks"}]})");
  REQUIRE(r.messages.size() == 4);
  CHECK(r.tools == nullptr);
  CHECK(r.messages[1].role == "assistant");
  CHECK(r.messages[1].content ==
        R"({"tool_call":{"name":"get_weather","arguments":{"city":"Oslo"}}})");
  CHECK(r.messages[2].role == "tool");
  CHECK(r.messages[2].content ==
        R"({"tool_response":{"tool_call_id":"call_1","content":"Sunny"}})");
  // The SmolLM3 template writes a tool's result as the user's turn.
  const std::string prompt =
      smol::render_chat(smol::ChatTemplate(smol::ChatFormat::smollm3), r.messages);
  CHECK(prompt.find("<|im_start|>user\n{\"tool_response\"") != std::string::npos);
}

TEST_CASE("tool replies parsed: one call, several, an answer, and anything else as content") {
  const auto r = parse_chat_request(tools_body(""));
  const smol::serve::ToolRequest& tools = *r.tools;
  using smol::serve::parse_tool_reply;

  auto reply = parse_tool_reply(
      R"({"tool_call": {"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}})", tools,
      "call_x_");
  REQUIRE(reply.calls.size() == 1);
  CHECK_FALSE(reply.content);
  CHECK(reply.calls[0].id == "call_x_0");
  CHECK(reply.calls[0].name == "get_weather");
  CHECK(reply.calls[0].arguments == R"({"city":"Oslo","days":2})");  // in the model's order

  reply = parse_tool_reply(R"({"tool_calls": [{"name": "get_time", "arguments": {}},
      {"name": "get_weather", "arguments": {"city": "Rome"}}]})",
                           tools, "c");
  REQUIRE(reply.calls.size() == 2);
  CHECK(reply.calls[1].id == "c1");
  CHECK(reply.calls[1].arguments == R"({"city":"Rome"})");

  reply = parse_tool_reply(R"({"response": "It is sunny."})", tools, "c");
  CHECK(reply.calls.empty());
  CHECK(reply.content == "It is sunny.");

  for (const char* other :
       {"Sunny today.", R"({"tool_call": {"name": "get_weather", "arguments": {"ci)",
        R"({"tool_call": {"name": "rm", "arguments": {}}})",
        R"({"tool_call": {"name": "get_time", "arguments": "{}"}})", R"({"tool_calls": []})",
        R"([{"name": "get_time"}])"}) {
    CAPTURE(other);
    reply = parse_tool_reply(other, tools, "c");
    CHECK(reply.calls.empty());
    CHECK(reply.content == other);
  }
}

TEST_CASE("tool calls in the reply and the stream: tool_calls, content null, finish tool_calls") {
  const auto r = parse_chat_request(tools_body(""));
  const std::string model_text =
      R"({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "get_time", "arguments": {}}]})";
  smol::serve::ReplyText text(smol::serve::ReasoningFormat::separate);
  text.add({model_text, smol::PieceKind::answer});
  const smol::serve::ReplyHeader header{"chatcmpl-9", 1, "m"};
  const Json reply = smol::serve::chat_completion_json(
      header, text, result_of(smol::StopReason::end_of_generation), false, r.tools.get());
  const Json choice = reply["choices"][0];
  CHECK(choice["finish_reason"] == "tool_calls");
  CHECK(choice["message"]["content"].is_null());
  REQUIRE(choice["message"]["tool_calls"].size() == 2);
  const Json& call = choice["message"]["tool_calls"][0];
  CHECK(call["id"] == "call_chatcmpl-9_0");
  CHECK(call["type"] == "function");
  CHECK(call["function"]["name"] == "get_weather");
  CHECK(Json::parse(call["function"]["arguments"].get<std::string>()) == Json{{"city", "Oslo"}});
  // Cut short: plain content, "length".
  smol::serve::ReplyText cut(smol::serve::ReasoningFormat::separate);
  cut.add({R"({"tool_call": {"na)", smol::PieceKind::answer});
  const Json partial = smol::serve::chat_completion_json(
      header, cut, result_of(smol::StopReason::max_tokens), false, r.tools.get());
  CHECK(partial["choices"][0]["finish_reason"] == "length");
  CHECK(partial["choices"][0]["message"]["content"] == R"({"tool_call": {"na)");
  CHECK_FALSE(partial["choices"][0]["message"].contains("tool_calls"));

  // Streamed in pieces of every size: the chunks add up to the same calls, each call's
  // name before its arguments.
  for (const std::size_t size :
       {std::size_t{1}, std::size_t{3}, std::size_t{10}, model_text.size()}) {
    CAPTURE(size);
    smol::serve::ChatStream stream(header, smol::serve::ReasoningFormat::separate, false, false,
                                   r.tools);
    std::string sse = stream.first();
    for (std::size_t at = 0; at < model_text.size(); at += size) {
      sse += stream.piece({model_text.substr(at, size), smol::PieceKind::answer});
    }
    sse += stream.end(result_of(smol::StopReason::end_of_generation));
    const std::vector<Json> events = events_of(sse);
    Json calls = Json::array();
    std::string finish;
    for (std::size_t i = 1; i + 1 < events.size(); ++i) {
      const Json& chunk = events[i]["choices"][0];
      CHECK_FALSE(chunk["delta"].contains("content"));
      if (chunk["finish_reason"].is_string()) finish = chunk["finish_reason"];
      if (!chunk["delta"].contains("tool_calls")) continue;
      const Json& piece = chunk["delta"]["tool_calls"][0];
      const std::size_t index = piece["index"];
      if (piece.contains("id")) {
        REQUIRE(index == calls.size());
        CHECK(piece["type"] == "function");
        CHECK(piece["function"]["arguments"] == "");
        calls.push_back({{"id", piece["id"]},
                         {"type", "function"},
                         {"function", {{"name", piece["function"]["name"]}, {"arguments", ""}}}});
      } else {
        REQUIRE(index < calls.size());
        CHECK_FALSE(piece["function"].contains("name"));
        calls[index]["function"]["arguments"] =
            calls[index]["function"]["arguments"].get<std::string>() +
            piece["function"]["arguments"].get<std::string>();
      }
    }
    CHECK(finish == "tool_calls");
    CHECK(calls == choice["message"]["tool_calls"]);
  }

  smol::serve::ChatStream answer(header, smol::serve::ReasoningFormat::separate, false, false,
                                 r.tools);
  std::string content;
  for (const std::string piece :
       {R"({"resp)", R"(onse": "Hi\nthe)", R"(re \u00e9\ud83d)", R"(\ude00 \"x\"")", "}"}) {
    for (const Json& event : events_of(answer.piece({piece, smol::PieceKind::answer}))) {
      content += event["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  CHECK(content == "Hi\nthere \u00e9\U0001F600 \"x\"");
  const std::vector<Json> answered =
      events_of(answer.end(result_of(smol::StopReason::end_of_generation)));
  REQUIRE(answered.size() == 2);
  CHECK(answered[0]["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("the tool reply scanner: names once complete, arguments without the whitespace") {
  using Scanner = smol::serve::ToolReplyScanner;
  const std::string text =
      "{ \"tool_calls\" :\n [ {\"name\": \"f\\u0031\", \"arguments\" : {\n \"name\" : \"a b\\\"}\","
      " \"n\" : [ 1 , {\"x\": null} ] } } ,{\"name\":\"g\",\"arguments\":{}}]}";
  std::vector<Scanner::Event> events;
  Scanner scanner;
  for (const char c : text) {
    for (auto& e : scanner.push(std::string(1, c))) events.push_back(std::move(e));
  }
  std::vector<std::string> names, arguments(2);
  for (const auto& e : events) {
    if (e.kind == Scanner::Kind::call) names.push_back(e.text);
    if (e.kind == Scanner::Kind::arguments) arguments.at(e.index) += e.text;
    CHECK(e.kind != Scanner::Kind::content);
  }
  CHECK(names == std::vector<std::string>{"f1", "g"});
  CHECK(arguments[0] == R"({"name":"a b\"}","n":[1,{"x":null}]})");
  CHECK(arguments[1] == "{}");
  // A single call and an answer, in one piece.
  const auto one = Scanner().push(R"({"tool_call": {"name": "h", "arguments": {"k": 2}}})");
  REQUIRE(one.size() == 2);
  CHECK(one[0].kind == Scanner::Kind::call);
  CHECK(one[1].text == R"({"k":2})");
  const auto said = Scanner().push(R"({"response": "a \"b\" {c}"})");
  REQUIRE(said.size() == 1);
  CHECK(said[0].kind == Scanner::Kind::content);
  CHECK(said[0].text == R"(a "b" {c})");
}

TEST_CASE(
    "tools: a function's own $defs and $ref (Pydantic's schemas) hold in the reply's grammar") {
  const auto r = parse_chat_request(body(R"("tool_choice": "required", "parallel_tool_calls": false,
      "tools": [{"type": "function", "function": {"name": "greet", "parameters": {
        "$defs": {"Greeting": {"type": "object", "properties": {
            "name": {"type": "string"}, "next": {"anyOf": [{"$ref": "#/$defs/Greeting"}, {"type": "null"}]}},
          "required": ["name", "next"], "additionalProperties": false}},
        "type": "object", "properties": {"request": {"$ref": "#/$defs/Greeting"}},
        "required": ["request"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "tree", "parameters": {
        "type": "object", "properties": {"child": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
        "required": ["child"], "additionalProperties": false}}}])"));
  const smol::serve::OutputGrammar& grammar = *r.params.output;
  CHECK(grammar_accepts(
      grammar,
      R"({"tool_call":{"name":"greet","arguments":{"request":{"name":"a","next":{"name":"b","next":null}}}}})"));
  CHECK_FALSE(grammar_accepts(
      grammar, R"({"tool_call":{"name":"greet","arguments":{"request":{"name":"a","next":5}}}})"));
  // "#" is the function's own parameters, not the reply's root.
  CHECK(grammar_accepts(grammar,
                        R"({"tool_call":{"name":"tree","arguments":{"child":{"child":null}}}})"));
  CHECK_FALSE(grammar_accepts(
      grammar,
      R"({"tool_call":{"name":"tree","arguments":{"child":{"tool_call":{"name":"tree","arguments":{"child":null}}}}}})"));
}

TEST_CASE("Hermes tools: the template's data, a forced call's grammar, replies read back") {
  smol::serve::RequestDefaults hermes;
  hermes.tool_syntax = smol::serve::tool_call_syntax_named("Hermes");
  REQUIRE(hermes.tool_syntax != nullptr);
  // The history: calls as data for the template (arguments as its tojson writes them),
  // results as they came; the tools as the client's objects, in the client's order.
  const std::string history = R"("messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\",\"days\":[1,2]}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "Rain"}])";
  const auto r = parse_chat_request(
      "{" + history + R"(, "tools": [)" + kWeatherTool + ", " + kTimeTool + "]}", hermes);
  REQUIRE(r.messages.size() == 3);
  CHECK(r.messages[0].role == "user");
  REQUIRE(r.messages[1].tool_calls.size() == 1);
  CHECK(r.messages[1].tool_calls[0].name == "get_weather");
  CHECK(r.messages[1].tool_calls[0].arguments == R"({"city": "Oslo", "days": [1, 2]})");
  CHECK(r.messages[1].content.empty());
  CHECK(r.messages[2].role == "tool");
  CHECK(r.messages[2].content == "Rain");
  REQUIRE(r.template_tools.size() == 2);
  CHECK(r.template_tools[1] == R"({"type": "function", "function": {"name": "get_time"}})");
  REQUIRE(r.tools != nullptr);
  CHECK(r.tools->syntax == hermes.tool_syntax);
  // auto: free text until a <tool_call> begins, then the grammar (a lazy one).
  REQUIRE(r.params.output.has_value());
  REQUIRE(r.params.output_trigger.has_value());
  CHECK(r.params.output_trigger->text == "<tool_call>");

  // Rendered as Qwen2.5's template does (tests/chat_template/ checks it against jinja2).
  smol::ChatTemplate qwen(smol::ChatFormat::chatml_tools);
  qwen.default_system = "S";
  const std::string prompt = smol::render_chat(qwen, r.messages, {.tools = r.template_tools});
  CHECK(prompt.find("<tools>\n" + r.template_tools[0] + "\n" + r.template_tools[1] +
                    "\n</tools>") != std::string::npos);
  CHECK(prompt.find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", "
                    "\"arguments\": {\"city\": \"Oslo\", \"days\": [1, 2]}}\n</tool_call>"
                    "<|im_end|>\n<|im_start|>user\n<tool_response>\nRain\n</tool_response>"
                    "<|im_end|>\n<|im_start|>assistant\n") != std::string::npos);

  // required: one or more blocks, each a call whose arguments match its parameters.
  const auto required = parse_chat_request(tools_body(R"("tool_choice": "required")"), hermes);
  REQUIRE(required.params.output.has_value());
  CHECK_FALSE(required.params.output_trigger.has_value());
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  const std::string time = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  CHECK(grammar_accepts(*required.params.output, weather));
  CHECK(grammar_accepts(*required.params.output, weather + "\n" + time));
  CHECK_FALSE(grammar_accepts(*required.params.output, "Hello"));
  CHECK_FALSE(grammar_accepts(*required.params.output, ""));
  CHECK_FALSE(grammar_accepts(
      *required.params.output,
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));  // no city
  const auto named = parse_chat_request(
      tools_body(R"("tool_choice": {"type": "function", "function": {"name": "get_time"}})"),
      hermes);
  CHECK(grammar_accepts(*named.params.output, time));
  CHECK_FALSE(grammar_accepts(*named.params.output, weather));
  CHECK_FALSE(grammar_accepts(*named.params.output, time + "\n" + time));  // one call
  // An enum value holding the word "root" stays a literal when the root is renamed.
  const auto tricky = parse_chat_request(
      body(R"("tools": [{"type": "function", "function": {"name": "f", "parameters":
        {"type": "object", "properties": {"a": {"enum": ["a root b", "root"]}}, "required": ["a"]}}}],
        "tool_choice": "required")"),
      hermes);
  CHECK(grammar_accepts(*tricky.params.output,
                        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"a root b\"}}\n"
                        "</tool_call>"));

  // Replies read back: calls with the text before them, anything else as content whole.
  const smol::serve::ToolRequest& tools = *r.tools;
  const auto read = [&](const std::string& text) {
    return smol::serve::read_tool_reply(text, tools, "id_");
  };
  auto reply = read("Let me see.\n" + weather + "\n" + time + "\n");
  REQUIRE(reply.calls.size() == 2);
  CHECK(reply.calls[0].id == "id_0");
  CHECK(reply.calls[0].name == "get_weather");
  CHECK(reply.calls[0].arguments == R"({"city":"Oslo"})");
  CHECK(reply.calls[1].arguments == "{}");
  CHECK(reply.content == "Let me see.");
  CHECK(read(weather).content == std::nullopt);
  for (const std::string& text : std::vector<std::string>{
           std::string("Just text"), "<tool_call>\n{\"name\": \"x\"}",
           "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>",
           "<tool_call>\nnot json\n</tool_call>"}) {
    CAPTURE(text);
    const auto plain = read(text);
    CHECK(plain.calls.empty());
    CHECK(plain.content == text);
  }
  // Text after the calls is content; the calls stay.
  const auto after = read(weather + " and more text");
  CHECK(after.calls.size() == 1);
  CHECK(after.content == " and more text");

  // Streamed in any pieces, the same calls and content.
  const std::string full = "Let me see.\n" + weather + "\n" + time;
  for (const std::size_t step : {std::size_t(1), std::size_t(3), std::size_t(7), full.size()}) {
    CAPTURE(step);
    smol::serve::ToolCallReader scanner(*tools.syntax, tools);
    std::vector<smol::serve::ToolReplyScanner::Event> events;
    for (std::size_t at = 0; at < full.size(); at += step) {
      for (auto& e : scanner.push(std::string_view(full).substr(at, step))) events.push_back(e);
    }
    for (auto& e : scanner.finish()) events.push_back(e);
    std::string content;
    std::vector<smol::serve::ToolCall> calls;
    for (const auto& e : events) {
      using Kind = smol::serve::ToolReplyScanner::Kind;
      if (e.kind == Kind::content) content += e.text;
      if (e.kind == Kind::call) calls.push_back({"", e.text, ""});
      if (e.kind == Kind::arguments) calls.at(e.index).arguments += e.text;
    }
    CHECK(content == "Let me see.");
    REQUIRE(calls.size() == 2);
    CHECK(calls[1].name == "get_time");
    CHECK(calls[0].arguments == reply.calls[0].arguments);
  }
  smol::serve::ToolCallReader plain(*tools.syntax, tools);
  std::string text;
  for (const auto& e : plain.push("A <tool")) text += e.text;
  for (const auto& e : plain.push("box> b\n")) text += e.text;
  for (const auto& e : plain.finish()) text += e.text;
  CHECK(text == "A <toolbox> b\n");

  // The chat reply: tool_calls, content null, finish "tool_calls", streamed alike.
  smol::serve::ReplyText reply_text(smol::serve::ReasoningFormat::separate);
  reply_text.add({weather, smol::PieceKind::answer});
  const Json whole = smol::serve::chat_completion_json(
      {"chatcmpl-1", 1, "m"}, reply_text, result_of(smol::StopReason::end_of_generation), false,
      &tools);
  CHECK(whole["choices"][0]["finish_reason"] == "tool_calls");
  CHECK(whole["choices"][0]["message"]["content"].is_null());
  CHECK(whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] ==
        R"({"city":"Oslo"})");
  smol::serve::ChatStream stream({"chatcmpl-1", 1, "m"}, smol::serve::ReasoningFormat::separate,
                                 false, false, r.tools);
  std::string sse = stream.first();
  for (std::size_t at = 0; at < weather.size(); at += 5) {
    sse += stream.piece({weather.substr(at, 5), smol::PieceKind::answer});
  }
  sse += stream.end(result_of(smol::StopReason::end_of_generation));
  std::string arguments, name;
  std::string finish;
  for (const Json& e : events_of(sse)) {
    if (!e.is_object() || e["choices"].empty()) continue;
    const Json& choice = e["choices"][0];
    if (choice["delta"].contains("tool_calls")) {
      const Json& f = choice["delta"]["tool_calls"][0]["function"];
      if (f.contains("name")) name += f["name"].get<std::string>();
      arguments += f.value("arguments", "");
    }
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  CHECK(name == "get_weather");
  CHECK(arguments == R"({"city":"Oslo"})");
  CHECK(finish == "tool_calls");
}

TEST_CASE("post_sampling_probs: parsed, and written as llama-server's prob and top_probs") {
  CHECK(parse_chat_request(body(R"("post_sampling_probs": true, "logprobs": true)"))
            .params.post_sampling_probs);
  CHECK_FALSE(parse_chat_request(body("")).params.post_sampling_probs);
  smol::TokenLogprob t;
  t.post_sampling = true;
  t.chosen = {5, std::log(0.25f), "a"};
  t.top = {{6, std::log(0.75f), "b"}, {5, std::log(0.25f), "a"}};
  const Json json = smol::serve::chat_logprobs_json(std::span(&t, 1));
  const Json& entry = json["content"][0];
  CHECK_FALSE(entry.contains("logprob"));
  CHECK(entry["prob"].get<double>() == doctest::Approx(0.25));
  REQUIRE(entry["top_probs"].size() == 2);
  CHECK(entry["top_probs"][0]["token"] == "b");
  CHECK(entry["top_probs"][0]["prob"].get<double>() == doctest::Approx(0.75));
  CHECK(entry["top_probs"][0]["bytes"] == Json::array({98}));
  t.post_sampling = false;
  CHECK(smol::serve::chat_logprobs_json(std::span(&t, 1))["content"][0].contains("top_logprobs"));
}

TEST_CASE("drafting: the server's default, tuned or turned off by speculative.n_max/n_min") {
  smol::serve::RequestDefaults off;
  // Without --spec-type, the fields are read (and checked) but turn nothing on.
  CHECK_FALSE(parse_chat_request(body(R"("speculative.n_max": 8)"), off).params.draft);
  smol::serve::RequestDefaults on;
  on.draft = smol::DraftLengthSettings{.max = 16, .min = 2};
  const auto plain = parse_chat_request(body(""), on).params.draft;
  REQUIRE(plain);
  CHECK(plain->max == 16);
  CHECK(plain->min == 2);
  const auto tuned =
      parse_chat_request(body(R"("speculative.n_max": 4, "speculative.n_min": 9)"), on)
          .params.draft;
  REQUIRE(tuned);
  CHECK(tuned->max == 4);
  CHECK(tuned->min == 4);  // no longer than the longest
  CHECK_FALSE(parse_chat_request(body(R"("speculative.n_max": 0)"), on).params.draft);
  const auto legacy =
      smol::serve::parse_completion_request(R"({"prompt": "hi", "speculative.n_max": 3})", on);
  REQUIRE(legacy.params.draft);
  CHECK(legacy.params.draft->max == 3);
}

TEST_CASE("timings carry llama-server's draft_n and draft_n_accepted when something was drafted") {
  smol::GenerationStats stats;
  stats.generated_tokens = 20;
  CHECK_FALSE(smol::serve::timings_json(stats).contains("draft_n"));
  stats.drafted_tokens = 12;
  stats.accepted_draft_tokens = 7;
  const Json timings = smol::serve::timings_json(stats);
  CHECK(timings["draft_n"] == 12);
  CHECK(timings["draft_n_accepted"] == 7);
}

// Anthropic's Messages API (serve/anthropic_messages.hpp): a request becomes the chat
// request it means, field by field; the reply's blocks and events.
namespace anthropic = smol::serve::anthropic;

namespace {

Json translated(const std::string& text) {
  return Json::parse(anthropic::chat_request_text(text));
}

ApiError messages_rejection(const std::string& text) {
  return refusal_of([](const std::string& t) { anthropic::chat_request_text(t); }, text);
}

}  // namespace

TEST_CASE("anthropic: a Messages request becomes the chat request it means") {
  const Json chat = translated(R"({
    "model": "m", "max_tokens": 32, "temperature": 0.5, "top_k": 7, "stream": true,
    "stop_sequences": ["END"],
    "system": [{"type": "text", "text": "Be terse."}, {"type": "text", "text": " Really."}],
    "thinking": {"type": "enabled", "budget_tokens": 1024},
    "tools": [{"name": "f", "description": "d",
               "input_schema": {"type": "object", "properties": {"z": {"type": "integer"},
                                                                 "a": {"type": "string"}}}}],
    "tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": true},
    "messages": [
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Hmm.", "signature": "x"},
        {"type": "text", "text": "Calling."},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"z": 1, "a": "b"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
         "content": [{"type": "text", "text": "boom"}]},
        {"type": "text", "text": "Go on."}]}]})");
  const Json& m = chat["messages"];
  REQUIRE(m.size() == 6);
  CHECK(m[0] == Json{{"role", "system"}, {"content", "Be terse. Really."}});
  CHECK(m[1] == Json{{"role", "user"}, {"content", "Hi"}});
  CHECK(m[2]["content"] == "Calling.");
  CHECK(m[2]["reasoning_content"] == "Hmm.");
  CHECK(m[2]["tool_calls"][0]["id"] == "toolu_1");
  CHECK(m[2]["tool_calls"][0]["function"]["arguments"] == R"({"z":1,"a":"b"})");  // client's order
  CHECK(m[3] == Json{{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "42"}});
  CHECK(m[4]["content"] == "Error: boom");
  CHECK(m[5] == Json{{"role", "user"}, {"content", "Go on."}});
  CHECK(chat["max_tokens"] == 32);
  CHECK(chat["top_k"] == 7);
  CHECK(chat["stop"] == Json::array({"END"}));
  CHECK(chat["chat_template_kwargs"]["enable_thinking"] == true);
  CHECK(chat["tool_choice"]["function"]["name"] == "f");
  CHECK(chat["parallel_tool_calls"] == false);
  CHECK(chat["reasoning_format"] == "deepseek");
  // Claude Code's reminders come as system turns: they join the system prompt, first.
  const Json reminded =
      translated(R"({"max_tokens": 1, "system": "S", "thinking": {"type": "adaptive"},
      "messages": [{"role": "user", "content": "Hi"},
                   {"role": "system", "content": [{"type": "text", "text": "R"}]}]})");
  CHECK(reminded["messages"] == Json::array({{{"role", "system"}, {"content", "S\n\nR"}},
                                             {{"role", "user"}, {"content", "Hi"}}}));
  CHECK_FALSE(reminded.contains("chat_template_kwargs"));  // adaptive: the server's default
  // The schema's properties keep the client's order (its grammar writes them so).
  const std::string text = anthropic::chat_request_text(
      R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
          "tools": [{"name": "f", "input_schema": {"type": "object",
                     "properties": {"z": {}, "a": {}}}}]})");
  CHECK(text.find(R"("properties":{"z":{},"a":{}})") != std::string::npos);
  // And the chat parser takes it: one request model behind both wire formats.
  const auto parsed = parse_chat_request(anthropic::chat_request_text(
      R"({"max_tokens": 5, "tool_choice": {"type": "any"},
          "tools": [{"name": "f", "input_schema": {"type": "object"}}],
          "messages": [{"role": "user", "content": "x"}]})"));
  CHECK(parsed.params.max_tokens == 5);
  REQUIRE(parsed.tools);
  CHECK(parsed.tools->choice == smol::serve::ToolChoice::required);
}

TEST_CASE("anthropic: what a Messages request gets wrong is named") {
  const auto param = [](const std::string& text) { return messages_rejection(text).param; };
  const std::string hi = R"("messages": [{"role": "user", "content": "Hi"}])";
  CHECK(param("{" + hi + "}") == "max_tokens");
  CHECK(anthropic::chat_request_text("{" + hi + "}", /*count_only=*/true).size() > 0);
  CHECK(param(R"({"max_tokens": 1, "messages": []})") == "messages");
  CHECK(param(R"({"max_tokens": 1, "messages": [{"role": "tool", "content": "x"}]})") ==
        "messages[0].role");
  CHECK(param(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [
                 {"type": "image", "source": {}}]}]})") == "messages[0].content[0].type");
  CHECK(param(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [
                 {"type": "tool_use", "id": "a", "name": "f", "input": {}}]}]})") ==
        "messages[0].content[0].type");
  CHECK(param(R"({"max_tokens": 1, "messages": [{"role": "assistant", "content": [
                 {"type": "tool_use", "id": "a", "name": "f", "input": 3}]}]})") ==
        "messages[0].content[0].input");
  CHECK(param("{\"max_tokens\": 1, " + hi + R"(, "tools": [{"type": "web_search_20250305",
                 "name": "web_search"}]})") == "tools[0].type");
  CHECK(param("{\"max_tokens\": 1, " + hi + R"(, "tool_choice": {"type": "maybe"}})") ==
        "tool_choice.type");
  CHECK(param("{\"max_tokens\": 1, " + hi + R"(, "thinking": {"type": "sometimes"}})") ==
        "thinking.type");
  CHECK(messages_rejection("[1]").status == 400);
  CHECK(messages_rejection("{\"max_tokens\": 1, \"messages\": [{\"role\": \"user\", \"content\": " +
                           std::string(300, '[') + std::string(300, ']') + "}]}")
            .status == 400);
  const Json error = anthropic::error_body(ApiError(401, "bad key", "authentication_error"));
  CHECK(error == Json{{"type", "error"},
                      {"error", {{"type", "authentication_error"}, {"message", "bad key"}}}});
  CHECK(anthropic::error_type(503) == "overloaded_error");
}

// The `data:` JSON of each event of an Anthropic (or Responses) stream, checking each
// `event:` line names it.
static std::vector<Json> anthropic_events(const std::string& sse) {
  std::vector<Json> events;
  std::size_t at = 0;
  while ((at = sse.find("event: ", at)) != std::string::npos) {
    const std::size_t name_end = sse.find('\n', at);
    const std::string name = sse.substr(at + 7, name_end - at - 7);
    const std::size_t data = sse.find("data: ", name_end) + 6;
    const std::size_t end = sse.find("\n\n", data);
    events.push_back(Json::parse(sse.substr(data, end - data)));
    CHECK(events.back()["type"] == name);
    at = end;
  }
  return events;
}

TEST_CASE("anthropic: a streamed message's blocks add up to the whole message") {
  using smol::PieceKind;
  const smol::serve::ReplyHeader header{"msg_1", 0, "m"};
  smol::GenerationResult result;
  result.stop = smol::StopReason::stop_string;
  result.stop_string = "END";
  result.stats.prompt_tokens = 7;
  result.stats.reused_tokens = 3;
  result.stats.generated_tokens = 5;
  anthropic::MessageStream stream(header, 10, nullptr);
  smol::serve::ReplyText whole(smol::serve::ReasoningFormat::separate);
  std::string sse = stream.first();
  for (const smol::TextPiece piece :
       {smol::TextPiece{"Let me ", PieceKind::thinking},
        smol::TextPiece{"think.", PieceKind::thinking}, smol::TextPiece{"\n\n", PieceKind::answer},
        smol::TextPiece{"Hello", PieceKind::answer},
        smol::TextPiece{" there", PieceKind::answer}}) {
    sse += stream.piece(piece);
    whole.add(piece);
  }
  sse += stream.finish(result);
  const std::vector<Json> events = anthropic_events(sse);
  std::vector<std::string> types;
  for (const Json& e : events) types.push_back(e["type"]);
  CHECK(types == std::vector<std::string>{"message_start", "content_block_start",
                                          "content_block_delta", "content_block_delta",
                                          "content_block_stop", "content_block_start",
                                          "content_block_delta", "content_block_delta",
                                          "content_block_stop", "message_delta", "message_stop"});
  CHECK(events[0]["message"]["usage"]["input_tokens"] == 10);
  CHECK(events[1]["index"] == 0);
  CHECK(events[1]["content_block"]["type"] == "thinking");
  CHECK(events[3]["delta"] == Json{{"type", "thinking_delta"}, {"thinking", "think."}});
  CHECK(events[5]["index"] == 1);
  CHECK(events[6]["index"] == 1);
  CHECK(events[6]["delta"] == Json{{"type", "text_delta"}, {"text", "Hello"}});
  CHECK(events[9]["delta"]["stop_reason"] == "stop_sequence");
  CHECK(events[9]["delta"]["stop_sequence"] == "END");
  CHECK(events[9]["usage"]["cache_read_input_tokens"] == 3);
  const Json message = anthropic::message_json(header, whole, result, nullptr);
  CHECK(message["content"] ==
        Json::array({{{"type", "thinking"}, {"thinking", "Let me think."}, {"signature", ""}},
                     {{"type", "text"}, {"text", "Hello there"}}}));
  CHECK(message["stop_reason"] == "stop_sequence");
  CHECK(message["usage"]["input_tokens"] == 7);
  CHECK(anthropic::stop_reason(smol::StopReason::end_of_generation, true) == "tool_use");
  CHECK(anthropic::stop_reason(smol::StopReason::max_tokens, false) == "max_tokens");
}

// OpenAI's Responses API (serve/openai_responses.hpp): a request becomes the chat request
// it means, after the stored conversation it continues; the reply's items and events.
namespace responses = smol::serve::responses;

namespace {

Json responses_translated(const std::string& text,
                          const responses::Ordered& earlier = responses::Ordered::array()) {
  return Json::parse(responses::translate(responses::read_request(text), earlier).chat);
}

ApiError responses_rejection(const std::string& text) {
  return refusal_of(
      [](const std::string& t) {
        responses::translate(responses::read_request(t), responses::Ordered::array());
      },
      text);
}

}  // namespace

TEST_CASE("responses: a Responses request becomes the chat request it means") {
  const std::string text = R"({
    "model": "m", "instructions": "Be terse.", "max_output_tokens": 32, "temperature": 0.5,
    "stream": true, "store": false, "parallel_tool_calls": false,
    "reasoning": {"effort": "none", "summary": "auto"},
    "tools": [{"type": "function", "name": "f", "description": "d", "strict": false,
               "parameters": {"type": "object", "properties": {"z": {"type": "integer"},
                                                               "a": {"type": "string"}}}},
              {"type": "namespace", "name": "ns", "description": "n",
               "tools": [{"type": "function", "name": "g", "parameters": {"type": "object"}}]},
              {"type": "web_search", "external_web_access": false}],
    "tool_choice": {"type": "function", "name": "f"},
    "input": [
      {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Dev."}]},
      {"role": "user", "content": "Hi"},
      {"type": "reasoning", "id": "rs_1", "summary": [],
       "content": [{"type": "reasoning_text", "text": "Hmm."}]},
      {"type": "message", "role": "assistant",
       "content": [{"type": "output_text", "text": "Calling.", "annotations": []}]},
      {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"z\":1,\"a\":\"b\"}"},
      {"type": "function_call", "call_id": "call_2", "name": "g", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "42"},
      {"type": "function_call_output", "call_id": "call_2",
       "output": [{"type": "input_text", "text": "ok"}]},
      {"role": "user", "content": [{"type": "input_text", "text": "Go on."}]}]})";
  const responses::ResponsesRequest request = responses::read_request(text);
  CHECK_FALSE(request.store);
  CHECK(request.stream);
  const responses::Translation translation =
      responses::translate(request, responses::Ordered::array());
  CHECK(translation.dropped_tools == std::vector<std::string>{"tools[2]: web_search"});
  const Json chat = Json::parse(translation.chat);
  const Json& m = chat["messages"];
  REQUIRE(m.size() == 6);
  CHECK(m[0] == Json{{"role", "system"}, {"content", "Be terse.\n\nDev."}});
  CHECK(m[1] == Json{{"role", "user"}, {"content", "Hi"}});
  CHECK(m[2]["content"] == "Calling.");
  CHECK(m[2]["reasoning_content"] == "Hmm.");
  REQUIRE(m[2]["tool_calls"].size() == 2);  // both calls join the turn's text
  CHECK(m[2]["tool_calls"][0]["id"] == "call_1");
  CHECK(m[2]["tool_calls"][1]["function"]["name"] == "g");
  CHECK(m[3] == Json{{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "42"}});
  CHECK(m[4] == Json{{"role", "tool"}, {"tool_call_id", "call_2"}, {"content", "ok"}});
  CHECK(m[5] == Json{{"role", "user"}, {"content", "Go on."}});
  CHECK(chat["max_tokens"] == 32);
  CHECK(chat["parallel_tool_calls"] == false);
  CHECK(chat["chat_template_kwargs"]["enable_thinking"] == false);
  REQUIRE(chat["tools"].size() == 2);  // f, and the namespace's g
  CHECK(chat["tools"][1]["function"]["name"] == "g");
  CHECK(chat["tool_choice"]["function"]["name"] == "f");
  CHECK(chat["reasoning_format"] == "deepseek");
  // The schema's properties keep the client's order (its grammar writes them so).
  CHECK(translation.chat.find(R"("properties":{"z":{"type":"integer"},"a":)") != std::string::npos);
  // A text input is one user message; text.format is response_format; the stored
  // conversation comes first, then this input.
  const responses::Ordered earlier = responses::Ordered::parse(
      R"([{"role": "user", "content": "Before"},
          {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Yes"}]}])");
  const Json next = responses_translated(
      R"({"input": "Now", "instructions": "I",
          "text": {"format": {"type": "json_schema", "name": "s", "strict": true,
                              "schema": {"type": "object", "properties": {"b": {}, "a": {}}}}}})",
      earlier);
  CHECK(next["messages"] == Json::array({{{"role", "system"}, {"content", "I"}},
                                         {{"role", "user"}, {"content", "Before"}},
                                         {{"role", "assistant"}, {"content", "Yes"}},
                                         {{"role", "user"}, {"content", "Now"}}}));
  CHECK(next["response_format"]["json_schema"]["name"] == "s");
  CHECK(next["response_format"]["json_schema"]["strict"] == true);
  // And the chat parser takes it: one request model behind every wire format.
  const auto parsed = parse_chat_request(
      responses::translate(responses::read_request(
                               R"({"input": "x", "max_output_tokens": 5, "tool_choice": "required",
                                   "tools": [{"type": "function", "name": "f",
                                              "parameters": {"type": "object"}}]})"),
                           responses::Ordered::array())
          .chat);
  CHECK(parsed.params.max_tokens == 5);
  REQUIRE(parsed.tools);
  CHECK(parsed.tools->choice == smol::serve::ToolChoice::required);
  CHECK(
      parse_chat_request(responses::translate(
                             responses::read_request(
                                 R"({"input": "x", "text": {"format": {"type": "json_object"}}})"),
                             responses::Ordered::array())
                             .chat)
          .params.output);
}

TEST_CASE("responses: what a Responses request gets wrong is named") {
  const auto param = [](const std::string& text) { return responses_rejection(text).param; };
  CHECK(param("{}") == "input");
  CHECK(param(R"({"input": 3})") == "input");
  CHECK(param(R"({"input": []})") == "input");
  CHECK(param(R"({"input": [{"role": "tool", "content": "x"}]})") == "input[0].role");
  CHECK(
      param(
          R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})") ==
      "input[0].content[0].type");
  CHECK(param(R"({"input": [{"type": "item_reference", "id": "x"}]})") == "input[0].type");
  CHECK(
      param(
          R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]})") ==
      "input[0].arguments");
  CHECK(param(R"({"input": [{"type": "function_call_output", "call_id": "c"}]})") ==
        "input[0].output");
  CHECK(param(R"({"input": "x", "tools": [{"type": "function"}]})") == "tools[0].name");
  CHECK(param(R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
                  "tool_choice": {"type": "web_search"}})") == "tool_choice");
  CHECK(param(R"({"input": "x", "text": {"format": {"type": "xml"}}})") == "text.format.type");
  CHECK(param(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "s"}}})") ==
        "text.format.schema");
  CHECK(param(R"({"input": "x", "store": "yes"})") == "store");
  CHECK(param(R"({"input": "x", "previous_response_id": 7})") == "previous_response_id");
  CHECK(param(R"({"input": "x", "reasoning": {"effort": 3}})") == "reasoning.effort");
  CHECK(responses_rejection("[1]").status == 400);
  CHECK(responses_rejection("{\"input\": " + std::string(300, '[') + std::string(300, ']') + "}")
            .status == 400);
}

// The `data:` JSON of each event of a Responses stream (checked as Anthropic's are),
// checking that the sequence numbers count up from 0.
static std::vector<Json> responses_events(const std::string& sse) {
  std::vector<Json> events = anthropic_events(sse);
  for (std::size_t i = 0; i < events.size(); ++i) CHECK(events[i]["sequence_number"] == i);
  return events;
}

TEST_CASE("responses: a streamed response's items add up to the whole response") {
  using smol::PieceKind;
  const smol::serve::ReplyHeader header{"resp_1", 5, "m"};
  const auto request = std::make_shared<const responses::ResponsesRequest>(
      responses::read_request(R"({"input": "Hi", "max_output_tokens": 9})"));
  smol::GenerationResult result;
  result.stop = smol::StopReason::max_tokens;
  result.stats.prompt_tokens = 7;
  result.stats.reused_tokens = 3;
  result.stats.generated_tokens = 5;
  responses::ResponseStream stream(header, request, nullptr);
  smol::serve::ReplyText whole(smol::serve::ReasoningFormat::separate);
  std::string sse = stream.first();
  for (const smol::TextPiece piece :
       {smol::TextPiece{"Let me ", PieceKind::thinking},
        smol::TextPiece{"think.", PieceKind::thinking}, smol::TextPiece{"\n\n", PieceKind::answer},
        smol::TextPiece{"Hello", PieceKind::answer},
        smol::TextPiece{" there", PieceKind::answer}}) {
    sse += stream.piece(piece);
    whole.add(piece);
  }
  Json final_response;
  sse += stream.finish(result, final_response);
  const std::vector<Json> events = responses_events(sse);
  std::vector<std::string> types;
  for (const Json& e : events) types.push_back(e["type"]);
  CHECK(types == std::vector<std::string>{
                     "response.created", "response.in_progress", "response.output_item.added",
                     "response.reasoning_text.delta", "response.reasoning_text.delta",
                     "response.reasoning_text.done", "response.output_item.done",
                     "response.output_item.added", "response.content_part.added",
                     "response.output_text.delta", "response.output_text.delta",
                     "response.output_text.done", "response.content_part.done",
                     "response.output_item.done", "response.incomplete"});
  CHECK(events[0]["response"]["status"] == "in_progress");
  CHECK(events[0]["response"]["max_output_tokens"] == 9);
  CHECK(events[2]["item"]["type"] == "reasoning");
  CHECK(events[6]["item"]["content"][0]["text"] == "Let me think.");
  CHECK(events[7]["output_index"] == 1);
  CHECK(events[9]["delta"] == "Hello");
  CHECK(events[11]["text"] == "Hello there");
  // The last event carries the response the non-streamed path builds for the same reply.
  const Json response = responses::finished_response(header, *request, whole, result, nullptr, 2);
  CHECK(events.back()["response"] == response);
  CHECK(final_response == response);
  CHECK(response["status"] == "incomplete");
  CHECK(response["incomplete_details"]["reason"] == "max_output_tokens");
  REQUIRE(response["output"].size() == 2);
  CHECK(response["output"][0]["id"] == events[2]["item"]["id"]);
  CHECK(response["output"][1]["id"] == events[7]["item"]["id"]);
  CHECK(response["output"][1]["content"][0]["text"] == "Hello there");
  CHECK(response["usage"]["input_tokens"] == 10);
  CHECK(response["usage"]["input_tokens_details"]["cached_tokens"] == 3);
  CHECK(response["usage"]["output_tokens_details"]["reasoning_tokens"] == 2);
  CHECK(response["usage"]["total_tokens"] == 15);
  // Stored, its conversation is the input, then the output, ready for the next request.
  const responses::Ordered items =
      responses::conversation_items(responses::Ordered::array(), *request, response);
  REQUIRE(items.size() == 3);
  CHECK(items[0]["content"] == "Hi");
  CHECK(items[2]["type"] == "message");
  const Json next = responses_translated(R"({"input": "More"})", items);
  CHECK(next["messages"][1]["reasoning_content"] == "Let me think.");
  CHECK(next["messages"][1]["content"] == "Hello there");
}

TEST_CASE("responses: the store keeps the most recently used, within its count and bytes") {
  smol::serve::ResponseStore store(2, 1000);
  const auto entry = [](std::size_t bytes) {
    return smol::serve::ResponseStore::Entry{responses::Ordered::array({std::string(bytes, 'x')}),
                                             Json::object()};
  };
  store.put("a", entry(10));
  store.put("b", entry(10));
  CHECK(store.get("a"));  // now the most recent: b goes first
  store.put("c", entry(10));
  CHECK(store.get("a"));
  CHECK_FALSE(store.get("b"));
  CHECK(store.get("c"));
  store.put("d", entry(900));  // over the count: a, the least recent, goes
  CHECK_FALSE(store.get("a"));
  CHECK(store.get("c"));
  store.put("f", entry(980));  // over the bytes: c and d go
  CHECK(store.size() == 1);
  CHECK(store.get("f"));
  store.put("e", entry(2000));  // larger than the whole budget: not kept
  CHECK_FALSE(store.get("e"));
  CHECK(store.erase("f"));
  CHECK_FALSE(store.erase("f"));
  smol::serve::ResponseStore none(0, 1000);
  none.put("a", entry(1));
  CHECK_FALSE(none.get("a"));
}

TEST_CASE(
    "context shift: the fewest oldest whole turns go; the system prompt and the last turn stay") {
  using smol::ChatMessage;
  // One token per message and per character of its content: a stand-in for a template.
  const auto encode = [](const std::vector<ChatMessage>& messages) {
    std::size_t n = 0;
    for (const ChatMessage& m : messages) n += 1 + m.content.size();
    return std::vector<smol::TokenId>(n, 0);
  };
  const auto message = [](const char* role, std::size_t size) {
    ChatMessage m;
    m.role = role;
    m.content = std::string(size, 'x');
    return m;
  };
  const std::vector<ChatMessage> conversation = {
      message("system", 9),    message("user", 19), message("assistant", 9),  message("tool", 9),
      message("assistant", 9), message("user", 19), message("assistant", 19), message("user", 9)};
  // 10 + 20 + 10 + 10 + 10 + 20 + 20 + 10 = 110 tokens.
  {
    std::vector<ChatMessage> messages = conversation;
    smol::serve::ContextShift shift;
    CHECK(smol::serve::shift_context(messages, 110, encode, shift).size() == 110);
    CHECK_FALSE(shift.shifted());
    CHECK(messages.size() == 8);
  }
  {
    // 109: the first turn (user, assistant, tool, assistant: 50 tokens) goes, whole.
    std::vector<ChatMessage> messages = conversation;
    smol::serve::ContextShift shift;
    CHECK(smol::serve::shift_context(messages, 109, encode, shift).size() == 60);
    CHECK(shift.dropped_messages == 4);
    CHECK(shift.dropped_tokens == 50);
    REQUIRE(messages.size() == 4);
    CHECK(messages[0].role == "system");
    CHECK(messages[1].role == "user");
    CHECK(messages[1].content.size() == 19);
  }
  {
    // 20: only the system prompt and the last turn are left, and still too many (the
    // caller refuses it as before).
    std::vector<ChatMessage> messages = conversation;
    smol::serve::ContextShift shift;
    CHECK(smol::serve::shift_context(messages, 15, encode, shift).size() == 20);
    CHECK(shift.dropped_messages == 6);
    REQUIRE(messages.size() == 2);
    CHECK(messages[1].content.size() == 9);
  }
  {
    // One turn only: nothing can go.
    std::vector<ChatMessage> messages = {message("system", 50), message("user", 50)};
    smol::serve::ContextShift shift;
    CHECK(smol::serve::shift_context(messages, 10, encode, shift).size() == 102);
    CHECK_FALSE(shift.shifted());
  }
  CHECK(smol::serve::prompt_budget(1000, std::nullopt) == 750);
  CHECK(smol::serve::prompt_budget(1000, 100) == 900);
  CHECK(smol::serve::prompt_budget(1000, 900) == 500);
}

TEST_CASE("tools: what a tool's schema cannot enforce is left unenforced, named; the root is not") {
  // Claude Code's own tools carry these three (SendMessage, WebFetch, Workflow).
  const auto r = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object",
        "properties": {
          "to": {"type": "string", "description": "who",
                 "allOf": [{"pattern": "^[^\\n]*$"}, {"pattern": "^.{0,300}$"}]},
          "url": {"type": "string", "format": "uri"},
          "script": {"type": "string", "maxLength": 100000},
          "n": {"type": "integer", "minimum": 1, "maximum": 3}},
        "required": ["to", "url", "script", "n"]}}}]})");
  REQUIRE(r.tools);
  const smol::serve::ToolFunction& f = r.tools->functions.at(0);
  REQUIRE(f.unenforced.size() == 3);
  CHECK(f.unenforced[0].find("pattern") != std::string::npos);
  CHECK(f.unenforced[0].find("#/properties/to") != std::string::npos);
  CHECK(f.unenforced[1].find("uri") != std::string::npos);
  CHECK(f.unenforced[2].find("maxLength") != std::string::npos);
  const auto& properties = f.parameters["properties"];
  CHECK(properties["to"] == smol::serve::OrderedJson{{"type", "string"}, {"description", "who"}});
  CHECK(properties["url"] == smol::serve::OrderedJson{{"type", "string"}});
  CHECK(properties["n"]["maximum"] == 3);  // what it can enforce, it does
  // The reply grammar takes the relaxed schema: a call with any string there parses.
  REQUIRE(r.params.output);
  CHECK(grammar_accepts(
      *r.params.output,
      R"({"tool_calls": [{"name": "f", "arguments": {"to": "a\nb", "url": "not a uri", "script": "s", "n": 2}}]})"));
  CHECK_FALSE(grammar_accepts(
      *r.params.output,
      R"({"tool_calls": [{"name": "f", "arguments": {"to": "a", "url": "u", "script": "s", "n": 4}}]})"));
  // A root the converter refuses stays a 400, and response_format is never relaxed.
  CHECK(rejection(body(R"("tools": [{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "format": "uri", "pattern": "a", "allOf": [{"pattern": "b"}]}}}])"))
            .param == "tools[0].function.parameters");
  CHECK(rejection(body(R"("response_format": {"type": "json_schema", "json_schema": {"name": "s",
      "schema": {"type": "object", "properties": {"url": {"type": "string", "format": "uri"}}}}})"))
            .status == 400);
}

TEST_CASE("logit_bias: OpenAI's object or llama.cpp's pairs, false bans") {
  const auto r = parse_chat_request(body(R"("logit_bias": {"5": 2.5, "7": -100})"));
  CHECK(r.params.sampling.logit_bias ==
        std::vector<std::pair<smol::TokenId, float>>{{5, 2.5f}, {7, -100.0f}});
  const auto pairs = parse_chat_request(body(R"("logit_bias": [[3, 1], [4, false]])"));
  REQUIRE(pairs.params.sampling.logit_bias.size() == 2);
  CHECK(pairs.params.sampling.logit_bias[1].second == -std::numeric_limits<float>::infinity());
  for (const char* bad :
       {R"("logit_bias": {"x": 1})", R"("logit_bias": {"5": 101})", R"("logit_bias": {"-1": 1})",
        R"("logit_bias": [[5]])", R"("logit_bias": [[5, true]])", R"("logit_bias": 3)"}) {
    CAPTURE(bad);
    CHECK(rejection(body(bad)).param == "logit_bias");
  }
}

}  // namespace test_serve_protocol

namespace test_serve_protocol {

TEST_CASE("rerank pairs: the file's rerank template filled in, its special tokens read as such") {
  const smol::Tokenizer tokenizer(smol::build_synthetic_vocabulary(1024));
  const std::string prompt_template = "<|im_start|>user\nQ: {query}\nD: {document}<|im_end|>";
  const auto ids = smol::serve::rerank_input(tokenizer, "where", "here", prompt_template);
  CHECK(ids == tokenizer.encode("<|im_start|>user\nQ: where\nD: here<|im_end|>",
                                {.parse_special = true, .add_bos = false}));
  const auto im_start = tokenizer.find_token("<|im_start|>");
  REQUIRE(im_start.has_value());
  CHECK(ids.front() == *im_start);
  // llama-server's order: {query} first, then {document}, in what the query put in too;
  // a replacement is not searched again.
  CHECK(smol::serve::replace_all("{query} and {document}", "{query}", "{document}{query}") ==
        "{document}{query} and {document}");
  // Without a template, a vocabulary that adds eos ends both halves with it.
  smol::Vocabulary with_eos = smol::build_synthetic_vocabulary(1024);
  with_eos.add_eos = true;
  const smol::Tokenizer eos_tokenizer(with_eos);
  const auto plain = smol::serve::rerank_input(eos_tokenizer, "where", "here");
  const auto q = eos_tokenizer.encode("where", {.add_bos = false});
  const auto d = eos_tokenizer.encode("here", {.add_bos = false});
  std::vector<smol::TokenId> want = q;
  want.push_back(*with_eos.eos_id);
  want.insert(want.end(), d.begin(), d.end());
  want.push_back(*with_eos.eos_id);
  CHECK(plain == want);
}

}  // namespace test_serve_protocol
