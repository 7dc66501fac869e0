// GPT-2's reversible byte <-> printable-character mapping used by byte-level BPE.
//
// Byte-level vocabularies store every token as text in which each byte of the real
// token is replaced by one printable code point: bytes that are already printable
// Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves, and the other 68 bytes
// take U+0100, U+0101, ... in byte order (so a space is 'Ġ' U+0120, '\n' is 'Ċ').
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "smol/text/unicode.hpp"

namespace smol::byte_unicode {

constexpr bool stands_for_itself(unsigned byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

inline constexpr std::array<char32_t, 256> kByteToCodepoint = [] {
  std::array<char32_t, 256> table{};
  char32_t next_substitute = 0x100;
  for (unsigned byte = 0; byte < 256; ++byte) {
    table[byte] = stands_for_itself(byte) ? char32_t(byte) : next_substitute++;
  }
  return table;
}();

// The inverse, for code points U+0000..U+0143 (the largest substitute is U+0143).
inline constexpr std::size_t kMappedCodepointLimit = 0x144;
inline constexpr std::array<std::int16_t, kMappedCodepointLimit> kCodepointToByte = [] {
  std::array<std::int16_t, kMappedCodepointLimit> table{};
  for (auto& entry : table) entry = -1;
  for (unsigned byte = 0; byte < 256; ++byte) {
    table[kByteToCodepoint[byte]] = static_cast<std::int16_t>(byte);
  }
  return table;
}();

inline std::optional<std::uint8_t> codepoint_to_byte(char32_t codepoint) {
  if (codepoint >= kMappedCodepointLimit || kCodepointToByte[codepoint] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(kCodepointToByte[codepoint]);
}

// The vocabulary spelling of raw bytes: "hi there" -> "hiĠthere".
inline std::string encode_bytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char byte : bytes) {
    unicode::append_utf8(out, kByteToCodepoint[static_cast<std::uint8_t>(byte)]);
  }
  return out;
}

// Raw bytes of a vocabulary spelling. A code point outside the mapping (possible in
// hand-made or added tokens) is kept as its own UTF-8 rather than dropped.
inline std::string decode_bytes(std::string_view spelling) {
  std::string out;
  out.reserve(spelling.size());
  for (std::size_t pos = 0; pos < spelling.size();) {
    const auto decoded = unicode::decode_utf8(spelling, pos);
    const auto byte = decoded.status == unicode::Utf8Status::valid
                          ? codepoint_to_byte(decoded.codepoint)
                          : std::nullopt;
    if (byte) {
      out += static_cast<char>(*byte);
    } else {
      out.append(spelling.substr(pos, decoded.length));
    }
    pos += decoded.length;
  }
  return out;
}

}  // namespace smol::byte_unicode
