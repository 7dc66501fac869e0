// Writing GBNF text: literals and character classes spelled so that parse_gbnf reads
// back exactly the code points meant. Used by the generators of grammar text (JSON
// schemas, regex patterns).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "smol/core/error.hpp"
#include "smol/grammar/grammar.hpp"
#include "smol/text/unicode.hpp"

namespace smol::gbnf_text {

// One code point inside a GBNF literal or class: printable ASCII as itself (except the
// characters GBNF gives a meaning there), everything else as a hex escape.
inline std::string escape_code_point(std::uint32_t cp) {
  const bool plain = cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\' && cp != '[' && cp != ']' &&
                     cp != '-' && cp != '^';
  if (plain) return std::string(1, static_cast<char>(cp));
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = cp <= 0xFF ? "\\x" : cp <= 0xFFFF ? "\\u" : "\\U";
  const int digits = cp <= 0xFF ? 2 : cp <= 0xFFFF ? 4 : 8;
  for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 0xF];
  return out;
}

// A GBNF literal that matches exactly `text` (UTF-8).
inline std::string literal(std::string_view text) {
  std::string out = "\"";
  for (std::size_t pos = 0; pos < text.size();) {
    const unicode::DecodedCodepoint d = unicode::decode_utf8(text, pos);
    if (d.status != unicode::Utf8Status::valid) fail("grammar text: invalid UTF-8 in a literal");
    out += escape_code_point(static_cast<std::uint32_t>(d.codepoint));
    pos += d.length;
  }
  return out + "\"";
}

// A GBNF character class matching exactly the code points of `chars` (which must not
// be empty: GBNF's `[]` would match nothing, which callers handle before).
inline std::string char_class(const CharClass& chars) {
  std::string out = "[";
  for (const CharClass::Range& r : chars.ranges()) {
    out += escape_code_point(r.first);
    if (r.last != r.first) {
      out += '-';  // appended apart: "-" + string trips GCC 12's -Wrestrict (its bug 105329)
      out += escape_code_point(r.last);
    }
  }
  return out + "]";
}

}  // namespace smol::gbnf_text
