// Pre-tokenizers: the regex splits that byte-level BPE applies before merging.
//
// The patterns need \p{L}, \p{N} and look-ahead, which std::regex lacks, and a
// general regex engine would be a heavy dependency for three fixed patterns; each
// is therefore a small hand-written scanner that tries the alternatives in the
// pattern's order, with the same greedy/backtracking outcome a regex engine gives.
//
// Invalid UTF-8 bytes are classified like U+FFFD (neither letter, number nor space)
// but stay in the pieces as the original bytes, so nothing the caller wrote is lost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "smol/text/unicode.hpp"

namespace smol {

enum class PreTokenizer : std::uint8_t {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  llama3,
  // llama.cpp's "smollm": split off every single \p{N} first, then gpt2 on the rest.
  smollm,
};

struct PreTokenizerLookup {
  PreTokenizer kind = PreTokenizer::gpt2;
  bool known = false;
};

// Maps tokenizer.ggml.pre to a scanner; unknown names fall back to gpt2.
inline PreTokenizerLookup find_pre_tokenizer(std::string_view name) {
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") {
    return {PreTokenizer::llama3, true};
  }
  if (name == "smollm") return {PreTokenizer::smollm, true};
  if (name == "gpt2" || name == "gpt-2") return {PreTokenizer::gpt2, true};
  return {PreTokenizer::gpt2, false};
}

namespace detail {

// Text decoded once into code points with their classes and byte offsets.
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
  std::size_t byte_offset(std::size_t i) const { return offsets_[i]; }
  bool letter(std::size_t i) const { return (flags_[i] & unicode::tables::kLetter) != 0; }
  bool number(std::size_t i) const { return (flags_[i] & unicode::tables::kNumber) != 0; }
  bool space(std::size_t i) const { return (flags_[i] & unicode::tables::kWhitespace) != 0; }
  // [^\s\p{L}\p{N}]
  bool other(std::size_t i) const { return flags_[i] == 0; }
  bool line_break(std::size_t i) const { return at(i) == U'\r' || at(i) == U'\n'; }

 private:
  std::vector<char32_t> codepoints_;
  std::vector<std::uint8_t> flags_;
  std::vector<std::size_t> offsets_;
};

inline char32_t ascii_lower(char32_t c) {
  return (c >= U'A' && c <= U'Z') ? c + 32 : c;
}

// Length (in code points) of a contraction 's 't 're 've 'm 'll 'd at `i`, or 0.
inline std::size_t contraction_length(const ClassifiedText& text, std::size_t i, std::size_t end,
                                      bool ignore_case) {
  if (text.at(i) != U'\'' || i + 1 >= end) return 0;
  const auto fold = [&](char32_t c) { return ignore_case ? ascii_lower(c) : c; };
  const char32_t first = fold(text.at(i + 1));
  if (first == U's' || first == U't' || first == U'm' || first == U'd') return 2;
  if (i + 2 >= end) return 0;
  const char32_t second = fold(text.at(i + 2));
  if ((first == U'r' && second == U'e') || (first == U'v' && second == U'e') ||
      (first == U'l' && second == U'l')) {
    return 3;
  }
  return 0;
}

// \s*[\r\n]+ | \s+(?!\S) | \s+ at `i` (a whitespace code point), in that order.
inline std::size_t whitespace_end(const ClassifiedText& text, std::size_t i, std::size_t end,
                                  bool newline_alternative) {
  std::size_t run_end = i;
  std::size_t after_last_break = 0;
  while (run_end < end && text.space(run_end)) {
    if (text.line_break(run_end)) after_last_break = run_end + 1;
    ++run_end;
  }
  // \s* backtracks from the end of the run to the last line break it can hand to [\r\n]+.
  if (newline_alternative && after_last_break != 0) return after_last_break;
  // \s+(?!\S): the whole run at the end of the text, else all but the last space.
  if (run_end == end || run_end - i == 1) return run_end;
  return run_end - 1;
}

// One match of the GPT-2 pattern starting at `i`; returns its end.
inline std::size_t gpt2_match_end(const ClassifiedText& text, std::size_t i, std::size_t end) {
  if (const std::size_t n = contraction_length(text, i, end, false)) return i + n;
  const std::size_t j = (text.at(i) == U' ' && i + 1 < end) ? i + 1 : i;  // " ?"
  const auto run_of = [&](auto&& in_class) {
    std::size_t k = j;
    while (k < end && in_class(k)) ++k;
    return k;
  };
  if (text.letter(j)) return run_of([&](std::size_t k) { return text.letter(k); });
  if (text.number(j)) return run_of([&](std::size_t k) { return text.number(k); });
  if (text.other(j)) return run_of([&](std::size_t k) { return text.other(k); });
  return whitespace_end(text, i, end, false);
}

// One match of the Llama-3 pattern starting at `i`; returns its end.
inline std::size_t llama3_match_end(const ClassifiedText& text, std::size_t i, std::size_t end) {
  if (const std::size_t n = contraction_length(text, i, end, true)) return i + n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  std::size_t j = i;
  if (!text.letter(i) && !text.number(i) && !text.line_break(i) && i + 1 < end) j = i + 1;
  if (text.letter(j)) {
    while (j < end && text.letter(j)) ++j;
    return j;
  }
  // \p{N}{1,3}
  if (text.number(i)) {
    j = i;
    while (j < end && j - i < 3 && text.number(j)) ++j;
    return j;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  j = (text.at(i) == U' ' && i + 1 < end) ? i + 1 : i;
  if (text.other(j)) {
    while (j < end && text.other(j)) ++j;
    while (j < end && text.line_break(j)) ++j;
    return j;
  }
  return whitespace_end(text, i, end, true);
}

template <class MatchEnd>
void split_range(const ClassifiedText& text, std::string_view bytes, std::size_t begin,
                 std::size_t end, MatchEnd match_end, std::vector<std::string_view>& pieces) {
  for (std::size_t i = begin; i < end;) {
    const std::size_t next = match_end(text, i, end);
    pieces.push_back(
        bytes.substr(text.byte_offset(i), text.byte_offset(next) - text.byte_offset(i)));
    i = next;
  }
}

}  // namespace detail

// Splits `text` into pre-tokens (views into `text`) that concatenate back to it.
inline std::vector<std::string_view> pre_tokenize(std::string_view text, PreTokenizer kind) {
  std::vector<std::string_view> pieces;
  const detail::ClassifiedText classified(text);
  const std::size_t n = classified.size();
  switch (kind) {
    case PreTokenizer::gpt2:
      detail::split_range(classified, text, 0, n, detail::gpt2_match_end, pieces);
      break;
    case PreTokenizer::llama3:
      detail::split_range(classified, text, 0, n, detail::llama3_match_end, pieces);
      break;
    case PreTokenizer::smollm:
      for (std::size_t i = 0; i < n;) {
        if (classified.number(i)) {
          detail::split_range(classified, text, i, i + 1, detail::gpt2_match_end, pieces);
          ++i;
          continue;
        }
        std::size_t segment_end = i;
        while (segment_end < n && !classified.number(segment_end)) ++segment_end;
        detail::split_range(classified, text, i, segment_end, detail::gpt2_match_end, pieces);
        i = segment_end;
      }
      break;
  }
  return pieces;
}

}  // namespace smol
