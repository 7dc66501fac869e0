// libFuzzer target: bytes as the body of POST /v1/chat/completions, /v1/completions,
// /v1/messages (Anthropic's, translated into a chat request: serve/anthropic_messages.hpp)
// and /v1/responses (OpenAI's Responses API: serve/openai_responses.hpp), and of
// /v1/embeddings and /embedding (serve/openai_embeddings.hpp), /v1/rerank
// (serve/rerank.hpp), and ollama's /api/chat, /api/generate, /api/embed and /api/embeddings
// (serve/ollama_api.hpp, translated as Anthropic's are).
//
// Every input must end in a parsed request or an ApiError (400): never a crash, an
// out-of-bounds read, a hang or another exception. A parsed chat request then goes on
// the way the server takes it: rendered with SmolLM3's template and tokenized, user
// text kept plain. The bytes are also read as a model's tool reply (tool_calls.hpp), which
// must come back as calls or as text, never a crash.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/serve/anthropic_messages.hpp"
#include "smol/serve/ollama_api.hpp"
#include "smol/serve/openai_embeddings.hpp"
#include "smol/serve/openai_protocol.hpp"
#include "smol/serve/openai_responses.hpp"
#include "smol/serve/rerank.hpp"
#include "smol/template/chat_prompt.hpp"
#include "smol/text/gguf_vocabulary.hpp"

namespace {

struct Text {
  smol::Tokenizer tokenizer;
  smol::ChatPromptEncoder encoder{tokenizer};
  std::shared_ptr<const smol::serve::ToolRequest> tools =
      smol::serve::parse_chat_request(
          R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function",
              "function": {"name": "f", "parameters": {"type": "object",
              "properties": {"a": {"type": "string"}}}}}]})")
          .tools;
};

