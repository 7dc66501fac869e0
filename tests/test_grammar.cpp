// The grammar engine: GBNF parsing (each construct, and the errors), the recognizer on
// known-good and known-bad texts, and the fast token masks against the brute force on
// the fixture's vocabulary and on SmolLM2's.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <string_view>

#include "grammar_oracle.hpp"
#include "smol/core/cancel.hpp"
#include "smol/core/error.hpp"
#include "smol/grammar/gbnf.hpp"
#include "smol/grammar/grammar_limits.hpp"
#include "smol/grammar/grammar_matcher.hpp"
#include "smol/grammar/recognizer.hpp"
#include "smol/grammar/token_mask_table.hpp"
#include "smol/grammar/token_trie.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_grammar {

namespace {

using smol::GrammarRecognizer;
using smol::GrammarState;
using smol::parse_gbnf;

// Whether the grammar accepts `text` as a whole / as the start of a sentence.
bool accepts(std::string_view grammar, std::string_view text) {
  GrammarRecognizer recognizer(parse_gbnf(grammar));
  GrammarState state = recognizer.initial();
  return recognizer.advance(state, text) && GrammarRecognizer::can_end(state);
}
bool accepts_prefix(std::string_view grammar, std::string_view text) {
  GrammarRecognizer recognizer(parse_gbnf(grammar));
  GrammarState state = recognizer.initial();
  return recognizer.advance(state, text);
}

std::string parse_error(std::string_view grammar) {
  try {
    parse_gbnf(grammar);
  } catch (const smol::Error& e) {
    return e.what();
  }
  return "(no error)";
}

constexpr std::string_view kJsonGrammar = R"(# any JSON value, as llama.cpp's grammars/json.gbnf
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,4})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";

}  // namespace

TEST_CASE("gbnf: literals, escapes and sequences") {
  CHECK(accepts(R"(root ::= "abc")", "abc"));
  CHECK_FALSE(accepts(R"(root ::= "abc")", "ab"));
  CHECK(accepts_prefix(R"(root ::= "abc")", "ab"));
  CHECK_FALSE(accepts_prefix(R"(root ::= "abc")", "ax"));
  CHECK(accepts(R"(root ::= "a" "b"   "c")", "abc"));
  CHECK(accepts(R"(root ::= "\n\r\t\\\"")", "\n\r\t\\\""));
  CHECK(accepts(R"(root ::= "\x41\u00e9\U0001F600")", "A\xC3\xA9\xF0\x9F\x98\x80"));
  CHECK(accepts(R"(root ::= "日本")", "日本"));
  CHECK(accepts(R"(root ::= "" "x")", "x"));
}

TEST_CASE("gbnf: alternation, groups and rules") {
  constexpr std::string_view g = R"(
root ::= greeting " " name   # a comment
greeting ::= "hi" | "hello" | ("good " ("morning" | "evening"))
name ::= "bob" |
         "alice"
)";
  CHECK(accepts(g, "hi bob"));
  CHECK(accepts(g, "hello alice"));
  CHECK(accepts(g, "good evening bob"));
  CHECK_FALSE(accepts(g, "good night bob"));
  CHECK_FALSE(accepts(g, "hi"));
  // An empty alternative.
  CHECK(accepts(R"(root ::= "a" | )", ""));
  CHECK(accepts(R"(root ::= "a" | )", "a"));
}

TEST_CASE("gbnf: character classes, negation and any character") {
  CHECK(accepts(R"(root ::= [a-c0-9_]+)", "ab0_9c"));
  CHECK_FALSE(accepts(R"(root ::= [a-c0-9_]+)", "abd"));
  CHECK(accepts(R"(root ::= [^"\\]+)", "anything but é"));
  CHECK_FALSE(accepts(R"(root ::= [^"\\]+)", "a\"b"));
  CHECK(accepts(R"(root ::= [\]\[-]+)", "]-["));
  CHECK(accepts(R"(root ::= [α-ω]+)", "λμ"));
  CHECK_FALSE(accepts(R"(root ::= [α-ω]+)", "λA"));
  CHECK(accepts(R"(root ::= . . .)", "a\n😀"));
  CHECK_FALSE(accepts(R"(root ::= . . .)", "ab"));
  CHECK(accepts(R"(root ::= [^\x00-\x7F])", "é"));
  CHECK_FALSE(accepts(R"(root ::= [^\x00-\x7F])", "e"));
  // A class ending with '-' takes it literally.
  CHECK(accepts(R"(root ::= [a-]+)", "a-a"));
}

