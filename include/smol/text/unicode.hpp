// UTF-8 decoding and the Unicode classes that tokenizer regexes use (\p{L}, \p{N},
// \p{P}, \s).
//
// Why not ICU: it is a 30+ MB dependency for what amounts to a category lookup and
// a UTF-8 decoder; a generated range table (unicode_tables.hpp, ~20 KB) does the job.
// std::regex cannot help either: it has no \p{L} (see codepoint_regex.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "smol/text/unicode_tables.hpp"

namespace smol::unicode {

inline constexpr char32_t kReplacementCharacter = 0xFFFD;

enum class Utf8Status : std::uint8_t {
  valid,       // a complete, well-formed sequence
  invalid,     // ill-formed: `length` bytes (the maximal bad subpart) to replace by U+FFFD
  incomplete,  // a well-formed prefix cut short by the end of the input
};

struct DecodedCodepoint {
  char32_t codepoint = kReplacementCharacter;
  std::uint8_t length = 1;  // bytes consumed (>= 1 unless the input was empty)
  Utf8Status status = Utf8Status::invalid;
};

// Decodes one code point at `pos` following Unicode's table of well-formed byte
// sequences (no overlongs, no surrogates, nothing above U+10FFFF). An ill-formed
// sequence reports its "maximal subpart" length, the unit that Python, browsers and
// Unicode §3.9 replace with a single U+FFFD.
inline DecodedCodepoint decode_utf8(std::string_view text, std::size_t pos) {
  const auto byte_at = [&](std::size_t i) { return static_cast<std::uint8_t>(text[pos + i]); };
  const std::size_t available = text.size() - pos;
  const std::uint8_t lead = byte_at(0);
  if (lead < 0x80) return {lead, 1, Utf8Status::valid};

  std::size_t length = 0;
  char32_t codepoint = 0;
  std::uint8_t second_low = 0x80, second_high = 0xBF;  // allowed range of the 2nd byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, codepoint = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, codepoint = lead & 0x0Fu;
    if (lead == 0xE0) second_low = 0xA0;   // no overlongs
    if (lead == 0xED) second_high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, codepoint = lead & 0x07u;
    if (lead == 0xF0) second_low = 0x90;   // no overlongs
    if (lead == 0xF4) second_high = 0x8F;  // nothing above U+10FFFF
  } else {
    return {};  // a continuation byte, C0, C1 or F5..FF can never start a sequence
  }
  for (std::size_t i = 1; i < length; ++i) {
    if (i >= available)
      return {kReplacementCharacter, static_cast<std::uint8_t>(i), Utf8Status::incomplete};
    const std::uint8_t byte = byte_at(i);
    const std::uint8_t low = i == 1 ? second_low : 0x80;
    const std::uint8_t high = i == 1 ? second_high : 0xBF;
    if (byte < low || byte > high) {
      return {kReplacementCharacter, static_cast<std::uint8_t>(i), Utf8Status::invalid};
    }
    codepoint = (codepoint << 6) | (byte & 0x3Fu);
  }
  return {codepoint, static_cast<std::uint8_t>(length), Utf8Status::valid};
}

