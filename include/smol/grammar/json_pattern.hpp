// JSON Schema's `pattern` (a regex over the string's characters) as GBNF over the JSON
// text of the string, without its quotes: a character the JSON spelling must escape
// (" \ and control characters) is written escaped, as a JSON encoder would.
//
// The subset: literals, `.`, classes [a-z] [^...] with \d \w \s inside, the escapes
// \d \w \s \D \W \S and escaped metacharacters, groups ( ) (?: ) (?<name> ), alternation,
// quantifiers ? * + {m} {m,} {m,n} (lazy forms accepted: same language), and the anchors
// ^ at the very start and $ at the very end. As in JSON Schema, a pattern is unanchored
// unless it says otherwise: "abc" matches any string containing abc. Anything else
// (look-around, back-references, \b, Unicode properties) is refused with smol::Error, and
// so is an unbounded repetition of something that can match nothing, as ()+ or (a?)*: its
// GBNF would be left-recursive, which the grammar parser rightly refuses (llama.cpp's too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/grammar/gbnf_text.hpp"
#include "smol/grammar/grammar.hpp"
#include "smol/text/unicode.hpp"

namespace smol {

namespace detail {

class PatternToGbnf {
 public:
  // `json_char` is the name of the GBNF rule for any one JSON string character.
  PatternToGbnf(std::string_view pattern, std::string json_char)
      : pattern_(pattern), json_char_(std::move(json_char)) {}

  std::string convert() {
    bool anchored_start = false, anchored_end = false;
    std::string_view body = pattern_;
    if (!body.empty() && body.front() == '^') {
      anchored_start = true;
      body.remove_prefix(1);
    }
    if (!body.empty() && body.back() == '$' && !escaped_at(body, body.size() - 1)) {
      anchored_end = true;
      body.remove_suffix(1);
    }
    text_ = body;
    std::string out = alternation(0).gbnf;
    if (pos_ < text_.size()) error("an unmatched ')'");
    if (!anchored_start) out = json_char_ + "* " + out;
    if (!anchored_end) out += " " + json_char_ + "*";
    return out;
  }

 private:
  // Each level of groups writes two of GBNF's, whose parser takes 200 (gbnf.hpp).
  static constexpr int kMaxNesting = 50;
  static constexpr std::uint32_t kMaxRepetition = 2000;

  static bool escaped_at(std::string_view s, std::size_t i) {
    std::size_t backslashes = 0;
    while (i > backslashes && s[i - 1 - backslashes] == '\\') ++backslashes;
    return backslashes % 2 == 1;
  }

  // A piece of the pattern as GBNF, and whether it can match the empty string.
  struct Piece {
    std::string gbnf;
    bool nullable = false;
  };

  [[noreturn]] void error(const std::string& what) const {
    fail("JSON schema: pattern \"", pattern_, "\": ", what, " is not supported");
  }

  bool more() const { return pos_ < text_.size(); }
  char peek() const { return more() ? text_[pos_] : '\0'; }

  std::uint32_t next_code_point() {
    const unicode::DecodedCodepoint d = unicode::decode_utf8(text_, pos_);
    if (d.status != unicode::Utf8Status::valid) error("invalid UTF-8");
    pos_ += d.length;
    return static_cast<std::uint32_t>(d.codepoint);
  }

  Piece alternation(int depth) {
    if (depth > kMaxNesting) error("nesting this deep");
    std::vector<Piece> options{sequence(depth)};
    while (peek() == '|') {
      ++pos_;
      options.push_back(sequence(depth));
    }
    if (options.size() == 1) return options.front();
    Piece out{"(", false};
    for (std::size_t i = 0; i < options.size(); ++i) {
      out.gbnf += (i ? " | " : "") + options[i].gbnf;
      out.nullable = out.nullable || options[i].nullable;
    }
    out.gbnf += ")";
    return out;
  }

  Piece sequence(int depth) {
    Piece out{"", true};
    while (more() && peek() != '|' && peek() != ')') {
      const Piece item = quantified(atom(depth));
      out.gbnf += (out.gbnf.empty() ? "" : " ") + item.gbnf;
      out.nullable = out.nullable && item.nullable;
    }
    out.gbnf = out.gbnf.empty() ? "\"\"" : "(" + out.gbnf + ")";
    return out;
  }

  std::uint32_t parse_number() {
    if (!(peek() >= '0' && peek() <= '9')) error("a '{' without a count");
    std::uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<std::uint64_t>(peek() - '0');
      if (value > kMaxRepetition) error("a repetition count above 2000");
      ++pos_;
    }
    return static_cast<std::uint32_t>(value);
  }

