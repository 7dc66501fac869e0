// JSON Schema -> grammar: every supported keyword gives a grammar whose sentences
// validate (checked by a small validator written here, on known-good and known-bad
// texts and on random sentences of the grammar), refused keywords are named, and the
// token masks of schema grammars equal the brute force.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
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
#include <tuple>
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
using smol::cat;
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

// A JSON number's value: exact for every int64, uint64 and double (a long double holds
// 64 bits of mantissa), so comparing two is comparing them as Python's jsonschema does
// (an int with a float exactly, two floats as doubles).
long double number(const Json& v) {
  if (v.is_number_unsigned()) return static_cast<long double>(v.get<std::uint64_t>());
  if (v.is_number_integer()) return static_cast<long double>(v.get<std::int64_t>());
  return static_cast<long double>(v.get<double>());
}

bool valid(const Json& schema, const Json& value, const Json& root);

bool valid_number(const Json& schema, const Json& value) {
  const long double x = number(value);
  for (const auto& [key, strict, below] :
       {std::tuple{"minimum", false, false}, std::tuple{"maximum", false, true},
        std::tuple{"exclusiveMinimum", true, false}, std::tuple{"exclusiveMaximum", true, true}}) {
    if (!schema.contains(key) || !schema[key].is_number()) continue;
    const long double bound = number(schema[key]);
    // Draft 4: a boolean exclusiveMinimum makes minimum strict.
    const char* draft4 = below ? "exclusiveMaximum" : "exclusiveMinimum";
    const bool exclusive = strict || (schema.contains(draft4) && schema[draft4].is_boolean() &&
                                      schema[draft4].get<bool>());
    if (below ? (exclusive ? x >= bound : x > bound) : (exclusive ? x <= bound : x < bound)) {
      return false;
    }
  }
  if (schema.contains("multipleOf")) {
    const long double m = number(schema["multipleOf"]);
    if (std::fmod(x, m) != 0) return false;
  }
  return true;
}

