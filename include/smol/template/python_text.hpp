// Python's text semantics, as chat templates see them through jinja2.
//
// A template runs on Python strings: len() and slices count code points, strip() and
// split() know Unicode whitespace, str(1.0) is "1.0" and json.dumps writes floats as
// repr() does. smol's strings are UTF-8, so each of these is written here over UTF-8,
// one function per Python behaviour, to give the same bytes jinja2 gives.
//
// Case mapping (lower, upper, title, capitalize) covers ASCII letters only: templates
// change the case of roles and keywords, and carrying Unicode's case tables for the
// rest is not worth their size; a non-ASCII letter keeps its case.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "smol/text/unicode.hpp"

namespace smol::python {

// The code points of `text` (ill-formed bytes become U+FFFD, as Python's decoder with
// errors="replace" would; the engine's own strings are well-formed).
inline std::vector<char32_t> code_points(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const auto decoded = unicode::decode_utf8(text, at);
    out.push_back(decoded.codepoint);
    at += decoded.length;
  }
  return out;
}

inline std::string from_code_points(const std::vector<char32_t>& points, std::size_t begin,
                                    std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end; ++i) unicode::append_utf8(out, points[i]);
  return out;
}

inline bool is_ascii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// len(text): code points, not bytes.
inline std::size_t length(std::string_view text) {
  std::size_t count = 0;
  for (const char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

// str.isspace() for one code point: Unicode whitespace plus the separators U+001C..U+001F.
inline bool is_space(char32_t c) {
  return unicode::is_whitespace(c) || (c >= 0x1C && c <= 0x1F);
}

// str.strip/lstrip/rstrip: with `chars` absent, whitespace; else any of its code points.
enum class StripSide { both, left, right };

inline std::string strip(std::string_view text, StripSide side = StripSide::both,
                         const std::string_view* chars = nullptr) {
  const std::vector<char32_t> points = code_points(text);
  std::vector<char32_t> set;
  if (chars) set = code_points(*chars);
  const auto strips = [&](char32_t c) {
    if (!chars) return is_space(c);
    for (const char32_t s : set) {
      if (s == c) return true;
    }
    return false;
  };
  std::size_t begin = 0, end = points.size();
  if (side != StripSide::right) {
    while (begin < end && strips(points[begin])) ++begin;
  }
  if (side != StripSide::left) {
    while (end > begin && strips(points[end - 1])) --end;
  }
  return from_code_points(points, begin, end);
}

// str.split(): runs of whitespace separate, and there are no empty pieces.
inline std::vector<std::string> split_whitespace(std::string_view text, long max_split) {
  const std::vector<char32_t> points = code_points(text);
  std::vector<std::string> out;
  std::size_t at = 0;
  while (true) {
    while (at < points.size() && is_space(points[at])) ++at;
    if (at == points.size()) break;
    if (max_split >= 0 && static_cast<long>(out.size()) == max_split) {
      std::size_t end = points.size();
      while (end > at && is_space(points[end - 1])) --end;
      out.push_back(from_code_points(points, at, end));
      break;
    }
    std::size_t end = at;
    while (end < points.size() && !is_space(points[end])) ++end;
    out.push_back(from_code_points(points, at, end));
    at = end;
  }
  return out;
}

// str.split(sep, max_split): exact separators, empty pieces kept.
inline std::vector<std::string> split(std::string_view text, std::string_view separator,
                                      long max_split) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (max_split < 0 || static_cast<long>(out.size()) < max_split) {
    const std::size_t found = text.find(separator, at);
    if (found == std::string_view::npos) break;
    out.emplace_back(text.substr(at, found - at));
    at = found + separator.size();
  }
  out.emplace_back(text.substr(at));
  return out;
}

// str.rsplit(sep, max_split): as split, the cuts counted from the right.
inline std::vector<std::string> rsplit(std::string_view text, std::string_view separator,
                                       long max_split) {
  std::vector<std::string> reversed;
  std::size_t end = text.size();
  while (max_split < 0 || static_cast<long>(reversed.size()) < max_split) {
    if (end < separator.size()) break;
    const std::size_t found = text.rfind(separator, end - separator.size());
    if (found == std::string_view::npos) break;
    reversed.emplace_back(text.substr(found + separator.size(), end - found - separator.size()));
    end = found;
  }
  reversed.emplace_back(text.substr(0, end));
  return {reversed.rbegin(), reversed.rend()};
}

// str.splitlines(): Python's line boundaries, the ends dropped.
inline bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

inline std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> out;
  std::string line;
  for (std::size_t at = 0; at < text.size();) {
    const auto decoded = unicode::decode_utf8(text, at);
    if (is_line_break(decoded.codepoint)) {
      out.push_back(std::move(line));
      line.clear();
      at += decoded.length;
      if (decoded.codepoint == '\r' && at < text.size() && text[at] == '\n') ++at;
      continue;
    }
    line.append(text.substr(at, decoded.length));
    at += decoded.length;
  }
  if (!line.empty()) out.push_back(std::move(line));
  return out;
}

