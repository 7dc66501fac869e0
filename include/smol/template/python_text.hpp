// Python's text semantics, as chat templates see them through jinja2.
//
// A template runs on Python strings: len() and slices count code points, strip() and
// split() know Unicode whitespace, str(1.0) is "1.0" and json.dumps writes floats as
// repr() does. smol's strings are UTF-8, so each of these is written here over UTF-8,
// one function per Python behaviour, to give the same bytes jinja2 gives.
//
// Case mapping (lower, upper, title, capitalize, swapcase) covers the alphabets of the
// languages chat users write in: ASCII, Latin-1, Latin Extended-A and Additional, Greek,
// Cyrillic, Armenian and full-width Latin, with Python's ß -> SS, İ -> i̇ and final
// sigma. Python's whole Unicode table (some 1,400 mappings) is not carried: a letter
// of another cased script (Georgian, Cherokee, polytonic Greek, ...), the Latin digraphs
// (Ǆ ǅ ǆ) and the ligatures (ﬁ -> FI) keep their case.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "smol/core/error.hpp"
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
      out.push_back(from_code_points(points, at, points.size()));  // trailing space kept
      break;
    }
    std::size_t end = at;
    while (end < points.size() && !is_space(points[end])) ++end;
    out.push_back(from_code_points(points, at, end));
    at = end;
  }
  return out;
}

