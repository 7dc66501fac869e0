// Tokenizer unit tests on tiny hand-made vocabularies.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "smol/text/byte_unicode.hpp"
#include "smol/text/pre_tokenizer.hpp"
#include "smol/text/tokenizer.hpp"
#include "smol/text/utf8_stream_decoder.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_tokenizer {

namespace {

using smol::TokenId;
using smol::TokenType;
using Pieces = std::vector<std::string_view>;

// Byte tokens first (id = byte value), then one token per merge (its result), then extras.
smol::Vocabulary byte_level_vocabulary(std::vector<std::string> merges, std::string pre,
                                       std::vector<std::string> extra_tokens = {},
                                       std::vector<TokenType> extra_types = {}) {
  smol::Vocabulary vocab;
  vocab.model = "gpt2";
  vocab.pre_tokenizer = std::move(pre);
  for (unsigned byte = 0; byte < 256; ++byte) {
    vocab.tokens.push_back(smol::byte_unicode::encode_bytes(std::string(1, char(byte))));
  }
  for (const auto& merge : merges) {
    std::string merged = merge;
    merged.erase(merge.find(' '), 1);
    vocab.tokens.push_back(merged);
  }
  vocab.merges = std::move(merges);
  vocab.token_types.assign(vocab.tokens.size(), TokenType::normal);
  for (std::size_t i = 0; i < extra_tokens.size(); ++i) {
    vocab.tokens.push_back(extra_tokens[i]);
    vocab.token_types.push_back(i < extra_types.size() ? extra_types[i] : TokenType::normal);
  }
  return vocab;
}

std::vector<std::string> spellings(const smol::Tokenizer& tokenizer,
                                   const std::vector<TokenId>& ids) {
  std::vector<std::string> out;
  for (const TokenId id : ids) out.push_back(tokenizer.vocabulary().tokens[std::size_t(id)]);
  return out;
}

using Spellings = std::vector<std::string>;

}  // namespace

TEST_CASE("llama3 pre-tokenizer splits like the Llama-3 regex") {
  const smol::PreTokenizer llama3 = smol::PreTokenizer::named("llama-bpe");
  const auto split = [&](std::string_view text) { return llama3.split(text); };
  CHECK(split("Hello world 12345 don't") ==
        Pieces{"Hello", " world", " ", "123", "45", " don", "'t"});
  CHECK(split("DON'T I'LL") == Pieces{"DON", "'T", " I", "'LL"});
  CHECK(split("a  \n\n b") == Pieces{"a", "  \n\n", " b"});
  CHECK(split("   leading") == Pieces{"  ", " leading"});
  CHECK(split("trailing   ") == Pieces{"trailing", "   "});
  CHECK(split("x \t\n y") == Pieces{"x", " \t\n", " y"});
  CHECK(split("!!! ...\n\nok") == Pieces{"!!!", " ...\n\n", "ok"});
  CHECK(split("'hello") == Pieces{"'hello"});
  CHECK(split("a\r\nb") == Pieces{"a", "\r\n", "b"});
  CHECK(split("naïve 中文") == Pieces{"naïve", " 中文"});
  CHECK(split("\xC2\xA0word") == Pieces{"\xC2\xA0word"});  // NBSP joins the word
  CHECK(split("") == Pieces{});
}

TEST_CASE("gpt2 and smollm pre-tokenizers") {
  const smol::PreTokenizer gpt2_splitter = smol::PreTokenizer::named("gpt-2");
  const smol::PreTokenizer smollm_splitter = smol::PreTokenizer::named("smollm");
  const auto gpt2 = [&](std::string_view text) { return gpt2_splitter.split(text); };
  const auto smollm = [&](std::string_view text) { return smollm_splitter.split(text); };
  CHECK(gpt2("Hello world 12345 don't DON'T") ==
        Pieces{"Hello", " world", " 12345", " don", "'t", " DON", "'", "T"});
  CHECK(gpt2("a  \n\n b") == Pieces{"a", "  \n\n", " b"});
  CHECK(gpt2("  \tx") == Pieces{"  ", "\t", "x"});
  CHECK(smollm("Hello 12345 x1") == Pieces{"Hello", " ", "1", "2", "3", "4", "5", " x", "1"});
  CHECK(smollm("a  1") == Pieces{"a", "  ", "1"});
}

