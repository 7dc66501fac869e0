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
//   enforced), $ref to "#", "#/$defs/..." or "#/definitions/..." (recursion allowed),
//   object: properties (in order), required, additionalProperties false / true / schema;
//   array: items, minItems, maxItems; string: minLength, maxLength, pattern (see
//   json_pattern.hpp), format date, time, date-time, uuid, email; number, integer,
//   boolean, null. Annotations (title, description, default, examples, $schema, $id,
//   $comment, deprecated, readOnly, writeOnly) change nothing.
// Any other keyword is refused by name (smol::Error), never ignored: a constraint that
// silently did not apply would let through output that the caller's validator rejects.
//
// Choices where JSON Schema leaves room (each output the grammar allows validates):
//  - additionalProperties absent: with `properties`, only the listed properties are
//    written (OpenAI's strict mode requires false anyway); without, any object.
//  - Whitespace: between tokens, nothing, one space, or one newline and up to 20 spaces
//    or tabs (llama.cpp's choice): pretty-printed output fits, and the model cannot run
//    on in whitespace forever. None before the first or after the last character.
//  - Numbers: at most 16 integer digits, 16 fraction digits and 2 exponent digits (a double holds
//  them), so
//    "0.33333..." cannot run forever either; integers are "-"? and 1 to 16 digits.
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
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/core/json_nesting.hpp"
#include "smol/grammar/gbnf.hpp"
#include "smol/grammar/gbnf_text.hpp"
#include "smol/grammar/grammar.hpp"
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
    static const std::set<std::string> kKnown = {
        "type",      "properties", "required", "additionalProperties",
        "items",     "minItems",   "maxItems", "enum",
        "const",     "anyOf",      "oneOf",    "$ref",
        "minLength", "maxLength",  "format",   "pattern"};
    for (const auto& [key, value] : schema.items()) {
      if (!is_annotation(key) && !kKnown.contains(key)) {
        refuse(path, cat("the keyword \"", key, "\" is not supported"));
      }
    }
    const auto only = [&](const char* keyword) {
      for (const auto& [key, value] : schema.items()) {
        if (key != keyword && !is_annotation(key)) {
          refuse(path, cat("\"", keyword, "\" together with \"", key, "\" is not supported"));
        }
      }
    };
    if (schema.contains("$ref")) {
      only("$ref");
      return reference(schema["$ref"], path);
    }
    if (schema.contains("const") || schema.contains("enum")) {
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
    for (const char* combinator : {"anyOf", "oneOf"}) {
      if (!schema.contains(combinator)) continue;
      only(combinator);
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
    if (schema.contains("type")) {
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
    if (schema.contains("properties") || schema.contains("additionalProperties") ||
        schema.contains("required")) {
      return visit_type("object", schema, name, path);
    }
    if (schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems")) {
      return visit_type("array", schema, name, path);
    }
    if (schema.contains("minLength") || schema.contains("maxLength") ||
        schema.contains("pattern") || schema.contains("format")) {
      return visit_type("string", schema, name, path);
    }
    return "value-json";
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
      return value.is_number_integer() ||
             (value.is_number_float() &&
              value.get<double>() ==
                  static_cast<double>(static_cast<std::int64_t>(value.get<double>())));
    }
    if (t == "boolean") return value.is_boolean();
    if (t == "null") return value.is_null();
    if (t == "object") return value.is_object();
    if (t == "array") return value.is_array();
    return false;
  }

  std::string reference(const Json& ref, const std::string& path) {
    if (!ref.is_string()) refuse(path, "\"$ref\" must be a string");
    const auto target = ref.get<std::string>();
    if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target != "#" && !target.starts_with("#/")) {
      refuse(path, cat("\"$ref\": \"", target, "\" is not a local reference (#/...)"));
    }
    const Json* node = &root_;
    if (target != "#") {
      try {
        node = &root_.at(Json::json_pointer(target.substr(1)));
      } catch (const nlohmann::json::exception&) {
        refuse(path, cat("\"$ref\": \"", target, "\" points at nothing"));
      }
    }
    // Named before it is visited, so that a recursive reference finds it.
    const std::string hint = target == "#" ? "root-ref" : target.substr(target.rfind('/') + 1);
    const std::string name = fresh_name(hint);
    refs_[target] = name;
    store(name, visit(*node, name + "-body", target), target);
    return name;
  }

  std::string visit_type(const std::string& type, const Json& schema, const std::string& name,
                         const std::string& path) {
    if (type == "string") return string_rule(schema, name, path);
    if (type == "number") return "number-json";
    if (type == "integer") return "integer-json";
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
    const std::string item = schema.contains("items")
                                 ? visit(schema["items"], name + "-item", path + "/items")
                                 : std::string("value-json");
    const std::uint64_t min = count(schema, "minItems", path, 0);
    std::optional<std::uint64_t> max;
    if (schema.contains("maxItems")) max = count(schema, "maxItems", path, 0);
    if (max && *max < min) refuse(path, "maxItems is below minItems");
    if (max && *max == 0) return add_rule(name, "\"[\" ws-json \"]\"");
    const std::string element = item + " ws-json";
    const std::string more = repetition("( \",\" ws-json " + element + " )", min == 0 ? 0 : min - 1,
                                        max ? std::optional(*max - 1) : std::nullopt);
    std::string items = element + (more.empty() ? "" : " " + more);
    if (min == 0) items = "( " + items + " )?";
    return add_rule(name, "\"[\" ws-json " + items + " \"]\"");
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

  std::string object_rule(const Json& schema, const std::string& name, const std::string& path) {
    std::vector<std::string> keys;
    std::vector<std::string> members;  // "key" ws : ws value ws
    std::vector<bool> required;
    if (schema.contains("properties")) {
      const Json& properties = schema["properties"];
      if (!properties.is_object()) refuse(path, "\"properties\" must be an object");
      for (const auto& [key, sub] : properties.items()) {
        keys.push_back(key);
        const std::string value =
            visit(sub, cat(name, "-", segment(key)), cat(path, "/properties/", segment(key)));
        members.push_back(gbnf_text::literal(Json(key).dump()) + " ws-json \":\" ws-json " + value +
                          " ws-json");
      }
    }
    required.assign(keys.size(), false);
    if (schema.contains("required")) {
      const Json& list = schema["required"];
      if (!list.is_array()) refuse(path, "\"required\" must be an array");
      std::map<std::string_view, std::size_t> index;
      for (std::size_t i = 0; i < keys.size(); ++i) index.emplace(keys[i], i);
      for (const Json& r : list) {
        if (!r.is_string()) refuse(path, "\"required\" must hold strings");
        const auto it = index.find(r.get_ref<const std::string&>());
        if (it == index.end()) {
          refuse(path, cat("the required property \"", r.get<std::string>(),
                           "\" is not in \"properties\""));
        }
        required[it->second] = true;
      }
    }
    // Extra members: absent means none when properties are listed, any otherwise.
    std::optional<std::string> extra_value;
    if (schema.contains("additionalProperties")) {
      const Json& extra = schema["additionalProperties"];
      if (!(extra.is_boolean() && !extra.get<bool>())) {
        extra_value = visit(extra, name + "-extra", path + "/additionalProperties");
      }
    } else if (keys.empty()) {
      extra_value = "value-json";
    }
    std::string extras_after;  // more extra members after at least one member
    std::string extra_member;
    if (extra_value) {
      const std::string key =
          keys.empty() ? std::string("string-json") : other_key(keys, name, path);
      extra_member =
          add_rule(name + "-extra-kv", key + " ws-json \":\" ws-json " + *extra_value + " ws-json");
      extras_after = "( \",\" ws-json " + extra_member + " )*";
    }
    // Two rules per property, so that the grammar grows linearly with the properties
    // however many are optional (one nested choice per optional property would grow
    // with their square, and nest as deep as they are many):
    //   after(i): members i.. once one was written, each with a leading comma;
    //   first(i): members i.. when none was written yet.
    const std::size_t n = keys.size();
    std::vector<std::string> after(n + 1), first(n + 1);
    after[n] = fresh_name(name + "-after-" + std::to_string(n));
    store(after[n], extras_after.empty() ? "\"\"" : extras_after, path);
    first[n] = fresh_name(name + "-first-" + std::to_string(n));
    store(first[n],
          extra_value ? "( " + extra_member + " " + extras_after + " )?" : std::string("\"\""),
          path);
    for (std::size_t i = n; i-- > 0;) {
      after[i] = fresh_name(name + "-after-" + std::to_string(i));
      first[i] = fresh_name(name + "-first-" + std::to_string(i));
      const std::string written = "\",\" ws-json " + members[i] + " " + after[i + 1];
      store(after[i], required[i] ? written : written + " | " + after[i + 1], path);
      const std::string take = members[i] + " " + after[i + 1];
      store(first[i], required[i] ? take : take + " | " + first[i + 1], path);
    }
    return add_rule(name, "\"{\" ws-json " + first[0] + " \"}\"");
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
