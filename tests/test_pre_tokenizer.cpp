// Pre-tokenizer tests: every row of kPreTokenizers on text that exercises its regexes,
// the hand-written scanners against the regex engine, the regex engine's own rules,
// and the refusal of unknown names.
//
// The expected pieces of "each row splits as llama.cpp's regexes do" were computed with
// Python's third-party `regex` module (2026.5.9), applying each row's regexes in sequence
// as llama.cpp's unicode_regex_split does (a match is a piece, and so is the text between
// matches; non-ASCII whitespace compares as U+000B, llama.cpp's substitute), and checked
// by hand against the patterns on a sample.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/codepoint_regex.hpp"
#include "smol/text/pre_tokenizer.hpp"
#include "smol/text/tokenizer.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_pre_tokenizer {

namespace {

using Pieces = std::vector<std::string_view>;
using smol::PreTokenizer;

auto splitter(std::string_view name,
              PreTokenizer::FastScanners fast = PreTokenizer::FastScanners::on) {
  return [pre = PreTokenizer::named(name, fast)](std::string_view text) { return pre.split(text); };
}

std::string joined(const Pieces& pieces) {
  std::string text;
  for (const std::string_view piece : pieces) text += piece;
  return text;
}

// Where `pattern` matches at the start of `text`, in code points; -1 if it does not.
long match_length(std::string_view pattern, std::string_view text) {
  const smol::CodepointRegex regex(pattern);
  const smol::ClassifiedText classified(text);
  std::size_t end = 0;
  if (!regex.match_at(classified, 0, classified.size(), end)) return -1;
  return static_cast<long>(end);
}

// Seeded text from fragments that hit the patterns' corners, for comparing two splitters.
std::string corpus(unsigned seed, std::size_t fragments) {
  static const std::vector<std::string> kFragments = {
      "Hello",  " world", "don't", "DON'T", "'s",       "'S",       "''",          " '",
      "'ll",    "1",      "22",    "4444",  "7777777",  " ",        "  ",          "   ",
      "\t",     "\n",     "\n\n",  "\r\n",  " \n ",     "\u00a0",   "\u3000",      "\u2028",
      "\u0085", "!!!",    "...",   "?!",    "$5",       "a+b=c",    "~|^",         "<=>",
      "@#%",    "(x)",    "__",    "naïve", "Ångström", "ŁÓDŹ",     "e\u0301",     "中文",
      "한국어", "日本語", "١٢٣",   "Ⅻ",     "½",        "🙂",     "👍🏽",    "🇫🇷",
      "‘q’",    "。",     "！",    "\xFF",  "\xC3",     "\xE2\x82", "\xED\xA0\x80"};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, kFragments.size() - 1);
  std::string text;
  for (std::size_t i = 0; i < fragments; ++i) text += kFragments[pick(rng)];
  return text;
}

}  // namespace

