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

// jinja2 reads a template as Python's splitlines() joined with "\n": every line break
// Python knows becomes "\n", and the final one goes (keep_trailing_newline is off).
inline std::string normalize_newlines(std::string_view source) {
  std::vector<std::string> lines = python::split_lines(source);
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) out += '\n';
    out += lines[i];
  }
  return out;
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
        at = trim_block_newline(close + 2, strip_next);
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
    for (std::size_t i = line_start; i < text.size(); ++i) {
      if (text[i] != ' ' && text[i] != '\t') return text;
    }
    return text.substr(0, line_start);
  }

  // trim_blocks: one newline right after a block tag (or comment) goes.
  std::size_t trim_block_newline(std::size_t at, bool stripping) const {
    if (!stripping && at < source_.size() && source_[at] == '\n') return at + 1;
    return at;
  }

  bool is_raw(std::size_t inside) const {
    std::size_t i = inside;
    while (i < source_.size() && (source_[i] == ' ' || source_[i] == '\t' || source_[i] == '\n'))
      ++i;
    if (source_.substr(i, 3) != "raw") return false;
    i += 3;
    while (i < source_.size() && (source_[i] == ' ' || source_[i] == '\t' || source_[i] == '\n'))
      ++i;
    return source_.substr(i, 2) == "%}" || source_.substr(i, 3) == "-%}" ||
           source_.substr(i, 3) == "+%}";
  }

  // {% raw %}...{% endraw %}: the text in between is printed as it is.
  std::size_t raw_block(std::size_t tag, std::size_t inside, std::vector<Token>& out,
                        bool& strip_next) {
    const std::size_t open_end = source_.find("%}", inside);
    const bool strip_inside = source_[open_end - 1] == '-';
    std::size_t body = trim_block_newline(open_end + 2, strip_inside);
    for (std::size_t close = source_.find("{%", body); close != std::string_view::npos;
         close = source_.find("{%", close + 2)) {
      std::size_t i = close + 2;
      const bool strip_before = i < source_.size() && source_[i] == '-';
      if (i < source_.size() && (source_[i] == '-' || source_[i] == '+')) ++i;
      while (i < source_.size() && (source_[i] == ' ' || source_[i] == '\t')) ++i;
      if (source_.substr(i, 6) != "endraw") continue;
      i += 6;
      while (i < source_.size() && (source_[i] == ' ' || source_[i] == '\t')) ++i;
      const bool strip_after = i < source_.size() && source_[i] == '-';
      if (strip_after || (i < source_.size() && source_[i] == '+')) ++i;
      if (source_.substr(i, 2) != "%}") continue;
      std::string content(source_.substr(body, close - body));
      if (strip_inside) content = python::strip(content, python::StripSide::left);
      if (strip_before) content = python::strip(content, python::StripSide::right);
      if (!content.empty()) out.push_back({Token::Type::text, std::move(content), body});
      strip_next = strip_after;
      return trim_block_newline(i + 2, strip_after);
    }
    fail_at(tag, "{% raw %} is never closed by {% endraw %}");
  }

  // The tokens of one {{ ... }} or {% ... %}, up to and including its end.
  std::size_t tag_tokens(std::size_t at, char kind, std::vector<Token>& out, bool& strip_next) {
    const char closer = kind == '{' ? '}' : '%';
    int brackets = 0;
    while (true) {
      while (at < source_.size() && (source_[at] == ' ' || source_[at] == '\t' ||
                                     source_[at] == '\n' || source_[at] == '\r')) {
        ++at;
      }
      if (at >= source_.size()) {
        fail_at(at, kind == '{' ? "a {{ is never closed by }}" : "a {% is never closed by %}");
      }
      const std::string_view rest = source_.substr(at);
      if (brackets == 0) {
        const bool dash = rest[0] == '-' && rest.size() > 2 && rest[1] == closer && rest[2] == '}';
        const bool plus = rest[0] == '+' && rest.size() > 2 && rest[1] == closer && rest[2] == '}';
        if (dash || plus || (rest.size() > 1 && rest[0] == closer && rest[1] == '}')) {
          out.push_back({kind == '{' ? Token::Type::variable_end : Token::Type::block_end, "", at});
          const std::size_t after = at + ((dash || plus) ? 3 : 2);
          strip_next = dash;
          return kind == '%' ? trim_block_newline(after, dash) : after;
        }
      }
      const char c = rest[0];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t end = 1;
        while (end < rest.size() &&
               (std::isalnum(static_cast<unsigned char>(rest[end])) || rest[end] == '_')) {
          ++end;
        }
        out.push_back({Token::Type::name, std::string(rest.substr(0, end)), at});
        at += end;
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

  // Integers and floats as Python writes them (with _ between digits); after a '.', only
  // an integer (foo.0 is an item, not a float).
  std::size_t number(std::size_t at, std::vector<Token>& out) {
    const auto digits = [&](std::size_t i) {
      while (i < source_.size() && (std::isdigit(static_cast<unsigned char>(source_[i])) ||
                                    (source_[i] == '_' && i + 1 < source_.size() &&
                                     std::isdigit(static_cast<unsigned char>(source_[i + 1]))))) {
        ++i;
      }
      return i;
    };
    std::size_t end = digits(at);
    bool is_float = false;
    const bool after_dot = at > 0 && source_[at - 1] == '.';
    if (!after_dot) {
      if (end + 1 < source_.size() && source_[end] == '.' &&
          std::isdigit(static_cast<unsigned char>(source_[end + 1]))) {
        end = digits(end + 1);
        is_float = true;
      }
      if (end < source_.size() && (source_[end] == 'e' || source_[end] == 'E')) {
        std::size_t e = end + 1;
        if (e < source_.size() && (source_[e] == '+' || source_[e] == '-')) ++e;
        if (e < source_.size() && std::isdigit(static_cast<unsigned char>(source_[e]))) {
          end = digits(e);
          is_float = true;
        }
      }
    }
    std::string text;
    for (std::size_t i = at; i < end; ++i) {
      if (source_[i] != '_') text += source_[i];
    }
    out.push_back({is_float ? Token::Type::floating : Token::Type::integer, text, at});
    return end;
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
        case 'U': {
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
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t code = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i < source_.size() && source_[i] >= '0' && source_[i] <= '7';
                 ++k, ++i) {
              code = code * 8 + static_cast<char32_t>(source_[i] - '0');
            }
            unicode::append_utf8(value, code);
          } else {
            value += '\\';  // Python keeps an unknown escape as it is
            value += e;
          }
      }
    }
    out.push_back({Token::Type::string, std::move(value), at});
    return i + 1;
  }

  std::string_view source_;
  const LineIndex& lines_;
};

}  // namespace smol::jinja
