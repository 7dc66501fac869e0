// JSON Schema -> GBNF, for structured output: the model can only write JSON that the
// schema accepts. Also the fixed grammar of "any JSON object" (OpenAI's
// response_format {"type": "json_object"}).
//
// This is the one header of the grammar layer that needs nlohmann-json: include it only
// from targets that link it (smol::serve does). Parse schemas as nlohmann::ordered_json
// (json_schema_to_gbnf(std::string_view) does): property order is the order of
// `properties` in the schema text, as in llama.cpp, and a std::map-based nlohmann::json
// has already sorted the keys.
//
// Supported (OpenAI's structured-output subset and a little more):
//   type (one or an array), enum, const, anyOf, oneOf (as anyOf: exclusivity is not
//   enforced), allOf (merged into one schema, below), $ref to "#", "#/$defs/..." or
//   "#/definitions/..." (recursion allowed),
//   object: properties (in order; a property `false` is never written), required,
//   additionalProperties false / true / schema, patternProperties (without properties),
//   minProperties, maxProperties;
//   array: items (a schema or false), prefixItems, minItems, maxItems;
//   string: minLength, maxLength, pattern (see json_pattern.hpp), format date, time,
//   date-time, uuid, email;
//   integer and number: minimum, maximum, exclusiveMinimum, exclusiveMaximum (draft 2020-12
//   numbers, or draft 4's boolean beside minimum/maximum), multipleOf a whole number;
//   boolean, null. Annotations (title, description, default, examples, $schema, $id,
//   $comment, deprecated, readOnly, writeOnly) change nothing.
// Any other keyword is refused by name (smol::Error), never ignored: a constraint that
// silently did not apply would let through output that the caller's validator rejects.
// So is a supported keyword in a form the grammar cannot enforce exactly (each refusal
// says which and where).
//
// Choices where JSON Schema leaves room (each output the grammar allows validates):
//  - additionalProperties absent: with `properties` or `patternProperties`, only the
//    listed (or matching) properties are written (OpenAI's strict mode requires false
//    anyway); without, any object.
//  - Whitespace: between tokens, nothing, one space, or one newline and up to 20 spaces
//    or tabs (llama.cpp's choice): pretty-printed output fits, and the model cannot run
//    on in whitespace forever. None before the first or after the last character.
//  - Numbers: at most 16 integer digits, 16 fraction digits and 2 exponent digits (a
//    double holds them), so "0.33333..." cannot run forever either; integers are "-"?
//    and 1 to 16 digits.
//  - Bounded numbers (json_number_range.hpp): exactly the values within the bounds, written
//    without an exponent, with as many integral digits as the larger of 16 and the bounds'
//    own (at most 19: a bound past 10^19 is dropped where every such text is within it,
//    else refused). Integers are compared exactly (JSON Schema's integers are
//    mathematical); a number's bound is compared as a double, as validators read it
//    (Python's jsonschema, ajv): an exclusive bound becomes the next double inward, and a
//    text is written only if its own double is within (rounding never reverses an order,
//    so comparing the decimal texts suffices). "-" is written only where the lower bound is
//    negative (or absent), so "-0" (JSON allows it: it is 0) only where 0 is in range and
//    so are negative values.
//    llama.cpp (common/json-schema-to-grammar.cpp) bounds integers alike (it too writes
//    "-0" only below a negative minimum, and also leaves it out when only a maximum is
//    given, where this writes it: 0 is in range); it ignores a number's bounds and
//    multipleOf, which this enforces or refuses.
//  - multipleOf: a whole number m (up to kMaxModulus) makes the value an integer that m
//    divides, enforced digit by digit by the remainder so far. A fraction (0.01) is
//    refused: validators test it in floating point (0.07 / 0.01 is not whole there), so
//    no grammar of decimals can agree with them.
//  - allOf: its subschemas (and the schema around it, $refs followed, nested allOf
//    opened) merged into one: types intersected (integer within number), enum/const
//    intersected, bounds and counts the tightest, properties united (a property's
//    schemas, and the additionalProperties of subschemas that do not list it, combined
//    as an allOf of their own), required united, prefixItems and items position by
//    position, equal pattern/format/multipleOf kept (whole multipleOf: their least
//    common multiple). One subschema with anyOf/oneOf is distributed over (A and (B or
//    C) is (A and B) or (A and C)). What cannot be merged exactly (two patterns, two
//    subschemas with anyOf, patternProperties beside another's properties) is refused,
//    naming allOf. llama.cpp merges only objects' properties and required (ignoring the
//    rest of each subschema, additionalProperties included) and intersects enums.
//  - prefixItems: the listed items first, then `items` (any value if absent, none if
//    false), within minItems/maxItems. (llama.cpp writes exactly the listed items.)
//  - minProperties/maxProperties: counted exactly: without them (or when they cannot
//    bind) the object's rules are as linear as ever; with them, one rule per property
//    and count so far (bounded by kMaxCountedObjectStates, past which refused).
//  - patternProperties: keys matching any of the patterns (json_pattern.hpp), each
//    value valid under every pattern's schema (their allOf: a key matching two patterns
//    owes both), in any number, after no listed properties; beside `properties` or an
//    additionalProperties other than false it is refused (keys matching no pattern would
//    need the patterns' complement).
//  - Strings are any JSON string (escapes included); minLength/maxLength count the
//    written characters, an escape counting as one.
//  - Extra keys (additionalProperties true or a schema) differ from every listed
//    property as written; a key spelled with escapes is not compared.
//
// Bounded: a schema nests at most kMaxSchemaDepth subschemas deep (the conversion recurses
// once per level), an object's rules grow linearly with its properties (two small rules
// per property, however many are optional), and a mistake names its place in the schema
// (#/properties/a/items/...), never a place in the GBNF text written from it.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/json_nesting.hpp"
#include "smol/grammar/gbnf.hpp"
#include "smol/grammar/gbnf_text.hpp"
#include "smol/grammar/grammar.hpp"
#include "smol/grammar/json_number_range.hpp"
#include "smol/grammar/json_pattern.hpp"

namespace smol {

namespace detail {

// The shared building blocks, named so that a schema's own names cannot collide (a
// schema-derived rule name never ends in "-json").
inline constexpr std::string_view kJsonPrimitives = R"(ws-json ::= | " " | "\n" [ \t]{0,20}
char-json ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string-json ::= "\"" char-json* "\""
integral-json ::= "0" | [1-9] [0-9]{0,15}
integer-json ::= "-"? integral-json
number-json ::= "-"? integral-json ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?
boolean-json ::= "true" | "false"
null-json ::= "null"
value-json ::= object-json | array-json | string-json | number-json | boolean-json | null-json
object-json ::= "{" ws-json ( string-json ws-json ":" ws-json value-json ws-json ( "," ws-json string-json ws-json ":" ws-json value-json ws-json )* )? "}"
array-json ::= "[" ws-json ( value-json ws-json ( "," ws-json value-json ws-json )* )? "]"
date-json ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )
time-json ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" ( [0-5] [0-9] | "60" ) ( "." [0-9]{1,9} )? ( [zZ] | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
date-time-json ::= date-json [tT] time-json
uuid-json ::= [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}
email-json ::= [a-zA-Z0-9._%+-]{1,64} "@" [a-zA-Z0-9-]{1,63} ( "." [a-zA-Z0-9-]{1,63} ){0,8} "." [a-zA-Z]{2,24}
)";

// How many subschemas deep a schema may nest (each level costs the conversion a few stack
// frames; real schemas nest a handful of levels), and how deep its JSON text may nest
// (two levels per subschema: "properties" and the property).
inline constexpr std::size_t kMaxSchemaDepth = 64;
inline constexpr std::size_t kMaxSchemaJsonDepth = 2 * kMaxSchemaDepth + 8;
// How much a conversion may do before the GBNF parser's own budget applies: subschemas
// visited, bytes of GBNF written, bytes of property names an "any other key" rule spells
// out (one rule per character).
inline constexpr std::size_t kMaxSchemaVisits = 250'000;
inline constexpr std::size_t kMaxSchemaGrammarBytes = std::size_t{32} << 20;
inline constexpr std::size_t kMaxOtherKeyBytes = std::size_t{1} << 20;
// The largest whole multipleOf, and how many states one bounded number's digit rules may
// look at (a modulus coprime to 10 needs about 19 per remainder: 4096 allow about 200).
inline constexpr std::uint64_t kMaxModulus = 1'000'000;
inline constexpr std::size_t kMaxDigitStates = 4096;
// An object counted by minProperties/maxProperties has a rule per property and count so
// far: at most this many.
inline constexpr std::size_t kMaxCountedObjectStates = 20'000;
// Schema nodes that merging allOf may copy, all merges of a conversion together (a merged
// property is a copy of its subschemas; nested allOf copy again).
inline constexpr std::size_t kMaxCopiedNodes = 1'000'000;

class JsonSchemaToGbnf {
 public:
  using Json = nlohmann::ordered_json;

  explicit JsonSchemaToGbnf(const Json& root) : root_(root) {}