TEST_CASE("each pre-tokenizer row splits as llama.cpp's regexes do") {
  SUBCASE("default") {
    const auto split = splitter("default");
    CHECK(split("don't DON'T I'll WE'RE you've SHE'D it's 'm") ==
          Pieces{"don",  "'", "t",  " DON", "'", "T", " I",  "'", "ll", " WE", "'", "RE",
                 " you", "'", "ve", " SHE", "'", "D", " it", "'", "s",  " ",   "'", "m"});
    CHECK(split("1 22 333 4444 55555 666666 7777777") ==
          Pieces{"1", " ", "22", " ", "333", " ", "444", "4", " ", "555", "55", " ", "666", "666",
                 " ", "777", "777", "7"});
    CHECK(split("   three spaces before, two after  ") ==
          Pieces{"  ", " three", " spaces", " before", ",", " two", " after", "  "});
    CHECK(split("line one\nline two\n\n  indented\r\nwindows\r\n") ==
          Pieces{"line", " one", "\n", "line", " two", "\n\n ", " indented", "\r", "\n", "windows",
                 "\r\n"});
    CHECK(split("Hello!!! ... ??? (a+b=c) $5 ~|^ <=> @#%") ==
          Pieces{"Hello", "!!!", " ", "...", " ", "???", " ",   "(", "a",   "+", "b",  "=",
                 "c",     ")",   " ", "$",   "5", " ",   "~|^", " ", "<=>", " ", "@#%"});
    CHECK(split("naïve Ångström 中文字符 한국어 漢字123 🙂🚀 👍🏽!") ==
          Pieces{"naïve", " Ångström", " 中文字符", " 한국어", " 漢字", "123", " 🙂🚀",
                 " 👍🏽", "!"});
    CHECK(split("a\xC2\xA0"
                "b \xE3\x80\x80x\xE2\x80\x83 y") ==
          Pieces{"a", "\xC2\xA0", "b", " ", "\xE3\x80\x80", "x", "\xE2\x80\x83", " y"});
  }
  SUBCASE("llama-bpe") {
    const auto split = splitter("llama-bpe");
    CHECK(split("don't DON'T I'll WE'RE you've SHE'D it's 'm") ==
          Pieces{"don", "'t", " DON", "'T", " I", "'ll", " WE", "'RE", " you", "'ve", " SHE", "'D",
                 " it", "'s", " '", "m"});
    CHECK(split("1 22 333 4444 55555 666666 7777777") ==
          Pieces{"1", " ", "22", " ", "333", " ", "444", "4", " ", "555", "55", " ", "666", "666",
                 " ", "777", "777", "7"});
    CHECK(split("   three spaces before, two after  ") ==
          Pieces{"  ", " three", " spaces", " before", ",", " two", " after", "  "});
    CHECK(split("line one\nline two\n\n  indented\r\nwindows\r\n") ==
          Pieces{"line", " one", "\n", "line", " two", "\n\n", " ", " indented", "\r\n", "windows",
                 "\r\n"});
    CHECK(split("Hello!!! ... ??? (a+b=c) $5 ~|^ <=> @#%") ==
          Pieces{"Hello", "!!!", " ...", " ???", " (", "a", "+b", "=c", ")", " $", "5", " ~|^",
                 " <=>", " @#%"});
    CHECK(split("naïve Ångström 中文字符 한국어 漢字123 🙂🚀 👍🏽!") ==
          Pieces{"naïve", " Ångström", " 中文字符", " 한국어", " 漢字", "123", " 🙂🚀",
                 " 👍🏽!"});
    CHECK(split("a\xC2\xA0"
                "b \xE3\x80\x80x\xE2\x80\x83 y") == Pieces{"a",
                                                           "\xC2\xA0"
                                                           "b",
                                                           " ", "\xE3\x80\x80x", "\xE2\x80\x83",
                                                           " y"});
  }
  SUBCASE("gpt-2") {
    const auto split = splitter("gpt-2");
    CHECK(split("don't DON'T I'll WE'RE you've SHE'D it's 'm") ==
          Pieces{"don", "'t", " DON", "'", "T", " I", "'ll", " WE", "'", "RE", " you", "'ve",
                 " SHE", "'", "D", " it", "'s", " '", "m"});
    CHECK(split("1 22 333 4444 55555 666666 7777777") ==
          Pieces{"1", " 22", " 333", " 4444", " 55555", " 666666", " 7777777"});
    CHECK(split("   three spaces before, two after  ") ==
          Pieces{"  ", " three", " spaces", " before", ",", " two", " after", "  "});
    CHECK(split("line one\nline two\n\n  indented\r\nwindows\r\n") ==
          Pieces{"line", " one", "\n", "line", " two", "\n\n ", " indented", "\r", "\n", "windows",
                 "\r\n"});
    CHECK(split("Hello!!! ... ??? (a+b=c) $5 ~|^ <=> @#%") ==
          Pieces{"Hello", "!!!", " ...", " ???", " (", "a", "+", "b", "=", "c", ")", " $", "5",
                 " ~|^", " <=>", " @#%"});
    CHECK(split("naïve Ångström 中文字符 한국어 漢字123 🙂🚀 👍🏽!") ==
          Pieces{"naïve", " Ångström", " 中文字符", " 한국어", " 漢字", "123", " 🙂🚀",
                 " 👍🏽!"});
    CHECK(split("a\xC2\xA0"
                "b \xE3\x80\x80x\xE2\x80\x83 y") ==
          Pieces{"a", "\xC2\xA0", "b", " ", "\xE3\x80\x80", "x", "\xE2\x80\x83", " y"});
  }
  SUBCASE("smollm") {
    const auto split = splitter("smollm");
    CHECK(split("don't DON'T I'll WE'RE you've SHE'D it's 'm") ==
          Pieces{"don", "'t", " DON", "'", "T", " I", "'ll", " WE", "'", "RE", " you", "'ve",
                 " SHE", "'", "D", " it", "'s", " '", "m"});
    CHECK(split("1 22 333 4444 55555 666666 7777777") ==
          Pieces{"1", " ", "2", "2", " ", "3", "3", "3", " ", "4", "4", "4",
                 "4", " ", "5", "5", "5", "5", "5", " ", "6", "6", "6", "6",
                 "6", "6", " ", "7", "7", "7", "7", "7", "7", "7"});
    CHECK(split("   three spaces before, two after  ") ==
          Pieces{"  ", " three", " spaces", " before", ",", " two", " after", "  "});
    CHECK(split("line one\nline two\n\n  indented\r\nwindows\r\n") ==
          Pieces{"line", " one", "\n", "line", " two", "\n\n ", " indented", "\r", "\n", "windows",
                 "\r\n"});
    CHECK(split("Hello!!! ... ??? (a+b=c) $5 ~|^ <=> @#%") ==
          Pieces{"Hello", "!!!", " ...", " ???", " (", "a", "+", "b", "=", "c", ")", " $", "5",
                 " ~|^", " <=>", " @#%"});
    CHECK(split("naïve Ångström 中文字符 한국어 漢字123 🙂🚀 👍🏽!") ==
          Pieces{"naïve", " Ångström", " 中文字符", " 한국어", " 漢字", "1", "2", "3", " 🙂🚀",
                 " 👍🏽!"});
    CHECK(split("a\xC2\xA0"
                "b \xE3\x80\x80x\xE2\x80\x83 y") ==
          Pieces{"a", "\xC2\xA0", "b", " ", "\xE3\x80\x80", "x", "\xE2\x80\x83", " y"});
  }
  SUBCASE("qwen2") {
    const auto split = splitter("qwen2");
    CHECK(split("don't DON'T I'll WE'RE you've SHE'D it's 'm") ==
          Pieces{"don", "'t", " DON", "'T", " I", "'ll", " WE", "'RE", " you", "'ve", " SHE", "'D",
                 " it", "'s", " '", "m"});
    CHECK(split("1 22 333 4444 55555 666666 7777777") ==
          Pieces{"1", " ", "2", "2", " ", "3", "3", "3", " ", "4", "4", "4",
                 "4", " ", "5", "5", "5", "5", "5", " ", "6", "6", "6", "6",
                 "6", "6", " ", "7", "7", "7", "7", "7", "7", "7"});
    CHECK(split("   three spaces before, two after  ") ==
          Pieces{"  ", " three", " spaces", " before", ",", " two", " after", "  "});
    CHECK(split("line one\nline two\n\n  indented\r\nwindows\r\n") ==
          Pieces{"line", " one", "\n", "line", " two", "\n\n", " ", " indented", "\r\n", "windows",
                 "\r\n"});
    CHECK(split("Hello!!! ... ??? (a+b=c) $5 ~|^ <=> @#%") ==
          Pieces{"Hello", "!!!", " ...", " ???", " (", "a", "+b", "=c", ")", " $", "5", " ~|^",
                 " <=>", " @#%"});
    CHECK(split("naïve Ångström 中文字符 한국어 漢字123 🙂🚀 👍🏽!") ==
          Pieces{"naïve", " Ångström", " 中文字符", " 한국어", " 漢字", "1", "2", "3", " 🙂🚀",
                 " 👍🏽!"});
    CHECK(split("a\xC2\xA0"
                "b \xE3\x80\x80x\xE2\x80\x83 y") == Pieces{"a",
                                                           "\xC2\xA0"
                                                           "b",
                                                           " ", "\xE3\x80\x80x", "\xE2\x80\x83",
                                                           " y"});
  }
  SUBCASE("deepseek-llm") {
    const auto split = splitter("deepseek-llm");
    CHECK(split("don't DON'T I'll WE'RE you've SHE'D it's 'm") ==
          Pieces{"don",  "'", "t",  " DON", "'", "T", " I",  "'", "ll", " WE", "'", "RE",
                 " you", "'", "ve", " SHE", "'", "D", " it", "'", "s",  " '",  "m"});
    CHECK(split("1 22 333 4444 55555 666666 7777777") == Pieces{"1", " ", "22", " ", "333", " ",
                                                                "4444", " ", "55555", " ", "666666",
                                                                " ", "7777777"});
    CHECK(split("   three spaces before, two after  ") ==
          Pieces{"  ", " three", " spaces", " before", ",", " two", " after", "  "});
    CHECK(split("line one\nline two\n\n  indented\r\nwindows\r\n") ==
          Pieces{"line", " one", "\n", "line", " two", "\n", "\n", " ", " indented", "\r", "\n",
                 "windows", "\r", "\n"});
    CHECK(split("Hello!!! ... ??? (a+b=c) $5 ~|^ <=> @#%") ==
          Pieces{"Hello", "!!!", " ...", " ???", " (", "a", "+", "b", "=", "c", ")", " $", "5",
                 " ~|^", " <=>", " @#%"});
    CHECK(split("naïve Ångström 中文字符 한국어 漢字123 🙂🚀 👍🏽!") ==
          Pieces{"na", "ï", "ve", " Å", "ngstr", "ö", "m", " ", "中文字符", " ", "한국어", " ",
                 "漢字", "123", " 🙂🚀 👍🏽", "!"});
    CHECK(split("a\xC2\xA0"
                "b \xE3\x80\x80x\xE2\x80\x83 y") == Pieces{"a",
                                                           "\xC2\xA0"
                                                           "b",
                                                           " ", "\xE3\x80\x80x", "\xE2\x80\x83",
                                                           " y"});
  }
  SUBCASE("deepseek-coder") {
    const auto split = splitter("deepseek-coder");
    CHECK(split("don't DON'T I'll WE'RE you've SHE'D it's 'm") ==
          Pieces{"don",  "'", "t",  " DON", "'", "T", " I",  "'", "ll", " WE", "'", "RE",
                 " you", "'", "ve", " SHE", "'", "D", " it", "'", "s",  " '",  "m"});
    CHECK(split("1 22 333 4444 55555 666666 7777777") ==
          Pieces{"1", " ", "2", "2", " ", "3", "3", "3", " ", "4", "4", "4",
                 "4", " ", "5", "5", "5", "5", "5", " ", "6", "6", "6", "6",
                 "6", "6", " ", "7", "7", "7", "7", "7", "7", "7"});
    CHECK(split("   three spaces before, two after  ") ==
          Pieces{"  ", " three", " spaces", " before", ",", " two", " after", "  "});
    CHECK(split("line one\nline two\n\n  indented\r\nwindows\r\n") ==
          Pieces{"line", " one", "\n", "line", " two", "\n", "\n", " ", " indented", "\r", "\n",
                 "windows", "\r", "\n"});
    CHECK(split("Hello!!! ... ??? (a+b=c) $5 ~|^ <=> @#%") ==
          Pieces{"Hello", "!!!", " ...", " ???", " (", "a", "+", "b", "=", "c", ")", " $", "5",
                 " ~|^ <=>", " @#%"});
    CHECK(split("naïve Ångström 中文字符 한국어 漢字123 🙂🚀 👍🏽!") ==
          Pieces{"naïve", " Ångström", " ", "中文字符", " ", "한국어", " ", "漢字", "1", "2", "3",
                 " 🙂🚀 👍🏽", "!"});
    CHECK(split("a\xC2\xA0"
                "b \xE3\x80\x80x\xE2\x80\x83 y") == Pieces{"a",
                                                           "\xC2\xA0"
                                                           "b",
                                                           " ", "\xE3\x80\x80x", "\xE2\x80\x83",
                                                           " y"});
  }
  SUBCASE("falcon") {
    const auto split = splitter("falcon");
    CHECK(split("don't DON'T I'll WE'RE you've SHE'D it's 'm") ==
          Pieces{"don",  "'", "t",  " DON", "'", "T", " I",  "'", "ll", " WE", "'", "RE",
                 " you", "'", "ve", " SHE", "'", "D", " it", "'", "s",  " ",   "'", "m"});
    CHECK(split("1 22 333 4444 55555 666666 7777777") == Pieces{"1", " 22", " ", "333", " ", "444",
                                                                "4", " ", "555", "55", " ", "666",
                                                                "666", " ", "777", "777", "7"});
    CHECK(split("   three spaces before, two after  ") ==
          Pieces{"  ", " three", " spaces", " before", ",", " two", " after", "  "});
    CHECK(split("line one\nline two\n\n  indented\r\nwindows\r\n") ==
          Pieces{"line", " one", "\n", "line", " two", "\n\n ", " indented", "\r", "\n", "windows",
                 "\r\n"});
    CHECK(split("Hello!!! ... ??? (a+b=c) $5 ~|^ <=> @#%") ==
          Pieces{"Hello", "!!!", " ", "...", " ", "???", " ",   "(", "a",   "+", "b",  "=",
                 "c",     ")",   " ", "$",   "5", " ",   "~|^", " ", "<=>", " ", "@#%"});
    CHECK(split("naïve Ångström 中文字符 한국어 漢字123 🙂🚀 👍🏽!") ==
          Pieces{"naïve", " Ångström", " 中文字符", " 한국어", " 漢字", "123", " 🙂🚀",
                 " 👍🏽", "!"});
    CHECK(split("a\xC2\xA0"
                "b \xE3\x80\x80x\xE2\x80\x83 y") ==
          Pieces{"a", "\xC2\xA0", "b", " ", "\xE3\x80\x80", "x", "\xE2\x80\x83", " y"});
  }
  // o200k's pattern as llama.cpp writes it (pre_tokenizer.hpp's kGpt4o): a word's
  // capitals, then its small letters, one piece; a non-ASCII letter counts as both, so
  // "ÉCOLE" parts after its É (llama.cpp's pieces, not tiktoken's).
  SUBCASE("gpt-4o") {
    const auto split = splitter("gpt-4o");
    CHECK(split("don't DON'T I'll WE'RE you've SHE'D it's 'm") ==
          Pieces{"don't", " DON'T", " I'll", " WE'RE", " you've", " SHE'D", " it's", " '", "m"});
    CHECK(split("1 22 333 4444 55555 666666 7777777") ==
          Pieces{"1", " ", "22", " ", "333", " ", "444", "4", " ", "555", "55", " ", "666", "666",
                 " ", "777", "777", "7"});
    CHECK(split("   three spaces before, two after  ") ==
          Pieces{"  ", " three", " spaces", " before", ",", " two", " after", "  "});
    CHECK(split("line one\nline two\n\n  indented\r\nwindows\r\n") ==
          Pieces{"line", " one", "\n", "line", " two", "\n\n", " ", " indented", "\r\n", "windows",
                 "\r\n"});
    CHECK(split("Hello!!! ... ??? (a+b=c) $5 ~|^ <=> @#%") ==
          Pieces{"Hello", "!!!", " ...", " ???", " (", "a", "+b", "=c", ")", " $", "5", " ~|^",
                 " <=>", " @#%"});
    CHECK(split("naïve Ångström 中文字符 한국어 漢字123 🙂🚀 👍🏽!") ==
          Pieces{"naïve", " Ångström", " 中文字符", " 한국어", " 漢字", "123", " 🙂🚀",
                 " 👍🏽!"});
    CHECK(split("a\xC2\xA0"
                "b \xE3\x80\x80x\xE2\x80\x83 y") == Pieces{"a",
                                                           "\xC2\xA0"
                                                           "b",
                                                           " ", "\xE3\x80\x80x", "\xE2\x80\x83",
                                                           " y"});
    CHECK(split("HELLOworld helloWorld CamelCase iPhone ÉCOLE ŁÓDŹ") ==
          Pieces{"HELLOworld", " hello", "World", " Camel", "Case", " i", "Phone", " É", "COLE",
                 " ŁÓDŹ"});
    CHECK(split("path/to/file\n/usr/bin//x") ==
          Pieces{"path", "/to", "/file", "\n", "/usr", "/bin", "//", "x"});
  }
}