// str.rsplit() with no separator: as split_whitespace, the cuts counted from the right.
inline std::vector<std::string> rsplit_whitespace(std::string_view text, long max_split) {
  const std::vector<char32_t> points = code_points(text);
  std::vector<std::string> reversed;
  std::size_t end = points.size();
  while (true) {
    while (end > 0 && is_space(points[end - 1])) --end;
    if (end == 0) break;
    if (max_split >= 0 && static_cast<long>(reversed.size()) == max_split) {
      reversed.push_back(from_code_points(points, 0, end));  // leading space kept
      break;
    }
    std::size_t begin = end;
    while (begin > 0 && !is_space(points[begin - 1])) --begin;
    reversed.push_back(from_code_points(points, begin, end));
    end = begin;
  }
  return {reversed.rbegin(), reversed.rend()};
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

// The simple case pairs of the scripts above: the other case of `c`, or `c`.
inline char32_t other_case(char32_t c, bool to_upper) {
  const auto shift = [&](char32_t lower_first, char32_t lower_last, char32_t offset) -> char32_t {
    return to_upper ? (c >= lower_first && c <= lower_last ? c - offset : c)
                    : (c >= lower_first - offset && c <= lower_last - offset ? c + offset : c);
  };
  // Runs where upper and lower alternate, the upper on even (or odd) code points.
  const auto alternating = [&](char32_t first, char32_t last, bool upper_even) -> char32_t {
    if (c < first || c > last) return c;
    const bool is_upper = ((c & 1) == 0) == upper_even;
    if (to_upper) return is_upper ? c : c - 1;
    return is_upper ? c + 1 : c;
  };
  if (c < 0x80) return shift('a', 'z', 32);
  if (c == 0xB5) return to_upper ? 0x39C : c;  // micro sign -> Greek capital mu
  if (c == 0xFF) return to_upper ? 0x178 : c;
  if (c == 0x178) return to_upper ? c : 0xFF;
  if (c >= 0xC0 && c <= 0xFE) return c == 0xD7 || c == 0xF7 ? c : shift(0xE0, 0xFE, 32);
  if (c == 0x130) return c;  // İ is upper; its lower (i and a dot) is append_lower's
  if (c == 0x131) return to_upper ? 'I' : c;
  if (c == 0x17F) return to_upper ? 'S' : c;
  if (c >= 0x100 && c <= 0x137) return alternating(0x100, 0x137, true);
  if (c >= 0x139 && c <= 0x148) return alternating(0x139, 0x148, false);
  if (c >= 0x14A && c <= 0x177) return alternating(0x14A, 0x177, true);
  if (c >= 0x179 && c <= 0x17E) return alternating(0x179, 0x17E, false);
  if (c == 0x386) return to_upper ? c : 0x3AC;
  if (c == 0x3AC) return to_upper ? 0x386 : c;
  if (c >= 0x388 && c <= 0x38A) return to_upper ? c : c + 37;
  if (c >= 0x3AD && c <= 0x3AF) return to_upper ? c - 37 : c;
  if (c == 0x38C) return to_upper ? c : 0x3CC;
  if (c == 0x3CC) return to_upper ? 0x38C : c;
  if (c == 0x38E || c == 0x38F) return to_upper ? c : c + 63;
  if (c == 0x3CD || c == 0x3CE) return to_upper ? c - 63 : c;
  if (c == 0x3C2) return to_upper ? 0x3A3 : c;  // final sigma
  if (c >= 0x391 && c <= 0x3C9) return c == 0x3A2 ? c : shift(0x3B1, 0x3C9, 32);
  if (c >= 0x400 && c <= 0x40F) return to_upper ? c : c + 80;
  if (c >= 0x450 && c <= 0x45F) return to_upper ? c - 80 : c;
  if (c >= 0x410 && c <= 0x44F) return shift(0x430, 0x44F, 32);
  if (c >= 0x460 && c <= 0x481) return alternating(0x460, 0x481, true);
  if (c >= 0x48A && c <= 0x4BF) return alternating(0x48A, 0x4BF, true);
  if (c == 0x4C0) return to_upper ? c : 0x4CF;
  if (c == 0x4CF) return to_upper ? 0x4C0 : c;
  if (c >= 0x4C1 && c <= 0x4CE) return alternating(0x4C1, 0x4CE, false);
  if (c >= 0x4D0 && c <= 0x52F) return alternating(0x4D0, 0x52F, true);
  if (c >= 0x531 && c <= 0x586) return c > 0x556 && c < 0x561 ? c : shift(0x561, 0x586, 48);
  if (c >= 0x1E00 && c <= 0x1E95) return alternating(0x1E00, 0x1E95, true);
  if (c >= 0x1EA0 && c <= 0x1EFF) return alternating(0x1EA0, 0x1EFF, true);
  if (c >= 0xFF21 && c <= 0xFF5A) return c > 0xFF3A && c < 0xFF41 ? c : shift(0xFF41, 0xFF5A, 32);
  return c;
}

inline bool is_lower_letter(char32_t c) {
  return other_case(c, true) != c || c == 0xDF;
}
inline bool is_upper_letter(char32_t c) {
  return other_case(c, false) != c || c == 0x130;
}

// Python's "cased" characters (those with a case, or a letter of a cased script which
// smol's mapping leaves as it is). A CJK ideograph is a letter without case.
inline bool is_cased(char32_t c) {
  if (is_lower_letter(c) || is_upper_letter(c)) return true;
  if (c < 0x80) return false;
  const bool cased_script = (c >= 0xC0 && c <= 0x58F) || (c >= 0x10A0 && c <= 0x10FF) ||
                            (c >= 0x13A0 && c <= 0x13FF) || (c >= 0x1C80 && c <= 0x1CBF) ||
                            (c >= 0x1D00 && c <= 0x1FFF) || (c >= 0x2C00 && c <= 0x2D2F) ||
                            (c >= 0xA640 && c <= 0xA7FF) || (c >= 0xAB70 && c <= 0xABBF) ||
                            (c >= 0xFF21 && c <= 0xFF5A) || (c >= 0x10400 && c <= 0x104FF);
  return cased_script && unicode::is_letter(c);
}

inline void append_upper(std::string& out, char32_t c) {
  if (c == 0xDF) {  // ß has no capital of one letter: Python writes SS
    out += "SS";
    return;
  }
  unicode::append_utf8(out, other_case(c, true));
}

// Σ lowers to ς at the end of a word (a cased letter before it, none after it).
inline void append_lower(std::string& out, const std::vector<char32_t>& points, std::size_t i) {
  const char32_t c = points[i];
  if (c == 0x130) {  // İ: i and a combining dot above
    out += "i\xCC\x87";
    return;
  }
  if (c == 0x3A3) {
    const bool after_cased = i > 0 && is_cased(points[i - 1]);
    const bool before_cased = i + 1 < points.size() && is_cased(points[i + 1]);
    unicode::append_utf8(out, after_cased && !before_cased ? 0x3C2 : 0x3C3);
    return;
  }
  unicode::append_utf8(out, other_case(c, false));
}

inline std::string lower(std::string_view text) {
  if (is_ascii(text)) {
    std::string out(text);
    for (char& c : out) c = ascii_lower(c);
    return out;
  }
  const std::vector<char32_t> points = code_points(text);
  std::string out;
  for (std::size_t i = 0; i < points.size(); ++i) append_lower(out, points, i);
  return out;
}

inline std::string upper(std::string_view text) {
  if (is_ascii(text)) {
    std::string out(text);
    for (char& c : out) c = ascii_upper(c);
    return out;
  }
  std::string out;
  for (const char32_t c : code_points(text)) append_upper(out, c);
  return out;
}

// str.capitalize(): the first character upper (title case), the rest lower.
inline std::string capitalize(std::string_view text) {
  const std::vector<char32_t> points = code_points(text);
  std::string out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i == 0) {
      if (points[0] == 0xDF) {
        out += "Ss";  // title case of ß
      } else {
        unicode::append_utf8(out, other_case(points[0], true));
      }
    } else {
      append_lower(out, points, i);
    }
  }
  return out;
}

