// Jinja's lexer, with the whitespace rules transformers renders chat templates under.
//
// Hugging Face's apply_chat_template compiles templates with trim_blocks (the newline
// right after a block tag is dropped) and lstrip_blocks (spaces and tabs before a block
// tag on its own line are dropped), and jinja2 keeps no trailing newline. `{%-` and
// `-%}` strip all whitespace on their side; `{%+` keeps what lstrip_blocks would drop.
// The rules are applied here, while cutting the text between tags, so the parser sees
// the text exactly as it will be printed.
//
// Inside a tag the lexer makes Python-like tokens: names, string literals (with Python's
// escapes), integers, floats and operators. Brackets are counted so that `}}` inside a
// dict literal does not end a `{{ ... }}`.
#pragma once

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "smol/template/jinja_value.hpp"

namespace smol::jinja {

struct Token {
  enum class Type {
    text,            // template text to print as it is
    variable_begin,  // {{
    variable_end,    // }}
    block_begin,     // {%
    block_end,       // %}
    name,
    string,  // `text` holds the decoded value
    integer,
    floating,
    op,  // an operator or bracket; `text` spells it
    end,
  };
  Type type;
  std::string text;
  std::size_t offset;  // where in the source it starts
};

// Line and column of byte offsets, for error messages.
class LineIndex {
 public:
  explicit LineIndex(std::string_view source) : source_(source) {
    starts_.push_back(0);
    for (std::size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\n') starts_.push_back(i + 1);
    }
  }
  SourceLocation locate(std::size_t offset) const {
    std::size_t line = 0;
    for (std::size_t lo = 0, hi = starts_.size(); lo < hi;) {
      const std::size_t mid = (lo + hi) / 2;
      if (starts_[mid] <= offset) {
        line = mid;
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const std::size_t begin = starts_[line];
    const std::size_t end = offset < source_.size() ? offset : source_.size();
    return {line + 1, python::length(source_.substr(begin, end - begin)) + 1};
  }

 private:
  std::string_view source_;
  std::vector<std::size_t> starts_;
};

// jinja2 reads a template with "\r\n", "\r" and "\n" as line breaks (only these: not
// Python's splitlines(), whose \v, \f, U+2028 ... stay text), each written "\n", and the
// final one dropped (keep_trailing_newline is off).
inline std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      out += '\n';
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's \s: str.isspace() code points (a run of them at `at`, its length in bytes).
inline std::size_t whitespace_run(std::string_view text, std::size_t at) {
  std::size_t end = at;
  while (end < text.size()) {
    const auto decoded = unicode::decode_utf8(text, end);
    if (!python::is_space(decoded.codepoint)) break;
    end += decoded.length;
  }
  return end - at;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LineIndex& lines) : source_(source), lines_(lines) {}

  std::vector<Token> tokens() {
    std::vector<Token> out;
    std::size_t at = 0;
    bool strip_next = false;  // the previous tag ended with "-"
    while (at <= source_.size()) {
      const std::size_t tag = find_tag(at);
      std::string_view text = source_.substr(at, tag - at);
      std::size_t text_begin = at;
      if (strip_next) {
        const std::size_t kept = text.size() - python::strip(text, python::StripSide::left).size();
        text.remove_prefix(kept);
        text_begin += kept;
        strip_next = false;
      }
      if (tag == source_.size()) {
        if (!text.empty()) out.push_back({Token::Type::text, std::string(text), text_begin});
        break;
      }
      const char kind = source_[tag + 1];  // '{', '%' or '#'
      const char marker = tag + 2 < source_.size() ? source_[tag + 2] : '\0';
      if (marker == '-') {
        text = text.substr(0, python::strip(text, python::StripSide::right).size());
      } else if (kind != '{' && marker != '+') {
        text = lstrip_block(text, text_begin);
      }
      if (!text.empty()) out.push_back({Token::Type::text, std::string(text), text_begin});
      std::size_t inside = tag + 2 + (marker == '-' || marker == '+');
      if (kind == '#') {
        const std::size_t close = source_.find("#}", inside);
        if (close == std::string_view::npos) fail_at(tag, "a comment {# is never closed");
        strip_next = close > inside && source_[close - 1] == '-';
        const bool keep = close > inside && source_[close - 1] == '+';  // +#}: no trim_blocks
        at = keep ? close + 2 : trim_block_newline(close + 2, strip_next);
        continue;
      }
      if (kind == '%' && is_raw(inside)) {
        at = raw_block(tag, inside, out, strip_next);
        continue;
      }
      out.push_back(
          {kind == '{' ? Token::Type::variable_begin : Token::Type::block_begin, "", tag});
      at = tag_tokens(inside, kind, out, strip_next);
    }
    out.push_back({Token::Type::end, "", source_.size()});
    return out;
  }

 private:
  [[noreturn]] void fail_at(std::size_t offset, const std::string& message) const {
    throw TemplateError(lines_.locate(offset), message);
  }

  std::size_t find_tag(std::size_t from) const {
    for (std::size_t i = source_.find('{', from); i != std::string_view::npos;
         i = source_.find('{', i + 1)) {
      if (i + 1 < source_.size() &&
          (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#')) {
        return i;
      }
    }
    return source_.size();
  }

  // lstrip_blocks: spaces and tabs between the start of a line and a block tag go.
  std::string_view lstrip_block(std::string_view text, std::size_t text_begin) const {
    const std::size_t newline = text.rfind('\n');
    const std::size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
    const bool at_line_start =
        newline != std::string_view::npos || text_begin == 0 || source_[text_begin - 1] == '\n';
    if (!at_line_start) return text;
    // Python's \s, so not only spaces and tabs: \f, \v, U+3000 ... go too.
    if (line_start + whitespace_run(text, line_start) != text.size()) return text;
    return text.substr(0, line_start);
  }

  // trim_blocks: one newline right after a block tag (or comment) goes.
  std::size_t trim_block_newline(std::size_t at, bool stripping) const {
    if (!stripping && at < source_.size() && source_[at] == '\n') return at + 1;
    return at;
  }

  // jinja2's raw_begin: {%[-+]\s*raw\s*(-%}|%}); `+%}` is no raw tag (and then fails as
  // an unknown statement).
  bool is_raw(std::size_t inside) const {
    std::size_t i = inside + whitespace_run(source_, inside);
    if (source_.substr(i, 3) != "raw") return false;
    i += 3;
    i += whitespace_run(source_, i);
    return source_.substr(i, 2) == "%}" || source_.substr(i, 3) == "-%}";
  }

  // {% raw %}...{% endraw %}: the text in between is printed as it is. jinja2 applies
  // no trim_blocks after {% raw %} (only `-%}` strips there), lstrip_blocks before
  // {% endraw %} (unless {%+ or {%-), and trim_blocks after it unless `+%}` or `-%}`.
  std::size_t raw_block(std::size_t tag, std::size_t inside, std::vector<Token>& out,
                        bool& strip_next) {
    const std::size_t open_end = source_.find("%}", inside);
    const bool strip_inside = source_[open_end - 1] == '-';
    const std::size_t body = open_end + 2;
    for (std::size_t close = source_.find("{%", body); close != std::string_view::npos;
         close = source_.find("{%", close + 2)) {
      std::size_t i = close + 2;
      const char marker = i < source_.size() ? source_[i] : '\0';
      if (marker == '-' || marker == '+') ++i;
      i += whitespace_run(source_, i);
      if (source_.substr(i, 6) != "endraw") continue;
      i += 6;
      i += whitespace_run(source_, i);
      const bool strip_after = source_.substr(i, 3) == "-%}";
      const bool keep_after = source_.substr(i, 3) == "+%}";
      if (strip_after || keep_after) ++i;
      if (source_.substr(i, 2) != "%}") continue;
      std::string_view content = source_.substr(body, close - body);
      std::size_t content_begin = body;
      if (strip_inside) {
        const std::size_t kept = whitespace_run(content, 0);
        content.remove_prefix(kept);
        content_begin += kept;
      }
      if (marker == '-') {
        content = content.substr(0, python::strip(content, python::StripSide::right).size());
      } else if (marker != '+') {
        content = lstrip_block(content, content_begin);
      }
      if (!content.empty()) out.push_back({Token::Type::text, std::string(content), body});
      strip_next = strip_after;
      return keep_after ? i + 2 : trim_block_newline(i + 2, strip_after);
    }
    fail_at(tag, "{% raw %} is never closed by {% endraw %}");
  }

  // The tokens of one {{ ... }} or {% ... %}, up to and including its end.
  std::size_t tag_tokens(std::size_t at, char kind, std::vector<Token>& out, bool& strip_next) {
    const char closer = kind == '{' ? '}' : '%';
    int brackets = 0;
    while (true) {
      at += whitespace_run(source_, at);
      if (at >= source_.size()) {
        fail_at(at, kind == '{' ? "a {{ is never closed by }}" : "a {% is never closed by %}");
      }
      const std::string_view rest = source_.substr(at);
      if (brackets == 0) {
        // `-%}` strips what follows; `+%}` keeps its newline (no trim_blocks); a
        // variable has no `+}}`.
        const bool dash = rest[0] == '-' && rest.size() > 2 && rest[1] == closer && rest[2] == '}';
        const bool plus =
            kind == '%' && rest[0] == '+' && rest.size() > 2 && rest[1] == closer && rest[2] == '}';
        if (dash || plus || (rest.size() > 1 && rest[0] == closer && rest[1] == '}')) {
          out.push_back({kind == '{' ? Token::Type::variable_end : Token::Type::block_end, "", at});
          const std::size_t after = at + ((dash || plus) ? 3 : 2);
          strip_next = dash;
          return kind == '%' && !plus ? trim_block_newline(after, dash) : after;
        }
      }
      const char c = rest[0];
      if (const std::size_t length = name_length(rest)) {
        out.push_back({Token::Type::name, std::string(rest.substr(0, length)), at});
        at += length;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        at = number(at, out);
      } else if (c == '\'' || c == '"') {
        at = string_literal(at, out);
      } else {
        static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string spelled;
        for (const std::string_view two : kTwo) {
          if (rest.starts_with(two)) spelled = two;
        }
        if (spelled.empty()) {
          if (std::string_view("+-*/%~()[]{},.:|=<>").find(c) == std::string_view::npos) {
            fail_at(at, cat("unexpected character '", c, "' in a tag"));
          }
          spelled = std::string(1, c);
          if (c == '(' || c == '[' || c == '{') ++brackets;
          if ((c == ')' || c == ']' || c == '}') && brackets > 0) --brackets;
        }
        out.push_back({Token::Type::op, spelled, at});
        at += spelled.size();
      }
    }
  }

  // A name: Python's identifiers (jinja2 takes Unicode ones), letters, digits and _
  // not starting with a digit. 0 when `text` does not start one.
  static std::size_t name_length(std::string_view text) {
    std::size_t end = 0;
    while (end < text.size()) {
      const auto decoded = unicode::decode_utf8(text, end);
      const char32_t c = decoded.codepoint;
      const bool digit = c >= '0' && c <= '9';
      const bool ok = c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0
                                            : unicode::is_letter(c) || unicode::is_number(c));
      if (!ok || (end == 0 && (digit || (c >= 0x80 && !unicode::is_letter(c))))) break;
      end += decoded.length;
    }
    return end;
  }

  // The end of a run of digits of `base` from `i` (each may have one _ before it, but
  // the run may not start with one); `i` when there is no digit there.
  std::size_t digits_end(std::size_t i, int base) const {
    const auto is_digit = [&](std::size_t k) {
      if (k >= source_.size()) return false;
      const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(source_[k])));
      if (base == 16) return std::isxdigit(static_cast<unsigned char>(c)) != 0;
      return c >= '0' && c < static_cast<char>('0' + base);
    };
    if (!is_digit(i)) return i;
    ++i;
    while (is_digit(i) || (i < source_.size() && source_[i] == '_' && is_digit(i + 1))) {
      i += source_[i] == '_' ? 2 : 1;
    }
    return i;
  }

