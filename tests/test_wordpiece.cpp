// WordPiece (BERT's tokenizer, text/wordpiece.hpp): the normalizer's words, as llama.cpp's
// WPM preprocess makes them (each code point to the first of its decomposition and
// combining marks dropped, then lowercase, as the file's options say; punctuation, ASCII
// symbols and CJK ideographs apart; controls dropped); the
// greedy longest-piece cut with "▁" at each word's start; [UNK] for a word that cannot be
// cut whole; [CLS] ... [SEP] around an input; the Unicode maps it reads. (The synthetic
// BERT file's tokens against llama.cpp's own: tests/real_model/embedding_check.py; and
// against Hugging Face's tokenizers on the conformance corpus: wordpiece_check.py.)
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "smol/text/tokenizer.hpp"
#include "smol/text/unicode.hpp"
#include "smol/text/wordpiece.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_wordpiece {

namespace {

using Words = std::vector<std::string>;

smol::Vocabulary small_vocabulary() {
  smol::Vocabulary vocab;
  vocab.model = "bert";
  vocab.tokens = {"[PAD]", "[UNK]",   "[CLS]",       "[SEP]",   "\u2581un",    "\u2581unaff", "aff",
                  "able",  "\u2581a", "\u2581hello", "\u2581,", "\u2581world", "\u2581!",     "s"};
  vocab.token_types.assign(vocab.tokens.size(), smol::TokenType::normal);
  for (int i = 0; i < 4; ++i) vocab.token_types[i] = smol::TokenType::control;
  vocab.padding_id = 0;
  vocab.unknown_id = 1;
  vocab.bos_id = 2;
  vocab.separator_id = 3;
  vocab.add_bos = true;
  vocab.add_eos = true;
  return vocab;
}

}  // namespace

TEST_CASE("the normalizer's words are llama.cpp's WPM preprocess") {
  using smol::WordPieceEncoder;
  CHECK(WordPieceEncoder::words("Hello, WORLD!") == Words{"hello", ",", "world", "!"});
  // Accents fall away with the decomposition; İ is I and a dot, so i.
  CHECK(WordPieceEncoder::words("Naïve café İstanbul") == Words{"naive", "cafe", "istanbul"});
  // ASCII symbols and CJK ideographs are words of their own; other symbols are not.
  CHECK(WordPieceEncoder::words("$5 日本語 a€b") == Words{"$", "5", "日", "本", "語", "a€b"});
  // Controls, NUL and U+FFFD dropped; any whitespace (NBSP, ideographic space) splits.
  CHECK(WordPieceEncoder::words(std::string("a\x07"
                                            "b\0c",
                                            5)) == Words{"abc"});
  CHECK(WordPieceEncoder::words("a\u00A0b\u3000c\t\nd") == Words{"a", "b", "c", "d"});
  CHECK(WordPieceEncoder::words("x\xFFy") == Words{"xy"});  // ill-formed UTF-8 is U+FFFD
  // A Hangul syllable keeps its leading consonant (llama.cpp's one-to-one NFD).
  CHECK(WordPieceEncoder::words("\uD55C") == Words{"\u1112"});
  CHECK(WordPieceEncoder::words("   ").empty());
  // Combining marks are dropped: a decomposed "e\u0301" is "e" as the composed one is.
  CHECK(WordPieceEncoder::words("e\u0301te\u0301 Cafe\u0301") == Words{"ete", "cafe"});
}

TEST_CASE("the file's BertNormalizer options: no lowercase, no accent stripping") {
  using smol::WordPieceEncoder;
  using smol::WordPieceNormalizer;
  // Cased models (bert-base-cased) keep case and accents, combining marks included.
  const WordPieceNormalizer cased{.lowercase = false, .strip_accents = false};
  CHECK(WordPieceEncoder::words("Café e\u0301 ÄB", cased) == Words{"Café", "e\u0301", "ÄB"});
  // Lowercase only (strip_accents set false on its own).
  const WordPieceNormalizer lower_only{.lowercase = true, .strip_accents = false};
  CHECK(WordPieceEncoder::words("Café ÄB", lower_only) == Words{"café", "äb"});
  // Accents stripped, case kept.
  const WordPieceNormalizer strip_only{.lowercase = false, .strip_accents = true};
  CHECK(WordPieceEncoder::words("Café ÄB", strip_only) == Words{"Cafe", "AB"});
}

TEST_CASE("the Unicode maps: simple lowercase and the decomposition's first code point") {
  CHECK(smol::unicode::to_lower(U'A') == U'a');
  CHECK(smol::unicode::to_lower(U'\u00C9') == U'\u00E9');  // É
  CHECK(smol::unicode::to_lower(U'\u0130') == U'i');       // İ: the simple mapping
  CHECK(smol::unicode::to_lower(U'\u0391') == U'\u03B1');  // Greek alpha
  CHECK(smol::unicode::to_lower(U'\u00DF') == U'\u00DF');  // ß has no lowercase of its own
  CHECK(smol::unicode::nfd_first(U'\u00E9') == U'e');
  CHECK(smol::unicode::nfd_first(U'\u1E69') == U's');  // ṩ: two marks
  CHECK(smol::unicode::nfd_first(U'\uAC00') == U'\u1100');
  CHECK(smol::unicode::nfd_first(U'\uD7A3') == U'\u1112');
  CHECK(smol::unicode::nfd_first(U'x') == U'x');
  CHECK(smol::unicode::is_control(U'\u200B'));      // a format character (Cf)
  CHECK(smol::unicode::is_control(U'\U000E0080'));  // unassigned (Cn)
  CHECK(smol::unicode::is_symbol(U'+'));
  CHECK_FALSE(smol::unicode::is_symbol(U'a'));
}

TEST_CASE("words are cut into the longest pieces; a word that cannot be cut is [UNK]") {
  const smol::Tokenizer tokenizer(small_vocabulary());
  using Ids = std::vector<smol::TokenId>;
  // unaffable: ▁unaff (longer than ▁un) + able; unaffs: ▁unaff + s.
  CHECK(tokenizer.encode("unaffable", {.add_bos = false}) == Ids{5, 7});
  CHECK(tokenizer.encode("Hello, world!", {.add_bos = false}) == Ids{9, 10, 11, 12});
  // "unb" has no cut ("b" is not a piece): the whole word is one [UNK], and its
  // neighbours are cut as ever.
  CHECK(tokenizer.encode("a unb a", {.add_bos = false}) == Ids{8, 1, 8});
  // An input: [CLS] ... [SEP].
  CHECK(tokenizer.encode("hello", {.add_eos = true}) == Ids{2, 9, 3});
  CHECK(tokenizer.decode(Ids{9, 10, 11}) == "hello , world");
}

TEST_CASE("a WordPiece vocabulary without [UNK] is refused") {
  smol::Vocabulary vocab = small_vocabulary();
  vocab.unknown_id.reset();
  CHECK_THROWS_WITH_AS(smol::Tokenizer(std::move(vocab)), doctest::Contains("unknown token"),
                       smol::Error);
}

}  // namespace test_wordpiece
