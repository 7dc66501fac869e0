// Structured output: the request fields that confine a reply to a language, read into one
// GBNF grammar (grammar/), or a 400 naming the field and the place in it at fault.
//
//   response_format {"type": "text"}                 free text (the default)
//   response_format {"type": "json_object"}          any JSON object (json_object_gbnf);
//                                                     with "schema" (llama-server's form),
//                                                     that schema
//   response_format {"type": "json_schema",
//                    "json_schema": {"name", "schema", "strict"}}   OpenAI's structured output
//   json_schema {...}                                llama-server: the schema itself
//   grammar "root ::= ..."                           llama-server: GBNF text
//
// At most one of them may constrain a request. A schema is always enforced, "strict" or
// not: every reply the grammar allows validates against it (json_schema.hpp), and a
// keyword the converter cannot enforce is refused rather than ignored.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "smol/core/error.hpp"
#include "smol/grammar/gbnf.hpp"
#include "smol/grammar/json_schema.hpp"
#include "smol/serve/api_error.hpp"

namespace smol::serve {

// The grammar a reply must follow.
struct OutputGrammar {
  std::string gbnf;                        // the text: keys the server's TokenMaskCache
  std::shared_ptr<const Grammar> grammar;  // parsed from it
  std::string param;                       // the request field it came from
};

namespace detail {

inline const Json* present(const Json& object, const char* name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// GBNF text parsed, its mistake (line, column) or its size over the budget a 400 naming
// `param`. `generated`: the text is a schema's, whose mistakes name rules instead.
inline OutputGrammar grammar_from_gbnf(std::string gbnf, const std::string& param,
                                       bool generated = false) {
  try {
    std::shared_ptr<const Grammar> grammar = parse_gbnf(gbnf, {.generated = generated});
    return {std::move(gbnf), std::move(grammar), param};
  } catch (const smol::Error& error) {
    throw invalid_request(param + ": " + error.what(), param);
  }
}

// A schema converted; a keyword it cannot enforce is a 400 naming `param` and, in the
// message, the keyword and its path in the schema.
inline OutputGrammar grammar_from_schema(const nlohmann::ordered_json& schema,
                                         const std::string& param) {
  if (!schema.is_object() && !schema.is_boolean()) {
    throw invalid_request(param + " must be a JSON schema (an object)", param);
  }
  std::string gbnf;
  try {
    gbnf = json_schema_value_to_gbnf(schema);
  } catch (const smol::Error& error) {
    throw invalid_request(param + ": " + error.what(), param);
  }
  return grammar_from_gbnf(std::move(gbnf), param, /*generated=*/true);
}

// The schema at `path` of the body, with its properties in the order the client wrote
// them: `body` (a std::map-based json) has sorted them, and the order of an object's
// properties is the order the model writes them in, which clients rely on.
template <class... Keys>
nlohmann::ordered_json ordered_schema(std::string_view body_text, const Keys&... path) {
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body_text);
  const nlohmann::ordered_json* at = &ordered;
  ((at = &at->at(path)), ...);
  return *at;
}

}  // namespace detail

// The grammar the request's fields ask for; nullopt: free text. `body` is the parsed
// request and `body_text` the text it came from (for the schema's property order).
inline std::optional<OutputGrammar> parse_output_grammar(const Json& body,
                                                         std::string_view body_text) {
  std::optional<OutputGrammar> output;
  const auto take = [&output](OutputGrammar grammar) {
    if (output) {
      throw invalid_request(
          grammar.param + " and " + output->param + " both constrain the reply: give one of them",
          grammar.param);
    }
    output = std::move(grammar);
  };

  if (const Json* format = detail::present(body, "response_format")) {
    const Json* type = format->is_object() ? detail::present(*format, "type") : nullptr;
    const std::string name = type != nullptr && type->is_string() ? type->get<std::string>() : "";
    if (name == "json_object") {
      take(detail::present(*format, "schema") != nullptr
               ? detail::grammar_from_schema(
                     detail::ordered_schema(body_text, "response_format", "schema"),
                     "response_format.schema")
               : detail::grammar_from_gbnf(json_object_gbnf(), "response_format",
                                           /*generated=*/true));
    } else if (name == "json_schema") {
      const Json* spec = detail::present(*format, "json_schema");
      if (spec == nullptr || !spec->is_object()) {
        throw invalid_request(
            "response_format.json_schema must be an object {\"name\", \"schema\", \"strict\"}",
            "response_format.json_schema");
      }
      if (const Json* n = detail::present(*spec, "name"); n != nullptr && !n->is_string()) {
        throw invalid_request("response_format.json_schema.name must be a string",
                              "response_format.json_schema.name");
      }
      if (const Json* s = detail::present(*spec, "strict"); s != nullptr && !s->is_boolean()) {
        throw invalid_request("response_format.json_schema.strict must be true or false",
                              "response_format.json_schema.strict");
      }
      // No schema: any JSON value (an empty schema accepts everything).
      take(detail::grammar_from_schema(
          detail::present(*spec, "schema") != nullptr
              ? detail::ordered_schema(body_text, "response_format", "json_schema", "schema")
              : nlohmann::ordered_json::object(),
          "response_format.json_schema.schema"));
    } else if (name != "text") {
      throw invalid_request(
          "response_format must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
          "{\"type\": \"json_schema\", \"json_schema\": {...}}",
          "response_format");
    }
  }
  if (detail::present(body, "json_schema") != nullptr) {
    take(detail::grammar_from_schema(detail::ordered_schema(body_text, "json_schema"),
                                     "json_schema"));
  }
  if (const Json* grammar = detail::present(body, "grammar")) {
    if (!grammar->is_string()) throw invalid_request("grammar must be GBNF text", "grammar");
    // An empty grammar is llama-server's "none".
    if (!grammar->get_ref<const std::string&>().empty()) {
      take(detail::grammar_from_gbnf(grammar->get<std::string>(), "grammar"));
    }
  }
  return output;
}

}  // namespace smol::serve
