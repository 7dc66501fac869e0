// JSON Schema -> grammar: every supported keyword gives a grammar whose sentences
// validate (checked by a small validator written here, on known-good and known-bad
// texts and on random sentences of the grammar), refused keywords are named, and the
// token masks of schema grammars equal the brute force.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <random>
// GCC 12 at -O1 with the sanitizers warns that libstdc++'s own std::regex internals may
// use an uninitialized std::function (a known false positive inside <regex>, not in
// this file), and -Werror makes that fatal; the warning is off for that header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <regex>
#pragma GCC diagnostic pop
#include <string>
#include <string_view>
#include <vector>

#include "fewer_repeats.hpp"
#include "grammar_oracle.hpp"
#include "nested_json.hpp"
#include "smol/core/error.hpp"
#include "smol/grammar/gbnf.hpp"
#include "smol/grammar/grammar_matcher.hpp"
#include "smol/grammar/json_schema.hpp"
#include "smol/grammar/recognizer.hpp"
#include "smol/grammar/token_mask_table.hpp"
#include "smol/grammar/token_trie.hpp"

// One namespace per suite: the suite compiles in a unity build (tests/CMakeLists.txt).
namespace test_grammar_schema {

namespace {

using Json = nlohmann::ordered_json;
using smol::GrammarRecognizer;
using smol::GrammarState;

// ---- a small validator for the supported subset --------------------------------------
std::size_t code_points(const std::string& s) {
  std::size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool matches_format(const std::string& format, const std::string& s) {
  static const std::string date = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
  static const std::string time =
      R"(([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?([zZ]|[+-]([01]\d|2[0-3]):[0-5]\d))";
  if (format == "date") return std::regex_match(s, std::regex(date));
  if (format == "time") return std::regex_match(s, std::regex(time));
  if (format == "date-time") return std::regex_match(s, std::regex(date + "[tT]" + time));
  if (format == "uuid") {
    return std::regex_match(
        s,
        std::regex("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"));
  }
  if (format == "email") return std::regex_match(s, std::regex(R"([^@\s]+@[^@\s]+\.[a-zA-Z]{2,})"));
  return false;
}

bool valid(const Json& schema, const Json& value, const Json& root) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref")) {
    const auto ref = schema["$ref"].get<std::string>();
    return valid(ref == "#" ? root : root.at(Json::json_pointer(ref.substr(1))), value, root);
  }
  if (schema.contains("const") && value != schema["const"]) return false;
  if (schema.contains("enum")) {
    bool found = false;
    for (const Json& v : schema["enum"]) found = found || v == value;
    if (!found) return false;
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!schema.contains(key)) continue;
    int n = 0;
    for (const Json& s : schema[key]) n += valid(s, value, root) ? 1 : 0;
    if (n == 0) return false;
  }
  if (schema.contains("type")) {
    const auto is = [&](const std::string& t) {
      if (t == "string") return value.is_string();
      if (t == "number") return value.is_number();
      if (t == "integer") return value.is_number_integer();
      if (t == "boolean") return value.is_boolean();
      if (t == "null") return value.is_null();
      if (t == "object") return value.is_object();
      if (t == "array") return value.is_array();
      return false;
    };
    bool any = false;
    if (schema["type"].is_string()) {
      any = is(schema["type"].get<std::string>());
    } else {
      for (const Json& t : schema["type"]) any = any || is(t.get<std::string>());
    }
    if (!any) return false;
  }
  if (value.is_string()) {
    const auto s = value.get<std::string>();
    if (schema.contains("minLength") && code_points(s) < schema["minLength"].get<std::size_t>())
      return false;
    if (schema.contains("maxLength") && code_points(s) > schema["maxLength"].get<std::size_t>())
      return false;
    if (schema.contains("pattern") &&
        !std::regex_search(s, std::regex(schema["pattern"].get<std::string>()))) {
      return false;
    }
    if (schema.contains("format") && !matches_format(schema["format"].get<std::string>(), s))
      return false;
  }
  if (value.is_object()) {
    const Json properties = schema.value("properties", Json::object());
    for (const auto& [key, v] : value.items()) {
      if (properties.contains(key)) {
        if (!valid(properties[key], v, root)) return false;
      } else if (schema.contains("additionalProperties") &&
                 !valid(schema["additionalProperties"], v, root)) {
        return false;
      }
    }
    for (const Json& r : schema.value("required", Json::array())) {
      if (!value.contains(r.get<std::string>())) return false;
    }
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<std::size_t>())
      return false;
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<std::size_t>())
      return false;
    if (schema.contains("items")) {
      for (const Json& v : value) {
        if (!valid(schema["items"], v, root)) return false;
      }
    }
  }
  return true;
}