inline char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c;
}
inline char ascii_upper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c;
}
inline bool ascii_letter(char c) {
  return ascii_lower(c) >= 'a' && ascii_lower(c) <= 'z';
}

inline std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

inline std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = ascii_upper(c);
  return out;
}

// str.capitalize(): the first character upper, the rest lower.
inline std::string capitalize(std::string_view text) {
  std::string out = lower(text);
  if (!out.empty()) out[0] = ascii_upper(out[0]);
  return out;
}

// str.title(): a letter after a non-letter is upper, any other letter lower (non-ASCII
// bytes count as letters, as Python's cased letters do, so "é" does not start a word).
inline std::string title(std::string_view text) {
  std::string out(text);
  bool previous_cased = false;
  for (char& c : out) {
    const bool high = static_cast<unsigned char>(c) >= 0x80;
    if (ascii_letter(c)) {
      c = previous_cased ? ascii_lower(c) : ascii_upper(c);
      previous_cased = true;
    } else {
      previous_cased = high && previous_cased;
    }
  }
  return out;
}

inline std::string replace(std::string_view text, std::string_view old, std::string_view with,
                           long count) {
  std::string out;
  std::size_t at = 0;
  long done = 0;
  if (old.empty()) {
    // Python inserts `with` between every code point and at both ends.
    const std::vector<char32_t> points = code_points(text);
    for (std::size_t i = 0; i <= points.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(with);
        ++done;
      }
      if (i < points.size()) unicode::append_utf8(out, points[i]);
    }
    return out;
  }
  while (count < 0 || done < count) {
    const std::size_t found = text.find(old, at);
    if (found == std::string_view::npos) break;
    out.append(text.substr(at, found - at)).append(with);
    at = found + old.size();
    ++done;
  }
  out.append(text.substr(at));
  return out;
}

// repr(float) and str(float): the shortest digits that read back as the same double,
// fixed notation for exponents -4..15, else scientific with a two-digit exponent.
inline std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  const auto result =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string scientific(buffer, result.ptr);
  const std::size_t e = scientific.find('e');
  std::string mantissa = scientific.substr(0, e);
  const int exponent = std::stoi(scientific.substr(e + 1));
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (const char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  if (exponent >= -5 + 1 && exponent < 16) {
    std::string fixed;
    if (exponent < 0) {
      fixed = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<std::size_t>(exponent) + 1 >= digits.size()) {
      fixed = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      fixed = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return sign + fixed;
  }
  std::string out = sign + digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  const int magnitude = exponent < 0 ? -exponent : exponent;
  out += exponent < 0 ? "e-" : "e+";
  if (magnitude < 10) out += "0";
  out += std::to_string(magnitude);
  return out;
}

// repr(str): single quotes unless the text holds one and no double quote; backslash
// escapes for the quote, the backslash and control characters. Code points from U+0080
// up are written as they are (Python escapes the few it deems unprintable, such as
// U+0085 and U+00A0..; templates do not print reprs of such text).
inline std::string string_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7F) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

// A JSON string as json.dumps writes it: the quote, the backslash and control characters
// escaped, and with ensure_ascii every code point above U+007F as \uXXXX (a surrogate
// pair above U+FFFF).
inline void append_json_string(std::string& out, std::string_view text, bool ensure_ascii) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto escape = [&](unsigned unit) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 15];
  };
  out += '"';
  for (std::size_t at = 0; at < text.size(); ++at) {
    const char c = text[at];
    const auto byte = static_cast<unsigned char>(c);
    if (ensure_ascii && byte >= 0x80) {
      const auto decoded = unicode::decode_utf8(text, at);
      const char32_t code = decoded.codepoint;
      if (code > 0xFFFF) {
        escape(0xD800 + ((code - 0x10000) >> 10));
        escape(0xDC00 + ((code - 0x10000) & 0x3FF));
      } else {
        escape(static_cast<unsigned>(code));
      }
      at += decoded.length - 1;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out += kHex[byte >> 4];
          out += kHex[byte & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// A float as json.dumps writes it: repr(), with NaN and Infinity spelled as JavaScript's.
inline std::string json_float(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  return float_repr(value);
}

}  // namespace smol::python