// str.title(): a cased character after an uncased one starts a word (upper), any other
// is lower; digits and apostrophes are uncased ("3rd" -> "3Rd", "o'neil" -> "O'Neil").
inline std::string title(std::string_view text) {
  const std::vector<char32_t> points = code_points(text);
  std::string out;
  bool previous_cased = false;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const char32_t c = points[i];
    if (!previous_cased) {
      if (c == 0xDF) {
        out += "Ss";
      } else {
        unicode::append_utf8(out, other_case(c, true));
      }
    } else {
      append_lower(out, points, i);
    }
    previous_cased = is_cased(c);
  }
  return out;
}

inline std::string swapcase(std::string_view text) {
  const std::vector<char32_t> points = code_points(text);
  std::string out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (is_upper_letter(points[i])) {
      append_lower(out, points, i);
    } else {
      append_upper(out, points[i]);
    }
  }
  return out;
}

// str.islower() / isupper(): some cased character, and none of the other case.
inline bool is_lower(std::string_view text) {
  bool cased = false;
  for (const char32_t c : code_points(text)) {
    if (is_upper_letter(c)) return false;
    cased = cased || is_lower_letter(c);
  }
  return cased;
}
inline bool is_upper(std::string_view text) {
  bool cased = false;
  for (const char32_t c : code_points(text)) {
    if (is_lower_letter(c)) return false;
    cased = cased || is_upper_letter(c);
  }
  return cased;
}

// str.istitle(): uppercase only after uncased characters, lowercase only after cased
// ones, and at least one cased character.
inline bool is_title(std::string_view text) {
  bool previous_cased = false, any = false;
  for (const char32_t c : code_points(text)) {
    const bool upper = is_upper_letter(c), lower = is_lower_letter(c);
    if ((upper && previous_cased) || (lower && !previous_cased)) return false;
    any = any || upper;
    previous_cased = is_cased(c);
  }
  return any;
}