bool grammar_accepts(const std::shared_ptr<const smol::Grammar>& grammar, std::string_view text) {
  GrammarRecognizer recognizer(grammar);
  GrammarState state = recognizer.initial();
  return recognizer.advance(state, text) && GrammarRecognizer::can_end(state);
}

// Random sentences: bytes drawn among those the grammar allows, closing characters
// favoured so that most walks finish. Returns the finished ones.
std::vector<std::string> random_sentences(const std::shared_ptr<const smol::Grammar>& grammar,
                                          int walks, unsigned seed) {
  GrammarRecognizer recognizer(grammar);
  std::mt19937 random(seed);
  std::vector<std::string> done;
  for (int w = 0; w < walks; ++w) {
    GrammarState state = recognizer.initial();
    std::string text;
    while (text.size() < 1500) {
      if (GrammarRecognizer::can_end(state) &&
          (GrammarRecognizer::exhausted(state) || random() % 4 == 0)) {
        done.push_back(text);
        break;
      }
      std::vector<std::pair<std::uint8_t, double>> options;
      double total = 0;
      for (int b = 0; b < 256; ++b) {
        GrammarState next;
        if (!recognizer.advance(state, static_cast<std::uint8_t>(b), next)) continue;
        double weight = b >= 0x20 && b < 0x7F ? 1.0 : 0.05;
        if (b == '"' || b == '}' || b == ']' || b == ',') weight = 12.0;
        if (b == ' ' || b == '\n' || b == '\t') weight = 0.3;
        options.push_back({static_cast<std::uint8_t>(b), weight});
        total += weight;
      }
      REQUIRE_MESSAGE(!options.empty(), "a live state with no next byte after \"" << text << "\"");
      double pick = std::uniform_real_distribution<double>(0, total)(random);
      std::uint8_t chosen = options.back().first;
      for (const auto& [b, weight] : options) {
        if ((pick -= weight) <= 0) {
          chosen = b;
          break;
        }
      }
      GrammarState next;
      REQUIRE(recognizer.advance(state, chosen, next));
      state = next;
      text += static_cast<char>(chosen);
    }
  }
  return done;
}