bool valid(const Json& schema, const Json& value, const Json& root) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (schema.contains("$ref")) {
    const auto ref = schema["$ref"].get<std::string>();
    if (!valid(ref == "#" ? root : root.at(Json::json_pointer(ref.substr(1))), value, root)) {
      return false;
    }
  }
  if (schema.contains("allOf")) {
    for (const Json& s : schema["allOf"]) {
      if (!valid(s, value, root)) return false;
    }
  }
  if (value.is_number() && !valid_number(schema, value)) return false;
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
      if (t == "integer") {  // 2.0 is an integer too (JSON Schema's integers are values)
        return value.is_number_integer() ||
               (value.is_number_float() && value.get<double>() == std::floor(value.get<double>()));
      }
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
    const Json patterns = schema.value("patternProperties", Json::object());
    for (const auto& [key, v] : value.items()) {
      bool matched = false;
      for (const auto& [pattern, s] : patterns.items()) {
        if (!std::regex_search(key, std::regex(pattern))) continue;
        matched = true;
        if (!valid(s, v, root)) return false;
      }
      if (properties.contains(key)) {
        if (!valid(properties[key], v, root)) return false;
      } else if (!matched && schema.contains("additionalProperties") &&
                 !valid(schema["additionalProperties"], v, root)) {
        return false;
      }
    }
    for (const Json& r : schema.value("required", Json::array())) {
      if (!value.contains(r.get<std::string>())) return false;
    }
    if (schema.contains("minProperties") &&
        value.size() < schema["minProperties"].get<std::size_t>())
      return false;
    if (schema.contains("maxProperties") &&
        value.size() > schema["maxProperties"].get<std::size_t>())
      return false;
  }
  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<std::size_t>())
      return false;
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<std::size_t>())
      return false;
    const Json prefix = schema.value("prefixItems", Json::array());
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (i < prefix.size()) {
        if (!valid(prefix[i], value[i], root)) return false;
      } else if (schema.contains("items") && !valid(schema["items"], value[i], root)) {
        return false;
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
  // A whole number written as a double is an integer, however large (fuzz_grammar: 1.8e20
  // was cast to int64 to be compared).
  check_schema(R"({"type": "integer", "enum": [1.8e20, 2.5, 3]})", {"1.8e+20", "3"}, {"2.5"});
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

// ---- bounded numbers, multipleOf (json_number_range.hpp) --------------------------------

// Integers past 64 bits: the bounds go to int64's ends, and the windows around them past.
__extension__ using Wide = __int128;

std::string wide_text(Wide v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string out;
  for (; v != 0; v /= 10)
    out += static_cast<char>('0' + static_cast<int>(negative ? -(v % 10) : v % 10));
  if (negative) out += '-';
  return {out.rbegin(), out.rend()};
}

Wide power_of_ten(int n) {
  Wide p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

int digit_count(Wide v) {
  return static_cast<int>(wide_text(v < 0 ? -v : v).size());
}

// An integer range of a schema: its bounds (kNone: absent), and a modulus. (Not
// std::optional: GCC 12 warns that an optional<__int128> may be read uninitialized.)
constexpr Wide kNone = -(Wide{1} << 126);
struct IntegerRange {
  Wide low = kNone, high = kNone;
  Wide modulus = 1;
};

// What the grammar of `range` must accept, by the choices json_schema.hpp states: the
// integers within the bounds that the modulus divides, of at most max(16, the bounds'
// digits) digits, "-0" where 0 is in range and the lower bound is negative or absent.
// A bound past 19 digits is below (or above) every text written: as if absent.
bool written(const IntegerRange& range, const std::string& text) {
  IntegerRange r = range;
  if (r.low != kNone && digit_count(r.low) > 19) r.low = kNone;
  if (r.high != kNone && digit_count(r.high) > 19) r.high = kNone;
  const int digits = std::max(
      {16, r.low != kNone ? digit_count(r.low) : 0, r.high != kNone ? digit_count(r.high) : 0});
  const Wide limit = power_of_ten(digits) - 1;
  const Wide low = r.low != kNone ? r.low : -limit, high = r.high != kNone ? r.high : limit;
  if (text == "-0") return low < 0 && high >= 0;
  Wide v = 0;
  const bool negative = text[0] == '-';
  for (std::size_t i = negative ? 1 : 0; i < text.size(); ++i) v = v * 10 + (text[i] - '0');
  if (negative) v = -v;
  return v >= low && v <= high && v >= -limit && v <= limit && v % r.modulus == 0;
}

// Every integer in windows around the bounds, 0 and the powers of ten, and `random_values`
// more drawn between and past them: accepted iff written(). Plus texts JSON or the
// choices leave out.
void check_integer_range(const std::string& schema_text, const IntegerRange& range,
                         std::mt19937_64& random, int random_values = 40) {
  CAPTURE(schema_text);
  const std::string gbnf = smol::json_schema_to_gbnf(schema_text);
  CAPTURE(gbnf);
  const auto grammar = smol::parse_gbnf(gbnf);
  std::vector<Wide> centers = {0};
  for (const Wide b : {range.low, range.high}) {
    if (b != kNone) centers.push_back(b);
  }
  for (int k = 1; k <= 19; ++k) {
    centers.push_back(power_of_ten(k));
    centers.push_back(-power_of_ten(k));
  }
  std::vector<Wide> values;
  for (const Wide c : centers) {
    for (Wide d = -12; d <= 12; ++d) values.push_back(c + d);
  }
  const Wide lo = range.low != kNone ? range.low : -power_of_ten(19);
  const Wide hi = range.high != kNone ? range.high : power_of_ten(19);
  const auto draw = [&](Wide from, Wide to) {
    const Wide span = to - from + 1;
    const Wide r = (static_cast<Wide>(random()) << 64 | random()) & ((Wide{1} << 126) - 1);
    return from + r % span;
  };
  for (int i = 0; i < random_values; ++i) {
    values.push_back(draw(lo, hi));
    values.push_back(draw(lo - power_of_ten(19), lo));
    values.push_back(draw(hi, hi + power_of_ten(19)));
  }
  for (const Wide v : values) {
    const std::string text = wide_text(v);
    CAPTURE(text);
    CHECK(grammar_accepts(grammar, text) == written(range, text));
  }
  for (const char* text : {"-0", "00", "01", "-00", "+1", "1.0", "1e2", "-", "", " 1", "--1"}) {
    CAPTURE(text);
    CHECK(grammar_accepts(grammar, text) == (std::string(text) == "-0" && written(range, text)));
  }
}

std::string integer_schema(const IntegerRange& r, const char* low_key = "minimum",
                           const char* high_key = "maximum") {
  std::string s = R"({"type": "integer")";
  if (r.low != kNone) s += cat(", \"", low_key, "\": ", wide_text(r.low));
  if (r.high != kNone) s += cat(", \"", high_key, "\": ", wide_text(r.high));
  if (r.modulus != 1) s += ", \"multipleOf\": " + wide_text(r.modulus);
  return s + "}";
}

TEST_CASE("json schema: integer bounds accept exactly the integers in range") {
  std::mt19937_64 random(70);
  const Wide int64_min = -(Wide{1} << 63), int64_max = (Wide{1} << 63) - 1;
  const std::vector<IntegerRange> ranges = {
      {-5, 123},
      {0, 0},
      {-1, -1},
      {-100, -7},
      {7, 7},
      {1, 9},
      {10, 99},
      {0, 9},
      {-9, 0},
      {0, kNone},
      {kNone, 0},
      {5, kNone},
      {kNone, -5},
      {-123456, 98765432101},
      {999, 1000},
      {-1000, -999},
      {int64_min, int64_max},
      {int64_max - 500, int64_max},
      {int64_min, int64_min + 500},
      {power_of_ten(18), kNone},
      {kNone, -power_of_ten(18)},
      {power_of_ten(18) - 1, power_of_ten(18)},
      {power_of_ten(19) - 10, kNone},  // the largest 19-digit numbers
      {0, (Wide{1} << 64) - 1},        // UINT64_MAX: past 19 digits, no bound
  };
  for (const IntegerRange& r : ranges) check_integer_range(integer_schema(r), r, random);
  // Exclusive bounds, as draft 2020-12 numbers and as draft 4's booleans.
  for (const IntegerRange& r : {IntegerRange{-5, 123}, IntegerRange{int64_min, int64_max}}) {
    const IntegerRange inner{r.low + 1, r.high - 1};
    check_integer_range(integer_schema(r, "exclusiveMinimum", "exclusiveMaximum"), inner, random);
    std::string draft4 = integer_schema(r);
    draft4.insert(draft4.size() - 1, R"(, "exclusiveMinimum": true, "exclusiveMaximum": true)");
    check_integer_range(draft4, inner, random);
  }
  // The tighter of minimum and exclusiveMinimum; fractional bounds round inward.
  check_integer_range(R"({"type": "integer", "minimum": 3, "exclusiveMinimum": 3})", {4, kNone},
                      random);
  check_integer_range(R"({"type": "integer", "minimum": 3, "exclusiveMinimum": 1})", {3, kNone},
                      random);
  check_integer_range(R"({"type": "integer", "minimum": -2.5, "maximum": 7.99})", {-2, 7}, random);
  check_integer_range(R"({"type": "integer", "exclusiveMinimum": -2.5, "exclusiveMaximum": 8.0})",
                      {-2, 7}, random);
  // Bounds past every text written constrain nothing.
  check_integer_range(R"({"type": "integer", "maximum": 1e300, "minimum": -1e300})", {}, random);
  // Random ranges of every length and sign.
  const int count = smol::test::fewer_repeats() ? 40 : 200;
  for (int i = 0; i < count; ++i) {
    const auto bound = [&] {
      const Wide digits = power_of_ten(1 + static_cast<int>(random() % 19));
      const Wide magnitude = static_cast<Wide>(random()) % digits;
      return random() % 3 == 0 ? -magnitude : magnitude;
    };
    Wide a = bound(), b = bound();
    a = std::max(a, int64_min);
    b = std::max(b, int64_min);
    if (a > b) std::swap(a, b);
    IntegerRange r{a, b};
    if (random() % 5 == 0) r.low = kNone;
    if (random() % 5 == 0) r.high = kNone;
    check_integer_range(integer_schema(r), r, random, 10);
  }
}

TEST_CASE("json schema: integer multipleOf, alone and within bounds") {
  std::mt19937_64 random(71);
  for (const Wide m : {1, 2, 3, 7, 10, 12, 25, 64, 100, 1000, 99, 100000}) {
    CAPTURE(wide_text(m));
    check_integer_range(integer_schema({kNone, kNone, m}), {kNone, kNone, m}, random);
    for (const IntegerRange& r :
         {IntegerRange{-250, 1234, m}, IntegerRange{-5000, -17, m}, IntegerRange{5, 8, m},
          IntegerRange{(Wide{1} << 63) - 100000, (Wide{1} << 63) - 1, m}}) {
      // A range without a multiple is refused, not left empty.
      Wide first = r.low;
      while (first <= r.high && first % m != 0) ++first;
      if (first > r.high) {
        CHECK(schema_error(integer_schema(r)).find("no multiple of") != std::string::npos);
      } else {
        check_integer_range(integer_schema(r), r, random);
      }
    }
  }
  // A whole multipleOf makes a number an integer (a multiple of a whole number is one):
  // "10.0" is valid but not written.
  check_schema(R"({"type": "number", "multipleOf": 5, "maximum": 20})", {"0", "-5", "20", "-0"},
               {"3", "25", "2.5"}, {"10.0", "1e1"});
  check_schema(R"({"multipleOf": 3.0, "minimum": 0})", {"0", "3", "999"}, {"-3", "4"});
}

TEST_CASE("json schema: bounded integers stay small: linear in the bounds' digits") {
  const auto size = [](const std::string& schema) {
    const std::string gbnf = smol::json_schema_to_gbnf(schema);
    return gbnf.size() - std::string(smol::detail::kJsonPrimitives).size();
  };
  const std::size_t five = size(R"({"type": "integer", "minimum": -12345, "maximum": 67891})");
  const std::size_t nineteen = size(
      R"({"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807})");
  MESSAGE("5 digits: " << five << " bytes, 19 digits: " << nineteen << " bytes");
  CHECK(nineteen < 2500);
  CHECK(nineteen < 6 * five);
  // A modulus adds a state per remainder (and digit): 7 is cheap, one near 1000 that
  // shares no factor with 10 is past the budget and refused; powers of ten collapse.
  CHECK(size(R"({"type": "integer", "multipleOf": 7})") < 40'000);
  CHECK(size(R"({"type": "integer", "multipleOf": 100000})") < 3'000);
  CHECK(schema_error(R"({"type": "integer", "multipleOf": 997})")
            .find("more than 4096 states (at #)") != std::string::npos);
}

// A number's text and whether a validator reading it as a double (Python's jsonschema,
// ajv) puts it within [low, high] (each bound exclusive or not).
struct NumberRange {
  std::optional<double> low, high;
  bool low_exclusive = false, high_exclusive = false;
};

bool number_valid(const NumberRange& r, const std::string& text) {
  const double x = std::strtod(text.c_str(), nullptr);
  if (r.low && (r.low_exclusive ? x <= *r.low : x < *r.low)) return false;
  if (r.high && (r.high_exclusive ? x >= *r.high : x > *r.high)) return false;
  return true;
}

// Valid, and not a negative zero ("-0.0") above a minimum of 0 or more (json_schema.hpp
// writes "-" only where the lower bound is negative or absent).
bool number_written(const NumberRange& r, const std::string& text) {
  if (text[0] == '-' && std::strtod(text.c_str(), nullptr) == 0 && r.low && *r.low >= 0) {
    return false;
  }
  return number_valid(r, text);
}

std::string number_schema(const NumberRange& r) {
  std::string s = R"({"type": "number")";
  const auto text = [](double v) {
    char buffer[64];
    const auto end = std::to_chars(buffer, buffer + sizeof buffer, v).ptr;
    return std::string(buffer, end);
  };
  if (r.low)
    s += cat(", \"", r.low_exclusive ? "exclusiveMinimum" : "minimum", "\": ", text(*r.low));
  if (r.high)
    s += cat(", \"", r.high_exclusive ? "exclusiveMaximum" : "maximum", "\": ", text(*r.high));
  return s + "}";
}

// Number texts on a grid of 0.001 around each bound and 0, and short ones between: the
// grammar accepts exactly the valid ones (texts of a few fraction digits are far apart
// next to a double's precision, so "valid" is a property of the text alone). Long texts
// (16 fraction digits) next to the bounds: every one accepted is valid.
void check_number_range(const NumberRange& r, std::mt19937_64& random) {
  const std::string schema = number_schema(r);
  CAPTURE(schema);
  const std::string gbnf = smol::json_schema_to_gbnf(schema);
  CAPTURE(gbnf);
  const auto grammar = smol::parse_gbnf(gbnf);
  std::vector<double> centers = {0};
  for (const auto& b : {r.low, r.high}) {
    if (b && std::fabs(*b) < 1e15) centers.push_back(*b);  // not those past every text
  }
  for (const double c : centers) {
    for (int step = -30; step <= 30; ++step) {
      for (const int decimals : {0, 1, 2, 3}) {
        char buffer[64];
        std::snprintf(buffer, sizeof buffer, "%.*f", decimals, c + step * 0.001);
        const std::string text = buffer;
        CAPTURE(text);
        CHECK(grammar_accepts(grammar, text) == number_written(r, text));
      }
    }
    for (int i = 0; i < 200; ++i) {
      char buffer[64];
      const double v = c + std::uniform_real_distribution<double>(-1e-12, 1e-12)(random);
      std::snprintf(buffer, sizeof buffer, "%.16f", v);
      const std::string text = buffer;
      CAPTURE(text);
      if (grammar_accepts(grammar, text)) CHECK(number_valid(r, text));
    }
  }
  for (int i = 0; i < 200; ++i) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.2f",
                  std::uniform_real_distribution<double>(-2000, 2000)(random));
    const std::string text = buffer;
    CAPTURE(text);
    CHECK(grammar_accepts(grammar, text) == number_written(r, text));
  }
  for (const char* text : {"1e2", "01", "1.", ".5", "+1"})
    CHECK_FALSE(grammar_accepts(grammar, text));
}

TEST_CASE("json schema: number bounds, compared as doubles") {
  std::mt19937_64 random(72);
  const std::vector<NumberRange> ranges = {
      {0.5, 2.25},
      {0.5, 2.25, true, true},
      {0, {}},
      {0, {}, true},
      {{}, 0},
      {{}, 0, false, true},
      {-1.5, -0.25},
      {-1.5, -0.25, true, true},
      {-0.001, 0.001},
      {0.1, 0.3},
      {-1000.125, 999},
      {1e-20, {}},
      {{}, -1e-20},
      {3, 3},
      {0.1, 0.1},
      {-7, 1e300},
      {-1e300, 12.5, false, true},
  };
  for (const NumberRange& r : ranges) check_number_range(r, random);
  // "-0" and "-0.0" are 0: written only where a negative minimum (or none) is below.
  const auto grammar = smol::json_schema_grammar(R"({"type": "number", "minimum": 0})");
  CHECK_FALSE(grammar_accepts(grammar, "-0"));
  CHECK(grammar_accepts(grammar, "0.0"));
  CHECK(grammar_accepts(smol::json_schema_grammar(R"({"type": "number", "maximum": 0})"), "-0.0"));
  CHECK_FALSE(grammar_accepts(
      smol::json_schema_grammar(R"({"type": "number", "exclusiveMaximum": 0})"), "-0.0"));
  // Exclusive bounds move to the next double: 0.1's exclusive minimum admits the double
  // after it, "0.10000000000000002", rounded up to 16 digits.
  const auto above = smol::json_schema_grammar(R"({"type": "number", "exclusiveMinimum": 0.1})");
  CHECK_FALSE(grammar_accepts(above, "0.1"));
  CHECK_FALSE(grammar_accepts(above, "0.1000000000000000"));
  CHECK(grammar_accepts(above, "0.1000000000000001"));
  // Bounds past 10^19 that leave nothing are refused, not ignored.
  CHECK(schema_error(R"({"type": "number", "minimum": 1e20})").find("is above every number") !=
        std::string::npos);
  CHECK(schema_error(R"({"type": "integer", "maximum": -1e20})").find("is below every integer") !=
        std::string::npos);
  CHECK(schema_error(R"({"type": "integer", "minimum": 5, "maximum": 4})")
            .find("no integer lies within its bounds") != std::string::npos);
  CHECK(schema_error(R"({"type": "integer", "exclusiveMinimum": 4, "exclusiveMaximum": 5})")
            .find("no integer lies within its bounds") != std::string::npos);
  CHECK(schema_error(R"({"type": "integer", "minimum": 1, "maximum": 4, "multipleOf": 5})")
            .find("no multiple of 5 lies within its bounds") != std::string::npos);
  for (const char* bad : {R"("minimum": "1")", R"("exclusiveMaximum": null)", R"("multipleOf": 0)",
                          R"("multipleOf": -2)", R"("multipleOf": 0.01)", R"("multipleOf": 1e7)"}) {
    CAPTURE(bad);
    CHECK(schema_error(std::string(R"({"type": "number", )") + bad + "}") != "(no error)");
  }
  CHECK(schema_error(R"({"type": "number", "multipleOf": 0.5})")
            .find("\"multipleOf\": 0.5 is not supported") != std::string::npos);
  // Untyped: the keywords make a number (other types would be valid too: not written).
  check_schema(R"({"minimum": 1, "maximum": 2})", {"1", "1.5", "2"}, {"0.5", "3"}, {"\"x\""});
  // Beside other types, only the number is bounded.
  check_schema(R"({"type": ["integer", "string"], "minimum": 10, "maxLength": 2})",
               {"10", "\"ab\""}, {"9", "\"abc\""});
}

// ---- allOf, prefixItems, minProperties/maxProperties, patternProperties ---------------

TEST_CASE("json schema: allOf merges its subschemas") {
  // Objects: properties and required united, in order (as llama.cpp merges them).
  check_schema(
      R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "string"}}, "required": ["b"]},
                    {"properties": {"c": {"type": "boolean"}}}]})",
      {R"({"a": 1, "b": "x"})", R"({"a": 1, "b": "x", "c": true})"},
      {R"({"a": 1})", R"({"b": "x"})", R"({"a": "1", "b": "x"})"}, {R"({"b": "x", "a": 1})"});
  // A property in two subschemas owes both; one subschema's additionalProperties binds
  // the properties only the other lists.
  check_schema(
      R"({"allOf": [{"properties": {"n": {"type": "integer", "minimum": 0}, "s": {}},
                     "additionalProperties": {"type": "string"}},
                    {"properties": {"n": {"maximum": 10}, "t": {"type": "string"}}, "required": ["n"]}]})",
      {R"({"n": 0})", R"({"n": 10, "s": [1], "t": "x"})"},
      {R"({"n": 11})", R"({"n": -1})", R"({})"});
  check_schema(
      R"({"allOf": [{"properties": {"a": {}}, "additionalProperties": false},
                    {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}]})",
      {R"({"a": 1})", "{}"}, {R"({"a": "x"})"}, {});
  CHECK(schema_error(
            R"({"allOf": [{"properties": {"a": {}}, "additionalProperties": false},
                          {"properties": {"b": {}}, "required": ["b"]}]})")
            .find("the required property \"b\" has the schema false (at #/allOf)") !=
        std::string::npos);
  // $ref inside allOf, and the schema around it; a single $ref stays a reference.
  check_schema(
      R"({"$defs": {"base": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
          "allOf": [{"$ref": "#/$defs/base"}], "properties": {"name": {"type": "string"}}, "required": ["name"]})",
      {R"({"id": 1, "name": "x"})"}, {R"({"name": "x"})", R"({"id": 1})"});
  check_schema(
      R"({"$defs": {"node": {"type": "object", "properties": {"next": {"allOf": [{"$ref": "#/$defs/node"}], "description": "d"}}}},
          "allOf": [{"$ref": "#/$defs/node"}]})",
      {"{}", R"({"next": {"next": {}}})"}, {R"({"next": 1})"});
  // Types intersected (an integer is a number), enums intersected, bounds the tightest.
  check_schema(R"({"allOf": [{"type": ["number", "string"]}, {"type": ["integer", "null"]}]})",
               {"3"}, {"3.5", "null", "\"x\""});
  check_schema(
      R"({"allOf": [{"enum": [1, 2, 3, "x"]}, {"enum": [3, "x", 2.0]}, {"type": "integer"}]})",
      {"2", "3"}, {"1", "\"x\""});
  // (fuzz_grammar: a const before any enum once left the merge pointing into a temporary.)
  check_schema(R"({"allOf": [{"const": "x"}, {"type": "string"}, {"enum": ["x", "y"]}]})",
               {"\"x\""}, {"\"y\""});
  check_schema(
      R"({"allOf": [{"minimum": 0, "exclusiveMaximum": 10}, {"exclusiveMinimum": 0, "maximum": 12}, {"type": "integer"}]})",
      {"1", "9"}, {"0", "10"});
  check_schema(R"({"allOf": [{"type": "integer", "multipleOf": 4}, {"multipleOf": 6}]})",
               {"0", "12", "-24"}, {"4", "6", "18"});
  check_schema(
      R"({"allOf": [{"type": "string", "maxLength": 5}, {"minLength": 2, "maxLength": 3}]})",
      {"\"ab\"", "\"abc\""}, {"\"a\"", "\"abcd\""});
  // A choice in one subschema is distributed over.
  check_schema(
      R"({"allOf": [{"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]},
                    {"anyOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                               {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]}]})",
      {R"({"kind": "x", "a": 1})", R"({"kind": "y", "b": true})"},
      {R"({"kind": "x"})", R"({"a": 1})", R"({"kind": "x", "a": true})"});
  // Nested allOf, and allOf inside items.
  check_schema(
      R"({"type": "array", "items": {"allOf": [{"allOf": [{"type": "integer"}, {"minimum": 1}]}, {"maximum": 3}]}})",
      {"[1, 2, 3]", "[]"}, {"[0]", "[4]", "[1.5]"});
  // Arrays: prefixItems and items position by position.
  check_schema(
      R"({"allOf": [{"prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
                    {"prefixItems": [{"minimum": 0}, {"maxLength": 1}, {}], "items": false}]})",
      {"[0]", R"([5, "a"])", R"([5, "a", "b"])"},
      {"[-1]", R"([1, "ab"])", R"([1, "a", "b", "c"])", "[1, 2]"});
  // What cannot be merged exactly is refused, naming allOf and where.
  const std::string conflicts[][2] = {
      {R"({"allOf": [{"type": "string"}, {"type": "integer"}]})",
       "allOf: its subschemas have no type in common (at #)"},
      {R"({"allOf": [{"enum": [1]}, {"const": 2}]})",
       "allOf: no value is allowed by every enum and const (at #)"},
      {R"({"properties": {"p": {"allOf": [{"pattern": "a"}, {"pattern": "b"}]}}})",
       "allOf: two different \"pattern\" (one in #/properties/p/allOf/1) cannot be merged (at "
       "#/properties/p)"},
      {R"({"allOf": [{"anyOf": [{}, {}]}, {"oneOf": [{}, {}]}]})",
       "allOf: \"anyOf\" in #/allOf/0 and \"oneOf\" in #/allOf/1 cannot be merged (only one choice "
       "is distributed over) (at #)"},
      {R"({"allOf": [{"multipleOf": 0.5}, {"multipleOf": 2}]})", "cannot be merged"},
      {R"({"allOf": [{"patternProperties": {"a": {}}}, {"properties": {"b": {}}}]})",
       "beside another subschema's properties or additionalProperties cannot be merged"},
      {R"({"allOf": [{}, false]})",
       "allOf: a subschema is false, which accepts nothing (at #/allOf/1)"},
      {R"({"allOf": []})", "\"allOf\" must be a non-empty array (at #)"},
      {R"({"allOf": [{"$ref": "#/nowhere"}]})", "points at nothing"},
  };
  for (const auto& conflict : conflicts) {
    const std::string& schema = conflict[0];
    CAPTURE(schema);
    CHECK(schema_error(schema).find(conflict[1]) != std::string::npos);
  }
  // A $ref cycle through allOf adds nothing the second time (x and x is x). (A validator
  // would recurse without end here: the grammar alone is checked.)
  const auto cycle =
      smol::json_schema_grammar(R"({"type": "integer", "allOf": [{"$ref": "#"}, {"minimum": 2}]})");
  CHECK(grammar_accepts(cycle, "2"));
  CHECK_FALSE(grammar_accepts(cycle, "1"));
}

TEST_CASE("json schema: allOf over choices costs linear work, within its budgets") {
  // Each level merges the same property into each option of a choice: converted once,
  // not once per option (which multiplied the work by 3 per level).
  std::string open, close;
  for (int i = 0; i < 14; ++i) {
    open +=
        R"({"allOf": [{"anyOf": [{"type": "null"}, {"minProperties": 1}, {"maxProperties": 3}]}, {"properties": {"p": )";
    close = "}}]}" + close;
  }
  const std::string gbnf = smol::json_schema_to_gbnf(open + R"({"type": "integer"})" + close);
  CHECK(gbnf.size() < 40'000);
  // Copies are counted: a schema whose merges would copy too much is refused.
  std::string wide = R"({"allOf": [{"anyOf": [)";
  for (int i = 0; i < 300; ++i) wide += cat(i ? ", " : "", R"({"const": )", i, "}");
  wide += R"(]}, {"properties": {)";
  for (int i = 0; i < 2000; ++i) wide += cat(i ? ", " : "", "\"p", i, R"(": {"type": "string"})");
  wide += "}}]}";
  CHECK(schema_error(wide).find("would copy more than 1000000 schema values") != std::string::npos);
}

TEST_CASE("json schema: prefixItems, then items, within minItems and maxItems") {
  check_schema(
      R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})",
      {"[]", "[1]", R"([1, "a"])"}, {R"(["a"])", R"([1, 2])", R"([1, "a", 3])"});
  check_schema(
      R"({"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": {"type": "boolean"}, "minItems": 2})",
      {R"([1, "a"])", R"([1, "a", true, false])"}, {"[1]", R"([1, "a", 3])"});
  check_schema(R"({"prefixItems": [{"const": 1}, {"const": 2}, {"const": 3}], "maxItems": 2})",
               {"[]", "[1]", "[1, 2]"}, {"[1, 2, 3]", "[2]"});
  check_schema(R"({"prefixItems": [{"const": 1}], "minItems": 3, "maxItems": 4})",
               {"[1, 0, null]", R"([1, "x", [], {}])"}, {"[1, 2]", "[1, 2, 3, 4, 5]", "[0, 1, 2]"});
  check_schema(R"({"prefixItems": [{"type": "integer"}, false]})", {"[]", "[1]"}, {"[1, 2]"});
  check_schema(R"({"type": "array", "items": false})", {"[]"}, {"[1]"});
  CHECK(schema_error(R"({"prefixItems": [{}], "items": false, "minItems": 2})")
            .find("minItems is above the 1 items that prefixItems and items (false) allow") !=
        std::string::npos);
  CHECK(schema_error(R"({"prefixItems": {}})").find("\"prefixItems\" must be an array") !=
        std::string::npos);
}