// str.center / ljust / rjust with a one-character fill (widths count code points).
enum class Align { left, right, center };
inline std::string pad(std::string_view text, std::int64_t width, Align align,
                       std::string_view fill = " ") {
  const auto len = static_cast<std::int64_t>(length(text));
  if (width <= len) return std::string(text);
  const std::int64_t padding = width - len;
  std::int64_t left = 0;
  if (align == Align::right) left = padding;
  // str.center puts the odd space on the left only when the width is odd too.
  if (align == Align::center) left = padding / 2 + (padding & width & 1);
  std::string out;
  for (std::int64_t i = 0; i < left; ++i) out += fill;
  out += text;
  for (std::int64_t i = left; i < padding; ++i) out += fill;
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

// Python's str.isprintable() for one code point above U+007F: not a control, format,
// separator (other than ASCII space) or private-use character. Unassigned code points
// (Python escapes them too) count as printable here: that table would be large, and text
// rarely holds them.
inline bool is_printable(char32_t c) {
  static constexpr char32_t kUnprintable[][2] = {
      {0x80, 0xA0},       {0xAD, 0xAD},       {0x600, 0x605},      {0x61C, 0x61C},
      {0x6DD, 0x6DD},     {0x70F, 0x70F},     {0x890, 0x891},      {0x8E2, 0x8E2},
      {0x1680, 0x1680},   {0x180E, 0x180E},   {0x2000, 0x200F},    {0x2028, 0x202F},
      {0x205F, 0x2064},   {0x2066, 0x206F},   {0x3000, 0x3000},    {0xD800, 0xF8FF},
      {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD},  {0x110CD, 0x110CD},
      {0x13430, 0x13438}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A},  {0xE0001, 0xE0001},
      {0xE0020, 0xE007F}, {0xF0000, 0xFFFFD}, {0x100000, 0x10FFFD}};
  for (const auto& range : kUnprintable) {
    if (c >= range[0] && c <= range[1]) return false;
  }
  return true;
}

// repr(str): single quotes unless the text holds one and no double quote; backslash
// escapes for the quote, the backslash, control characters and what Python deems
// unprintable (\xa0, \u200b, \u2028, ...).
inline std::string string_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(1, quote);
  for (std::size_t at = 0; at < text.size();) {
    const auto decoded = unicode::decode_utf8(text, at);
    const char32_t code = decoded.codepoint;
    const char c = text[at];
    const auto byte = static_cast<unsigned char>(c);
    if (code >= 0x80) {
      if (is_printable(code)) {
        out.append(text.substr(at, decoded.length));
      } else {
        const int digits = code <= 0xFF ? 2 : code <= 0xFFFF ? 4 : 8;
        out += digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U";
        for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) {
          out += kHex[(code >> shift) & 15];
        }
      }
    } else if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7F) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
    at += decoded.length;
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

// ---- numbers: Python's float(), int(), round(), // and %, format() and % ----