TEST_CASE("merges apply in rank order, leftmost first on equal rank") {
  const smol::Tokenizer bc_first(byte_level_vocabulary({"b c", "a b", "ab c"}, "gpt-2"));
  CHECK(spellings(bc_first, bc_first.encode("abc")) == Spellings{"a", "bc"});
  const smol::Tokenizer ab_first(byte_level_vocabulary({"a b", "b c", "ab c"}, "gpt-2"));
  CHECK(spellings(ab_first, ab_first.encode("abc")) == Spellings{"abc"});
  const smol::Tokenizer pairs(byte_level_vocabulary({"a a"}, "gpt-2"));
  CHECK(spellings(pairs, pairs.encode("aaa")) == Spellings{"aa", "a"});
  CHECK(spellings(pairs, pairs.encode("aaaa")) == Spellings{"aa", "aa"});
  const smol::Tokenizer spaces(byte_level_vocabulary({"Ġ t", "Ġt h", "Ġth e"}, "gpt-2"));
  CHECK(spellings(spaces, spaces.encode("the the")) == Spellings{"t", "h", "e", "Ġthe"});
}

TEST_CASE("llama-bpe emits a pre-token that is a whole token without merging") {
  // "abc" is in the vocabulary but no merge sequence reaches it.
  const auto vocab = [](std::string pre) {
    return byte_level_vocabulary({"a b"}, std::move(pre), {"abc"});
  };
  const smol::Tokenizer llama3(vocab("llama-bpe"));
  CHECK(spellings(llama3, llama3.encode("abc")) == Spellings{"abc"});
  const smol::Tokenizer gpt2(vocab("gpt-2"));
  CHECK(spellings(gpt2, gpt2.encode("abc")) == Spellings{"ab", "c"});
}

TEST_CASE("special tokens are matched only when asked; user-defined ones always") {
  const smol::Tokenizer tokenizer(
      byte_level_vocabulary({}, "llama-bpe", {"<|im_end|>", "<|im_end|>x", "<tool>"},
                            {TokenType::control, TokenType::control, TokenType::user_defined}));
  const TokenId im_end = *tokenizer.find_token("<|im_end|>");
  const TokenId longer = *tokenizer.find_token("<|im_end|>x");
  const TokenId tool = *tokenizer.find_token("<tool>");

  const auto special = tokenizer.encode("a<|im_end|>b", {.parse_special = true});
  CHECK(special.size() == 3);
  CHECK(special[1] == im_end);
  const auto plain = tokenizer.encode("a<|im_end|>b");
  CHECK(plain.size() > 3);
  CHECK(std::find(plain.begin(), plain.end(), im_end) == plain.end());
  CHECK(tokenizer.decode(plain) == "a<|im_end|>b");

  // Longest first: "<|im_end|>x" wins over its prefix "<|im_end|>".
  CHECK(tokenizer.encode("<|im_end|>x<|im_end|>", {.parse_special = true}) ==
        std::vector<TokenId>{longer, im_end});
  // A partial control token is plain text.
  CHECK(tokenizer.encode("<|im_end", {.parse_special = true}).size() == 8);
  // User-defined tokens need no parse_special.
  CHECK(tokenizer.encode("x<tool>") == std::vector<TokenId>{'x', tool});
}

