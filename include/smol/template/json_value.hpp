// JSON text to a template value, as Python's json.loads reads it: objects keep their
// key order, integers stay int and numbers with a fraction or exponent become float.
//
// A chat template receives the tools and each tool call's arguments as objects (llama-
// server parses the arguments string before rendering, and transformers is given
// dicts), while smol's conversation holds them as the JSON text the client sent. The
// library proper does not link a JSON library (only smol::serve does), and this reader
// is small, so it is written here; it refuses what json.loads refuses and nests at most
// kMaxJsonDepth levels.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include "smol/template/jinja_value.hpp"
#include "smol/text/unicode.hpp"

namespace smol::jinja {

inline constexpr int kMaxJsonDepth = 256;

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  Value read() {
    Value value = parse(0);
    skip_space();
    if (at_ != text_.size()) error("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void error(const std::string& message) const {
    fail("JSON at byte ", at_, ": ", message);
  }

  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }

  bool take(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  Value parse(int depth) {
    if (depth > kMaxJsonDepth) error(cat("nests deeper than ", kMaxJsonDepth, " levels"));
    skip_space();
    if (at_ >= text_.size()) error("a value is missing");
    const char c = text_[at_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value(string());
    if (take("true")) return true;
    if (take("false")) return false;
    if (take("null")) return None{};
    if (take("NaN")) return std::numeric_limits<double>::quiet_NaN();  // as json.loads
    if (take("Infinity")) return std::numeric_limits<double>::infinity();
    if (take("-Infinity")) return -std::numeric_limits<double>::infinity();
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    error(cat("unexpected character '", c, "'"));
  }

  Value object(int depth) {
    ++at_;
    Dict dict;
    std::unordered_map<std::string, std::size_t> index;
    skip_space();
    if (take("}")) return dict;
    while (true) {
      skip_space();
      if (at_ >= text_.size() || text_[at_] != '"') error("an object key must be a string");
      std::string key = string();
      skip_space();
      if (!take(":")) error("expected ':' after an object key");
      // A repeated key keeps its first place and its last value, as Python's dict. The
      // index makes a client's object of many keys linear to read, not quadratic.
      const auto [at, fresh] = index.try_emplace(key, dict.size());
      if (fresh) {
        dict.append(std::move(key), parse(depth + 1));
      } else {
        dict.replace_at(at->second, parse(depth + 1));
      }
      skip_space();
      if (take("}")) return dict;
      if (!take(",")) error("expected ',' or '}' in an object");
    }
  }

  Value array(int depth) {
    ++at_;
    List list;
    skip_space();
    if (take("]")) return list;
    while (true) {
      list.push_back(parse(depth + 1));
      skip_space();
      if (take("]")) return list;
      if (!take(",")) error("expected ',' or ']' in an array");
    }
  }

  Value number() {
    const std::size_t begin = at_;
    if (text_[at_] == '-') ++at_;
    const auto digits = [&] {
      const std::size_t start = at_;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
      return at_ - start;
    };
    const std::size_t int_start = at_;
    if (digits() == 0) error("a number needs digits");
    if (text_[int_start] == '0' && at_ - int_start > 1) error("a number may not start with 0");
    bool is_float = false;
    if (at_ < text_.size() && text_[at_] == '.') {
      ++at_;
      if (digits() == 0) error("a number needs digits after '.'");
      is_float = true;
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      ++at_;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      if (digits() == 0) error("a number needs digits in its exponent");
      is_float = true;
    }
    const std::string_view spelled = text_.substr(begin, at_ - begin);
    if (!is_float) {
      std::int64_t value = 0;
      const auto [end, status] =
          std::from_chars(spelled.data(), spelled.data() + spelled.size(), value);
      if (status == std::errc() && end == spelled.data() + spelled.size()) return value;
      // Python's int has no bound; smol's are 64-bit, so a larger one is read as float.
    }
    return std::strtod(std::string(spelled).c_str(), nullptr);
  }

  unsigned hex4() {
    if (at_ + 4 > text_.size()) error("a \\u escape needs four hex digits");
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[at_++];
      value <<= 4;
      if (h >= '0' && h <= '9') {
        value |= static_cast<unsigned>(h - '0');
      } else if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') {
        value |= static_cast<unsigned>((h | 0x20) - 'a' + 10);
      } else {
        error("a \\u escape needs four hex digits");
      }
    }
    return value;
  }

  std::string string() {
    ++at_;  // the opening quote
    std::string out;
    while (true) {
      if (at_ >= text_.size()) error("a string is never closed");
      const char c = text_[at_];
      if (c == '"') {
        ++at_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) error("a control character inside a string");
      if (c != '\\') {
        const auto decoded = unicode::decode_utf8(text_, at_);
        if (decoded.status != unicode::Utf8Status::valid) error("invalid UTF-8 in a string");
        out.append(text_.substr(at_, decoded.length));
        at_ += decoded.length;
        continue;
      }
      if (++at_ >= text_.size()) error("a string is never closed");
      const char e = text_[at_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          char32_t code = hex4();
          if (code >= 0xD800 && code <= 0xDBFF && text_.substr(at_, 2) == "\\u") {
            const std::size_t saved = at_;
            at_ += 2;
            const unsigned low = hex4();
            if (low >= 0xDC00 && low <= 0xDFFF) {
              code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            } else {
              at_ = saved;
            }
          }
          // A lone surrogate (which Python keeps) cannot be UTF-8: U+FFFD stands in.
          if (code >= 0xD800 && code <= 0xDFFF) code = unicode::kReplacementCharacter;
          unicode::append_utf8(out, code);
          break;
        }
        default:
          error(cat("unknown escape '\\", e, "' in a string"));
      }
    }
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

inline Value parse_json(std::string_view text) {
  return JsonReader(text).read();
}

}  // namespace smol::jinja