TEST_CASE("gbnf: repetition operators") {
  CHECK(accepts(R"(root ::= "a"*)", ""));
  CHECK(accepts(R"(root ::= "a"*)", "aaaa"));
  CHECK_FALSE(accepts(R"(root ::= "a"+)", ""));
  CHECK(accepts(R"(root ::= "a"+)", "aaa"));
  CHECK(accepts(R"(root ::= "a"? "b")", "b"));
  CHECK(accepts(R"(root ::= "a"? "b")", "ab"));
  CHECK_FALSE(accepts(R"(root ::= "a"? "b")", "aab"));
  CHECK(accepts(R"(root ::= "ab"{3})", "ababab"));
  CHECK_FALSE(accepts(R"(root ::= "ab"{3})", "abab"));
  CHECK_FALSE(accepts(R"(root ::= "ab"{3})", "abababab"));
  CHECK(accepts(R"(root ::= [0-9]{2,})", "12345"));
  CHECK_FALSE(accepts(R"(root ::= [0-9]{2,})", "1"));
  for (const char* text : {"1", "12", "123", "1234"}) {
    CHECK(accepts(R"(root ::= [0-9]{1,4})", text) == (std::string_view(text).size() <= 4));
  }
  CHECK_FALSE(accepts(R"(root ::= [0-9]{1,4})", "12345"));
  CHECK(accepts(R"(root ::= ("x" | "y"){0,2} "!")", "!"));
  CHECK(accepts(R"(root ::= ("x" | "y"){0,2} "!")", "yx!"));
  CHECK_FALSE(accepts(R"(root ::= ("x" | "y"){0,2} "!")", "xyx!"));
  CHECK(accepts(R"(root ::= "a" { 2 , 3 })", "aaa"));
}