  bool digit_at(std::size_t i) const {
    return i < source_.size() && std::isdigit(static_cast<unsigned char>(source_[i]));
  }

  std::string without_underscores(std::size_t begin, std::size_t end) const {
    std::string text;
    for (std::size_t i = begin; i < end; ++i) {
      if (source_[i] != '_') text += source_[i];
    }
    return text;
  }

  // The end of a float starting at `at`: digits, then a fraction, an exponent or both.
  // `at` when the digits there have neither (they are an integer).
  std::size_t float_end(std::size_t at) const {
    std::size_t end = digits_end(at, 10);
    bool fraction = false, exponent = false;
    if (end + 1 < source_.size() && source_[end] == '.' && digit_at(end + 1)) {
      end = digits_end(end + 1, 10);
      fraction = true;
    }
    if (end < source_.size() && (source_[end] == 'e' || source_[end] == 'E')) {
      std::size_t e = end + 1;
      if (e < source_.size() && (source_[e] == '+' || source_[e] == '-')) ++e;
      if (digit_at(e)) {
        end = digits_end(e, 10);
        exponent = true;
      }
    }
    return fraction || exponent ? end : at;
  }

  // The end of 0(_?0)* from the 0 at end - 1: the one decimal integer that may start
  // with 0.
  std::size_t zeros_end(std::size_t end) const {
    while (true) {
      if (end < source_.size() && source_[end] == '0') {
        ++end;
      } else if (end + 1 < source_.size() && source_[end] == '_' && source_[end + 1] == '0') {
        end += 2;
      } else {
        return end;
      }
    }
  }

