// libFuzzer target, structure-aware: the input is not the text but a recipe for it. Byte
// by byte it picks what to build, so the fuzzer reaches the shapes that hurt (nesting
// thousands deep, repetitions of repetitions, thousands of properties) in a few bytes,
// where mutating text would need luck:
//   byte 0 % 3 == 0  a request body nested deep (arrays and objects, in the messages or in
//                    a schema), through the OpenAI parser: a request or a 400;
//   byte 0 % 3 == 1  a JSON schema (objects with many properties, anyOf, arrays, patterns
//                    with nested counted repetition, $ref, allOf over choices, members
//                    counted by maxProperties, integers with bounds and multipleOf),
//                    converted and compiled;
//   byte 0 % 3 == 2  GBNF with nested groups and counted repetitions, compiled.
// Compiling means TokenMaskTable::compile over the fixture's vocabulary, under budgets
// (a smaller step budget than the server's, so that each input stays fast under the
// sanitizers); any smol::Error is an answer, anything else (a crash, another exception,
// a hang past -timeout, memory past -rss_limit_mb) is a failure.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "smol/core/error.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/grammar/gbnf.hpp"
#include "smol/grammar/json_schema.hpp"
#include "smol/grammar/token_mask_table.hpp"
#include "smol/grammar/token_trie.hpp"
#include "smol/serve/openai_protocol.hpp"
#include "smol/text/gguf_vocabulary.hpp"