TEST_CASE("bos is added when asked or when the vocabulary says so") {
  auto vocab = byte_level_vocabulary({}, "gpt-2", {"<s>"}, {TokenType::control});
  vocab.bos_id = 256;
  const smol::Tokenizer without(vocab);
  CHECK(without.encode("a") == std::vector<TokenId>{'a'});
  CHECK(without.encode("a", {.add_bos = true}) == std::vector<TokenId>{256, 'a'});
  vocab.add_bos = true;
  const smol::Tokenizer with(vocab);
  CHECK(with.encode("a").front() == 256);
  CHECK(with.encode("a", {.add_bos = false}).size() == 1);
}

TEST_CASE("an unknown pre-tokenizer is refused, as llama.cpp refuses it") {
  CHECK_THROWS_WITH_AS(smol::Tokenizer(byte_level_vocabulary({}, "mystery")),
                       doctest::Contains("unknown pre-tokenizer \"mystery\""), smol::Error);
}

TEST_CASE("decoding: pieces, control tokens, bad ids") {
  auto vocab = byte_level_vocabulary({"Ġ w"}, "llama-bpe", {"<|eot|>"}, {TokenType::control});
  vocab.eos_id = 257;
  const smol::Tokenizer tokenizer(vocab);
  CHECK(tokenizer.token_to_piece(256) == " w");
  CHECK(tokenizer.token_to_piece(257).empty());
  CHECK(tokenizer.token_to_piece(257, {.render_special = true}) == "<|eot|>");
  CHECK(tokenizer.is_end_of_generation(257));
  CHECK_THROWS_AS(tokenizer.token_to_piece(9999), smol::Error);
  CHECK_THROWS_AS(tokenizer.token_to_piece(-1), smol::Error);
}

TEST_CASE("invalid UTF-8 input neither crashes nor loses bytes") {
  const smol::Tokenizer tokenizer(byte_level_vocabulary({"a b"}, "llama-bpe"));
  const std::string bad =
      "ab\xFF\xFE \xE3\xBF"
      "x\xC0\x80 \xED\xA0\x80\xF4\x90\x80\x80 end\xE2";
  CHECK(tokenizer.decode(tokenizer.encode(bad)) == bad);

  std::mt19937 random(1234);
  for (int round = 0; round < 300; ++round) {
    std::string bytes(random() % 40, '\0');
    for (auto& byte : bytes) byte = static_cast<char>(random() % 256);
    for (const auto pre : {"llama-bpe", "gpt-2", "smollm", "qwen2", "default"}) {
      const smol::Tokenizer any(byte_level_vocabulary({"a b", "Ġ Ġ"}, pre));
      REQUIRE(any.decode(any.encode(bytes, {.parse_special = true})) == bytes);
    }
  }
}

TEST_CASE("vocabulary validation") {
  auto vocab = byte_level_vocabulary({}, "gpt-2");
  vocab.token_types.pop_back();
  CHECK_THROWS_AS(smol::Tokenizer{vocab}, smol::Error);
  vocab = byte_level_vocabulary({}, "gpt-2");
  vocab.eos_id = 100000;
  CHECK_THROWS_AS(smol::Tokenizer{vocab}, smol::Error);
  vocab = byte_level_vocabulary({}, "gpt-2");
  vocab.model = "bert";
  CHECK_THROWS_AS(smol::Tokenizer{vocab}, smol::Error);
}

// ---- SentencePiece ---------------------------------------------------------------

namespace {

smol::Vocabulary sentencepiece_vocabulary() {
  smol::Vocabulary vocab;
  vocab.model = "llama";
  const auto add = [&](std::string text, float score, TokenType type = TokenType::normal) {
    vocab.tokens.push_back(std::move(text));
    vocab.scores.push_back(score);
    vocab.token_types.push_back(type);
  };
  add("<unk>", 0, TokenType::unknown);
  add("<s>", 0, TokenType::control);
  add("</s>", 0, TokenType::control);
  for (unsigned byte = 0; byte < 256; ++byte) {
    add(smol::byte_token_spelling(static_cast<std::uint8_t>(byte)), 0, TokenType::byte);
  }
  for (const char* piece : {"▁", "h", "e", "l", "o", "w", "r", "d"}) add(piece, -10);
  add("he", -3);
  add("ll", -2);
  add("llo", -4);
  add("hello", -5);
  add("▁hello", -6);
  add("▁w", -7);
  add("or", -1);  // the best score: merges before "▁w", which then joins it
  add("▁wor", -8);
  vocab.unknown_id = 0;
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  vocab.add_bos = true;
  return vocab;
}

}  // namespace