  std::string convert() {
    const std::string top = visit(root_, "root", "#");
    std::string out = "root ::= " + top + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    out += kJsonPrimitives;
    return out;
  }

 private:
  static constexpr std::uint64_t kMaxCount = 2000;  // GBNF's largest repetition

  [[noreturn]] static void refuse(const std::string& path, const std::string& what) {
    fail("JSON schema: ", what, " (at ", shown_path(path), ")");
  }

  // A property name as a piece of a rule's name or a path: at most 32 bytes (cut at a
  // character), so that names and paths stay short whatever the keys (a megabyte key
  // above thousands of properties would otherwise be copied into each of their names).
  static std::string segment(const std::string& key) {
    constexpr std::size_t kMax = 32;
    if (key.size() <= kMax) return key;
    std::size_t cut = kMax;
    while (cut > 0 && (static_cast<unsigned char>(key[cut]) & 0xC0) == 0x80) --cut;
    return key.substr(0, cut) + "...";
  }

  // Stores a rule, counting the GBNF written against kMaxSchemaGrammarBytes.
  void store(const std::string& name, std::string body, const std::string& path) {
    grammar_bytes_ += name.size() + body.size() + 6;
    if (grammar_bytes_ > kMaxSchemaGrammarBytes) {
      refuse(path, cat("its grammar would be larger than ", kMaxSchemaGrammarBytes >> 20, " MiB"));
    }
    rules_[name] = std::move(body);
  }

  // A path as a message shows it: a deep one keeps its two ends.
  static std::string shown_path(const std::string& path) {
    constexpr std::size_t kHead = 80, kTail = 60;
    if (path.size() <= kHead + kTail + 3) return path;
    return path.substr(0, kHead) + "..." + path.substr(path.size() - kTail);
  }

  // One level of subschema nesting, for as long as it lives.
  class Nesting {
   public:
    Nesting(std::size_t& depth, const std::string& path) : depth_(depth) {
      if (++depth_ > kMaxSchemaDepth) {
        --depth_;
        refuse(path, cat("subschemas nested more than ", kMaxSchemaDepth, " levels deep"));
      }
    }
    ~Nesting() { --depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    std::size_t& depth_;
  };

  // A rule for `body`, named after `hint`; the same body gets the same rule.
  std::string add_rule(const std::string& hint, const std::string& body) {
    if (const auto it = by_body_.find(body); it != by_body_.end()) return it->second;
    const std::string name = fresh_name(hint);
    store(name, body, "#");
    by_body_[body] = name;
    return name;
  }

  std::string fresh_name(const std::string& hint) {
    std::string base;
    const std::string_view tail =
        std::string_view(hint).substr(hint.size() > 64 ? hint.size() - 64 : 0);
    for (const char c : tail) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      base += ok ? c : '-';
    }
    if (base.empty() || base == "root") base = "root-value";
    if (base.ends_with("-json")) base += "-x";
    std::string name = base;
    // Each base counts its own suffixes, so that many hints with one base (keys that
    // differ only in punctuation) cost a lookup each, not a search past all the others.
    std::size_t& next = next_suffix_[base];
    while (rules_.contains(name) || reserved_.contains(name)) {
      name = base + "-" + std::to_string(next < 2 ? (next = 2) : next);
      ++next;
    }
    reserved_.insert(name);
    return name;
  }

  static bool is_annotation(const std::string& key) {
    static const std::set<std::string> kAnnotations = {
        "title",    "description", "default",  "examples",  "$schema", "$id",
        "$comment", "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};
    return kAnnotations.contains(key);
  }

  static std::uint64_t count(const Json& schema, const char* key, const std::string& path,
                             std::uint64_t fallback) {
    if (!schema.contains(key)) return fallback;
    const Json& v = schema[key];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
      refuse(path, cat("\"", key, "\" must be a non-negative integer"));
    }
    const auto n = v.get<std::uint64_t>();
    if (n > kMaxCount) refuse(path, cat("\"", key, "\" above ", kMaxCount, " is not supported"));
    return n;
  }

  static std::string repetition(const std::string& item, std::uint64_t min,
                                std::optional<std::uint64_t> max) {
    if (max && *max == 0) return "";
    if (!max) return min == 0 ? item + "*" : min == 1 ? item + "+" : cat(item, "{", min, ",}");
    if (min == *max) return cat(item, "{", min, "}");
    return cat(item, "{", min, ",", *max, "}");
  }