// The grammar of `schema` accepts every `good` text and refuses every `bad` one, and the
// validator agrees on both; it also refuses the valid `not_written` texts, by the
// choices json_schema.hpp states (property order, no unlisted members unless asked,
// bounded digits); random sentences of the grammar validate (at least `finished` of
// 40 random walks end).
void check_schema(const std::string& schema_text, const std::vector<std::string>& good,
                  const std::vector<std::string>& bad,
                  const std::vector<std::string>& not_written = {}, std::size_t finished = 10) {
  const unsigned seed = 1;
  CAPTURE(schema_text);
  const Json schema = Json::parse(schema_text);
  const std::string gbnf = smol::json_schema_to_gbnf(schema_text);
  CAPTURE(gbnf);
  const auto grammar = smol::parse_gbnf(gbnf);
  for (const std::string& text : good) {
    CAPTURE(text);
    CHECK(valid(schema, Json::parse(text), schema));
    CHECK(grammar_accepts(grammar, text));
  }
  for (const std::string& text : bad) {
    CAPTURE(text);
    const Json parsed = Json::parse(text, nullptr, false);
    if (!parsed.is_discarded()) CHECK_FALSE(valid(schema, parsed, schema));
    CHECK_FALSE(grammar_accepts(grammar, text));
  }
  for (const std::string& text : not_written) {
    CAPTURE(text);
    CHECK(valid(schema, Json::parse(text), schema));
    CHECK_FALSE(grammar_accepts(grammar, text));
  }
  // Under the sanitizers (fewer_repeats.hpp) 10 walks, of which a quarter as many must
  // end: the same recognizer paths, a quarter of the cost (this check took 66 s there).
  const int walks = smol::test::fewer_repeats() ? 10 : 40;
  const std::size_t enough = smol::test::fewer_repeats() ? (finished + 3) / 4 : finished;
  const std::vector<std::string> sentences = random_sentences(grammar, walks, seed);
  CHECK(sentences.size() >= enough);
  for (const std::string& text : sentences) {
    CAPTURE(text);
    const Json parsed = Json::parse(text, nullptr, false);
    REQUIRE_FALSE(parsed.is_discarded());
    CHECK(valid(schema, parsed, schema));
  }
}

std::string schema_error(const std::string& schema_text) {
  try {
    smol::json_schema_to_gbnf(schema_text);
  } catch (const smol::Error& e) {
    return e.what();
  }
  return "(no error)";
}

constexpr std::string_view kPersonSchema = R"({
  "$defs": {
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string", "maxLength": 40},
        "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}
      },
      "required": ["street", "city"],
      "additionalProperties": false
    }
  },
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1},
    "age": {"type": "integer"},
    "email": {"type": "string", "format": "email"},
    "role": {"enum": ["admin", "user", "guest"]},
    "active": {"type": "boolean"},
    "score": {"type": ["number", "null"]},
    "home": {"$ref": "#/$defs/address"},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
    "friends": {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string"}, "since": {"type": "string", "format": "date"}},
        "required": ["name"], "additionalProperties": false}}
  },
  "required": ["name", "age", "role", "home", "tags"],
  "additionalProperties": false
})";

constexpr std::string_view kPersonDocument = R"({
  "name": "Ada Lovelace",
  "age": 36,
  "email": "ada@example.org",
  "role": "admin",
  "active": true,
  "score": 97.5,
  "home": {"street": "12 St James's Square", "city": "London", "zip": "12345"},
  "tags": ["math", "poetry"],
  "friends": [{"name": "Charles Babbage", "since": "1833-06-05"}, {"name": "Mary Somerville"}]
})";

}  // namespace

TEST_CASE("json schema: primitive types") {
  check_schema(R"({"type": "string"})", {R"("hi")", R"("a\"b\\c\u00e9")", R"("")"},
               {R"(hi)", R"("a)", "\"a\nb\"", "1"});
  check_schema(R"({"type": "integer"})", {"0", "-12", "1234567890123456"},
               {"01", "1.5", "-", "\"1\""}, {"12345678901234567"});
  check_schema(R"({"type": "number"})", {"0", "-1.25", "3e10", "2.5E-3"}, {"1.", ".5", "01", "1e"});
  check_schema(R"({"type": "boolean"})", {"true", "false"}, {"True", "1"});
  check_schema(R"({"type": "null"})", {"null"}, {"nil", "\"null\""});
  check_schema(R"({"type": ["string", "null"]})", {"\"x\"", "null"}, {"1"});
  check_schema(R"({})", {"{}", "[1, \"a\"]", "null", "{\"k\": [true]}"}, {"{", "nul"});
}

