// Chat templates, character by character. The SmolLM3 expectations were checked
// against the fixture's own Jinja template rendered by jinja2; tests/chat_template/
// compares a whole table of conversations with jinja2 for every known template.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "json_file.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/template/chat_template.hpp"
#include "smol/template/known_chat_templates.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_chat_template {

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

// SmolLM2-135M-Instruct's template, verbatim from its GGUF file.
std::string smollm2_template() {
  std::ifstream in(
      std::string(SMOL_SOURCE_DIR) + "/tests/chat_template/smollm2-135m-instruct.jinja",
      std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const std::string kSmolLM2Default =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

}  // namespace

TEST_CASE("the fixture's template is recognized as SmolLM3") {
  const auto file = smol::gguf::GgufFile::open(kFixtures + "/tiny-smollm3-a.q4_k_m.gguf");
  const auto jinja = file.get<std::string>("tokenizer.chat_template");
  CHECK(jinja.size() == 3795);
  CHECK(jinja == smol::kSmolLM3ChatTemplate);
  const auto recognized = smol::recognize_template(jinja);
  REQUIRE(recognized);
  CHECK(recognized->format == smol::ChatFormat::smollm3);
  CHECK(recognized->known_as == "SmolLM3 (Unsloth's edition)");
  CHECK(!recognized->default_system);
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

TEST_CASE("SmolLM2's template: ChatML whose default system prompt is read from the text") {
  const std::string jinja = smollm2_template();
  CHECK(jinja.size() == 368);
  const auto recognized = smol::recognize_template(jinja);
  REQUIRE(recognized);
  CHECK(recognized->format == smol::ChatFormat::chatml);
  CHECK(recognized->known_as == "ChatML with a default system prompt (SmolLM2)");
  CHECK(recognized->default_system == kSmolLM2Default);

  // A conversation without a system message gets the default one; a system message
  // of the user's own replaces it; an empty conversation gets nothing at all.
  CHECK(smol::render_chat(*recognized, Messages{{"user", "Hi"}}) ==
        "<|im_start|>system\n" + kSmolLM2Default +
            "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(smol::render_chat(*recognized, Messages{{"system", "Be brief."}, {"user", "Hi"}}) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n");
  CHECK(smol::render_chat(*recognized, Messages{}) == "<|im_start|>assistant\n");
  // An assistant prefill ends in the open reply (the template closes it; so does smol).
  CHECK(smol::render_chat(*recognized, Messages{{"user", "Hi"}, {"assistant", "Hel"}},
                          {.add_generation_prompt = false})
            .ends_with("<|im_start|>assistant\nHel<|im_end|>\n"));

  // Another default text, unicode included, is read the same way; an empty one too,
  // which the template still writes as an (empty) system block.
  std::string other = jinja;
  smol::detail::replace_all(other, kSmolLM2Default, "Tu es SmolLM — réponds brièvement. 🙂");
  CHECK(smol::recognize_template(other)->default_system ==
        "Tu es SmolLM — réponds brièvement. 🙂");
  std::string empty = jinja;
  smol::detail::replace_all(empty, kSmolLM2Default, "");
  REQUIRE(smol::recognize_template(empty));
  CHECK(smol::recognize_template(empty)->default_system == "");
  CHECK(smol::render_chat(*smol::recognize_template(empty), Messages{{"user", "Hi"}})
            .starts_with("<|im_start|>system\n<|im_end|>\n<|im_start|>user\n"));
}

TEST_CASE("a template that is not exactly a known one is never claimed as known") {
  const std::string jinja = smollm2_template();
  const auto unknown = [](const std::string& text) {
    return !smol::recognize_template(text).has_value();
  };
  // One byte changed outside the default system prompt.
  std::string changed = jinja;
  smol::detail::replace_all(changed, "add_generation_prompt", "add_generation_prompt_");
  CHECK(unknown(changed));
  // A default text that Jinja would decode (an escape, a quote ending the literal)
  // is not taken at its spelling.
  for (const std::string_view odd : {"Say \\\"hi\\\"", "It\\'s me", "a\\nb", "x' + 'y", "a\r\nb"}) {
    std::string variant = jinja;
    smol::detail::replace_all(variant, kSmolLM2Default, odd);
    CAPTURE(odd);
    CHECK(unknown(variant));
  }
  // Trailing text makes it another template; one final newline does not (Jinja drops
  // it when rendering), two do.
  CHECK(!unknown(jinja + "\n"));
  CHECK(unknown(jinja + "\n\n"));
  CHECK(unknown(std::string(smol::kSmolLM3ChatTemplate) + " "));
  CHECK(unknown(""));
}

TEST_CASE("detect_template: known templates silently, guesses with a warning") {
  std::vector<std::string> warnings;
  const auto warn = [&](std::string_view message) { warnings.emplace_back(message); };
  CHECK(smol::detect_template(smollm2_template(), warn).default_system == kSmolLM2Default);
  CHECK(smol::detect_template(smol::kChatMLTemplate, warn).known_as == "ChatML");
  CHECK(smol::detect_template(smol::kSmolLM3ChatTemplate, warn).format ==
        smol::ChatFormat::smollm3);
  CHECK(warnings.empty());

  // Guessed from the markers: the layout is the family's, and the warning says that
  // the prompt may not be the template's.
  const auto guessed = [&](std::string_view jinja, smol::ChatFormat format) {
    warnings.clear();
    const smol::ChatTemplate result = smol::detect_template(jinja, warn);
    CHECK(result.format == format);
    CHECK(result.known_as.empty());
    CHECK(!result.default_system);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("not one smol knows exactly") != std::string::npos);
  };
  guessed("{{ '<|im_start|>' + message['role'] }}", smol::ChatFormat::chatml);
  guessed("{{ '<|im_start|>system' }}Reasoning Mode: {{ mode }}", smol::ChatFormat::smollm3);
  guessed("{{ '<|start_header_id|>' + role }}", smol::ChatFormat::llama3);
  guessed("{{ bos_token + '[INST] ' + content }}", smol::ChatFormat::llama2);
  guessed("{{ '<start_of_turn>' + role }}", smol::ChatFormat::gemma);
  guessed("{{ '<|start_of_role|>' }}", smol::ChatFormat::chatml);
  CHECK(warnings[0].find("plain ChatML") != std::string::npos);

  warnings.clear();
  CHECK(smol::detect_template("", warn).format == smol::ChatFormat::chatml);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "the model has no chat template; using ChatML");

  // A file with none gets its family's when the family has one (general.architecture).
  warnings.clear();
  const smol::ChatTemplate family = smol::detect_template("", warn, "gemma3");
  CHECK(family.format == smol::ChatFormat::gemma);
  CHECK(family.known_as == "Gemma 3");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "the model has no chat template; using its family's (gemma3)");
  CHECK(smol::detect_template("", warn, "llama").format == smol::ChatFormat::chatml);
}