TEST_CASE("SentencePiece: best-score merges, space prefix, byte fallback") {
  const smol::Tokenizer tokenizer(sentencepiece_vocabulary());
  CHECK(spellings(tokenizer, tokenizer.encode("hello", {.add_bos = false})) == Spellings{"▁hello"});
  CHECK(spellings(tokenizer, tokenizer.encode("hello world")) ==
        Spellings{"<s>", "▁hello", "▁wor", "l", "d"});
  // "é" has no token: its two UTF-8 bytes become byte tokens.
  CHECK(spellings(tokenizer, tokenizer.encode("hé", {.add_bos = false})) ==
        Spellings{"▁", "h", "<0xC3>", "<0xA9>"});
  // After a special token the prefix space is added again, as llama.cpp does.
  CHECK(spellings(tokenizer,
                  tokenizer.encode("hello</s>hello", {.parse_special = true, .add_bos = false})) ==
        Spellings{"▁hello", "</s>", "▁hello"});

  const auto ids = tokenizer.encode("hello héllo\n", {.add_bos = false});
  CHECK(tokenizer.decode(ids) == "hello héllo\n");
  CHECK(tokenizer.token_to_piece(*tokenizer.find_token("▁hello")) == " hello");
  CHECK(tokenizer.token_to_piece(*tokenizer.find_token("<0x0A>")) == "\n");
  CHECK(tokenizer.token_to_piece(0) == "\xEF\xBF\xBD");

  auto no_prefix = sentencepiece_vocabulary();
  no_prefix.add_space_prefix = false;
  const smol::Tokenizer bare(no_prefix);
  CHECK(spellings(bare, bare.encode("hello", {.add_bos = false})) == Spellings{"hello"});

  const std::string bad = "h\xFF\xC3(";
  CHECK(tokenizer.decode(tokenizer.encode(bad, {.add_bos = false})) == bad);
}

// ---- streaming decoder -----------------------------------------------------------

TEST_CASE("Utf8StreamDecoder holds back unfinished characters") {
  smol::Utf8StreamDecoder stream;
  const std::string smile = "\xF0\x9F\x99\x82";  // 🙂
  CHECK(stream.push(smile.substr(0, 1)).empty());
  CHECK(stream.push(smile.substr(1, 2)).empty());
  CHECK(stream.has_pending());
  CHECK(stream.push(smile.substr(3) + "ok") == smile + "ok");
  CHECK_FALSE(stream.has_pending());
}

TEST_CASE("Utf8StreamDecoder replaces bytes that can never be valid") {
  const std::string replacement = "\xEF\xBF\xBD";
  smol::Utf8StreamDecoder stream;
  CHECK(stream.push("a\xFF"
                    "b") == "a" + replacement + "b");
  CHECK(stream.push("\xE3\xBF").empty());                       // could still complete
  CHECK(stream.push("p") == replacement + "p");                 // it did not: one U+FFFD
  CHECK(stream.push("\xC0\x80") == replacement + replacement);  // overlong NUL
  CHECK(stream.push("\xED\xA0\x80") == replacement + replacement + replacement);  // surrogate
  CHECK(stream.push("\xE2\x82").empty());
  CHECK(stream.flush() == replacement);  // cut off at the end of the stream
  CHECK(stream.flush().empty());
}

}  // namespace test_tokenizer