inline void append_utf8(std::string& out, char32_t codepoint) {
  if (codepoint < 0x80) {
    out += static_cast<char>(codepoint);
  } else if (codepoint < 0x800) {
    out += static_cast<char>(0xC0 | (codepoint >> 6));
    out += static_cast<char>(0x80 | (codepoint & 0x3F));
  } else if (codepoint < 0x10000) {
    out += static_cast<char>(0xE0 | (codepoint >> 12));
    out += static_cast<char>(0x80 | ((codepoint >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (codepoint & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (codepoint >> 18));
    out += static_cast<char>(0x80 | ((codepoint >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((codepoint >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (codepoint & 0x3F));
  }
}

inline std::string to_utf8(char32_t codepoint) {
  std::string out;
  append_utf8(out, codepoint);
  return out;
}

// ASCII dominates most text; a direct table spares it the binary search.
inline constexpr std::array<std::uint8_t, 128> kAsciiFlags = [] {
  std::array<std::uint8_t, 128> flags{};
  for (const auto& range : tables::kRanges) {
    for (char32_t c = range.first; c <= range.last && c < 128; ++c) flags[c] = range.flags;
  }
  return flags;
}();

// Flags from tables::kLetter / kNumber / kPunctuation / kWhitespace (0 for anything else).
inline std::uint8_t codepoint_flags(char32_t codepoint) {
  if (codepoint < 128) return kAsciiFlags[codepoint];
  const auto& ranges = tables::kRanges;
  const auto after = std::upper_bound(
      ranges.begin(), ranges.end(), codepoint,
      [](char32_t value, const tables::CodepointRange& range) { return value < range.first; });
  if (after == ranges.begin()) return 0;
  const auto& range = *(after - 1);
  return codepoint <= range.last ? range.flags : 0;
}

inline bool is_letter(char32_t c) {
  return (codepoint_flags(c) & tables::kLetter) != 0;
}
inline bool is_number(char32_t c) {
  return (codepoint_flags(c) & tables::kNumber) != 0;
}
inline bool is_whitespace(char32_t c) {
  return (codepoint_flags(c) & tables::kWhitespace) != 0;
}
inline bool is_punctuation(char32_t c) {
  return (codepoint_flags(c) & tables::kPunctuation) != 0;
}
// \p{C}: controls, formats, surrogates, private use and unassigned code points.
inline bool is_control(char32_t c) {
  return (codepoint_flags(c) & tables::kControl) != 0;
}
inline bool is_symbol(char32_t c) {
  return (codepoint_flags(c) & tables::kSymbol) != 0;
}
// \p{M}: combining marks (llama.cpp's is_accent_mark).
inline bool is_mark(char32_t c) {
  return (codepoint_flags(c) & tables::kMark) != 0;
}

// A code point's mapping in one of the generated tables, or the code point itself.
inline char32_t mapped(std::span<const tables::CodepointMapping> table, char32_t c) {
  const auto found = std::lower_bound(
      table.begin(), table.end(), c,
      [](const tables::CodepointMapping& m, char32_t value) { return m.from < value; });
  return found != table.end() && found->from == c ? found->to : c;
}

// Unicode's simple lowercase mapping (one code point to one).
inline char32_t to_lower(char32_t c) {
  if (c < 128) return c >= U'A' && c <= U'Z' ? c + 32 : c;
  return mapped(tables::kLowercase, c);
}

// The first code point of c's canonical decomposition (NFD): "é" gives "e". This is
// what llama.cpp's WordPiece normalization keeps of each code point (its
// unicode_cpts_normalize_nfd maps one to one), so the accents are dropped with the rest
// of the decomposition. A Hangul syllable's first is its leading consonant (jamo).
inline char32_t nfd_first(char32_t c) {
  constexpr char32_t kHangulFirst = 0xAC00, kHangulLast = 0xD7A3, kLeadingBase = 0x1100;
  constexpr char32_t kSyllablesPerLeading = 21 * 28;  // vowels x trailing consonants
  if (c < 0xC0) return c;
  if (c >= kHangulFirst && c <= kHangulLast) {
    return kLeadingBase + (c - kHangulFirst) / kSyllablesPerLeading;
  }
  return mapped(tables::kNfdFirst, c);
}

// Replaces every ill-formed part of `text` by U+FFFD; valid text comes back unchanged.
inline std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const DecodedCodepoint decoded = decode_utf8(text, pos);
    if (decoded.status == Utf8Status::valid) {
      out.append(text.substr(pos, decoded.length));
    } else {
      append_utf8(out, kReplacementCharacter);
    }
    pos += decoded.length;
  }
  return out;
}

}  // namespace smol::unicode