TEST_CASE("gbnf: a JSON grammar accepts JSON and refuses the rest") {
  CHECK(accepts(kJsonGrammar, R"({"a": [1, 2.5, -3e10], "b": {"c": null}, "d": "x\"y\u00e9"})"));
  CHECK(accepts(kJsonGrammar, "{\n  \"k\": true\n}"));
  CHECK_FALSE(accepts(kJsonGrammar, R"({"a": 01})"));
  CHECK_FALSE(accepts(kJsonGrammar, R"({"a" 1})"));
  CHECK_FALSE(accepts(kJsonGrammar, R"({"a": [1,]})"));
  CHECK(accepts_prefix(kJsonGrammar, R"({"a": [1, {"b": "unfinished)"));
}

TEST_CASE("gbnf: a malformed grammar names the line, the column and what was expected") {
  CHECK(parse_error("root ::= \"abc") ==
        "grammar: line 1, column 14: expected '\"' to close the string, found the end of the "
        "grammar");
  CHECK(parse_error("root ::= \"a\"\nfoo = \"b\"") ==
        "grammar: line 2, column 5: expected '::=', found '='");
  CHECK(parse_error("root ::= (\"a\" | \"b\"\n") ==
        "grammar: line 2, column 1: expected ')' to close the group, found the end of the grammar");
  CHECK(parse_error("root ::= [a-z") ==
        "grammar: line 1, column 14: expected ']' to close the character class, found the end "
        "of the grammar");
  CHECK(parse_error("root ::= \"\\q\"") ==
        "grammar: line 1, column 12: expected an escape (\\n \\r \\t \\\\ \\\" \\[ \\] \\xHH "
        "\\uHHHH \\UHHHHHHHH), found 'q'");
  CHECK(parse_error("root ::= \"\\x4\"") ==
        "grammar: line 1, column 14: expected 2 hexadecimal digits, found '\"'");
  CHECK(parse_error("root ::= * \"a\"") ==
        "grammar: line 1, column 10: expected an element before '*', found '*'");
  CHECK(parse_error("root ::= \"a\"{2") ==
        "grammar: line 1, column 15: expected '}' to close the repetition, found the end of the "
        "grammar");
  CHECK(parse_error("root ::= \"a\"{3,1}") ==
        "grammar: line 1, column 13: a repetition {m,n} with n smaller than m");
  CHECK(parse_error("root ::= \"a\"{99999}") ==
        "grammar: line 1, column 14: a repetition count is at most 2000");
  CHECK(parse_error("root ::= \"a\" % \"b\"") ==
        "grammar: line 1, column 14: expected an element, '|' or the end of the line, found '%'");
  CHECK(parse_error("::= \"a\"") == "grammar: line 1, column 1: expected a rule name, found ':'");
  CHECK(parse_error("root ::= [z-a]") ==
        "grammar: line 1, column 10: a character range whose end is before its start");
  CHECK(parse_error("root ::= \"a\"\nroot ::= \"b\"") ==
        "grammar: line 2, column 1: rule 'root' is defined twice");
}

TEST_CASE("gbnf: undefined rules, a missing root and left recursion are refused by name") {
  CHECK(parse_error("root ::= item\n  item ::= \"x\" value") ==
        "grammar: line 2, column 16: rule 'value' is used but never defined");
  CHECK(parse_error("start ::= \"x\"") ==
        "grammar: there is no rule named 'root' (generation starts there)");
  const std::string direct =
      parse_error("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]");
  CHECK(direct.find("rule 'expr' is left-recursive") != std::string::npos);
  // Through another rule, and behind something that can match nothing.
  CHECK(
      parse_error("root ::= a\na ::= b \"x\"\nb ::= \"y\"? a").find("rule 'a' is left-recursive") !=
      std::string::npos);
  // Right recursion is fine.
  CHECK(accepts("root ::= \"(\" root \")\" | \"x\"", "((x))"));
}

TEST_CASE("gbnf: hostile input is refused, not crashed on") {
  CHECK(parse_error("root ::= " + std::string(500, '(')).find("nested too deeply") !=
        std::string::npos);
  CHECK(parse_error("root ::= \"\xC3\"").find("valid UTF-8") != std::string::npos);
  // A repeated literal becomes one rule, and each copy one reference to it: 2000 copies
  // of a 2000-character literal take 2000 elements and more, not four million.
  const auto repeated = parse_gbnf("root ::= \"" + std::string(2000, 'a') + "\"{2000}");
  CHECK(repeated->element_count() < 10'000);
  // The grammar's size is counted as it is built: 600 repetitions of 2000 are refused
  // when the count passes the budget, at their line and column.
  std::string large = "root ::= \"x\"\nmore ::=";
  for (int i = 0; i < 600; ++i) large += " \"a\"{2000}";
  const std::string error = parse_error(large);
  CHECK(error.find("more than 1000000 elements") != std::string::npos);
  CHECK(error.find("line 2, column") != std::string::npos);
}

// ---- budgets (grammar_limits.hpp) ---------------------------------------------------

// The budget error a compilation of `gbnf` over the fixture's vocabulary ends in, or
// "(compiled)".
std::string compile_error(std::string_view gbnf, const smol::GrammarLimits& limits = {},
                          const smol::CancelCheck& cancel = {}) {
  auto trie = std::make_shared<const smol::TokenTrie>(*smol::test::fixture_tokenizer());
  try {
    smol::TokenMaskTable::compile(parse_gbnf(gbnf), trie, limits, cancel);
  } catch (const smol::GrammarLimitError& e) {
    return std::string("limit: ") + e.what();
  } catch (const smol::Cancelled&) {
    return "cancelled";
  } catch (const smol::Error& e) {
    return std::string("error: ") + e.what();
  }
  return "(compiled)";
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// Nested counted repetition reads "aaa" in a number of ways that multiplies with every
// level; the recognizer would hold a stack per way (three levels of 2000: billions).
constexpr std::string_view kNestedRepetition = R"(root ::= (("a"{0,2000}){0,2000}){0,2000})";

TEST_CASE("budgets: nested repetition is refused after a step's budget, naming the rule") {
  const std::string error = compile_error(kNestedRepetition);
  CAPTURE(error);
  CHECK(contains(error, "limit: grammar: too ambiguous to follow"));
  CHECK(contains(error, "more than 4000000 expansions"));
  CHECK(contains(error, "rule 'root' (line 1)"));
  // The same through a budget of the caller's: the work is what is counted.
  CHECK(contains(compile_error(kNestedRepetition, {.max_step_work = 50'000}),
                 "more than 50000 expansions"));
  // Three levels of 30 are fine: a budget refuses the multiplied, not the nested.
  CHECK(compile_error(R"(root ::= (("a"{0,30}){0,30}){0,30})") == "(compiled)");
}

TEST_CASE("budgets: a table's memory, the compile time and a cancel each end the work") {
  // Memory: the stack frames a step makes count at each poll, not after the step.
  const std::string memory = compile_error(
      kNestedRepetition,
      {.max_step_work = std::size_t{1} << 40, .max_table_bytes = std::size_t{8} << 20});
  CAPTURE(memory);
  CHECK(contains(memory, "limit: grammar: its tables need more than 8 MiB"));
  // Time: a deadline already past stops at the first poll.
  CHECK(contains(compile_error(kNestedRepetition,
                               {.max_step_work = std::size_t{1} << 40, .compile_seconds = 0}),
                 "compiling it takes more than 0 seconds"));
  // Cancel: polled with the others (the server's hung-up client, its SIGTERM).
  int polls = 0;
  const smol::CancelCheck cancel([&polls] { return ++polls > 3; });
  CHECK(compile_error(kNestedRepetition, {.max_step_work = std::size_t{1} << 40}, cancel) ==
        "cancelled");
  CHECK(polls == 4);
}

TEST_CASE("budgets: a grammar no token can begin is refused when compiled") {
  // The recognizer takes no surrogate code point, so no token can start this one.
  const std::string error = compile_error(R"(root ::= [\uD800-\uDFFF]+)");
  CAPTURE(error);
  CHECK(contains(error, "error: grammar: no token of the model's vocabulary can begin a text"));
  // A grammar of the empty text alone may end at once: that is a reply.
  CHECK(compile_error(R"(root ::= "")") == "(compiled)");
}

TEST_CASE("budgets: a table's calls after compiling keep the step budget") {
  // Cheap to start, ambiguous after a prefix longer than any token: the blow-up comes
  // mid-reply, where the matcher throws and generation ends the reply (grammar_budget).
  auto trie = std::make_shared<const smol::TokenTrie>(*smol::test::fixture_tokenizer());
  const std::string gbnf =
      "root ::= \"" + std::string(40, 'x') + "\" ((\"a\"{0,200}){0,200}){0,200}";
  auto table = smol::TokenMaskTable::compile(parse_gbnf(gbnf), trie, {.max_step_work = 100'000});
  smol::GrammarMatcher matcher(table);
  REQUIRE(matcher.accept_bytes(std::string(39, 'x')));
  CHECK_THROWS_AS(matcher.accept_bytes("x"), smol::GrammarLimitError);
  CHECK(table->stats().peak_step_work <= 100'000 + 16384);
  // A request's steps together have a budget too: each new state below is cheap, and a
  // reply that needs many of them stops at the sum.
  auto json =
      smol::TokenMaskTable::compile(parse_gbnf(kJsonGrammar), trie, {.max_request_work = 2'000});
  smol::GrammarMatcher reply(json);
  std::string error;
  try {
    for (const char c : std::string(R"({"a": [1, 2, {"b": [[[["x", "y"]]]], "c": null}]})")) {
      reply.allowed_tokens();
      const bool taken = reply.accept_bytes(std::string(1, c));  // outside REQUIRE: it throws
      REQUIRE(taken);
    }
  } catch (const smol::GrammarLimitError& e) {
    CHECK(e.budget() == smol::GrammarLimitError::Budget::request_work);
    error = e.what();
  }
  CHECK(error.find("this reply's steps needed more than 2000 expansions") != std::string::npos);
  CHECK(reply.work() > 2'000);
  // Another request on the same table starts afresh, and what the first computed is free.
  smol::GrammarMatcher next(json);
  CHECK_NOTHROW(next.allowed_tokens());
  CHECK(next.accept_bytes("{"));
  CHECK(next.work() == 0);
}

TEST_CASE("recognizer: partial UTF-8 is kept only while a completion can match") {
  GrammarRecognizer recognizer(parse_gbnf(R"(root ::= "é" | [а-я] "!")"));
  GrammarState state = recognizer.initial();
  GrammarState next;
  CHECK(recognizer.advance(state, 0xC3, next));        // é is C3 A9
  CHECK_FALSE(recognizer.advance(next, 0xA8, state));  // è: C3 A8
  CHECK(recognizer.advance(next, 0xA9, state));
  CHECK(GrammarRecognizer::exhausted(state));
  state = recognizer.initial();
  CHECK(recognizer.advance(state, 0xD0, next));  // а..я live under D0 and D1
  CHECK_FALSE(recognizer.advance(recognizer.initial(), 0xD2, next));
  // Ill-formed UTF-8 never matches, even for `.`.
  GrammarRecognizer any(parse_gbnf("root ::= .*"));
  for (const std::string_view bad :
       {"\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "\xFF"}) {
    GrammarState s = any.initial();
    CHECK_FALSE(any.advance(s, bad));
  }
  GrammarState s = any.initial();
  CHECK(any.advance(s, "\xF0\x9F\x98"));  // three bytes of 😀 so far
  CHECK_FALSE(GrammarRecognizer::can_end(s));
}

TEST_CASE("token masks: end of generation only where the grammar may end") {
  const auto tokenizer = smol::test::fixture_tokenizer();
  auto trie = std::make_shared<const smol::TokenTrie>(*tokenizer);
  REQUIRE_FALSE(trie->end_of_generation().empty());
  const smol::TokenId eog = trie->end_of_generation().front();
  auto table = std::make_shared<smol::TokenMaskTable>(parse_gbnf(R"(root ::= "a" "b"?)"), trie);
  smol::GrammarMatcher matcher(table);
  CHECK_FALSE(matcher.allowed_tokens()->contains(eog));
  CHECK_FALSE(matcher.accept(eog));
  REQUIRE(matcher.accept_bytes("a"));
  CHECK(matcher.allowed_tokens()->contains(eog));
  CHECK(matcher.can_end());
  REQUIRE(matcher.accept_bytes("b"));
  // Complete and nothing may follow: the end is the only choice.
  CHECK(matcher.exhausted());
  const auto only = matcher.allowed_tokens()->ids();
  CHECK(only == trie->end_of_generation());
  CHECK(matcher.accept(eog));
  CHECK(matcher.ended());
  CHECK(matcher.allowed_tokens()->empty());
}

TEST_CASE("token masks: control tokens never match text; tokens may span elements") {
  const auto tokenizer = smol::test::fixture_tokenizer();
  auto trie = std::make_shared<const smol::TokenTrie>(*tokenizer);
  // A grammar that accepts any text still refuses control tokens.
  auto table = std::make_shared<smol::TokenMaskTable>(parse_gbnf("root ::= .*"), trie);
  smol::GrammarMatcher matcher(table);
  const auto allowed = matcher.allowed_tokens();
  for (std::size_t i = 0; i < tokenizer->size(); ++i) {
    const auto id = static_cast<smol::TokenId>(i);
    if (tokenizer->is_control(id) && !tokenizer->is_end_of_generation(id)) {
      CHECK_FALSE(allowed->contains(id));
    }
  }
  // A token that covers the end of one rule and the start of the next: find a
  // multi-byte token and build a grammar that splits it across two rules.
  std::optional<smol::TokenId> long_token;
  for (std::size_t i = 0; i < tokenizer->size() && !long_token; ++i) {
    const std::string_view piece = trie->piece(static_cast<smol::TokenId>(i));
    if (piece.size() >= 4 && piece.find_first_of("\"\\\n") == std::string_view::npos &&
        static_cast<unsigned char>(piece[0]) < 0x80 &&
        static_cast<unsigned char>(piece[1]) < 0x80) {
      long_token = static_cast<smol::TokenId>(i);
    }
  }
  REQUIRE(long_token);
  const std::string piece(trie->piece(*long_token));
  const std::string grammar = "root ::= first second\nfirst ::= \"" + piece.substr(0, 2) +
                              "\"\nsecond ::= \"" + piece.substr(2) + "\" \"!\"";
  auto split = std::make_shared<smol::TokenMaskTable>(parse_gbnf(grammar), trie);
  smol::GrammarMatcher split_matcher(split);
  CHECK(split_matcher.allowed_tokens()->contains(*long_token));
  CHECK(split_matcher.accept(*long_token));
  CHECK(split_matcher.accept_bytes("!"));
  CHECK(split_matcher.exhausted());
}

TEST_CASE("token masks: a token may end inside a character") {
  const auto tokenizer = smol::test::fixture_tokenizer();
  auto trie = std::make_shared<const smol::TokenTrie>(*tokenizer);
  // Byte-level vocabularies hold every byte as a token: find C3, A9 and A8.
  const auto byte_token = [&](unsigned char b) {
    for (std::size_t i = 0; i < tokenizer->size(); ++i) {
      if (trie->piece(static_cast<smol::TokenId>(i)) == std::string(1, static_cast<char>(b))) {
        return static_cast<smol::TokenId>(i);
      }
    }
    FAIL("no token for byte " << int(b));
    return smol::TokenId{-1};
  };
  const smol::TokenId c3 = byte_token(0xC3), a9 = byte_token(0xA9), a8 = byte_token(0xA8);
  auto table = std::make_shared<smol::TokenMaskTable>(parse_gbnf(R"(root ::= "é!")"), trie);
  smol::GrammarMatcher matcher(table);
  CHECK(matcher.allowed_tokens()->contains(c3));
  CHECK_FALSE(matcher.allowed_tokens()->contains(a9));
  REQUIRE(matcher.accept(c3));
  CHECK(matcher.allowed_tokens()->contains(a9));
  CHECK_FALSE(matcher.allowed_tokens()->contains(a8));
  CHECK_FALSE(matcher.can_end());
  REQUIRE(matcher.accept(a9));
  CHECK(matcher.accept_bytes("!"));
}

TEST_CASE("token masks equal the brute force: fixture vocabulary") {
  const auto tokenizer = smol::test::fixture_tokenizer();
  const auto json = parse_gbnf(kJsonGrammar);
  int checked = smol::test::oracle_walk(
      json, tokenizer,
      "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"tags\": [\"math\", \"poet\\u00e9\"],\n"
      "  \"nested\": {\"ok\": true, \"pi\": 3.14159, \"none\": null}}",
      60, 1);
  checked += smol::test::oracle_walk(
      parse_gbnf(R"(root ::= ( [α-ω]+ " € " | "日本" [^a-z]* ) "\n" ([0-9]{2,4} ",")+)"), tokenizer,
      "日本語 XYZ\n12,3456,", 40, 2);
  checked += smol::test::oracle_walk(parse_gbnf(R"g(
root ::= expr
expr ::= term (ws ("+" | "-") ws term)*
term ::= factor (ws ("*" | "/") ws factor)*
factor ::= [0-9]+ | "(" ws expr ws ")"
ws ::= [ ]?
)g"),
                                     tokenizer, "(1 + 23) * 4 - (5/(6 - 7))", 40, 3);
  MESSAGE(checked << " states checked");
}

TEST_CASE("token masks equal the brute force: SmolLM2's vocabulary (real_model fixture)") {
  const auto tokenizer = smol::test::smollm2_tokenizer();
  if (!tokenizer) return;
  int checked = smol::test::oracle_walk(
      parse_gbnf(kJsonGrammar), tokenizer,
      "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"tags\": [\"math\", \"po\\u00e9t\", "
      "\"日本\"],\n  \"nested\": {\"ok\": true, \"pi\": 3.14159, \"none\": null}}",
      25, 4, 3);
  checked += smol::test::oracle_walk(
      parse_gbnf(R"(root ::= ( [α-ω]+ " € " | "日本" [^a-z]* ) "\n" ([0-9]{2,4} ",")+)"), tokenizer,
      "日本語 XYZ\n12,3456,", 15, 5, 2);
  MESSAGE(checked << " states checked");
}

}  // namespace test_grammar