// float(text): whitespace around, a sign, digits with single underscores between them, a
// fraction and an exponent, or inf, infinity, nan in any case. Absent when Python
// raises ValueError.
inline std::optional<double> parse_float(std::string_view text) {
  const std::string trimmed = strip(text);
  std::string_view rest = trimmed;
  std::string clean;
  if (!rest.empty() && (rest[0] == '+' || rest[0] == '-')) {
    clean += rest[0];
    rest.remove_prefix(1);
  }
  const std::string word = lower(rest);
  if (word == "inf" || word == "infinity") return clean == "-" ? -HUGE_VAL : HUGE_VAL;
  if (word == "nan") return std::nan("");
  // digits ("_" digit)*, counting what was read
  const auto digits = [&](std::string_view& from) {
    std::size_t n = 0;
    while (!from.empty() && from[0] >= '0' && from[0] <= '9') {
      clean += from[0];
      from.remove_prefix(1);
      ++n;
      if (from.size() > 1 && from[0] == '_' && from[1] >= '0' && from[1] <= '9') {
        from.remove_prefix(1);
      }
    }
    return n;
  };
  std::size_t mantissa = digits(rest);
  if (!rest.empty() && rest[0] == '.') {
    clean += '.';
    rest.remove_prefix(1);
    mantissa += digits(rest);
  }
  if (mantissa == 0) return std::nullopt;
  if (!rest.empty() && (rest[0] == 'e' || rest[0] == 'E')) {
    clean += 'e';
    rest.remove_prefix(1);
    if (!rest.empty() && (rest[0] == '+' || rest[0] == '-')) {
      clean += rest[0];
      rest.remove_prefix(1);
    }
    if (digits(rest) == 0) return std::nullopt;
  }
  if (!rest.empty()) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

// int(text, base) for base 2..36: whitespace around, a sign, the base's prefix (0x, 0o,
// 0b) if any, digits with single underscores between them (and after the prefix).
struct ParsedInt {
  bool valid = false;
  bool overflow = false;  // valid for Python, beyond 64 bits here
  std::int64_t value = 0;
};

inline ParsedInt parse_int(std::string_view text, int base) {
  ParsedInt out;
  const std::string trimmed = strip(text);
  std::string_view rest = trimmed;
  bool negative = false;
  if (!rest.empty() && (rest[0] == '+' || rest[0] == '-')) {
    negative = rest[0] == '-';
    rest.remove_prefix(1);
  }
  if (rest.size() >= 2 && rest[0] == '0') {
    const char p = ascii_lower(rest[1]);
    if ((base == 16 && p == 'x') || (base == 8 && p == 'o') || (base == 2 && p == 'b')) {
      rest.remove_prefix(2);
      if (!rest.empty() && rest[0] == '_') rest.remove_prefix(1);
    }
  }
  const auto digit = [&](char c) {
    c = ascii_lower(c);
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
    return d < base ? d : -1;
  };
  std::uint64_t magnitude = 0;
  std::size_t count = 0;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '_') {
      if (count == 0 || i + 1 >= rest.size() || digit(rest[i + 1]) < 0) return out;
      continue;
    }
    const int d = digit(rest[i]);
    if (d < 0) return out;
    ++count;
    if (magnitude > (~std::uint64_t{0} - static_cast<unsigned>(d)) / static_cast<unsigned>(base)) {
      out.overflow = true;
    } else {
      magnitude = magnitude * static_cast<unsigned>(base) + static_cast<unsigned>(d);
    }
  }
  if (count == 0) return out;
  out.valid = true;
  const std::uint64_t limit = std::uint64_t{1} << 63;
  if (magnitude > limit || (!negative && magnitude == limit)) out.overflow = true;
  if (!out.overflow) {
    out.value =
        negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
  }
  return out;
}

// printf into a string of the size it needs (a precision or a width may be large).
template <class... Args>
std::string c_format(const char* format, Args... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  if (n <= 0) return {};
  std::string out(static_cast<std::size_t>(n), '\0');
  std::snprintf(out.data(), out.size() + 1, format, args...);
  return out;
}

// round(x, ndigits) for a float: the decimal value nearest to x's exact binary value,
// ties to even (CPython's dtoa; glibc's printf rounds the same way).
inline double round_float(double x, std::int64_t ndigits) {
  if (!std::isfinite(x) || x == 0 || ndigits > 323) return x;
  if (ndigits < -308) return 0.0 * x;
  if (ndigits >= 0) {
    return std::strtod(c_format("%.*f", static_cast<int>(ndigits), x).c_str(), nullptr);
  }
  // To a multiple of 10**-ndigits: as many significant digits as that leaves.
  const std::string scientific = c_format("%.16e", x);
  const int exponent = std::atoi(scientific.c_str() + scientific.find('e') + 1);
  const std::int64_t significant = exponent + 1 + ndigits;
  if (significant < 0) return 0.0 * x;
  if (significant == 0) {
    // |x| < 10**(exponent + 1) = unit: 0 or unit, ties to 0 (the even multiple).
    const double unit = std::pow(10.0, static_cast<double>(exponent + 1));
    return std::fabs(x) > unit / 2 ? std::copysign(unit, x) : 0.0 * x;
  }
  return std::strtod(c_format("%.*e", static_cast<int>(significant - 1), x).c_str(), nullptr);
}

// x // y and x % y for floats, as CPython computes them (not floor(x / y): 1 // 0.1 is
// 9.0). The caller refuses y == 0.
inline double float_floordiv(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return std::copysign(0.0, x / y);
  double floored = std::floor(div);
  if (div - floored > 0.5) floored += 1.0;
  return floored;
}
inline double float_mod(double x, double y) {
  double mod = std::fmod(x, y);
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) mod += y;
  } else {
    mod = std::copysign(0.0, y);
  }
  return mod;
}