TEST_CASE("every name maps to its row, once; every regex compiles") {
  std::vector<std::string_view> seen;
  for (const smol::PreTokenizerSpec& spec : smol::kPreTokenizers) {
    CHECK_FALSE(spec.names.empty());
    CHECK_FALSE(spec.regexes.empty());
    for (const std::string_view name : spec.names) {
      CHECK(smol::find_pre_tokenizer(name) == &spec);
      CHECK(std::find(seen.begin(), seen.end(), name) == seen.end());
      seen.push_back(name);
    }
    CHECK_NOTHROW(PreTokenizer(spec, PreTokenizer::FastScanners::off));
  }
  CHECK(smol::find_pre_tokenizer("smollm") == smol::find_pre_tokenizer("starcoder"));
  CHECK(smol::find_pre_tokenizer("smollm") == smol::find_pre_tokenizer("refact"));
  CHECK(smol::find_pre_tokenizer("llama-bpe") == smol::find_pre_tokenizer("llama3"));
  CHECK(smol::find_pre_tokenizer("llama-bpe")->ignore_merges);
  CHECK(smol::find_pre_tokenizer("llama-bpe")->add_bos);
  CHECK_FALSE(smol::find_pre_tokenizer("dbrx")->ignore_merges);
  CHECK(smol::find_pre_tokenizer("gpt-2") == smol::find_pre_tokenizer("mpt"));
}

