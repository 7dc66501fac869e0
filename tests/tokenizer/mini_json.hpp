// A small JSON reader for the tokenizer tests (goldens, tokenizer.json).
//
// The tests read a handful of trusted files, so a ~150-line recursive-descent
// parser is enough; a JSON library would be one more dependency just for tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/unicode.hpp"

namespace mini_json {

struct Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // keeps file order

struct Value {
  std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>>
      data;

  bool is_null() const { return std::holds_alternative<std::nullptr_t>(data); }
  bool is_string() const { return std::holds_alternative<std::string>(data); }
  bool is_array() const { return std::holds_alternative<std::shared_ptr<Array>>(data); }
  bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(data); }
  double number() const { return std::get<double>(data); }
  bool boolean() const { return std::get<bool>(data); }
  const std::string& string() const { return std::get<std::string>(data); }
  const Array& array() const { return *std::get<std::shared_ptr<Array>>(data); }
  const Object& object() const { return *std::get<std::shared_ptr<Object>>(data); }

  const Value* find(std::string_view key) const {
    for (const auto& [name, value] : object()) {
      if (name == key) return &value;
    }
    return nullptr;
  }
  const Value& operator[](std::string_view key) const {
    const Value* value = find(key);
    if (value == nullptr) smol::fail("json: no key \"", key, "\"");
    return *value;
  }
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Value parse_document() {
    Value value = parse_value();
    skip_space();
    if (pos_ != text_.size()) error("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    smol::fail("json: ", what, " at byte ", pos_);
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  char peek() {
    skip_space();
    if (pos_ >= text_.size()) error("unexpected end");
    return text_[pos_];
  }
  void expect(char c) {
    if (peek() != c) error(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value parse_value() {
    const char c = peek();
    if (c == '{') return parse_object();
    if (c == '[') return parse_array();
    if (c == '"') return Value{parse_string()};
    if (consume_word("true")) return Value{true};
    if (consume_word("false")) return Value{false};
    if (consume_word("null")) return Value{nullptr};
    return Value{parse_number()};
  }

  Value parse_object() {
    expect('{');
    auto object = std::make_shared<Object>();
    if (peek() == '}') {
      ++pos_;
      return Value{object};
    }
    while (true) {
      if (peek() != '"') error("expected a key");
      std::string key = parse_string();
      expect(':');
      object->emplace_back(std::move(key), parse_value());
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return Value{object};
    }
  }

  Value parse_array() {
    expect('[');
    auto array = std::make_shared<Array>();
    if (peek() == ']') {
      ++pos_;
      return Value{array};
    }
    while (true) {
      array->push_back(parse_value());
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return Value{array};
    }
  }

  double parse_number() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           std::string_view("+-0123456789.eE").find(text_[pos_]) != std::string_view::npos) {
      ++pos_;
    }
    if (start == pos_) error("unexpected character");
    return std::stod(std::string(text_.substr(start, pos_ - start)));
  }

  unsigned parse_hex4() {
    if (pos_ + 4 > text_.size()) error("short \\u escape");
    const unsigned value = std::stoul(std::string(text_.substr(pos_, 4)), nullptr, 16);
    pos_ += 4;
    return value;
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) error("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) error("unterminated escape");
      const char escape = text_[pos_++];
      switch (escape) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          char32_t codepoint = parse_hex4();
          if (codepoint >= 0xD800 && codepoint < 0xDC00 && consume_word("\\u")) {
            const unsigned low = parse_hex4();
            codepoint = 0x10000 + ((codepoint - 0xD800) << 10) + (low - 0xDC00);
          }
          smol::unicode::append_utf8(out, codepoint);
          break;
        }
        default:
          out += escape;
          break;  // \" \\ \/
      }
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

// `text` as a JSON string literal, for readable failure messages.
inline std::string quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", byte);
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

inline Value parse(std::string_view text) {
  return Parser(text).parse_document();
}

inline Value parse_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) smol::fail("json: cannot open ", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse(buffer.str());
}

}  // namespace mini_json