// A format() spec: [[fill]align][sign][z][#][0][width][grouping][.precision][type].
struct FormatSpec {
  std::string fill = " ";
  char align = '\0';
  char sign = '-';
  bool no_negative_zero = false;
  bool alternate = false;
  bool zero = false;
  std::int64_t width = 0;
  char grouping = '\0';
  std::int64_t precision = -1;
  char type = '\0';
};

inline FormatSpec parse_format_spec(std::string_view spec) {
  FormatSpec out;
  const auto is_align = [](char c) { return c == '<' || c == '>' || c == '=' || c == '^'; };
  std::size_t at = 0;
  if (!spec.empty()) {
    const auto first = unicode::decode_utf8(spec, 0);
    if (first.length < spec.size() && is_align(spec[first.length])) {
      out.fill = std::string(spec.substr(0, first.length));
      out.align = spec[first.length];
      at = first.length + 1;
    } else if (is_align(spec[0])) {
      out.align = spec[0];
      at = 1;
    }
  }
  if (at < spec.size() && (spec[at] == '+' || spec[at] == '-' || spec[at] == ' ')) {
    out.sign = spec[at++];
  }
  if (at < spec.size() && spec[at] == 'z') {
    out.no_negative_zero = true;
    ++at;
  }
  if (at < spec.size() && spec[at] == '#') {
    out.alternate = true;
    ++at;
  }
  if (at < spec.size() && spec[at] == '0') {
    out.zero = true;
    if (out.align == '\0') out.fill = "0";
    ++at;
  }
  const auto number = [&]() {
    std::int64_t n = 0;
    while (at < spec.size() && spec[at] >= '0' && spec[at] <= '9') {
      n = n * 10 + (spec[at++] - '0');
      if (n > 100000) fail("format: too large a width or precision");
    }
    return n;
  };
  out.width = number();
  if (at < spec.size() && (spec[at] == ',' || spec[at] == '_')) out.grouping = spec[at++];
  if (at < spec.size() && spec[at] == '.') {
    ++at;
    if (at >= spec.size() || spec[at] < '0' || spec[at] > '9')
      fail("Format specifier missing precision");
    out.precision = number();
  }
  if (at < spec.size()) out.type = spec[at++];
  if (at < spec.size()) fail("Invalid format specifier '", spec, "'");
  return out;
}

// Pads `sign` + `body` to the spec's width: `=` puts the fill between them.
inline std::string format_align(const std::string& sign, const std::string& body,
                                const FormatSpec& spec, char default_align) {
  char align = spec.align ? spec.align : default_align;
  if (spec.zero && !spec.align && default_align == '>') align = '=';
  const auto len = static_cast<std::int64_t>(length(sign) + length(body));
  if (spec.width <= len) return sign + body;
  const std::int64_t padding = spec.width - len;
  std::string fill;
  const auto repeat = [&](std::int64_t n) {
    std::string out;
    for (std::int64_t i = 0; i < n; ++i) out += spec.fill;
    return out;
  };
  if (align == '<') return sign + body + repeat(padding);
  if (align == '^') return repeat(padding / 2) + sign + body + repeat(padding - padding / 2);
  if (align == '=') return sign + repeat(padding) + body;
  return repeat(padding) + sign + body;
}

// Digit groups: `separator` every `size` digits of the integer part of `digits`.
inline std::string group_digits(const std::string& digits, char separator, std::size_t size) {
  std::size_t end = digits.find_first_not_of(size == 3 ? "0123456789" : "0123456789abcdefABCDEF");
  if (end == std::string::npos) end = digits.size();
  std::string out;
  for (std::size_t i = 0; i < end; ++i) {
    if (i && (end - i) % size == 0) out += separator;
    out += digits[i];
  }
  return out + digits.substr(end);
}

