// Chat templates, character by character. The SmolLM3 expectations were checked
// against the fixture's own Jinja template rendered by jinja2.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "json_file.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/text/chat_template.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"

namespace {

using Messages = std::vector<smol::ChatMessage>;

const std::string kFixtures = SMOL_FIXTURES_DIR;

std::string smollm3(const Messages& messages, bool thinking, bool generation_prompt = true) {
  return smol::render_chat(
      smol::ChatFormat::smollm3, messages,
      {.add_generation_prompt = generation_prompt, .enable_thinking = thinking});
}

std::string system_block(std::string_view mode, std::string_view instructions) {
  return std::string("<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\n") +
         "Reasoning Mode: " + std::string(mode) + "\n\n## Custom Instructions\n\n" +
         std::string(instructions) + "\n\n<|im_end|>\n";
}

const std::string kShortDefault =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face.";

}  // namespace

TEST_CASE("the fixture's template is recognized as SmolLM3") {
  const auto file = smol::gguf::GgufFile::open(kFixtures + "/tiny-smollm3-a.q4_k_m.gguf");
  const auto jinja = file.get<std::string>("tokenizer.chat_template");
  CHECK(jinja.size() == 3795);
  CHECK(smol::detect_template(jinja) == smol::ChatFormat::smollm3);
  // The long thinking-mode instructions are the template's own words.
  CHECK(jinja.find(std::string(smol::detail::kSmolLM3ThinkingInstructions) + "\\n\\n") !=
        std::string::npos);
}

TEST_CASE("P2: one user message, thinking off, reproduces the golden prompt exactly") {
  const std::string rendered = smollm3({{"user", "What is 2+2?"}}, false);
  const auto run = smol::test::read_json_file(kFixtures + "/tiny-smollm3-a.q4_k_m.P2.json");
  CHECK(rendered == run.at("prompt_text").get<std::string>());
  CHECK(rendered ==
        "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: "
        "/no_think\n\n## Custom Instructions\n\nYou are a helpful AI assistant named SmolLM, "
        "trained by Hugging Face.\n\n<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n");

  // And its tokens are the golden prompt ids.
  const auto file = smol::gguf::GgufFile::open(kFixtures + "/tiny-smollm3-a.q4_k_m.gguf");
  const smol::Tokenizer tokenizer(smol::load_vocabulary(file));
  const auto expected = run.at("prompt_ids").get<std::vector<smol::TokenId>>();
  CHECK(tokenizer.encode(rendered, {.parse_special = true}) == expected);
}

TEST_CASE("thinking on: the long default instructions and a bare generation prompt") {
  const std::string rendered = smollm3({{"user", "Hi"}}, true);
  CHECK(rendered == system_block("/think", smol::detail::kSmolLM3ThinkingInstructions) +
                        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(smol::detail::kSmolLM3ThinkingInstructions.size() == 1162);
  CHECK(smollm3({{"user", "Hi"}}, true, false) ==
        system_block("/think", smol::detail::kSmolLM3ThinkingInstructions) +
            "<|im_start|>user\nHi<|im_end|>\n");
}

TEST_CASE("a system prompt becomes the custom instructions") {
  CHECK(smollm3({{"system", "Answer in French.  \n"}, {"user", "Hi"}}, true) ==
        system_block("/think", "Answer in French.") +
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(smollm3({{"system", "Answer in French."}, {"user", "Hi"}}, false) ==
        system_block("/no_think", "Answer in French.") +
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n");
}

TEST_CASE("/think and /no_think in the system message switch the mode and vanish") {
  // /no_think overrides enable_thinking = true; only trailing space is stripped.
  CHECK(smollm3({{"system", "Be /no_think brief. /no_think"}, {"user", "Hi"}}, true) ==
        system_block("/no_think", "Be  brief.") +
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n");
  // A system message that is only "/think" leaves no instructions: the default is used.
  CHECK(smollm3({{"system", "/think"}, {"user", "Hi"}}, false) ==
        system_block("/think", smol::detail::kSmolLM3ThinkingInstructions) +
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // Nothing but markers and spaces: empty after rstrip, so the default text.
  CHECK(smollm3({{"system", " /no_think "}, {"user", "Hi"}}, true) ==
        system_block("/no_think", kShortDefault) +
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n");
  // Only the first message counts as the system prompt.
  CHECK(smollm3({{"user", "Hi"}, {"system", "/no_think"}}, true) ==
        system_block("/think", smol::detail::kSmolLM3ThinkingInstructions) +
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("multi-turn: earlier answers are kept as written, thinking included") {
  const Messages conversation = {
      {"user", "What is 2+2?"},
      {"assistant", "\n\n<think>\nEasy.\n</think>\n4"},
      {"tool", "{\"result\": 4}"},
      {"user", "And 3+3?"},
  };
  const std::string turns_on =
      "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
      "<|im_start|>assistant\n<think>\nEasy.\n</think>\n4<|im_end|>\n"
      "<|im_start|>user\n{\"result\": 4}<|im_end|>\n"
      "<|im_start|>user\nAnd 3+3?<|im_end|>\n";
  CHECK(smollm3(conversation, true) ==
        system_block("/think", smol::detail::kSmolLM3ThinkingInstructions) + turns_on +
            "<|im_start|>assistant\n");

  // Thinking off: every assistant turn gets the empty think block in front.
  const std::string turns_off =
      "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
      "<|im_start|>assistant\n<think>\n\n</think>\n<think>\nEasy.\n</think>\n4<|im_end|>\n"
      "<|im_start|>user\n{\"result\": 4}<|im_end|>\n"
      "<|im_start|>user\nAnd 3+3?<|im_end|>\n";
  CHECK(smollm3(conversation, false) == system_block("/no_think", kShortDefault) + turns_off +
                                            "<|im_start|>assistant\n<think>\n\n</think>\n");
  // An empty conversation (on which the Jinja template itself fails) is the system block.
  CHECK(smollm3({}, false, false) == system_block("/no_think", kShortDefault));
}

TEST_CASE("ChatML, Llama-3 and Llama-2") {
  const Messages messages = {
      {"system", "Be brief."}, {"user", " Hi "}, {"assistant", "Hello."}, {"user", "Bye"}};
  CHECK(smol::render_chat(smol::ChatFormat::chatml, messages) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
        "<|im_start|>assistant\n");
  CHECK(smol::render_chat(smol::ChatFormat::llama3, messages) ==
        "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(smol::render_chat(smol::ChatFormat::llama2, messages) ==
        "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s><s>[INST] Bye [/INST]");
}

TEST_CASE("detect_template") {
  std::vector<std::string> warnings;
  const auto warn = [&](std::string_view message) { warnings.emplace_back(message); };
  CHECK(smol::detect_template("{{ '<|im_start|>' + message['role'] }}", warn) ==
        smol::ChatFormat::chatml);
  CHECK(smol::detect_template("{{ '<|start_header_id|>' + role }}", warn) ==
        smol::ChatFormat::llama3);
  CHECK(smol::detect_template("{{ bos_token + '[INST] ' + content }}", warn) ==
        smol::ChatFormat::llama2);
  CHECK(warnings.empty());
  CHECK(smol::detect_template("{{ '<start_of_turn>' }}", warn) == smol::ChatFormat::chatml);
  CHECK(smol::detect_template("", warn) == smol::ChatFormat::chatml);
  CHECK(warnings.size() == 2);
}