TEST_CASE("json schema: enum and const") {
  check_schema(R"({"enum": ["red", "green", 3, null, {"a": 1}]})",
               {R"("red")", R"("green")", "3", "null", R"({"a":1})"},
               {R"("blue")", "4", R"("Red")"});
  check_schema(R"({"const": "fixed"})", {R"("fixed")"}, {R"("other")"});
  check_schema(R"({"type": "string", "enum": ["a", 1]})", {R"("a")"}, {"1"});
}

TEST_CASE("json schema: objects, required, order and additionalProperties") {
  // Listed order, required ones present, optional ones anywhere in that order.
  check_schema(
      R"({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["a"]})",
      {R"({"a": "x"})", R"({"b": 1, "a": "x"})", R"({"a": "x", "c": true})",
       R"({"b": 1, "a": "x", "c": false})", "{\n  \"b\": 2,\n  \"a\": \"y\"\n}"},
      {R"({})", R"({"b": 1})", R"({"a": 1})", R"({"a": "x",})"},
      {R"({"a": "x", "b": 1})", R"({"a": "x", "d": 1})"});
  // All optional: the empty object too.
  check_schema(
      R"({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}})",
      {"{}", R"({"x": 1})", R"({"y": 2})", R"({"x": 1, "y": 2})"}, {R"({"x": "1"})"},
      {R"({"y": 2, "x": 1})"});
  // Extra members: any value, or of a schema; never a listed name again.
  check_schema(
      R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"], "additionalProperties": true})",
      {R"({"id": 1})", R"({"id": 1, "other": [1, 2]})", R"({"id": 1, "i": 0, "idx": "s"})"},
      {R"({"other": 1})"}, {R"({"id": 1, "id": 2})"});
  check_schema(
      R"({"type": "object", "properties": {"id": {"type": "integer"}}, "additionalProperties": {"type": "string"}})",
      {R"({})", R"({"id": 1, "x": "s"})", R"({"x": "s", "y": "t"})"},
      {R"({"x": 1})", R"({"id": "s"})"});
  check_schema(R"({"type": "object"})", {"{}", R"({"a": {"b": [null]}})"}, {"[]"});
  check_schema(R"({"type": "object", "additionalProperties": false})", {"{}"}, {R"({"a": 1})"});
}

TEST_CASE("json schema: arrays with items, minItems and maxItems") {
  check_schema(R"({"type": "array", "items": {"type": "integer"}})", {"[]", "[1]", "[1, 2, 3]"},
               {"[1,]", "[\"a\"]", "[,1]"});
  check_schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
               {"[1, 2]", "[1, 2, 3]"}, {"[]", "[1]", "[1, 2, 3, 4]"});
  check_schema(R"({"type": "array", "maxItems": 0})", {"[]"}, {"[1]"});
  check_schema(R"({"type": "array", "minItems": 1})", {"[null]", "[{}, []]"}, {"[]"});
}

TEST_CASE("json schema: anyOf, oneOf, nested objects, $ref and $defs/definitions") {
  check_schema(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})",
               {"5", R"("ab")"}, {R"("abc")", "true"});
  check_schema(R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})", {"true", "null"}, {"0"});
  check_schema(
      R"({"definitions": {"leaf": {"type": "integer"}}, "type": "object", "properties": {"v": {"$ref": "#/definitions/leaf"}}, "required": ["v"]})",
      {R"({"v": 3})"}, {R"({"v": "3"})"});
  // Recursion through $ref.
  check_schema(
      R"({"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["value"]}}, "$ref": "#/$defs/node"})",
      {R"({"value": 1})",
       R"({"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]})"},
      {R"({"value": 1, "children": [{}]})"});
  check_schema(
      std::string(kPersonSchema), {std::string(kPersonDocument)},
      {R"({"name": "", "age": 1, "role": "admin", "home": {"street": "s", "city": "c"}, "tags": ["t"]})",
       R"({"name": "n", "age": 1, "role": "boss", "home": {"street": "s", "city": "c"}, "tags": ["t"]})"});
}