namespace {

const std::shared_ptr<const smol::TokenTrie>& vocabulary() {
  static const auto trie = std::make_shared<const smol::TokenTrie>(
      smol::Tokenizer(smol::load_vocabulary(smol::gguf::GgufFile::open(
          std::string(SMOL_FIXTURES_DIR) + "/tiny-smollm3-a.q4_k_m.gguf"))));
  return trie;
}

constexpr smol::GrammarLimits kLimits{
    .max_step_work = 200'000, .max_table_bytes = std::size_t{64} << 20, .compile_seconds = 5};

// The recipe: bytes read one at a time, zeros once they run out.
class Recipe {
 public:
  Recipe(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  bool more() const { return at_ < size_; }
  // A count up to about `max`, large ones as likely as small ones.
  std::size_t count(std::size_t max) {
    const std::uint8_t b = byte();
    const std::size_t n = b < 128 ? b % 8 : (std::size_t{b} * byte() * 37) % (max + 1);
    return n > max ? max : n;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

void compile(const std::shared_ptr<const smol::Grammar>& grammar) {
  smol::TokenMaskTable::compile(grammar, vocabulary(), kLimits);
}

// A body whose nesting the recipe chooses, deeper than any limit when it likes.
std::string deep_body(Recipe& r) {
  const std::size_t depth = r.count(20'000);
  std::string inside;
  for (std::size_t i = 0; i < depth; ++i) inside += r.byte() % 2 ? "[" : "{\"k\":";
  inside += "1";
  for (std::size_t i = depth; i-- > 0;) inside += inside[i] == '[' ? "]" : "}";
  // The depth goes into the messages, or into a schema.
  if (r.byte() % 2) {
    return R"({"messages": [{"role": "user", "content": "x", "extra": )" + inside + "}]}";
  }
  return R"({"messages": [{"role": "user", "content": "x"}], "json_schema": )" + inside + "}";
}

// A regex with nested counted repetition (JSON Schema's `pattern`).
std::string pattern(Recipe& r) {
  std::string p = "a";
  const std::size_t levels = r.count(60);
  for (std::size_t i = 0; i < levels && r.more(); ++i) {
    switch (r.byte() % 4) {
      case 0:
        p = "(" + p + "){0," + std::to_string(r.count(2000)) + "}";
        break;
      case 1:
        p = "(" + p + "?)";
        break;
      case 2:
        p = "(" + p + "|b)" + (r.byte() % 2 ? "*" : "+");
        break;
      default:
        p = "[a-c]" + p;
        break;
    }
  }
  return (r.byte() % 2 ? "^" : "") + p + "$";
}

// A schema, built level by level (no recursion here either: the fuzzer's own stack).
std::string schema(Recipe& r) {
  std::string open, close;
  const std::size_t levels = r.count(200);
  for (std::size_t i = 0; i < levels && r.more(); ++i) {
    switch (r.byte() % 6) {
      case 0:
        open += R"({"anyOf": [{"type": "null"}, )";
        close = "]}" + close;
        break;
      case 1:
        open +=
            R"({"type": "array", "maxItems": )" + std::to_string(r.count(2000)) + R"(, "items": )";
        close = "}" + close;
        break;
      case 2: {
        std::string properties;
        const std::size_t n = r.count(5000);
        for (std::size_t k = 0; k < n; ++k) {
          properties += "\"p" + std::to_string(k) + R"(": {"type": "integer"}, )";
        }
        open += R"({"type": "object", "additionalProperties": )" +
                std::string(r.byte() % 2 ? "true" : "false") + R"(, "properties": {)" + properties +
                R"("last": )";
        close = "}}" + close;
        break;
      }
      case 3:
        open += R"({"$defs": {"d": {"type": "string"}}, "anyOf": [{"$ref": "#/$defs/d"}, )";
        close = "]}" + close;
        break;
      case 4:
        // allOf distributes over a choice: each level copies what is below it per option.
        open += R"({"allOf": [{"anyOf": [{"type": "null"}, {"minItems": 1}, {"maxLength": 3}]}, )";
        close = "]}" + close;
        break;
      default: {
        // Members counted by maxProperties: a rule per property and count.
        std::string properties;
        const std::size_t n = r.count(300);
        for (std::size_t k = 0; k < n; ++k) properties += "\"p" + std::to_string(k) + R"(": {}, )";
        open += R"({"type": "object", "additionalProperties": true, "maxProperties": )" +
                std::to_string(r.count(2000)) + R"(, "properties": {)" + properties + R"("last": )";
        close = "}}" + close;
        break;
      }
    }
  }
  std::string leaf;
  switch (r.byte() % 3) {
    case 0:
      leaf = R"({"type": "string", "pattern": )" + nlohmann::json(pattern(r)).dump() + "}";
      break;
    case 1:
      leaf = R"({"type": "string", "maxLength": )" + std::to_string(r.count(2000)) + "}";
      break;
    default:
      // Digit rules: bounds of any length, a modulus.
      leaf = R"({"type": "integer", "minimum": -)" + std::to_string(r.count(2000) * 1000003) +
             R"(, "exclusiveMaximum": )" + std::to_string(r.count(2000)) +
             std::string(r.count(17), '7') + R"(, "multipleOf": )" +
             std::to_string(r.count(2000) + 1) + "}";
      break;
  }
  return open + leaf + close;
}

// GBNF with groups nested and repeated as the recipe says.
std::string grammar(Recipe& r) {
  std::string body = "\"a\"";
  const std::size_t levels = r.count(250);
  for (std::size_t i = 0; i < levels && r.more(); ++i) {
    const std::size_t m = r.count(2000), n = m + r.count(2000);
    switch (r.byte() % 5) {
      case 0:
        body = "(" + body + "){" + std::to_string(m) + "," + std::to_string(n) + "}";
        break;
      case 1:
        body = "(" + body + ")" + (r.byte() % 2 ? "*" : "?");
        break;
      case 2:
        body = "(" + body + " | \"b\"" + ")";
        break;
      case 3:
        body = "(" + body + "){" + std::to_string(m) + "}";
        break;
      default:
        body = "[a-c] " + body;
        break;
    }
  }
  return "root ::= " + body + (r.byte() % 2 ? " [\\uD800-\\uDFFF]" : "") + "\n";
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vocabulary();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  Recipe recipe(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      try {
        smol::serve::parse_chat_request(deep_body(recipe));
      } catch (const smol::serve::ApiError& error) {
        if (error.status != 400) __builtin_trap();
      }
      return 0;
    case 1:
      try {
        compile(smol::json_schema_grammar(schema(recipe), kLimits));
      } catch (const smol::Error&) {
      }
      return 0;
    default:
      try {
        compile(smol::parse_gbnf(grammar(recipe), {.limits = kLimits}));
      } catch (const smol::Error&) {
      }
      return 0;
  }
}