TEST_CASE("json schema: minProperties and maxProperties are exact") {
  // Every subset of three optional properties, with 0 to 3 extra members: accepted iff
  // the count is within the bounds.
  for (const auto& [min, max] : {std::pair{0, 1}, std::pair{2, 2}, std::pair{1, 4}, std::pair{3, 9},
                                 std::pair{5, 6}, std::pair{0, 0}, std::pair{4, -1}}) {
    std::string schema =
        R"({"properties": {"a": {}, "b": {}, "c": {}}, "additionalProperties": {"type": "integer"})";
    schema += cat(", \"minProperties\": ", min);
    if (max >= 0) schema += cat(", \"maxProperties\": ", max);
    schema += "}";
    CAPTURE(schema);
    const auto grammar = smol::json_schema_grammar(schema);
    for (int subset = 0; subset < 8; ++subset) {
      for (int extras = 0; extras <= 3; ++extras) {
        std::string text = "{";
        int n = 0;
        for (int i = 0; i < 3; ++i) {
          if (subset >> i & 1) text += cat(n++ ? ", " : "", "\"", "abc"[i], "\": null");
        }
        for (int e = 0; e < extras; ++e) text += cat(n++ ? ", " : "", "\"x", e, "\": ", e);
        text += "}";
        CAPTURE(text);
        CHECK(grammar_accepts(grammar, text) == (n >= min && (max < 0 || n <= max)));
      }
    }
  }
  check_schema(
      R"({"properties": {"a": {}, "b": {}, "c": {}}, "required": ["b"], "minProperties": 2, "maxProperties": 2})",
      {R"({"a": 1, "b": 2})", R"({"b": 2, "c": 3})"},
      {R"({"b": 2})", R"({"a": 1, "c": 3})", R"({"a": 1, "b": 2, "c": 3})"});
  check_schema(R"({"type": "object", "minProperties": 1, "maxProperties": 2})",
               {R"({"k": 1})", R"({"k": 1, "l": [2]})"}, {"{}", R"({"a": 1, "b": 2, "c": 3})"});
  CHECK(schema_error(R"({"properties": {"a": {}}, "minProperties": 2})")
            .find("minProperties is above the 1 properties that may be written") !=
        std::string::npos);
  CHECK(schema_error(
            R"({"properties": {"a": {}, "b": {}}, "required": ["a", "b"], "maxProperties": 1})")
            .find("maxProperties is below the number of required properties") != std::string::npos);
  CHECK(schema_error(R"({"minProperties": 3, "maxProperties": 2})")
            .find("maxProperties is below minProperties") != std::string::npos);
  // Without a bound that binds, the rules are the usual linear ones.
  CHECK(
      smol::json_schema_to_gbnf(
          R"({"properties": {"a": {}}, "required": ["a"], "minProperties": 1, "maxProperties": 1})") ==
      smol::json_schema_to_gbnf(R"({"properties": {"a": {}}, "required": ["a"]})"));
  // The counted rules are bounded: one per property and count.
  std::string many = R"({"type": "object", "maxProperties": 1000, "properties": {)";
  for (int i = 0; i < 300; ++i) many += cat(i ? ", " : "", "\"p", i, "\": {}");
  many += R"(}, "additionalProperties": true})";
  CHECK(schema_error(many).find("would need more than 20000 rules") != std::string::npos);
}