TEST_CASE("json schema: string lengths, formats and patterns") {
  check_schema(R"({"type": "string", "minLength": 2, "maxLength": 4})",
               {R"("ab")", R"("abcd")", R"("é\né")"}, {R"("a")", R"("abcde")"});
  check_schema(R"({"type": "string", "format": "date"})", {R"("2024-02-29")"},
               {R"("2024-13-01")", R"("24-01-01")"});
  check_schema(R"({"type": "string", "format": "time"})",
               {R"("23:59:59Z")", R"("01:02:03.5+05:30")"}, {R"("24:00:00Z")", R"("12:00:00")"});
  check_schema(R"({"type": "string", "format": "date-time"})", {R"("2024-01-31T12:30:00Z")"},
               {R"("2024-01-31 12:30:00Z")"});
  check_schema(R"({"type": "string", "format": "uuid"})",
               {R"("123e4567-e89b-12d3-a456-426614174000")"},
               {R"("123e4567e89b12d3a456426614174000")"});
  check_schema(R"({"type": "string", "format": "email"})", {R"("a.b+c@mail.example.com")"},
               {R"("a@b")", R"("@example.com")"});
  check_schema(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3,4}$"})",
               {R"("AB-123")", R"("ZZ-0000")"}, {R"("AB-12")", R"("ab-123")", R"("xAB-123")"});
  check_schema(R"({"type": "string", "pattern": "^(cat|dog)s?$"})", {R"("cat")", R"("dogs")"},
               {R"("cow")", R"("cats!")"});
  // Unanchored: anything around a match.
  check_schema(R"({"type": "string", "pattern": "ab+c"})", {R"("abc")", R"("xxabbbcyy")"},
               {R"("ac")"}, {}, 0);
  // Characters JSON escapes: the pattern is over the decoded string.
  check_schema(R"({"type": "string", "pattern": "^a\"b\\\\c[\\n]?$"})",
               {R"("a\"b\\c")", R"("a\"b\\c\n")"}, {R"("a"b\c")"});
  check_schema(R"({"type": "string", "pattern": "^[^a-z]+\\.(?:x|y)*$"})",
               {R"("AB.")", R"("É1.xyx")"}, {R"("a.")", R"("AB")"});
  // Bounded repetitions of what can match nothing are fine ((a?){2} is 0 to 2 a's).
  check_schema(R"({"type": "string", "pattern": "^x(a?){2}(|b){0,2}$"})",
               {R"("x")", R"("xaa")", R"("xab")", R"("xbb")"}, {R"("xaaa")", R"("xba")"});
}