inline std::string format_string(std::string_view text, const FormatSpec& spec) {
  if (spec.type != '\0' && spec.type != 's') {
    fail("Unknown format code '", spec.type, "' for object of type 'str'");
  }
  if (spec.sign != '-') fail("Sign not allowed in string format specifier");
  if (spec.alternate) fail("Alternate form (#) not allowed in string format specifier");
  if (spec.grouping) fail("Cannot specify '", spec.grouping, "' with 's'.");
  if (spec.align == '=') fail("'=' alignment not allowed in string format specifier");
  std::string body(text);
  if (spec.precision >= 0) {
    const std::vector<char32_t> points = code_points(text);
    if (static_cast<std::size_t>(spec.precision) < points.size()) {
      body = from_code_points(points, 0, static_cast<std::size_t>(spec.precision));
    }
  }
  return format_align("", body, spec, '<');
}

inline std::string format_float(double value, const FormatSpec& spec);

inline std::string format_int(std::int64_t value, const FormatSpec& spec) {
  const char type = spec.type;
  if (type == 'e' || type == 'E' || type == 'f' || type == 'F' || type == 'g' || type == 'G' ||
      type == '%') {
    return format_float(static_cast<double>(value), spec);
  }
  if (type != '\0' && type != 'd' && type != 'n' && type != 'b' && type != 'o' && type != 'x' &&
      type != 'X' && type != 'c') {
    fail("Unknown format code '", type, "' for object of type 'int'");
  }
  if (spec.precision >= 0) fail("Precision not allowed in integer format specifier");
  if (type == 'c') {
    if (value < 0 || value > 0x10FFFF) fail("%c arg not in range(0x110000)");
    std::string out;
    unicode::append_utf8(out, static_cast<char32_t>(value));
    return format_align("", out, spec, '>');
  }
  const int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
  std::uint64_t magnitude =
      value < 0 ? 0 - static_cast<std::uint64_t>(value) : static_cast<std::uint64_t>(value);
  std::string digits;
  do {
    const int d = static_cast<int>(magnitude % static_cast<unsigned>(base));
    digits.insert(digits.begin(),
                  static_cast<char>(d < 10 ? '0' + d : (type == 'X' ? 'A' : 'a') + d - 10));
    magnitude /= static_cast<unsigned>(base);
  } while (magnitude);
  if (spec.grouping == ',' && base != 10) fail("Cannot specify ',' with '", type, "'.");
  if (spec.grouping) digits = group_digits(digits, spec.grouping, base == 10 ? 3 : 4);
  std::string sign = value < 0 ? "-" : spec.sign == '+' ? "+" : spec.sign == ' ' ? " " : "";
  if (spec.alternate && base != 10) {
    sign += base == 2 ? "0b" : base == 8 ? "0o" : type == 'X' ? "0X" : "0x";
  }
  return format_align(sign, digits, spec, '>');
}

