// libFuzzer target: bytes as the body of POST /v1/chat/completions and /v1/completions.
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

#include "smol/gguf/gguf_file.hpp"
#include "smol/serve/openai_protocol.hpp"
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
    const smol::serve::ChatCompletionRequest chat =
        smol::serve::parse_chat_request(body, {.hermes_tools = true});
    smol::ChatTemplate qwen(smol::ChatFormat::chatml_tools);
    qwen.default_system = "S";
    const auto tokens = text().encoder.encode(
        qwen, chat.messages,
        {.enable_thinking = chat.enable_thinking, .tools = chat.template_tools});
    if (tokens.empty()) __builtin_trap();
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  smol::serve::HermesReplyScanner hermes(*text().tools);
  hermes.push(body);
  hermes.finish();
  const smol::serve::ToolReply hermes_reply =
      smol::serve::parse_hermes_reply(body, *text().tools, "c");
  if (hermes_reply.calls.empty() && !hermes_reply.content) __builtin_trap();
  smol::serve::ToolReplyScanner().push(body);
  const smol::serve::ToolReply reply = smol::serve::parse_tool_reply(body, *text().tools, "c");
  if (reply.calls.empty() && !reply.content) __builtin_trap();  // calls or text, always
  try {
    smol::serve::parse_completion_request(body);
  } catch (const smol::serve::ApiError& error) {
    if (error.status != 400) __builtin_trap();
  }
  return 0;
}