TEST_CASE("an unknown pre-tokenizer is refused, naming the known ones") {
  for (const std::string_view name : {"mystery", "gpt2", ""}) {
    CAPTURE(name);
    CHECK(smol::find_pre_tokenizer(name) == nullptr);
    try {
      (void)PreTokenizer::named(name);
      FAIL("no error");
    } catch (const smol::Error& error) {
      const std::string message = error.what();
      CHECK(message.find("unknown pre-tokenizer \"" + std::string(name) + "\"") !=
            std::string::npos);
      CHECK(message.find("llama-bpe") != std::string::npos);
      CHECK(message.find("smollm") != std::string::npos);
      CHECK(message.find("deepseek-coder") != std::string::npos);
    }
  }
  smol::Vocabulary vocab;
  vocab.model = "gpt2";
  vocab.pre_tokenizer = "mystery";
  vocab.tokens = {"a"};
  CHECK_THROWS_AS(smol::Tokenizer{vocab}, smol::Error);
}

TEST_CASE("the fast scanners split like the regex engine") {
  for (const smol::PreTokenizerSpec& spec : smol::kPreTokenizers) {
    const PreTokenizer fast(spec, PreTokenizer::FastScanners::on);
    const PreTokenizer regex(spec, PreTokenizer::FastScanners::off);
    for (unsigned seed = 0; seed < 40; ++seed) {
      const std::string text = corpus(seed, 200);
      CAPTURE(spec.names[0]);
      CAPTURE(seed);
      const Pieces pieces = fast.split(text);
      CHECK(pieces == regex.split(text));
      CHECK(joined(pieces) == text);
    }
  }
}