TEST_CASE("json schema: patternProperties") {
  // Keys matching no pattern are valid (additionalProperties is absent) but not written.
  check_schema(R"({"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "integer"}}})",
               {"{}", R"({"x-a": 1, "x-bc": 2})"}, {R"({"x-a": "1"})"},
               {R"({"y": 1})", R"({"x-A": 1})"});
  // A key matching two patterns owes both schemas: values are written valid under both.
  check_schema(
      R"({"patternProperties": {"^a[a-z]*$": {"type": "integer"}, "^[a-z]*b$": {"minimum": 0}},
                   "additionalProperties": false, "maxProperties": 2})",
      {R"({"ab": 1})", R"({"a": 2, "b": 3})"},
      {R"({"ab": -1})", R"({"c": 1})", R"({"a": 1, "b": 2, "ab": 3})"}, {R"({"a": -1})"});
  check_schema(
      R"({"patternProperties": {"^[0-9]+$": {"type": "string"}}, "additionalProperties": false, "minProperties": 1})",
      {R"({"1": "a"})", R"({"12": "a", "3": "b"})"}, {"{}", R"({"a": "x"})", R"({"1": 1})"});
  CHECK(schema_error(R"({"properties": {"a": {}}, "patternProperties": {"b": {}}})")
            .find("patternProperties together with properties is not supported") !=
        std::string::npos);
  CHECK(schema_error(R"({"patternProperties": {"b": {}}, "additionalProperties": true})")
            .find("patternProperties with additionalProperties other than false") !=
        std::string::npos);
  CHECK(schema_error(R"j({"patternProperties": {"(?=a)": {}}})j").find("look-around") !=
        std::string::npos);
}