  Piece quantified(const Piece& item) {
    std::string suffix;
    bool unbounded = false, optional = false;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      suffix = std::string(1, c);
      unbounded = c != '?';
      optional = c != '+';
    } else if (c == '{') {
      ++pos_;
      const std::uint32_t min = parse_number();
      suffix = "{" + std::to_string(min);
      optional = min == 0;
      if (peek() == ',') {
        ++pos_;
        suffix += ",";
        unbounded = peek() == '}';  // {m,}
        if (!unbounded) {
          const std::uint32_t max = parse_number();
          if (max < min) error("a repetition {m,n} with n < m");
          suffix += std::to_string(max);
        }
      }
      if (peek() != '}') error("an unclosed '{'");
      ++pos_;
      suffix += "}";
    } else {
      return item;
    }
    if (unbounded && item.nullable) {
      error("an unbounded repetition of something that can match nothing (as ()+ or (a?)*)");
    }
    if (peek() == '?') ++pos_;  // lazy: the same strings
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') {
      error("a quantifier after a quantifier");
    }
    return {item.gbnf + suffix, item.nullable || optional};
  }

  Piece atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        ++pos_;
        if (peek() == ':') {
          ++pos_;
        } else if (peek() == '<' && pos_ + 1 < text_.size() && text_[pos_ + 1] != '=' &&
                   text_[pos_ + 1] != '!') {
          while (more() && peek() != '>') ++pos_;  // a named group: the name is irrelevant
          if (!more()) error("an unclosed group name");
          ++pos_;
        } else {
          error("look-around or group flags (?...)");
        }
      }
      const Piece inner = alternation(depth + 1);
      if (peek() != ')') error("an unclosed '('");
      ++pos_;
      return {"(" + inner.gbnf + ")", inner.nullable};
    }
    if (c == '[') return {chars(bracket_class())};
    if (c == '.') {
      ++pos_;
      return {chars(CharClass::single('\n').complement())};
    }
    if (c == '\\') {
      ++pos_;
      CharClass escaped;
      if (class_escape(escaped)) return {chars(escaped)};
      return {chars(CharClass::single(escaped_literal()))};
    }
    if (c == '^' || c == '$') error("an anchor other than ^ at the start or $ at the end");
    if (c == '*' || c == '+' || c == '?' || c == '{') error("a quantifier with nothing before it");
    return {chars(CharClass::single(next_code_point()))};
  }

  // \d \w \s and their complements, after the backslash.
  bool class_escape(CharClass& out) {
    const char c = peek();
    CharClass set;
    switch (c) {
      case 'd':
      case 'D':
        set.add('0', '9');
        break;
      case 'w':
      case 'W':
        set.add('a', 'z');
        set.add('A', 'Z');
        set.add('0', '9');
        set.add('_', '_');
        break;
      case 's':
      case 'S':
        for (const char s : {' ', '\t', '\n', '\r', '\f', '\v'}) {
          set.add(static_cast<unsigned char>(s), static_cast<unsigned char>(s));
        }
        break;
      default:
        return false;
    }
    ++pos_;
    out = (c >= 'A' && c <= 'Z') ? set.complement() : set;
    return true;
  }

  // The character after a backslash that is not a class escape.
  std::uint32_t escaped_literal() {
    if (!more()) error("a trailing backslash");
    const char c = peek();
    switch (c) {
      case 'n':
        ++pos_;
        return '\n';
      case 't':
        ++pos_;
        return '\t';
      case 'r':
        ++pos_;
        return '\r';
      case 'f':
        ++pos_;
        return '\f';
      case 'v':
        ++pos_;
        return '\v';
      default:
        break;
    }
    const bool ascii_alnum =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ascii_alnum) error(cat("the escape \\", std::string(1, c)));
    return next_code_point();  // an escaped metacharacter or punctuation: itself
  }

  CharClass bracket_class() {
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    CharClass set;
    bool first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      std::uint32_t low = 0;
      if (peek() == '\\') {
        ++pos_;
        CharClass escaped;
        if (class_escape(escaped)) {
          for (const auto& r : escaped.ranges()) set.add(r.first, r.last);
          continue;
        }
        low = peek() == 'b' ? (++pos_, 0x08u) : escaped_literal();
      } else {
        low = next_code_point();
      }
      std::uint32_t high = low;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        if (peek() == '\\') {
          ++pos_;
          high = escaped_literal();
        } else {
          high = next_code_point();
        }
        if (high < low) error("a class range whose end is before its start");
      }
      set.add(low, high);
    }
    if (!more()) error("an unclosed '['");
    ++pos_;
    return negated ? set.complement() : set;
  }

  // GBNF for one character of `set`, spelled as JSON would spell it inside a string.
  std::string chars(const CharClass& set) {
    std::vector<std::string> options;
    // Characters JSON writes as themselves: everything but " \ and control characters
    // (and DEL, left out as llama.cpp's JSON grammar does).
    CharClass plain;
    plain.add(0x20, 0x21);
    plain.add(0x23, 0x5B);
    plain.add(0x5D, 0x7E);
    plain.add(0x80, kMaxCodePoint);
    CharClass kept;
    for (const auto& r : set.ranges()) {
      for (const auto& p : plain.ranges()) {
        const std::uint32_t lo = std::max(r.first, p.first), hi = std::min(r.last, p.last);
        if (lo <= hi) kept.add(lo, hi);
      }
    }
    if (!kept.empty()) options.push_back(gbnf_text::char_class(kept));
    if (set.contains('"')) options.push_back(gbnf_text::literal("\\\""));
    if (set.contains('\\')) options.push_back(gbnf_text::literal("\\\\"));
    static constexpr struct {
      std::uint32_t cp;
      const char* spelling;
    } kShortEscapes[] = {{'\n', "\\n"}, {'\t', "\\t"}, {'\r', "\\r"}, {'\b', "\\b"}, {'\f', "\\f"}};
    for (const auto& e : kShortEscapes) {
      if (set.contains(e.cp)) options.push_back(gbnf_text::literal(e.spelling));
    }
    if (options.empty()) error("a class that matches no character");
    if (options.size() == 1) return options.front();
    std::string out = "(";
    for (std::size_t i = 0; i < options.size(); ++i) out += (i ? " | " : "") + options[i];
    return out + ")";
  }

  std::string_view pattern_;
  std::string json_char_;
  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace detail

// GBNF for the JSON text (without quotes) of a string matching `pattern`; `json_char`
// names the rule of one JSON string character (for the unanchored ends).
inline std::string pattern_to_gbnf(std::string_view pattern, const std::string& json_char) {
  return detail::PatternToGbnf(pattern, json_char).convert();
}

}  // namespace smol