const Text& text() {
  static const Text instance{smol::Tokenizer(smol::load_vocabulary(
      smol::gguf::GgufFile::open(std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf")))};
  return instance;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  text();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    const smol::serve::ChatCompletionRequest chat = smol::serve::parse_chat_request(body);
    const auto tokens = text().encoder.encode(smol::ChatFormat::smollm3, chat.messages,
                                              {.enable_thinking = chat.enable_thinking});
    if (tokens.empty()) __builtin_trap();  // the template always writes something
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  // The same request for a template with Hermes-style tools (Qwen2.5's).
  try {
    smol::serve::RequestDefaults hermes;
    hermes.tool_syntax = smol::serve::tool_call_syntax_named("Hermes");
    const smol::serve::ChatCompletionRequest chat = smol::serve::parse_chat_request(body, hermes);
    smol::ChatTemplate qwen(smol::ChatFormat::chatml_tools);
    qwen.default_system = "S";
    const auto tokens = text().encoder.encode(
        qwen, chat.messages,
        {.enable_thinking = chat.enable_thinking, .tools = chat.template_tools});
    if (tokens.empty()) __builtin_trap();
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  // The body as a reply in each family's syntax: calls or text, streamed as whole.
  for (const smol::serve::ToolCallSyntax& syntax : smol::serve::kToolCallSyntaxes) {
    const smol::serve::ToolReply whole =
        smol::serve::read_family_reply(body, syntax, *text().tools, "c");
    if (whole.calls.empty() && !whole.content && !body.empty()) __builtin_trap();
    smol::serve::ToolCallReader reader(syntax, *text().tools);
    std::size_t calls = 0;
    for (std::size_t at = 0; at < body.size(); at += 7) {
      for (const auto& event : reader.push(body.substr(at, 7))) {
        calls += event.kind == smol::serve::ToolReplyScanner::Kind::call;
      }
    }
    for (const auto& event : reader.finish()) {
      calls += event.kind == smol::serve::ToolReplyScanner::Kind::call;
    }
    if (calls != whole.calls.size()) __builtin_trap();  // a stream reads what the whole does
  }
  smol::serve::ToolReplyScanner().push(body);
  const smol::serve::ToolReply reply = smol::serve::parse_tool_reply(body, *text().tools, "c");
  if (reply.calls.empty() && !reply.content) __builtin_trap();  // calls or text, always
  try {
    smol::serve::parse_completion_request(body);
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  // As an Anthropic Messages request: a chat request the chat parser takes, or a 400.
  try {
    const smol::serve::ChatCompletionRequest chat = smol::serve::parse_chat_request(
        smol::serve::anthropic::chat_request_text(body, /*count_only=*/true));
    const auto tokens = text().encoder.encode(smol::ChatFormat::smollm3, chat.messages,
                                              {.enable_thinking = chat.enable_thinking});
    if (tokens.empty()) __builtin_trap();
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  // As ollama's chat, generate and embed requests: translated into requests the OpenAI
  // parsers take, or a 400.
  try {
    const smol::serve::ChatCompletionRequest chat =
        smol::serve::parse_chat_request(smol::serve::ollama::chat_request_text(body));
    const auto tokens = text().encoder.encode(smol::ChatFormat::smollm3, chat.messages,
                                              {.enable_thinking = chat.enable_thinking});
    if (tokens.empty()) __builtin_trap();
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  try {
    const smol::serve::ollama::GenerateRequest generate =
        smol::serve::ollama::generate_request(body);
    if (generate.raw) {
      smol::serve::parse_completion_request(generate.openai);
    } else {
      smol::serve::parse_chat_request(generate.openai);
    }
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  try {
    smol::serve::ollama::embed_request(body);
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  try {
    smol::serve::ollama::legacy_embedding_prompt(body);
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  // As a Responses request, alone and after a stored conversation of its own input: a
  // chat request the chat parser takes, or a 400.
  try {
    namespace responses = smol::serve::responses;
    const responses::ResponsesRequest request = responses::read_request(body);
    for (const responses::Ordered& earlier : {responses::Ordered::array(), request.input}) {
      const smol::serve::ChatCompletionRequest chat =
          smol::serve::parse_chat_request(responses::translate(request, earlier).chat);
      const auto tokens = text().encoder.encode(smol::ChatFormat::smollm3, chat.messages,
                                                {.enable_thinking = chat.enable_thinking});
      if (tokens.empty()) __builtin_trap();
    }
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  // As an embeddings request (`input`, and /embedding's `content`): token lists within
  // the vocabulary, none empty, each vector made what it asks (dimensions, norm), or a 400.
  for (const char* field : {"input", "content"}) {
    try {
      const smol::serve::EmbeddingRequest request =
          smol::serve::parse_embedding_request(body, text().tokenizer, field);
      if (request.inputs.empty()) __builtin_trap();
      for (const auto& input : request.inputs) {
        if (input.empty()) __builtin_trap();
        for (const smol::TokenId id : input) {
          if (id < 0 || static_cast<std::size_t>(id) >= text().tokenizer.size()) __builtin_trap();
        }
      }
      const std::vector<float> finished =
          smol::serve::finish_embedding(std::vector<float>(16, 0.5f), request);
      smol::serve::embeddings_reply("m", std::span(&finished, 1), request);
    } catch (const smol::serve::ApiError& error) {
      if (error.status != 400) __builtin_trap();
    }
  }
  // As a rerank request: one pair per document, each scored and sorted, or a 400.
  try {
    const smol::serve::RerankRequest request =
        smol::serve::parse_rerank_request(body, text().tokenizer);
    if (request.inputs.size() != request.documents.size() || request.inputs.empty()) {
      __builtin_trap();
    }
    std::vector<float> scores(request.inputs.size());
    for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = static_cast<float>(i % 3);
    const smol::serve::Json reply = smol::serve::rerank_reply("m", scores, request);
    if (reply["results"].size() > scores.size()) __builtin_trap();
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  return 0;
}