TEST_CASE("json schema: unsupported keywords are refused by name, never ignored") {
  CHECK(schema_error(R"({"type": "integer", "minContains": 0})") ==
        "JSON schema: the keyword \"minContains\" is not supported (at #)");
  CHECK(schema_error(R"({"type": "object", "properties": {"a": {"not": {}}}})") ==
        "JSON schema: the keyword \"not\" is not supported (at #/properties/a)");
  // Inside allOf too: the merged schema is named after it.
  CHECK(schema_error(
            R"({"properties": {"a": {"allOf": [{"type": "array"}, {"uniqueItems": true}]}}})") ==
        "JSON schema: the keyword \"uniqueItems\" is not supported (at #/properties/a/allOf)");
  for (const char* keyword : {"not", "if", "uniqueItems", "contains", "dependentRequired",
                              "propertyNames", "unevaluatedProperties", "additionalItems"}) {
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
  // Digit rules (bounds, a modulus), a tuple and counted members.
  checked += smol::test::oracle_walk(smol::json_schema_grammar(
                                         R"({"type": "object", "properties": {
                "n": {"type": "integer", "minimum": -250, "maximum": 1234, "multipleOf": 7},
                "x": {"type": "number", "exclusiveMinimum": 0.5, "maximum": 2.25},
                "t": {"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false}},
              "additionalProperties": {"type": "integer"}, "maxProperties": 4})"),
                                     tokenizer,
                                     R"({"n": -245, "x": 2.2499, "t": [3, "a"], "k": 10})", 60, 14);
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
