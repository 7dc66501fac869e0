// The tokenizer against llama.cpp's ids for the tiny SmolLM3 fixture vocabulary.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_file.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"
#include "smol/text/utf8_stream_decoder.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_tokenizer_fixture {

namespace {

const std::string kFixtures = SMOL_FIXTURES_DIR;

const smol::Tokenizer& fixture_tokenizer() {
  static const smol::Tokenizer tokenizer = [] {
    const auto file = smol::gguf::GgufFile::open(kFixtures + "/tiny-smollm3-a.q4_k_m.gguf");
    return smol::Tokenizer(smol::load_vocabulary(file));
  }();
  return tokenizer;
}

std::vector<smol::TokenId> ids_of(const nlohmann::json& array) {
  return array.get<std::vector<smol::TokenId>>();
}

}  // namespace

TEST_CASE("the fixture vocabulary loads with its metadata") {
  const auto& vocab = fixture_tokenizer().vocabulary();
  CHECK(vocab.size() == 1024);
  CHECK(vocab.model == "gpt2");
  CHECK(vocab.pre_tokenizer == "llama-bpe");
  CHECK(vocab.merges.size() == 736);
  CHECK(vocab.add_bos == false);
  CHECK(vocab.bos_id == fixture_tokenizer().find_token("<|begin_of_text|>"));
  CHECK(vocab.eos_id == fixture_tokenizer().find_token("<|im_end|>"));
  CHECK(fixture_tokenizer().is_end_of_generation(*vocab.eos_id));
  CHECK(fixture_tokenizer().is_control(*fixture_tokenizer().find_token("<think>")));
}

TEST_CASE("all llama-tokenize goldens match") {
  const auto goldens = smol::test::read_json_file(kFixtures + "/tiny-smollm3-a.tokenizer.json");
  REQUIRE(goldens.size() == 35);
  for (const auto& golden : goldens) {
    const auto& text = golden.at("text").get_ref<const std::string&>();
    CAPTURE(text);
    const auto ids = fixture_tokenizer().encode(text, {.parse_special = true, .add_bos = false});
    CHECK(ids == ids_of(golden.at("ids")));
    // Decoding with special tokens rendered gives the text back byte for byte.
    CHECK(fixture_tokenizer().decode(ids, {.render_special = true}) == text);
  }
}

TEST_CASE("prompt ids of every golden run match") {
  for (const char* model : {"f32", "q4_k_m"}) {
    for (const char* prompt : {"P1", "P2", "P3"}) {
      const std::string path = kFixtures + "/tiny-smollm3-a." + model + "." + prompt + ".json";
      CAPTURE(path);
      const auto run = smol::test::read_json_file(path);
      const auto ids = fixture_tokenizer().encode(run.at("prompt_text").get<std::string>(),
                                                  {.parse_special = true, .add_bos = false});
      CHECK(ids == ids_of(run.at("prompt_ids")));
      CHECK(ids.size() == run.at("n_prompt").get<std::size_t>());
    }
  }
}

namespace {

// The goldens replaced bad bytes piece by piece, and so count one U+FFFD per piece
// where a character was split across pieces; the stream decoder sees the joined
// bytes and, as Unicode recommends, writes one U+FFFD per maximal bad subpart.
std::string squeeze_replacements(const std::string& text) {
  const std::string replacement = "\xEF\xBF\xBD";
  std::string out;
  for (std::size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, 3, replacement) == 0) {
      if (out.size() < 3 || out.compare(out.size() - 3, 3, replacement) != 0) out += replacement;
      pos += 3;
    } else {
      out += text[pos++];
    }
  }
  return out;
}

}  // namespace

TEST_CASE("generated pieces stream to the golden text") {
  for (const char* run_name :
       {"f32.P1", "f32.P2", "f32.P3", "q4_k_m.P1", "q4_k_m.P2", "q4_k_m.P3"}) {
    const auto run =
        smol::test::read_json_file(kFixtures + "/tiny-smollm3-a." + run_name + ".json");
    CAPTURE(run_name);
    smol::Utf8StreamDecoder stream;
    std::string text;
    for (const auto id : ids_of(run.at("generated_ids"))) {
      text += stream.push(fixture_tokenizer().token_to_piece(id, {.render_special = true}));
    }
    text += stream.flush();
    CHECK(text == smol::unicode::sanitize_utf8(fixture_tokenizer().decode(
                      ids_of(run.at("generated_ids")), {.render_special = true})));
    CHECK(squeeze_replacements(text) ==
          squeeze_replacements(run.at("generated_text").get<std::string>()));
  }
}

namespace {

double seconds_to_encode(const std::string& text) {
  const auto start = std::chrono::steady_clock::now();
  const auto ids = fixture_tokenizer().encode(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(fixture_tokenizer().decode(ids) == text);
  return seconds;
}

std::string words(int count) {
  static const char* const kWords[] = {"licence ", "Software ", "the ",  "Foundation, ", "1234 ",
                                       "don't ",   "naïve ",    "中文 ", "\n\n",         "🙂 "};
  std::string text;
  for (int i = 0; i < count; ++i) text += kWords[(i * 7 + i / 3) % 10];
  return text;
}

}  // namespace

// Time is reported, not checked (machines differ); what is checked is that encoding
// scales linearly, which a quadratic merge loop or pre-tokenizer would not.
TEST_CASE("encoding time grows linearly with the text") {
  seconds_to_encode(words(1000));  // warm up
  const double small = seconds_to_encode(words(1000));
  const double large = seconds_to_encode(words(10000));
  MESSAGE("1,000 words: ", small, " s; 10,000 words: ", large, " s");
  CHECK(large < 30 * small + 0.01);
}

}  // namespace test_tokenizer_fixture
