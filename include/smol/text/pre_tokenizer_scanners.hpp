// Hand-written scanners for the two patterns that most vocabularies use, GPT-2's and
// Llama-3's. They give the same pieces as CodepointRegex on the same pattern (the test
// "fast scanners split like the regex" checks it on a corpus) at a fraction of the cost,
// the way llama.cpp's unicode_regex_split_custom_gpt2/_llama3 stand in for std::regex.
//
// Each returns, for a position `i` inside a piece that ends at `end`, where the next
// piece ends: the match starting at `i`, or `i + 1` where no alternative matches there
// (llama.cpp's regex split makes that code point a piece of its own too).
#pragma once

#include <cstddef>

#include "smol/text/classified_text.hpp"

namespace smol::pre_tokenizer_scanners {

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
  // \s+(?!\S) leaves the last space to the word after it. A run that reaches the end of
  // the piece is taken whole, and so is a single space before \S: Llama-3's \s+, and in
  // GPT-2's pattern (which has no \s+) the unmatched code point that is a piece anyway.
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

}  // namespace smol::pre_tokenizer_scanners