inline std::string format_float(double value, const FormatSpec& spec) {
  char type = spec.type;
  if (type != '\0' && type != 'e' && type != 'E' && type != 'f' && type != 'F' && type != 'g' &&
      type != 'G' && type != 'n' && type != '%') {
    fail("Unknown format code '", type, "' for object of type 'float'");
  }
  if (type == 'n') type = 'g';
  const bool negative = std::signbit(value) && !std::isnan(value);
  double magnitude = std::fabs(value);
  if (type == '%') magnitude *= 100;
  std::string body;
  const bool upper = type == 'E' || type == 'F' || type == 'G';
  if (!std::isfinite(magnitude)) {
    body = std::isnan(magnitude) ? "nan" : "inf";
    if (upper) body = python::upper(body);
  } else if (type == '\0' && spec.precision < 0) {
    body = float_repr(magnitude);
  } else {
    const int precision = static_cast<int>(spec.precision < 0 ? 6 : spec.precision);
    const auto print = [&](char conversion, int digits) {
      const std::string format = std::string(spec.alternate ? "%#.*" : "%.*") + conversion;
      return c_format(format.c_str(), digits, magnitude);
    };
    if (type == '\0') {
      // like 'g', but scientific from an exponent of precision - 1 on, and a fixed result
      // keeps a digit after the point ("1.0")
      const int p = precision == 0 ? 1 : precision;
      const std::string scientific = c_format("%.*e", p - 1, magnitude);
      const std::size_t e_at = scientific.find('e');
      const int exponent = std::atoi(scientific.c_str() + e_at + 1);
      if (exponent < -4 || exponent >= p - 1) {
        std::string mantissa = scientific.substr(0, e_at);
        if (!spec.alternate && mantissa.find('.') != std::string::npos) {
          while (mantissa.back() == '0') mantissa.pop_back();
          if (mantissa.back() == '.') mantissa.pop_back();
        }
        const int e = exponent < 0 ? -exponent : exponent;
        body = mantissa + (exponent < 0 ? "e-" : "e+") + (e < 10 ? "0" : "") + std::to_string(e);
      } else {
        body = c_format("%.*f", p - 1 - exponent, magnitude);
        if (!spec.alternate && body.find('.') != std::string::npos) {
          while (body.back() == '0') body.pop_back();
        }
        if (body.back() == '.') body += '0';
        if (body.find('.') == std::string::npos) body += ".0";
      }
    } else if (type == '%') {
      body = print('f', precision) + "%";
    } else {
      const bool general = type == 'g' || type == 'G';
      body = print(type, general && precision == 0 ? 1 : precision);
    }
  }
  bool sign_negative = negative;
  if (spec.no_negative_zero && negative && body.find_first_of("123456789") == std::string::npos) {
    sign_negative = false;  // z: -0.0 rounds to 0
  }
  if (spec.grouping) body = group_digits(body, spec.grouping, 3);
  const std::string sign = sign_negative      ? "-"
                           : spec.sign == '+' ? "+"
                           : spec.sign == ' ' ? " "
                                              : "";
  return format_align(sign, body, spec, '>');
}

// x / y for integers, correctly rounded as Python's int.__truediv__ is (converting both
// to double first rounds twice once they pass 2**53). y is not 0.
inline double int_true_divide(std::int64_t x, std::int64_t y) {
  constexpr std::int64_t kExact = std::int64_t{1} << 53;
  if (x > -kExact && x < kExact && y > -kExact && y < kExact) {
    return static_cast<double>(x) / static_cast<double>(y);
  }
  const bool negative = (x < 0) != (y < 0);
  const std::uint64_t a = x < 0 ? 0 - static_cast<std::uint64_t>(x) : static_cast<std::uint64_t>(x);
  const std::uint64_t b = y < 0 ? 0 - static_cast<std::uint64_t>(y) : static_cast<std::uint64_t>(y);
  if (a == 0) return negative ? -0.0 : 0.0;
  // The quotient's first 62 bits by long division, and a sticky bit for all below: the
  // hardware's conversion of that to double then rounds once, to nearest even.
  std::uint64_t q = a / b, r = a % b, mantissa = 0;
  int exponent = 0, bits = 0;
  bool sticky = false;
  if (q != 0) {
    bits = 64 - __builtin_clzll(q);
    if (bits > 62) {
      const int drop = bits - 62;
      sticky = (q & ((std::uint64_t{1} << drop) - 1)) != 0;
      mantissa = q >> drop;
      exponent = drop;
      bits = 62;
    } else {
      mantissa = q;
    }
  }
  while (bits < 62) {  // r < b < 2**63, so r << 1 fits
    r <<= 1;
    const bool bit = r >= b;
    if (bit) r -= b;
    mantissa = (mantissa << 1) | (bit ? 1 : 0);
    --exponent;
    if (mantissa) ++bits;
  }
  sticky = sticky || r != 0;
  const double value =
      std::ldexp(static_cast<double>((mantissa << 1) | (sticky ? 1 : 0)), exponent - 1);
  return negative ? -value : value;
}

// Python's comparison of an int with a float: exact (2**53 + 1 > 2.0**53), not after
// converting the int. -1, 0, 1, or 2 when the float is NaN (unordered).
inline int compare_int_float(std::int64_t i, double d) {
  if (std::isnan(d)) return 2;
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  const double whole = std::floor(d);
  const auto w = static_cast<std::int64_t>(whole);
  if (i != w) return i < w ? -1 : 1;
  return d > whole ? -1 : 0;
}

}  // namespace smol::python