TEST_CASE("Gemma 3: the system prompt in the first user turn, model turns, alternation") {
  // Recognized with or without the final newline its tokenizer_config.json carries.
  const std::string jinja(smol::kGemma3ChatTemplate);
  CHECK(smol::recognize_template(jinja)->format == smol::ChatFormat::gemma);
  CHECK(smol::recognize_template(jinja + "\n")->known_as == "Gemma 3");
  const smol::ChatTemplate gemma(smol::ChatFormat::gemma);
  CHECK(smol::render_chat(gemma, Messages{{"system", " Be brief.\n"},
                                          {"user", "  What is 2+2?\n"},
                                          {"assistant", "\n4 "},
                                          {"user", "And 3+3?"}}) ==
        "<start_of_turn>user\n Be brief.\n\n\nWhat is 2+2?<end_of_turn>\n"
        "<start_of_turn>model\n4<end_of_turn>\n"
        "<start_of_turn>user\nAnd 3+3?<end_of_turn>\n<start_of_turn>model\n");
  CHECK(smol::render_chat(gemma, Messages{{"user", "Hi"}}, {.add_generation_prompt = false}) ==
        "<start_of_turn>user\nHi<end_of_turn>\n");
  // A system message alone: no turn holds it, as the template drops it.
  CHECK(smol::render_chat(gemma, Messages{{"system", "Be brief."}}) == "<start_of_turn>model\n");
  CHECK(smol::trims_message_text(smol::ChatFormat::gemma));
  // The template's refusals: roles that do not alternate, an empty conversation.
  CHECK_THROWS_AS(smol::render_chat(gemma, Messages{{"user", "a"}, {"user", "b"}}),
                  smol::ChatTemplateError);
  CHECK_THROWS_AS(smol::render_chat(gemma, Messages{{"assistant", "a"}}), smol::ChatTemplateError);
  CHECK_THROWS_AS(
      smol::render_chat(gemma, Messages{{"user", "a"}, {"assistant", "b"}, {"assistant", "c"}}),
      smol::ChatTemplateError);
  CHECK_THROWS_AS(smol::render_chat(gemma, Messages{}), smol::ChatTemplateError);
}

}  // namespace test_chat_template
