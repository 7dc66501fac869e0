// Little-endian loads and stores for GGUF's packed, unaligned fields, and the quoting of
// untrusted names in error messages.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace smol::gguf::detail {

// GGUF v3 may be big-endian, but such files are rejected; what remains is stored exactly
// as a little-endian host holds it, so loads are plain copies.
static_assert(std::endian::native == std::endian::little,
              "the GGUF reader and writer assume a little-endian host");

// Fields sit at any byte offset, so they are copied out, never read through a T*.
template <class T>
T load(const std::byte* at) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

template <class T>
void store(std::byte* at, T value) noexcept {
  static_assert(std::is_trivially_copyable_v<T>);
  std::memcpy(at, &value, sizeof value);
}

// Appends `n` bytes to `out`. Written as resize + memcpy rather than vector::insert:
// GCC 12 at -O3 reports false out-of-bounds writes (-Wstringop-overflow,
// -Warray-bounds) in insert's inlined code, depending on the caller's context.
inline void append_bytes(std::vector<std::byte>& out, const void* bytes, std::size_t n) {
  if (n == 0) return;
  const std::size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, bytes, n);
}

// std::byteswap is C++23.
constexpr std::uint32_t swap_bytes(std::uint32_t value) noexcept {
  return (value >> 24) | ((value >> 8) & 0xff00u) | ((value << 8) & 0xff0000u) | (value << 24);
}

// Names from a file can be anything; keep messages one readable line and bounded.
inline std::string quoted(std::string_view text) {
  constexpr std::size_t kMaxShown = 120;
  std::string out = "'";
  const std::size_t shown = text.size() < kMaxShown ? text.size() : kMaxShown;
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (shown < text.size()) out += "...";
  out += "'";
  return out;
}

}  // namespace smol::gguf::detail