  // An integer token's text: the value in decimal, or the digits as written when they
  // do not fit 64 bits (the parser reports that).
  static std::string integer_text(const std::string& digits, int base) {
    std::int64_t value = 0;
    bool fits = true;
    for (const char c : digits) {
      const int d = std::isdigit(static_cast<unsigned char>(c))
                        ? c - '0'
                        : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
      fits = fits && !__builtin_mul_overflow(value, base, &value) &&
             !__builtin_add_overflow(value, d, &value);
    }
    return fits ? std::to_string(value) : digits;
  }

  // Numbers as jinja2's lexer reads them. A float (not right after a '.': foo.0.1 is two
  // items): digits, then a fraction, an exponent or both. Else an integer: 0b, 0o or 0x
  // and digits of that base, or decimal digits not starting with 0 (a 0 followed by
  // digits is two numbers, as in jinja2). Each may have _ between digits.
  std::size_t number(std::size_t at, std::vector<Token>& out) {
    if (at == 0 || source_[at - 1] != '.') {
      const std::size_t end = float_end(at);
      if (end != at) {
        out.push_back({Token::Type::floating, without_underscores(at, end), at});
        return end;
      }
    }
    int base = 10;
    std::size_t begin = at, end = at + 1;
    const char prefix =
        at + 1 < source_.size()
            ? static_cast<char>(std::tolower(static_cast<unsigned char>(source_[at + 1])))
            : '\0';
    if (source_[at] == '0' && (prefix == 'b' || prefix == 'o' || prefix == 'x')) {
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
      std::size_t i = at + 2;
      if (i < source_.size() && source_[i] == '_') ++i;
      const std::size_t last = digits_end(i, base);
      if (last > i) {
        begin = at + 2;
        end = last;
      } else {
        base = 10;
      }
    }
    if (base == 10) end = source_[at] == '0' ? zeros_end(end) : digits_end(at, 10);
    out.push_back({Token::Type::integer, integer_text(without_underscores(begin, end), base), at});
    return end;
  }