TEST_CASE("json schema: unsupported keywords are refused by name, never ignored") {
  CHECK(schema_error(R"({"type": "integer", "minimum": 0})") ==
        "JSON schema: the keyword \"minimum\" is not supported (at #)");
  CHECK(schema_error(R"({"type": "object", "properties": {"a": {"allOf": [{}]}}})") ==
        "JSON schema: the keyword \"allOf\" is not supported (at #/properties/a)");
  for (const char* keyword : {"not", "if", "prefixItems", "uniqueItems", "patternProperties",
                              "minProperties", "multipleOf", "contains", "dependentRequired"}) {
    const std::string schema = std::string(R"({")") + keyword + R"(": 1})";
    CHECK(schema_error(schema).find(std::string("\"") + keyword + "\" is not supported") !=
          std::string::npos);
  }
  CHECK(schema_error(R"({"type": "string", "format": "ipv4"})").find("\"ipv4\" is not supported") !=
        std::string::npos);
  CHECK(schema_error(R"({"$ref": "https://example.com/s.json"})").find("not a local reference") !=
        std::string::npos);
  CHECK(schema_error(R"({"$ref": "#/$defs/missing"})").find("points at nothing") !=
        std::string::npos);
  CHECK(schema_error(R"({"type": "string", "pattern": "(?=a)b"})").find("look-around") !=
        std::string::npos);
  CHECK(schema_error(R"({"type": "string", "pattern": "a\\1"})").find("\\1") != std::string::npos);
  CHECK(schema_error(R"({"type": "string", "pattern": "a^b"})").find("anchor") !=
        std::string::npos);
  // Unbounded ones would be left-recursive GBNF (found by fuzz_grammar: "[a-z]()+xy").
  for (const char* pattern : {"^[a-z]()+xy$", "(a?)*", "(|b)+", "(a*){2,}", "((a|)c?)*"}) {
    CAPTURE(pattern);
    CHECK(schema_error(std::string(R"({"type": "string", "pattern": ")") + pattern + R"("})")
              .find("unbounded repetition of something that can match nothing") !=
          std::string::npos);
  }
  CHECK(schema_error(R"({"type": "object", "required": ["x"]})").find("\"x\" is not in") !=
        std::string::npos);
  CHECK(schema_error(R"({"type": "strin"})").find("\"strin\" is not a JSON Schema type") !=
        std::string::npos);
  CHECK(schema_error(R"({"type": "array", "maxItems": 100000})").find("above 2000") !=
        std::string::npos);
  CHECK(schema_error("false").find("accepts nothing") != std::string::npos);
  CHECK(schema_error("{").find("not valid JSON") != std::string::npos);
}

using smol::test::nested;

TEST_CASE("json schema: nesting is bounded, and the refusal names the place in the schema") {
  // As text: the nesting is measured before the text is parsed (byte offsets).
  const std::string deep_objects =
      nested(10'000, R"({"type": "object", "properties": {"a": )", "{}", "}}");
  CHECK(schema_error(deep_objects).find("nested more than 136 levels deep (at byte") !=
        std::string::npos);
  CHECK(schema_error(nested(20'000, R"({"anyOf": [)", "{}", "]}")).find("136 levels") !=
        std::string::npos);
  CHECK(
      schema_error(nested(8'000, R"({"type": "array", "items": )", "{}", "}")).find("136 levels") !=
      std::string::npos);
  // Parsed: the conversion counts its subschemas, and names the path where it stopped,
  // its two ends kept when it is long.
  const auto parsed = nlohmann::ordered_json::parse(deep_objects);
  std::string error;
  try {
    smol::json_schema_value_to_gbnf(parsed);
  } catch (const smol::Error& e) {
    error = e.what();
  }
  CAPTURE(error);
  CHECK(error.find("subschemas nested more than 64 levels deep (at #/properties/a/properties/a") !=
        std::string::npos);
  CHECK(error.find("...") != std::string::npos);
  CHECK(error.size() < 300);
  const std::string anyof = nested(66, R"({"anyOf": [)", "{}", "]}");
  CHECK(schema_error(anyof).find("(at #/anyOf/0/anyOf/0/") != std::string::npos);
  // 64 levels are fine.
  CHECK(schema_error(nested(63, R"({"type": "object", "properties": {"a": )", "{}", "}}")) ==
        "(no error)");
  // A pattern nested too deeply names its place in the schema too.
  const std::string pattern = nested(60, "(", "a", ")");
  CHECK(
      schema_error(R"({"properties": {"p": {"type": "string", "pattern": ")" + pattern + R"("}}})")
          .find("(at #/properties/p)") != std::string::npos);
}

TEST_CASE("json schema: what could multiply the conversion's work is refused or kept short") {
  // Each listed type converts the schema once more: a list that repeats one would do so
  // at every level, its square, its cube...
  CHECK(schema_error(R"({"type": ["object", "object"], "properties": {}})")
            .find("\"type\" lists \"object\" twice") != std::string::npos);
  // A long property name is cut in the names and paths built from it, so the thousands
  // of properties below it do not each copy it.
  const std::string key(100'000, 'k');
  std::string inner;
  for (int i = 0; i < 2000; ++i)
    inner += (i ? ", " : "") + std::string("\"q") + std::to_string(i) + R"(": {})";
  const std::string schema =
      R"({"properties": {")" + key + R"(": {"properties": {)" + inner +
      R"(}, "additionalProperties": false}}, "additionalProperties": false})";
  const std::string gbnf = smol::json_schema_to_gbnf(schema);
  CHECK(gbnf.size() < 2000 * 600 + 2 * key.size());
}

TEST_CASE("json schema: objects grow linearly with their properties, optional or not") {
  // 5,000 optional properties beside additionalProperties: two small rules each (a
  // choice nested per optional property would grow with their square and nest 5,000 deep).
  std::string schema = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 5000; ++i) {
    schema +=
        (i ? ", " : "") + std::string("\"p") + std::to_string(i) + R"(": {"type": "integer"})";
  }
  schema += R"(}, "required": ["p1"], "additionalProperties": {"type": "string"}})";
  const std::string gbnf = smol::json_schema_to_gbnf(schema);
  CHECK(gbnf.size() < 5000 * 400);
  const auto grammar = smol::parse_gbnf(gbnf, {.generated = true});
  CHECK(grammar->element_count() < 5000 * 80);
  CHECK(grammar_accepts(grammar, R"({"p1": 5})"));
  CHECK(grammar_accepts(grammar, R"({"p0": 1, "p1": 2, "p4999": 3, "other": "x"})"));
  CHECK_FALSE(grammar_accepts(grammar, R"({"p0": 1})"));              // p1 is required
  CHECK_FALSE(grammar_accepts(grammar, R"({"p1": 2, "p0": 1})"));     // the order
  CHECK_FALSE(grammar_accepts(grammar, R"({"p1": 2, "p17": "x"})"));  // p17 is an integer
  CHECK_FALSE(grammar_accepts(grammar, R"({"p1": 2, "other": 1})"));  // extras are strings
  // Its token masks compile within the default budgets.
  auto trie = std::make_shared<const smol::TokenTrie>(*smol::test::fixture_tokenizer());
  const auto table = smol::TokenMaskTable::compile(grammar, trie);
  smol::GrammarMatcher matcher(table);
  for (const char c : std::string(R"({"p1": 1, "p4999": 2, "z": "w"})")) {
    REQUIRE(matcher.accept_bytes(std::string(1, c)));
    CHECK_FALSE(matcher.allowed_tokens()->empty());
  }
}

TEST_CASE("json schema: the json_object grammar takes any object and nothing else") {
  const auto grammar = smol::parse_gbnf(smol::json_object_gbnf());
  CHECK(grammar_accepts(grammar, R"({"a": [1, {"b": null}], "c": "d"})"));
  CHECK(grammar_accepts(grammar, "{}"));
  CHECK_FALSE(grammar_accepts(grammar, "[]"));
  CHECK_FALSE(grammar_accepts(grammar, "\"s\""));
  CHECK_FALSE(grammar_accepts(grammar, "{} "));
}

TEST_CASE("json schema: token masks equal the brute force (fixture vocabulary)") {
  const auto tokenizer = smol::test::fixture_tokenizer();
  int checked = smol::test::oracle_walk(smol::json_schema_grammar(kPersonSchema), tokenizer,
                                        kPersonDocument, 60, 11);
  checked += smol::test::oracle_walk(smol::parse_gbnf(smol::json_object_gbnf()), tokenizer,
                                     R"({"k": [1, -2.5e3, "x"], "n": {"m": null}})", 60, 12);
  MESSAGE(checked << " states checked");
}

TEST_CASE("json schema: token masks equal the brute force (SmolLM2's vocabulary)") {
  const auto tokenizer = smol::test::smollm2_tokenizer();
  if (!tokenizer) return;
  const int checked = smol::test::oracle_walk(smol::json_schema_grammar(kPersonSchema), tokenizer,
                                              kPersonDocument, 20, 13, 3);
  MESSAGE(checked << " states checked");
}

}  // namespace test_grammar_schema