  // Refuses a keyword the conversion does not know (annotations aside).
  static void check_keywords(const Json& schema, const std::string& path) {
    static const std::set<std::string> kKnown = {
        // Any type.
        "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
        // Objects.
        "properties", "required", "additionalProperties", "patternProperties", "minProperties",
        "maxProperties",
        // Arrays.
        "items", "prefixItems", "minItems", "maxItems",
        // Strings.
        "minLength", "maxLength", "format", "pattern",
        // Numbers.
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
    for (const auto& [key, value] : schema.items()) {
      if (!is_annotation(key) && !kKnown.contains(key)) {
        refuse(path, cat("the keyword \"", key, "\" is not supported"));
      }
    }
  }

  // Refuses any keyword beside `keyword` (annotations aside).
  static void refuse_beside(const Json& schema, const char* keyword, const std::string& path) {
    for (const auto& [key, value] : schema.items()) {
      if (key != keyword && !is_annotation(key)) {
        refuse(path, cat("\"", keyword, "\" together with \"", key, "\" is not supported"));
      }
    }
  }

  // A schema with allOf: merged, then converted as one schema; what the merge gives is
  // named as the allOf's.
  std::string all_of_rule(const Json& schema, const std::string& name, const std::string& path) {
    if (const auto target = single_reference(schema)) return reference(*target, path);
    // A merged schema met again (the same subschema merged into each option of a
    // choice) is converted once: else each level of allOf over a choice would multiply
    // the work below it by the choice's options.
    const Json merged = merge_all_of(schema, path);
    std::string key = merged.dump();
    if (const auto it = merged_rules_.find(key); it != merged_rules_.end()) return it->second;
    const std::string rule = visit(merged, name, path + "/allOf");
    merged_rules_.emplace(std::move(key), rule);
    return rule;
  }

  // A schema with const or enum (and perhaps type): the listed values of its type.
  std::string enum_rule(const Json& schema, const std::string& name, const std::string& path) {
    const bool is_const = schema.contains("const");
    for (const auto& [key, value] : schema.items()) {
      if (key != "const" && key != "enum" && key != "type" && !is_annotation(key)) {
        refuse(path, cat("\"", is_const ? "const" : "enum", "\" together with \"", key,
                         "\" is not supported"));
      }
    }
    if (schema.contains("const") && schema.contains("enum")) {
      refuse(path, "\"const\" together with \"enum\" is not supported");
    }
    const Json values = is_const ? Json::array({schema["const"]}) : schema["enum"];
    if (!values.is_array() || values.empty()) refuse(path, "\"enum\" must be a non-empty array");
    std::string body;
    for (const Json& v : values) {
      if (schema.contains("type") && !has_type(v, schema["type"])) continue;
      body += (body.empty() ? "" : " | ") + gbnf_text::literal(v.dump());
    }
    if (body.empty()) refuse(path, "no value of \"enum\" or \"const\" has the schema's type");
    return add_rule(name, body);
  }

  // A schema with anyOf or oneOf (`combinator`): any of its options.
  std::string choice_rule(const Json& schema, const char* combinator, const std::string& name,
                          const std::string& path) {
    refuse_beside(schema, combinator, path);
    const Json& options = schema[combinator];
    if (!options.is_array() || options.empty()) {
      refuse(path, cat("\"", combinator, "\" must be a non-empty array"));
    }
    std::string body;
    for (std::size_t i = 0; i < options.size(); ++i) {
      body += (i ? " | " : "") +
              visit(options[i], cat(name, "-", i), cat(path, "/", combinator, "/", i));
    }
    return add_rule(name, body);
  }

  // A schema with type: one type, or any of an array of them.
  std::string typed_rule(const Json& schema, const std::string& name, const std::string& path) {
    const Json& type = schema["type"];
    if (type.is_string()) return visit_type(type.get<std::string>(), schema, name, path);
    if (!type.is_array() || type.empty()) refuse(path, "\"type\" must be a string or an array");
    std::string body;
    std::set<std::string> seen;
    for (const Json& t : type) {
      if (!t.is_string()) refuse(path, "\"type\" must hold strings");
      const auto s = t.get<std::string>();
      // JSON Schema wants them unique; each would convert the whole schema once more.
      if (!seen.insert(s).second) refuse(path, cat("\"type\" lists \"", s, "\" twice"));
      body += (body.empty() ? "" : " | ") + visit_type(s, schema, cat(name, "-", s), path);
    }
    return add_rule(name, body);
  }

  // A schema without type: the type its keywords apply to (JSON Schema lets values of the
  // other types through; writing only this one is a narrower choice, and valid).
  std::string untyped_rule(const Json& schema, const std::string& name, const std::string& path) {
    const auto has_any = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(),
                         [&](const char* k) { return schema.contains(k); });
    };
    if (has_any({"properties", "additionalProperties", "required", "patternProperties",
                 "minProperties", "maxProperties"})) {
      return visit_type("object", schema, name, path);
    }
    if (has_any({"items", "prefixItems", "minItems", "maxItems"})) {
      return visit_type("array", schema, name, path);
    }
    if (has_any({"minLength", "maxLength", "pattern", "format"})) {
      return visit_type("string", schema, name, path);
    }
    if (has_any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})) {
      return visit_type("number", schema, name, path);
    }
    return "value-json";
  }

  // The GBNF expression (a rule name, mostly) for values valid under `schema`.
  std::string visit(const Json& schema, const std::string& hint, const std::string& path) {
    const Nesting level(depth_, path);
    if (++visits_ > kMaxSchemaVisits) {
      refuse(path, cat("the schema has more than ", kMaxSchemaVisits, " subschemas"));
    }
    // Rule names are hints for a reader of the GBNF: their tail is enough.
    const std::string name = hint.size() <= 64 ? hint : hint.substr(hint.size() - 64);
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return "value-json";
      refuse(path, "the schema false accepts nothing");
    }
    if (!schema.is_object()) refuse(path, "a schema must be an object or a boolean");
    check_keywords(schema, path);
    if (schema.contains("allOf")) return all_of_rule(schema, name, path);
    if (schema.contains("$ref")) {
      refuse_beside(schema, "$ref", path);
      return reference(schema["$ref"], path);
    }
    if (schema.contains("const") || schema.contains("enum")) return enum_rule(schema, name, path);
    for (const char* combinator : {"anyOf", "oneOf"}) {
      if (schema.contains(combinator)) return choice_rule(schema, combinator, name, path);
    }
    if (schema.contains("type")) return typed_rule(schema, name, path);
    return untyped_rule(schema, name, path);
  }

  // Whether `value` is of (one of) the JSON Schema type(s) `type`.
  static bool has_type(const Json& value, const Json& type) {
    if (type.is_array()) {
      return std::any_of(type.begin(), type.end(),
                         [&](const Json& t) { return has_type(value, t); });
    }
    if (!type.is_string()) return false;
    const auto t = type.get<std::string>();
    if (t == "string") return value.is_string();
    if (t == "number") return value.is_number();
    if (t == "integer") {
      // A whole double of any size (a cast to int64 past its range is undefined: found by
      // fuzz_grammar with 1.8e20 in an enum).
      return value.is_number_integer() ||
             (value.is_number_float() && std::isfinite(value.get<double>()) &&
              value.get<double>() == std::floor(value.get<double>()));
    }
    if (t == "boolean") return value.is_boolean();
    if (t == "null") return value.is_null();
    if (t == "object") return value.is_object();
    if (t == "array") return value.is_array();
    return false;
  }

  // The schema a $ref points at.
  const Json& resolve(const Json& ref, const std::string& path) const {
    if (!ref.is_string()) refuse(path, "\"$ref\" must be a string");
    const auto& target = ref.get_ref<const std::string&>();
    if (target != "#" && !target.starts_with("#/")) {
      refuse(path, cat("\"$ref\": \"", target, "\" is not a local reference (#/...)"));
    }
    if (target == "#") return root_;
    try {
      return root_.at(Json::json_pointer(target.substr(1)));
    } catch (const nlohmann::json::exception&) {
      refuse(path, cat("\"$ref\": \"", target, "\" points at nothing"));
    }
  }

  std::string reference(const Json& ref, const std::string& path) {
    const Json& node = resolve(ref, path);
    const auto target = ref.get<std::string>();
    if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
    // Named before it is visited, so that a recursive reference finds it.
    const std::string hint = target == "#" ? "root-ref" : target.substr(target.rfind('/') + 1);
    const std::string name = fresh_name(hint);
    refs_[target] = name;
    store(name, visit(node, name + "-body", target), target);
    return name;
  }

  // ---- integer and number: bounds and multipleOf (json_number_range.hpp) ----

  // A JSON number's value as a decimal: exact for integers and whole doubles below 2^64,
  // else the shortest decimal that reads back as the double.
  static Decimal decimal_of(const Json& v) {
    if (v.is_number_unsigned()) return decimal_from_unsigned(v.get<std::uint64_t>(), false);
    if (v.is_number_integer()) {
      const auto i = v.get<std::int64_t>();
      // The magnitude of INT64_MIN does not fit an int64: negate as unsigned.
      const std::uint64_t magnitude =
          i < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(i) : static_cast<std::uint64_t>(i);
      return decimal_from_unsigned(magnitude, i < 0);
    }
    return decimal_from_double(v.get<double>());
  }

  // A schema's lower (or upper) bound: its value and whether it is exclusive, the
  // tighter of minimum and exclusiveMinimum when both are given (draft 4's boolean
  // exclusiveMinimum makes minimum exclusive instead).
  struct Bound {
    Json value;
    bool exclusive = false;
  };
  static std::optional<Bound> bound_of(const Json& schema, bool lower, const std::string& path) {
    const char* inclusive_key = lower ? "minimum" : "maximum";
    const char* exclusive_key = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    std::optional<Bound> bound;
    bool draft4_exclusive = false;
    if (schema.contains(exclusive_key)) {
      const Json& v = schema[exclusive_key];
      if (v.is_boolean()) {
        draft4_exclusive = v.get<bool>();
      } else if (finite_number(v)) {
        bound = Bound{v, true};
      } else {
        refuse(path, cat("\"", exclusive_key, "\" must be a number"));
      }
    }
    if (schema.contains(inclusive_key)) {
      const Json& v = schema[inclusive_key];
      if (!finite_number(v)) refuse(path, cat("\"", inclusive_key, "\" must be a number"));
      bound = tighter(bound, Bound{v, draft4_exclusive}, lower);
    }
    return bound;
  }

  // JSON text has no NaN or infinity, but a schema built in code may.
  static bool finite_number(const Json& v) {
    return v.is_number() && (!v.is_number_float() || std::isfinite(v.get<double>()));
  }

  // The tighter of two bounds (at one value, the exclusive one).
  static std::optional<Bound> tighter(const std::optional<Bound>& a, const Bound& b, bool lower) {
    if (!a) return b;
    const int c = compare(decimal_of(a->value), decimal_of(b.value));
    if (c == 0) return a->exclusive ? a : b;
    return (c < 0) == lower ? b : a;
  }

  // A whole multipleOf (an integer, or a double with a whole value), nullopt for another
  // number.
  static std::optional<std::uint64_t> whole_number(const Json& v) {
    if (v.is_number_unsigned()) return v.get<std::uint64_t>();
    if (v.is_number_integer()) {
      const auto i = v.get<std::int64_t>();
      return i > 0 ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(i)) : std::nullopt;
    }
    const double d = v.get<double>();
    if (d >= 1 && d <= 9007199254740992.0 && d == std::floor(d)) {
      return static_cast<std::uint64_t>(d);
    }
    return std::nullopt;
  }

  // A bound on the grid the grammar writes (whole for integers, 16 fraction digits for
  // numbers), inclusive, moved inward where the grid or a double's rounding asks.
  static Decimal grid_bound(const Bound& bound, bool lower, bool integer) {
    const Json& v = bound.value;
    if (integer) {
      // Integers are compared with the bound's exact value.
      const Decimal d = decimal_of(v);
      if (!d.fraction.empty()) return round_to_grid(d, 0, lower);
      return bound.exclusive ? step(d, 0, lower) : d;
    }
    // A number is compared as a double: the nearest double on the bound's inside (past it
    // when exclusive), then that double's decimal, rounded inward to the grid.
    double a = v.get<double>();
    if (!v.is_number_float()) {
      const int c = compare(decimal_from_double(a), decimal_of(v));
      const bool outside =
          lower ? (bound.exclusive ? c <= 0 : c < 0) : (bound.exclusive ? c >= 0 : c > 0);
      if (outside) a = std::nextafter(a, lower ? HUGE_VAL : -HUGE_VAL);
    } else if (bound.exclusive) {
      a = std::nextafter(a, lower ? HUGE_VAL : -HUGE_VAL);
    }
    if (!std::isfinite(a)) {
      // Past the largest double: beyond any text the grammar writes, in its direction.
      Decimal huge;
      huge.negative = a < 0;
      huge.integral = "1" + std::string(400, '0');
      return huge;
    }
    return round_to_grid(decimal_from_double(a), DigitRanges::kFractionDigits, lower);
  }

  // A multipleOf's value, refused unless it is a whole number up to kMaxModulus.
  static std::uint64_t whole_modulus(const Json& m, const std::string& path) {
    if (!finite_number(m) || decimal_of(m).negative || decimal_of(m).is_zero()) {
      refuse(path, "\"multipleOf\" must be a number above 0");
    }
    const auto whole = whole_number(m);
    if (!whole || *whole > kMaxModulus) {
      refuse(path, cat("\"multipleOf\": ", m.dump(), " is not supported (a whole number up to ",
                       kMaxModulus, " is; validators test a fraction in floating point)"));
    }
    return *whole;
  }

  // The most integral digits written: 19 keeps every whole bound exact in 64 bits.
  static constexpr std::size_t kMaxIntegralDigits = 19;

  // A lower (or upper) bound on the grid the grammar writes; nullopt where there is none,
  // or where it lies beyond every text written on its outside (no constraint). One
  // beyond every text written on its inside leaves nothing to write: refused.
  static std::optional<Decimal> written_bound(const std::optional<Bound>& bound, bool lower,
                                              bool integer, const std::string& path) {
    if (!bound) return std::nullopt;
    const Decimal d = grid_bound(*bound, lower, integer);
    if (d.integral.size() <= kMaxIntegralDigits) return d;
    if (d.negative != lower) {
      refuse(path,
             cat("the ", lower ? "lower" : "upper", " bound ", bound->value.dump(),
                 lower ? " is above every " : " is below every ", integer ? "integer" : "number",
                 " of at most ", kMaxIntegralDigits, " digits (the most written)"));
    }
    return std::nullopt;
  }

  // The range of the values written: the bounds given, the widest text written in place
  // of a missing one (as many integral digits as the larger of 16 and the bounds' own).
  static std::pair<Decimal, Decimal> written_range(const std::optional<Decimal>& low,
                                                   const std::optional<Decimal>& high,
                                                   bool integer) {
    std::size_t digits = 16;
    for (const auto& b : {low, high}) {
      if (b) digits = std::max(digits, b->integral.size());
    }
    Decimal limit;
    limit.integral = std::string(digits, '9');
    if (!integer) limit.fraction = std::string(DigitRanges::kFractionDigits, '9');
    Decimal lowest = limit;
    lowest.negative = true;
    return {low ? *low : lowest, high ? *high : limit};
  }

  // The alternatives of a bounded number between `low` and `high` (a non-empty range):
  // "-" and the magnitudes of the negative values (and of 0), then the non-negative
  // values, each where the range and `modulus` leave any.
  std::vector<std::string> signed_magnitudes(const Decimal& low, const Decimal& high, bool integer,
                                             std::uint64_t modulus, const std::string& name,
                                             const std::string& path) {
    std::vector<std::string> alternatives;
    DigitRanges digit_rules([&](const std::string& body) { return add_rule(name + "-d", body); },
                            !integer, modulus, kMaxDigitStates, shown_path(path));
    const auto magnitude = [](Decimal d) {
      d.negative = false;
      return d;
    };
    if (low.negative) {
      const Decimal from = high.negative ? magnitude(high) : Decimal{};
      if (const auto e = digit_rules.magnitudes(from, magnitude(low))) {
        alternatives.push_back("\"-\" ( " + *e + " )");
      }
    }
    if (!high.negative) {
      const Decimal from = low.negative ? Decimal{} : low;
      if (const auto e = digit_rules.magnitudes(from, high)) alternatives.push_back(*e);
    }
    return alternatives;
  }

  std::string number_rule(bool integer, const Json& schema, const std::string& name,
                          const std::string& path) {
    const std::optional<Bound> lower = bound_of(schema, true, path);
    const std::optional<Bound> upper = bound_of(schema, false, path);
    std::uint64_t modulus = 1;
    if (schema.contains("multipleOf")) {
      modulus = whole_modulus(schema["multipleOf"], path);
      integer = true;  // only integers are multiples of a whole number
    }
    if (!lower && !upper && modulus == 1) return integer ? "integer-json" : "number-json";

    const std::optional<Decimal> low = written_bound(lower, true, integer, path);
    const std::optional<Decimal> high = written_bound(upper, false, integer, path);
    const auto [from, to] = written_range(low, high, integer);
    if (compare(from, to) > 0) {
      refuse(path, cat("no ", integer ? "integer" : "number",
                       " lies within its bounds (minimum, maximum, exclusiveMinimum, "
                       "exclusiveMaximum)"));
    }
    const std::vector<std::string> alternatives =
        signed_magnitudes(from, to, integer, modulus, name, path);
    if (alternatives.empty()) {
      refuse(path, cat("no multiple of ", modulus, " lies within its bounds"));
    }
    std::string body;
    for (const std::string& a : alternatives) body += (body.empty() ? "" : " | ") + a;
    return add_rule(name, body);
  }

  // ---- allOf: merged into one schema ----

  // `allOf` of nothing but one $ref (beside annotations, in the schema and its
  // subschemas): that reference, kept a rule reference so that recursion through it
  // stays a reference, not a copy.
  std::optional<Json> single_reference(const Json& schema) const {
    for (const auto& [key, value] : schema.items()) {
      if (key != "allOf" && !is_annotation(key)) return std::nullopt;
    }
    const Json& list = schema["allOf"];
    if (!list.is_array()) return std::nullopt;
    std::optional<Json> target;
    for (const Json& sub : list) {
      if (sub.is_boolean() && sub.get<bool>()) continue;
      if (!sub.is_object()) return std::nullopt;
      for (const auto& [key, value] : sub.items()) {
        if (key == "$ref") {
          if (target && *target != value) return std::nullopt;
          target = value;
        } else if (!is_annotation(key)) {
          return std::nullopt;
        }
      }
    }
    return target;
  }

  // A copy of `value` for a merged schema, counted against kMaxCopiedNodes first.
  Json copied(const Json& value, const std::string& path) {
    std::vector<const Json*> todo{&value};
    std::size_t nodes = 0;
    while (!todo.empty()) {
      const Json* v = todo.back();
      todo.pop_back();
      if (copied_nodes_ + ++nodes > kMaxCopiedNodes) {
        refuse(path, cat("allOf: merging its subschemas would copy more than ", kMaxCopiedNodes,
                         " schema values"));
      }
      if (v->is_structured()) {
        for (const Json& child : *v) todo.push_back(&child);
      }
    }
    copied_nodes_ += nodes;
    return value;
  }

  // One subschema of a merge and where it is.
  struct Part {
    const Json* schema;
    std::string path;
  };

  // The schemas whose conjunction `schema` is: what its $ref points at and its allOf's
  // subschemas (depth first), then itself, each once (x and x is x: a schema met again,
  // by a recursive $ref too, adds nothing). Their own $ref and allOf are thereby done.
  // The order is that of the merged properties: what a schema builds on comes first.
  void flatten(const Json& schema, const std::string& path, std::vector<Part>& parts,
               std::set<const Json*>& seen) {
    const Nesting level(depth_, path);
    if (++visits_ > kMaxSchemaVisits) {
      refuse(path, cat("the schema has more than ", kMaxSchemaVisits, " subschemas"));
    }
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return;
      refuse(path, "allOf: a subschema is false, which accepts nothing");
    }
    if (!schema.is_object()) refuse(path, "a schema must be an object or a boolean");
    if (!seen.insert(&schema).second) return;
    if (schema.contains("$ref")) {
      const Json& target = resolve(schema["$ref"], path);
      flatten(target, schema["$ref"].get<std::string>(), parts, seen);
    }
    if (schema.contains("allOf")) {
      const Json& list = schema["allOf"];
      if (!list.is_array() || list.empty()) refuse(path, "\"allOf\" must be a non-empty array");
      for (std::size_t i = 0; i < list.size(); ++i) {
        flatten(list[i], cat(path, "/allOf/", i), parts, seen);
      }
    }
    parts.push_back({&schema, path});
  }

  // A part's keywords as a schema of their own (its $ref and allOf are other parts).
  Json own_keywords(const Part& part, const std::string& path) {
    Json out = Json::object();
    for (const auto& [key, value] : part.schema->items()) {
      if (key != "$ref" && key != "allOf" && !is_annotation(key)) out[key] = copied(value, path);
    }
    return out;
  }

  // The conjunction of subschemas, as one: true ones dropped, false wins, equal ones once.
  Json conjunction(const std::vector<const Json*>& schemas, const std::string& path) {
    std::vector<const Json*> kept;
    for (const Json* s : schemas) {
      if (s->is_boolean()) {
        if (!s->get<bool>()) return Json(false);
        continue;
      }
      if (s->is_object() && std::all_of(s->items().begin(), s->items().end(),
                                        [](const auto& kv) { return is_annotation(kv.key()); })) {
        continue;
      }
      if (std::none_of(kept.begin(), kept.end(), [&](const Json* k) { return *k == *s; })) {
        kept.push_back(s);
      }
    }
    if (kept.empty()) return Json::object();
    if (kept.size() == 1) return copied(*kept[0], path);
    Json list = Json::array();
    for (const Json* s : kept) list.push_back(copied(*s, path));
    return Json{{"allOf", std::move(list)}};
  }

  // Calls f(part, value) for each part that has `key`, in order.
  template <typename F>
  static void each_with(const std::vector<Part>& parts, const char* key, const F& f) {
    for (const Part& part : parts) {
      if (part.schema->contains(key)) f(part, (*part.schema)[key]);
    }
  }

  // The part with a choice (anyOf or oneOf) and its keyword, or none. A choice in one
  // part is distributed over; two would multiply, and are refused.
  struct Choice {
    const Part* part = nullptr;
    const char* key = nullptr;
  };
  static Choice find_choice(const std::vector<Part>& parts, const std::string& path) {
    Choice choice;
    for (const Part& part : parts) {
      for (const char* key : {"anyOf", "oneOf"}) {
        if (!part.schema->contains(key)) continue;
        if (choice.part != nullptr) {
          refuse(path, cat("allOf: \"", choice.key, "\" in ", shown_path(choice.part->path),
                           " and \"", key, "\" in ", shown_path(part.path),
                           " cannot be merged (only one choice is distributed over)"));
        }
        choice = {&part, key};
      }
    }
    return choice;
  }

  // The parts with a choice distributed over: A and (B or C) is (A and B) or (A and C).
  Json distribute_choice(const std::vector<Part>& parts, const Choice& choice,
                         const std::string& path) {
    const Json& options = (*choice.part->schema)[choice.key];
    if (!options.is_array() || options.empty()) {
      refuse(choice.part->path, cat("\"", choice.key, "\" must be a non-empty array"));
    }
    Json alternatives = Json::array();
    for (const Json& option : options) {
      Json all = Json::array();
      for (const Part& part : parts) {
        Json own = own_keywords(part, path);
        if (&part == choice.part) own.erase(choice.key);
        if (!own.empty()) all.push_back(std::move(own));
      }
      all.push_back(copied(option, path));
      alternatives.push_back(Json{{"allOf", std::move(all)}});
    }
    return Json{{"anyOf", std::move(alternatives)}};
  }

  // The types of `types` that `list` allows too, in the order of `types` (an integer is a
  // number: integer and number have integer in common).
  static std::vector<std::string> common_types(const std::vector<std::string>& types,
                                               const std::vector<std::string>& list) {
    std::vector<std::string> both;
    const auto has = [](const std::vector<std::string>& l, const std::string& x) {
      return std::find(l.begin(), l.end(), x) != l.end();
    };
    for (const std::string& x : types) {
      std::string kept;
      if (has(list, x)) {
        kept = x;
      } else if ((x == "integer" && has(list, "number")) ||
                 (x == "number" && has(list, "integer"))) {
        kept = "integer";
      }
      if (!kept.empty() && !has(both, kept)) both.push_back(kept);
    }
    return both;
  }

  // type: the types every part allows.
  static void merge_types(const std::vector<Part>& parts, Json& merged, const std::string& path) {
    std::optional<std::vector<std::string>> types;
    each_with(parts, "type", [&](const Part& part, const Json& t) {
      std::vector<std::string> list;
      for (const Json& one : t.is_array() ? t : Json::array({t})) {
        if (!one.is_string()) refuse(part.path, "\"type\" must be a string or an array of strings");
        list.push_back(one.get<std::string>());
      }
      types = types ? common_types(*types, list) : list;
    });
    if (types) {
      if (types->empty()) refuse(path, "allOf: its subschemas have no type in common");
      merged["type"] = types->size() == 1 ? Json((*types)[0]) : Json(*types);
    }
  }

  // enum and const: the values every part allows.
  void merge_values(const std::vector<Part>& parts, Json& merged, const std::string& path) {
    std::optional<std::vector<const Json*>> values;
    const auto keep_values = [&](const Part& part, const Json& list) {
      if (!list.is_array() || list.empty()) refuse(part.path, "\"enum\" must be a non-empty array");
      const auto in = [](const auto& l, const Json& v) {
        return std::any_of(l.begin(), l.end(), [&](const auto& w) { return deref(w) == v; });
      };
      std::vector<const Json*> next;
      if (!values) {  // the first list, in its order and spelling
        for (const Json& v : list) {
          if (!in(next, v)) next.push_back(&v);
        }
      } else {
        for (const Json* v : *values) {
          if (in(list, *v)) next.push_back(v);
        }
      }
      values = std::move(next);
    };
    each_with(parts, "enum", keep_values);
    std::deque<Json> consts;  // each const as a list, alive while `values` points into it
    for (const Part& part : parts) {
      if (part.schema->contains("const")) {
        keep_values(part, consts.emplace_back(Json::array({(*part.schema)["const"]})));
      }
    }
    if (values) {
      if (values->empty()) refuse(path, "allOf: no value is allowed by every enum and const");
      Json list = Json::array();
      for (const Json* v : *values) list.push_back(copied(*v, path));
      merged["enum"] = std::move(list);
    }
  }

  // Bounds: the tightest.
  static void merge_bounds(const std::vector<Part>& parts, Json& merged) {
    for (const bool lower : {true, false}) {
      std::optional<Bound> bound;
      for (const Part& part : parts) {
        if (const auto b = bound_of(*part.schema, lower, part.path))
          bound = tighter(bound, *b, lower);
      }
      if (bound) {
        merged[bound->exclusive ? (lower ? "exclusiveMinimum" : "exclusiveMaximum")
                                : (lower ? "minimum" : "maximum")] = bound->value;
      }
    }
  }

  // multipleOf: equal ones kept, whole ones their least common multiple.
  static void merge_multiple_of(const std::vector<Part>& parts, Json& merged,
                                const std::string& path) {
    each_with(parts, "multipleOf", [&](const Part& part, const Json& m) {
      if (!merged.contains("multipleOf") || merged["multipleOf"] == m) {
        merged["multipleOf"] = m;
        return;
      }
      const auto a = whole_number(merged["multipleOf"]), b = whole_number(m);
      if (!a || !b) {
        refuse(path, cat("allOf: the multipleOf ", merged["multipleOf"].dump(), " and ", m.dump(),
                         " (in ", shown_path(part.path), ") cannot be merged"));
      }
      // The least common multiple, which both divide; past kMaxModulus it is refused below.
      const std::uint64_t g = std::gcd(*a, *b);
      const std::uint64_t lcm =
          *a / g > kMaxModulus / std::max<std::uint64_t>(*b, 1) ? kMaxModulus + 1 : *a / g * *b;
      merged["multipleOf"] = lcm;
    });
  }

  // Counts: the tightest.
  static void merge_counts(const std::vector<Part>& parts, Json& merged) {
    for (const char* key : {"minLength", "minItems", "minProperties"}) {
      each_with(parts, key, [&](const Part&, const Json& n) {
        if (!merged.contains(key) || !n.is_number() || !merged[key].is_number() ||
            compare(decimal_of(n), decimal_of(merged[key])) > 0) {
          merged[key] = n;
        }
      });
    }
    for (const char* key : {"maxLength", "maxItems", "maxProperties"}) {
      each_with(parts, key, [&](const Part&, const Json& n) {
        if (!merged.contains(key) || !n.is_number() || !merged[key].is_number() ||
            compare(decimal_of(n), decimal_of(merged[key])) < 0) {
          merged[key] = n;
        }
      });
    }
  }

  // Patterns and formats: one (two different ones cannot be merged).
  static void merge_pattern_and_format(const std::vector<Part>& parts, Json& merged,
                                       const std::string& path) {
    for (const char* key : {"pattern", "format"}) {
      each_with(parts, key, [&](const Part& part, const Json& v) {
        if (merged.contains(key) && merged[key] != v) {
          refuse(path, cat("allOf: two different \"", key, "\" (one in ", shown_path(part.path),
                           ") cannot be merged"));
        }
        merged[key] = v;
      });
    }
  }

  // Anything else the parts say, copied as it is: a keyword the conversion refuses by name.
  void copy_other_keywords(const std::vector<Part>& parts, Json& merged, const std::string& path) {
    for (const Part& part : parts) {
      for (const auto& [key, value] : part.schema->items()) {
        if (key != "$ref" && key != "allOf" && key != "const" && !is_annotation(key) &&
            !merged.contains(key) && !kMergedKeys.contains(key)) {
          merged[key] = copied(value, path);
        }
      }
    }
  }

  // The schema `schema` (with allOf) means, without allOf.
  Json merge_all_of(const Json& schema, const std::string& path) {
    std::vector<Part> parts;
    std::set<const Json*> seen;
    flatten(schema, path, parts, seen);
    if (const Choice choice = find_choice(parts, path); choice.part != nullptr) {
      return distribute_choice(parts, choice, path);
    }
    Json merged = Json::object();
    merge_types(parts, merged, path);
    merge_values(parts, merged, path);
    merge_bounds(parts, merged);
    merge_multiple_of(parts, merged, path);
    merge_counts(parts, merged);
    merge_pattern_and_format(parts, merged, path);
    merge_objects(parts, merged, path);
    merge_arrays(parts, merged, path);
    copy_other_keywords(parts, merged, path);
    return merged;
  }

  static const Json& deref(const Json* v) { return *v; }
  static const Json& deref(const Json& v) { return v; }

  // The keywords merge_all_of writes itself (or leaves out when they merge to nothing).
  static inline const std::set<std::string> kMergedKeys = {"type",
                                                           "enum",
                                                           "minimum",
                                                           "maximum",
                                                           "multipleOf",
                                                           "minLength",
                                                           "minItems",
                                                           "minProperties",
                                                           "maxLength",
                                                           "maxItems",
                                                           "maxProperties",
                                                           "pattern",
                                                           "format",
                                                           "properties",
                                                           "required",
                                                           "additionalProperties",
                                                           "items",
                                                           "prefixItems",
                                                           "exclusiveMinimum",
                                                           "exclusiveMaximum",
                                                           "patternProperties"};

  // Objects: a property's schema is the conjunction of what each part says of it (its
  // `properties` entry, or else its additionalProperties); required united.
  void merge_objects(const std::vector<Part>& parts, Json& merged, const std::string& path) {
    std::vector<std::string> order;
    std::set<std::string> listed;
    const Part* patterns = nullptr;
    bool others = false;  // properties or additionalProperties beside patternProperties
    for (const Part& part : parts) {
      const Json& s = *part.schema;
      if (s.contains("patternProperties")) {
        if (patterns != nullptr) {
          refuse(path, "allOf: patternProperties in two subschemas cannot be merged");
        }
        patterns = &part;
      }
      if (s.contains("properties")) {
        if (!s["properties"].is_object()) refuse(part.path, "\"properties\" must be an object");
        for (const auto& [key, value] : s["properties"].items()) {
          if (listed.insert(key).second) order.push_back(key);
        }
      }
    }
    for (const Part& part : parts) {
      if (&part == patterns) continue;
      if (part.schema->contains("properties") || part.schema->contains("additionalProperties")) {
        others = true;
      }
    }
    if (patterns != nullptr && others) {
      refuse(path, cat("allOf: patternProperties (in ", shown_path(patterns->path),
                       ") beside another subschema's properties or additionalProperties cannot be "
                       "merged"));
    }
    if (patterns != nullptr) {
      merged["patternProperties"] = copied((*patterns->schema)["patternProperties"], path);
    }
    if (!order.empty()) {
      Json properties = Json::object();
      for (const std::string& key : order) {
        std::vector<const Json*> says;
        for (const Part& part : parts) {
          const Json& s = *part.schema;
          if (s.contains("properties") && s["properties"].contains(key)) {
            says.push_back(&s["properties"][key]);
          } else if (s.contains("additionalProperties")) {
            says.push_back(&s["additionalProperties"]);
          }
        }
        properties[key] = conjunction(says, path);
      }
      merged["properties"] = std::move(properties);
    }
    std::vector<const Json*> extra;
    for (const Part& part : parts) {
      if (part.schema->contains("additionalProperties")) {
        extra.push_back(&(*part.schema)["additionalProperties"]);
      }
    }
    if (!extra.empty()) merged["additionalProperties"] = conjunction(extra, path);
    Json required = Json::array();
    std::set<std::string> seen;
    for (const Part& part : parts) {
      if (!part.schema->contains("required")) continue;
      const Json& list = (*part.schema)["required"];
      if (!list.is_array()) refuse(part.path, "\"required\" must be an array");
      for (const Json& r : list) {
        if (!r.is_string()) refuse(part.path, "\"required\" must hold strings");
        if (seen.insert(r.get<std::string>()).second) required.push_back(r);
      }
    }
    if (!required.empty()) merged["required"] = std::move(required);
  }

  // Arrays: position by position, each part's prefixItems entry there or else its items;
  // items the conjunction of the parts' items. A position no part allows ends the array.
  void merge_arrays(const std::vector<Part>& parts, Json& merged, const std::string& path) {
    std::size_t longest = 0;
    bool any = false;
    for (const Part& part : parts) {
      const Json& s = *part.schema;
      if (s.contains("prefixItems")) {
        if (!s["prefixItems"].is_array()) refuse(part.path, "\"prefixItems\" must be an array");
        longest = std::max(longest, s["prefixItems"].size());
        any = true;
      }
    }
    if (any) {
      Json prefix = Json::array();
      for (std::size_t i = 0; i < longest; ++i) {
        std::vector<const Json*> says;
        for (const Part& part : parts) {
          const Json& s = *part.schema;
          if (s.contains("prefixItems") && i < s["prefixItems"].size()) {
            says.push_back(&s["prefixItems"][i]);
          } else if (s.contains("items")) {
            says.push_back(&s["items"]);
          }
        }
        Json at = conjunction(says, path);
        if (at.is_boolean() && !at.get<bool>()) {
          // Nothing may stand here: the array ends before.
          if (!merged.contains("maxItems") || !merged["maxItems"].is_number() ||
              compare(decimal_of(merged["maxItems"]), decimal_from_unsigned(i, false)) > 0) {
            merged["maxItems"] = i;
          }
          break;
        }
        prefix.push_back(std::move(at));
      }
      merged["prefixItems"] = std::move(prefix);
    }
    std::vector<const Json*> items;
    for (const Part& part : parts) {
      if (part.schema->contains("items")) items.push_back(&(*part.schema)["items"]);
    }
    if (!items.empty()) merged["items"] = conjunction(items, path);
  }

  std::string visit_type(const std::string& type, const Json& schema, const std::string& name,
                         const std::string& path) {
    if (type == "string") return string_rule(schema, name, path);
    if (type == "number" || type == "integer")
      return number_rule(type == "integer", schema, name, path);
    if (type == "boolean") return "boolean-json";
    if (type == "null") return "null-json";
    if (type == "object") return object_rule(schema, name, path);
    if (type == "array") return array_rule(schema, name, path);
    refuse(path, cat("the type \"", type, "\" is not a JSON Schema type"));
  }

  std::string string_rule(const Json& schema, const std::string& name, const std::string& path) {
    const bool lengths = schema.contains("minLength") || schema.contains("maxLength");
    const bool pattern = schema.contains("pattern");
    const bool format = schema.contains("format");
    if (int(lengths) + int(pattern) + int(format) > 1) {
      refuse(path, "combining minLength/maxLength, pattern and format is not supported");
    }
    if (format) {
      if (!schema["format"].is_string()) refuse(path, "\"format\" must be a string");
      const auto f = schema["format"].get<std::string>();
      static const std::set<std::string> kFormats = {"date", "time", "date-time", "uuid", "email"};
      if (!kFormats.contains(f)) {
        refuse(path,
               cat("the format \"", f, "\" is not supported (date, time, date-time, uuid, email)"));
      }
      return add_rule(name, cat("\"\\\"\" ", f, "-json \"\\\"\""));
    }
    if (pattern) {
      if (!schema["pattern"].is_string()) refuse(path, "\"pattern\" must be a string");
      std::string body;
      try {
        body = pattern_to_gbnf(schema["pattern"].get<std::string>(), "char-json");
      } catch (const Error& error) {
        fail(error.what(), " (at ", shown_path(path), ")");
      }
      return add_rule(name, "\"\\\"\" " + body + " \"\\\"\"");
    }
    if (lengths) {
      const std::uint64_t min = count(schema, "minLength", path, 0);
      std::optional<std::uint64_t> max;
      if (schema.contains("maxLength")) max = count(schema, "maxLength", path, 0);
      if (max && *max < min) refuse(path, "maxLength is below minLength");
      return add_rule(name, "\"\\\"\" " + repetition("char-json", min, max) + " \"\\\"\"");
    }
    return "string-json";
  }

  std::string array_rule(const Json& schema, const std::string& name, const std::string& path) {
    // prefixItems first; a `false` among them ends the array before it.
    std::vector<std::string> prefix;
    std::optional<std::uint64_t> prefix_end;
    if (schema.contains("prefixItems")) {
      const Json& list = schema["prefixItems"];
      if (!list.is_array()) refuse(path, "\"prefixItems\" must be an array");
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (list[i].is_boolean() && !list[i].get<bool>()) {
          prefix_end = i;
          break;
        }
        prefix.push_back(visit(list[i], cat(name, "-", i), cat(path, "/prefixItems/", i)) +
                         " ws-json");
      }
    }
    // The items after them: `items`, any value if absent, none if false.
    std::optional<std::string> item = std::string("value-json");
    if (schema.contains("items")) {
      const Json& items = schema["items"];
      if (items.is_boolean() && !items.get<bool>()) {
        item.reset();
      } else {
        item = visit(items, name + "-item", path + "/items");
      }
    }
    const std::uint64_t min = count(schema, "minItems", path, 0);
    std::optional<std::uint64_t> max;
    if (schema.contains("maxItems")) max = count(schema, "maxItems", path, 0);
    if (max && *max < min) refuse(path, "maxItems is below minItems");
    if (prefix_end || !item) {
      const std::uint64_t end = prefix_end ? *prefix_end : prefix.size();
      if (min > end) {
        refuse(path, cat("minItems is above the ", end,
                         " items that prefixItems and items (false) allow"));
      }
      max = max ? std::min(*max, end) : end;
    }
    if (max && *max == 0) return add_rule(name, "\"[\" ws-json \"]\"");
    if (prefix.empty()) {
      const std::string element = *item + " ws-json";
      const std::string more =
          repetition("( \",\" ws-json " + element + " )", min == 0 ? 0 : min - 1,
                     max ? std::optional(*max - 1) : std::nullopt);
      std::string items = element + (more.empty() ? "" : " " + more);
      if (min == 0) items = "( " + items + " )?";
      return add_rule(name, "\"[\" ws-json " + items + " \"]\"");
    }
    // rest[i]: the items after the first i (1 <= i <= k), each after a comma: one rule per
    // prefix item, then the counted repetition of `items`.
    const std::size_t k = prefix.size();
    std::string rest;  // rest[i + 1] while building rest[i]
    for (std::size_t i = k + 1; i-- > 1;) {
      std::string body;
      if (max && i >= *max) {
        body = "\"\"";
      } else if (i == k) {
        const std::uint64_t at_least = min > k ? min - k : 0;
        const std::string more =
            item ? repetition("( \",\" ws-json " + *item + " ws-json )", at_least,
                              max ? std::optional(*max - k) : std::nullopt)
                 : std::string();
        body = more.empty() ? "\"\"" : more;
      } else {
        const std::string write = "\",\" ws-json " + prefix[i] + " " + rest;
        body = i >= min ? write + " | \"\"" : write;
      }
      rest = add_rule(cat(name, "-rest-", i), body);
    }
    const std::string first = prefix[0] + " " + rest;
    return add_rule(name, "\"[\" ws-json " + (min == 0 ? "( " + first + " )?" : first) + " \"]\"");
  }

  // A JSON string that is none of `names` as written: a trie of the names, leaving it at
  // any character that no name continues with.
  std::string other_key(const std::vector<std::string>& names, const std::string& name,
                        const std::string& path) {
    struct Node {
      std::map<std::uint32_t, std::size_t> children;
      bool is_name = false;
    };
    std::size_t spelled = 0;
    for (const std::string& key : names) spelled += key.size();
    if (spelled > kMaxOtherKeyBytes) {
      refuse(path, cat("\"additionalProperties\" beside property names of more than ",
                       kMaxOtherKeyBytes >> 20, " MiB in all is not supported"));
    }
    std::vector<Node> trie(1);
    for (const std::string& key : names) {
      // A name JSON must escape cannot be written as it is: no key written plainly
      // equals it, so it needs no branch.
      if (std::any_of(key.begin(), key.end(), [](char c) {
            return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7F;
          })) {
        continue;
      }
      std::size_t at = 0;
      for (std::size_t pos = 0; pos < key.size();) {
        const unicode::DecodedCodepoint d = unicode::decode_utf8(key, pos);
        pos += d.length;
        const auto cp = static_cast<std::uint32_t>(d.codepoint);
        auto it = trie[at].children.find(cp);
        if (it == trie[at].children.end()) {
          trie.emplace_back();
          it = trie[at].children.emplace(cp, trie.size() - 1).first;
        }
        at = it->second;
      }
      trie[at].is_name = true;
    }
    const std::string prefix = name + "-key";
    std::vector<std::string> node_names(trie.size());
    for (std::size_t i = 0; i < trie.size(); ++i) node_names[i] = fresh_name(cat(prefix, "-", i));
    for (std::size_t i = 0; i < trie.size(); ++i) {
      std::vector<std::string> options;
      if (!trie[i].is_name) options.push_back("\"\\\"\"");  // the key ends here
      CharClass others;
      others.add(0x20, 0x21);
      others.add(0x23, 0x5B);
      others.add(0x5D, 0x7E);
      others.add(0x80, kMaxCodePoint);
      CharClass taken;
      for (const auto& [cp, child] : trie[i].children) {
        options.push_back(gbnf_text::literal(unicode::to_utf8(cp)) + " " + node_names[child]);
        taken.add(cp, cp);
      }
      CharClass leave;  // others minus taken
      const CharClass untaken = taken.complement();
      for (const auto& r : others.ranges()) {
        for (const auto& t : untaken.ranges()) {
          const std::uint32_t lo = std::max(r.first, t.first), hi = std::min(r.last, t.last);
          if (lo <= hi) leave.add(lo, hi);
        }
      }
      const std::string escape = "\"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})";
      options.push_back("( " + gbnf_text::char_class(leave) + " | " + escape +
                        " ) char-json* \"\\\"\"");
      std::string body;
      for (const std::string& o : options) body += (body.empty() ? "" : " | ") + o;
      store(node_names[i], std::move(body), path);
    }
    return "\"\\\"\" " + node_names[0];
  }

  // An object's listed properties, as its rules write them.
  struct ListedProperties {
    std::vector<std::string> names;    // every listed property: extra keys differ from them
    std::vector<std::string> keys;     // the ones that may be written, in order
    std::vector<std::string> members;  // "key" ws : ws value ws
    std::vector<bool> required;        // per key
    std::size_t required_count = 0;
    std::set<std::string> forbidden;  // listed with the schema false: never written
  };

  // `properties`: a member rule per property that may be written, in order.
  ListedProperties listed_properties(const Json& schema, const std::string& name,
                                     const std::string& path) {
    ListedProperties listed;
    if (!schema.contains("properties")) return listed;
    const Json& properties = schema["properties"];
    if (!properties.is_object()) refuse(path, "\"properties\" must be an object");
    for (const auto& [key, sub] : properties.items()) {
      listed.names.push_back(key);
      if (sub.is_boolean() && !sub.get<bool>()) {
        listed.forbidden.insert(key);
        continue;
      }
      listed.keys.push_back(key);
      const std::string value =
          visit(sub, cat(name, "-", segment(key)), cat(path, "/properties/", segment(key)));
      listed.members.push_back(gbnf_text::literal(Json(key).dump()) + " ws-json \":\" ws-json " +
                               value + " ws-json");
    }
    return listed;
  }

  // `required`: marks the listed properties that must be written.
  static void mark_required(const Json& schema, const std::string& path, ListedProperties& listed) {
    listed.required.assign(listed.keys.size(), false);
    if (!schema.contains("required")) return;
    const Json& list = schema["required"];
    if (!list.is_array()) refuse(path, "\"required\" must be an array");
    std::map<std::string_view, std::size_t> index;
    for (std::size_t i = 0; i < listed.keys.size(); ++i) index.emplace(listed.keys[i], i);
    for (const Json& r : list) {
      if (!r.is_string()) refuse(path, "\"required\" must hold strings");
      const auto it = index.find(r.get_ref<const std::string&>());
      if (it == index.end()) {
        refuse(path, cat("the required property \"", r.get<std::string>(),
                         listed.forbidden.contains(r.get<std::string>())
                             ? "\" has the schema false"
                             : "\" is not in \"properties\""));
      }
      if (!listed.required[it->second]) ++listed.required_count;
      listed.required[it->second] = true;
    }
  }

  // The members an object may have beside the listed ones: their value's rule (nullopt:
  // none may be written) and their key's (empty: any key but the listed ones).
  struct ExtraMembers {
    std::optional<std::string> value;
    std::string key;
  };

  // patternProperties: keys matching a pattern, valid under every pattern's schema (a key
  // matching two owes both); keys matching none would need the patterns' complement, so
  // nothing else may be written beside them.
  ExtraMembers pattern_members(const Json& schema, const std::vector<std::string>& names,
                               const std::string& name, const std::string& path) {
    const Json& list = schema["patternProperties"];
    if (!list.is_object()) refuse(path, "\"patternProperties\" must be an object");
    if (!names.empty()) refuse(path, "patternProperties together with properties is not supported");
    if (schema.contains("additionalProperties") && !(schema["additionalProperties"].is_boolean() &&
                                                     !schema["additionalProperties"].get<bool>())) {
      refuse(path, "patternProperties with additionalProperties other than false is not supported");
    }
    std::string key_body;
    std::vector<const Json*> values;
    for (const auto& [pattern, sub] : list.items()) {
      std::string body;
      try {
        body = pattern_to_gbnf(pattern, "char-json");
      } catch (const Error& error) {
        fail(error.what(), " (at ", shown_path(path + "/patternProperties"), ")");
      }
      key_body += (key_body.empty() ? "" : " | ") + ("( " + body + " )");
      values.push_back(&sub);
    }
    const Json value = conjunction(values, path + "/patternProperties");
    ExtraMembers extra;
    extra.value = visit(value, name + "-pattern", path + "/patternProperties");
    extra.key = add_rule(name + "-pattern-key", "\"\\\"\" ( " + key_body + " ) \"\\\"\"");
    return extra;
  }

  // Extra members: patternProperties, or additionalProperties; absent means none when
  // properties are listed, any otherwise.
  ExtraMembers extra_members(const Json& schema, const std::vector<std::string>& names,
                             const std::string& name, const std::string& path) {
    const bool patterns =
        schema.contains("patternProperties") &&
        !(schema["patternProperties"].is_object() && schema["patternProperties"].empty());
    if (patterns) return pattern_members(schema, names, name, path);
    ExtraMembers extra;
    if (schema.contains("additionalProperties")) {
      const Json& additional = schema["additionalProperties"];
      if (!(additional.is_boolean() && !additional.get<bool>())) {
        extra.value = visit(additional, name + "-extra", path + "/additionalProperties");
      }
    } else if (names.empty()) {
      extra.value = "value-json";
    }
    return extra;
  }

  // The rule for one extra member ("key" ws : ws value ws); empty when none may be written.
  std::string extra_member_rule(const ExtraMembers& extra, const std::vector<std::string>& names,
                                const std::string& name, const std::string& path) {
    if (!extra.value) return "";
    std::string key = extra.key;
    if (key.empty())
      key = names.empty() ? std::string("string-json") : other_key(names, name, path);
    return add_rule(name + "-extra-kv",
                    key + " ws-json \":\" ws-json " + *extra.value + " ws-json");
  }

  // minProperties and maxProperties, refused where they contradict each other or what
  // may be written.
  struct PropertyCounts {
    std::uint64_t min = 0;
    std::optional<std::uint64_t> max;
  };
  static PropertyCounts property_counts(const Json& schema, const ListedProperties& listed,
                                        bool extras, const std::string& path) {
    PropertyCounts counts;
    counts.min = count(schema, "minProperties", path, 0);
    if (schema.contains("maxProperties")) counts.max = count(schema, "maxProperties", path, 0);
    if (counts.max && *counts.max < counts.min) {
      refuse(path, "maxProperties is below minProperties");
    }
    if (counts.max && *counts.max < listed.required_count) {
      refuse(path, "maxProperties is below the number of required properties");
    }
    if (!extras && counts.min > listed.keys.size()) {
      refuse(path, cat("minProperties is above the ", listed.keys.size(),
                       " properties that may be written (additionalProperties is false, or "
                       "absent beside properties, which writes only those listed)"));
    }
    return counts;
  }

  // An object whose members are not counted: the listed ones in order, then any number of
  // extra ones (if `extra_member` is not empty). Two rules per property, so that the
  // grammar grows linearly with the properties however many are optional (one nested
  // choice per optional property would grow with their square, and nest as deep as they
  // are many):
  //   after(i): members i.. once one was written, each with a leading comma;
  //   first(i): members i.. when none was written yet.
  std::string uncounted_object(const ListedProperties& listed, const std::string& extra_member,
                               const std::string& name, const std::string& path) {
    const bool extras = !extra_member.empty();
    const std::string extras_after = extras ? "( \",\" ws-json " + extra_member + " )*" : "";
    const std::size_t n = listed.keys.size();
    std::vector<std::string> after(n + 1), first(n + 1);
    after[n] = fresh_name(name + "-after-" + std::to_string(n));
    store(after[n], extras_after.empty() ? "\"\"" : extras_after, path);
    first[n] = fresh_name(name + "-first-" + std::to_string(n));
    store(first[n], extras ? "( " + extra_member + " " + extras_after + " )?" : std::string("\"\""),
          path);
    for (std::size_t i = n; i-- > 0;) {
      after[i] = fresh_name(name + "-after-" + std::to_string(i));
      first[i] = fresh_name(name + "-first-" + std::to_string(i));
      const std::string written = "\",\" ws-json " + listed.members[i] + " " + after[i + 1];
      store(after[i], listed.required[i] ? written : written + " | " + after[i + 1], path);
      const std::string take = listed.members[i] + " " + after[i + 1];
      store(first[i], listed.required[i] ? take : take + " | " + first[i + 1], path);
    }
    return add_rule(name, "\"{\" ws-json " + first[0] + " \"}\"");
  }

  std::string object_rule(const Json& schema, const std::string& name, const std::string& path) {
    ListedProperties listed = listed_properties(schema, name, path);
    mark_required(schema, path, listed);
    const ExtraMembers extra = extra_members(schema, listed.names, name, path);
    const std::string extra_member = extra_member_rule(extra, listed.names, name, path);
    // minProperties/maxProperties: counted only where they can bind.
    const PropertyCounts counts = property_counts(schema, listed, extra.value.has_value(), path);
    const bool counted = counts.min > listed.required_count ||
                         (counts.max && (extra.value || *counts.max < listed.keys.size()));
    if (counted) {
      return counted_object(listed.members, listed.required, extra_member, counts.min, counts.max,
                            name, path);
    }
    return uncounted_object(listed, extra_member, name, path);
  }

  // An object whose members are counted (minProperties, maxProperties): one rule per
  // property and count written so far, the count kept up to maxProperties (or, without
  // one, up to minProperties: more is as good). Listed members first, in order, then the
  // extra ones, as many as the count still allows.
  std::string counted_object(const std::vector<std::string>& members,
                             const std::vector<bool>& required, const std::string& extra_member,
                             std::uint64_t min_count, std::optional<std::uint64_t> max_count,
                             const std::string& name, const std::string& path) {
    const std::size_t n = members.size();
    const std::uint64_t cap = max_count ? *max_count : min_count;
    std::size_t states = 0;
    for (std::size_t i = 0; i <= n; ++i) states += std::min<std::uint64_t>(i, cap) + 1;
    if (states > kMaxCountedObjectStates) {
      refuse(path, cat("minProperties/maxProperties over ", n, " properties would need more than ",
                       kMaxCountedObjectStates, " rules (one per property and count)"));
    }
    // state[c]: the rule for members i.. after c were written (nullopt: no way to finish).
    std::vector<std::optional<std::string>> state, next;
    const auto saturated = [&](std::uint64_t c) { return max_count ? c : std::min(c, min_count); };
    for (std::size_t i = n + 1; i-- > 0;) {
      state.assign(std::min<std::uint64_t>(i, cap) + 1, std::nullopt);
      for (std::uint64_t c = 0; c < state.size(); ++c) {
        std::string body;
        if (i == n) {
          const std::uint64_t at_least = min_count > c ? min_count - c : 0;
          const std::optional<std::uint64_t> at_most =
              max_count ? std::optional(*max_count - c) : std::nullopt;
          if (extra_member.empty()) {
            if (at_least > 0) continue;
            body = "\"\"";
          } else if (at_most && *at_most == 0) {
            body = "\"\"";
          } else if (c == 0) {
            const std::string more = repetition(
                "( \",\" ws-json " + extra_member + " )", at_least == 0 ? 0 : at_least - 1,
                at_most ? std::optional(*at_most - 1) : std::nullopt);
            const std::string some = extra_member + (more.empty() ? "" : " " + more);
            body = at_least == 0 ? "( " + some + " )?" : some;
          } else {
            const std::string more =
                repetition("( \",\" ws-json " + extra_member + " )", at_least, at_most);
            body = more.empty() ? "\"\"" : more;
          }
        } else {
          if (!max_count || c + 1 <= *max_count) {
            if (const auto& then = next[saturated(c + 1)]) {
              body = (c == 0 ? "" : "\",\" ws-json ") + members[i] + " " + *then;
            }
          }
          if (!required[i] && next[c]) body += (body.empty() ? "" : " | ") + *next[c];
          if (body.empty()) continue;
        }
        state[c] = add_rule(cat(name, "-count-", i, "-", c), body);
      }
      std::swap(state, next);
    }
    if (!next[0]) {
      refuse(path, "no object within minProperties/maxProperties fits the other keywords");
    }
    return add_rule(name, "\"{\" ws-json " + *next[0] + " \"}\"");
  }

  const Json& root_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> by_body_;
  std::map<std::string, std::string> refs_;
  std::set<std::string> reserved_;
  std::map<std::string, std::size_t> next_suffix_;
  std::size_t depth_ = 0;
  std::size_t visits_ = 0;
  std::size_t grammar_bytes_ = 0;
  std::size_t copied_nodes_ = 0;
  std::map<std::string, std::string> merged_rules_;  // merged schema's text -> its rule
};

}  // namespace detail