TEST_CASE("invalid UTF-8 splits like U+FFFD and keeps its bytes") {
  // U+FFFD is a symbol: [^\s\p{L}\p{N}], a piece apart from letters and digits.
  CHECK(splitter("gpt-2")("a\xFF"
                          "b") == Pieces{"a", "\xFF", "b"});
  CHECK(splitter("gpt-2")("a \xFF\xFE!") == Pieces{"a", " \xFF\xFE!"});
  CHECK(splitter("smollm")("x\xC3"
                           "12") == Pieces{"x", "\xC3", "1", "2"});
  CHECK(splitter("llama-bpe")("\xE2\x82word") == Pieces{"\xE2\x82word"});
  for (const smol::PreTokenizerSpec& spec : smol::kPreTokenizers) {
    const std::string text = "\xED\xA0\x80 a\xC0\x80 1\xF5 \xF0\x9F";
    CHECK(joined(PreTokenizer(spec).split(text)) == text);
  }
}

TEST_CASE("CodepointRegex: classes, quantifiers, look-ahead, end of piece") {
  CHECK(match_length(R"(\p{L}+)", "naïve!") == 5);
  CHECK(match_length(R"(\p{N}{1,3})", "١٢٣٤") == 3);
  CHECK(match_length(R"(\p{N}{2})", "1") == -1);
  CHECK(match_length(R"(\p{P}+)", "¿!«»$") == 4);  // $ is a symbol, not punctuation
  CHECK(match_length(R"(\s+(?!\S))", "   x") == 2);
  CHECK(match_length(R"(\s+(?!\S))", "   ") == 3);
  CHECK(match_length(R"(\s*[\r\n]+)", " \n \n  x") == 4);
  CHECK(match_length(R"(a(?=b))", "ab") == 1);
  CHECK(match_length(R"(a(?=b))", "ac") == -1);
  CHECK(match_length(R"(\s+$)", "  ") == 2);
  CHECK(match_length(R"(\s+$)", "  x") == -1);
  CHECK(match_length(R"(x|xy)", "xy") == 1);  // the first alternative wins, not the longest
  CHECK(match_length(R"((?:ab)+c)", "ababc") == 5);
  CHECK(match_length(R"([^\r\n\p{L}\p{N}]?\p{L}+)", "\u00a0word") == 5);
  CHECK(match_length(R"('[sS])", "'S") == 2);
  // Non-ASCII whitespace compares as U+000B against literals, as in llama.cpp.
  CHECK(match_length("\\v", "\u3000") == 1);
  CHECK(match_length("[\u3000-\u3002]", "\u3000") == -1);
  CHECK(match_length("[\u3000-\u3002]", "\u3001") == 1);
}

TEST_CASE("CodepointRegex refuses what it does not understand") {
  for (const std::string_view pattern : {"(?i:'s)", "a+?", "a*", "(a|)", "\\p{Han}", "[a", "(a",
                                         "a)", "\\w", "x{3,1}", "(?:a*)+", "."}) {
    CAPTURE(pattern);
    CHECK_THROWS_AS(smol::CodepointRegex{pattern}, smol::Error);
  }
}

}  // namespace test_pre_tokenizer
