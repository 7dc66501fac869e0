// Text decoded once into code points, each with its Unicode classes and byte offset:
// what the pre-tokenizer's scanners and regexes read, so that no step decodes twice.
//
// Invalid UTF-8 is classified like U+FFFD (a symbol: no letter, number, punctuation or
// space flag) but the pieces cut from the text keep the original bytes, so nothing the
// caller wrote is lost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "smol/text/unicode.hpp"

namespace smol {

class ClassifiedText {
 public:
  explicit ClassifiedText(std::string_view text) {
    codepoints_.reserve(text.size());
    flags_.reserve(text.size());
    offsets_.reserve(text.size() + 1);
    for (std::size_t pos = 0; pos < text.size();) {
      const auto decoded = unicode::decode_utf8(text, pos);
      const char32_t c = decoded.status == unicode::Utf8Status::valid
                             ? decoded.codepoint
                             : unicode::kReplacementCharacter;
      codepoints_.push_back(c);
      flags_.push_back(unicode::codepoint_flags(c));
      offsets_.push_back(pos);
      pos += decoded.length;
    }
    offsets_.push_back(text.size());
  }

  std::size_t size() const { return codepoints_.size(); }
  char32_t at(std::size_t i) const { return codepoints_[i]; }
  std::uint8_t flags(std::size_t i) const { return flags_[i]; }
  std::size_t byte_offset(std::size_t i) const { return offsets_[i]; }

  bool letter(std::size_t i) const { return (flags_[i] & unicode::tables::kLetter) != 0; }
  bool number(std::size_t i) const { return (flags_[i] & unicode::tables::kNumber) != 0; }
  bool space(std::size_t i) const { return (flags_[i] & unicode::tables::kWhitespace) != 0; }
  // [^\s\p{L}\p{N}]
  bool other(std::size_t i) const {
    constexpr std::uint8_t kWordOrSpace =
        unicode::tables::kLetter | unicode::tables::kNumber | unicode::tables::kWhitespace;
    return (flags_[i] & kWordOrSpace) == 0;
  }
  bool line_break(std::size_t i) const { return at(i) == U'\r' || at(i) == U'\n'; }

 private:
  std::vector<char32_t> codepoints_;
  std::vector<std::uint8_t> flags_;
  std::vector<std::size_t> offsets_;
};

}  // namespace smol