// GBNF text for a parsed `schema`; throws smol::Error naming an unsupported keyword and
// where. (Not an overload of the text version: a string converts to a json implicitly.)
inline std::string json_schema_value_to_gbnf(const nlohmann::ordered_json& schema) {
  return detail::JsonSchemaToGbnf(schema).convert();
}

// From schema text; invalid JSON is a smol::Error too.
inline std::string json_schema_to_gbnf(std::string_view schema_text) {
  if (const auto at = json_nesting_beyond(schema_text, detail::kMaxSchemaJsonDepth)) {
    fail("JSON schema: nested more than ", detail::kMaxSchemaJsonDepth, " levels deep (at byte ",
         *at, ")");
  }
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(schema_text);
  } catch (const nlohmann::json::exception& e) {
    fail("JSON schema: not valid JSON: ", e.what());
  }
  return json_schema_value_to_gbnf(schema);
}

inline std::shared_ptr<const Grammar> json_schema_grammar(std::string_view schema_text,
                                                          const GrammarLimits& limits = {}) {
  return parse_gbnf(json_schema_to_gbnf(schema_text), {.limits = limits, .generated = true});
}

// Any JSON object (response_format {"type": "json_object"}).
inline std::string json_object_gbnf() {
  return "root ::= object-json\n" + std::string(detail::kJsonPrimitives);
}

}  // namespace smol