  // \xhh, \uhhhh and \Uhhhhhhhh: a code point in that many hex digits, from `i`.
  void append_hex_escape(std::string& value, std::size_t& i, char e) const {
    const std::size_t count = e == 'x' ? 2 : e == 'u' ? 4 : 8;
    char32_t code = 0;
    for (std::size_t k = 0; k < count; ++k, ++i) {
      if (i >= source_.size() || !std::isxdigit(static_cast<unsigned char>(source_[i]))) {
        fail_at(i, cat("a \\", e, " escape needs ", count, " hex digits"));
      }
      const char h = source_[i];
      code = code * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                   ? h - '0'
                                                   : (h | 0x20) - 'a' + 10);
    }
    if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      fail_at(i, "a string escape names a code point that UTF-8 cannot hold");
    }
    unicode::append_utf8(value, code);
  }

  // \ooo: one to three octal digits, the first of them `e`, the rest from `i`.
  void append_octal_escape(std::string& value, std::size_t& i, char e) const {
    char32_t code = static_cast<char32_t>(e - '0');
    for (int k = 0; k < 2 && i < source_.size() && source_[i] >= '0' && source_[i] <= '7';
         ++k, ++i) {
      code = code * 8 + static_cast<char32_t>(source_[i] - '0');
    }
    unicode::append_utf8(value, code);
  }

  // What the escape \e stands for; `i` is just past `e` and moves past any digits.
  void append_escape(std::string& value, std::size_t& i, char e) const {
    switch (e) {
      case 'n':
        value += '\n';
        break;
      case 't':
        value += '\t';
        break;
      case 'r':
        value += '\r';
        break;
      case '\\':
        value += '\\';
        break;
      case '\'':
        value += '\'';
        break;
      case '"':
        value += '"';
        break;
      case 'a':
        value += '\a';
        break;
      case 'b':
        value += '\b';
        break;
      case 'f':
        value += '\f';
        break;
      case 'v':
        value += '\v';
        break;
      case '\n':
        break;  // a line continuation
      case 'x':
      case 'u':
      case 'U':
        append_hex_escape(value, i, e);
        break;
      default:
        if (e >= '0' && e <= '7') {
          append_octal_escape(value, i, e);
        } else {
          value += '\\';  // Python keeps an unknown escape as it is
          value += e;
        }
    }
  }

  // A string literal, its escapes decoded as Python's unicode-escape codec does.
  std::size_t string_literal(std::size_t at, std::vector<Token>& out) {
    const char quote = source_[at];
    std::string value;
    std::size_t i = at + 1;
    while (true) {
      if (i >= source_.size()) fail_at(at, "a string literal is never closed");
      const char c = source_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++i;
        continue;
      }
      if (i + 1 >= source_.size()) fail_at(at, "a string literal is never closed");
      const char e = source_[i + 1];
      i += 2;
      append_escape(value, i, e);
    }
    out.push_back({Token::Type::string, std::move(value), at});
    return i + 1;
  }

  std::string_view source_;
  const LineIndex& lines_;
};

}  // namespace smol::jinja
