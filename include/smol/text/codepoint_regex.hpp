// CodepointRegex: a small backtracking regex over code points, for the splitting
// patterns of byte-level BPE vocabularies (pre_tokenizer.hpp holds them).
//
// Why hand-written: the patterns need \p{L}, \p{N}, \p{P} and the look-ahead (?!\S).
// std::regex knows neither Unicode classes nor code points (llama.cpp works around that
// by collapsing every code point to one byte that stands for its class), and no library
// smol depends on gives Unicode-class regexes with look-ahead. The patterns are short
// and fixed, so a compiler to a handful of instructions and one backtracking loop do.
//
// The semantics are those of llama.cpp's std::regex (ECMAScript) run over a piece:
//   - leftmost match; among alternatives the first that leads to a match (not the
//     longest); quantifiers greedy; a look-ahead is atomic;
//   - `$` and look-ahead see the piece being split and nothing beyond it;
//   - \p{L}, \p{N}, \p{P} are Unicode's general categories L*, N*, P* (from
//     unicode_tables.hpp); \s is Unicode's White_Space; \d is [0-9];
//   - a literal or a range compares the code point, except that a non-ASCII whitespace
//     code point compares as U+000B: llama.cpp replaces it by U+000B so that std::regex's
//     ASCII-only \s sees it, and the literals then see U+000B too.
//
// Syntax understood: UTF-8 literals; escapes \r \n \t \f \v and an escaped ASCII
// punctuation character; \s \S \d \p{L} \p{N} \p{P}; classes [...] and [^...] with
// ranges; groups (...) and (?:...); look-ahead (?=...) and (?!...); greedy ? * + {n}
// {n,} {n,m}; | and $. Anything else is refused with smol::Error, including (?i:...):
// std::regex has no inline flags, so llama.cpp spells case-insensitive contractions as
// '[sS]', and so do the patterns here. A pattern that can match the empty string is
// refused as well (splitting with it would emit empty pieces).
//
// Cost: every quantifier in these patterns repeats a single class, which runs as one
// instruction that backs off one code point at a time, so a match costs about its length
// plus the backtracking the pattern asks for (\s+(?!\S) backs off once).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/text/classified_text.hpp"
#include "smol/text/unicode.hpp"

namespace smol {

// A set of code points: listed ranges, Unicode categories, whitespace, or its complement.
class CodepointSet {
 public:
  void add_range(char32_t first, char32_t last) { ranges_.emplace_back(first, last); }
  void add_categories(std::uint8_t flags) { categories_ |= flags; }
  void add_whitespace() { whitespace_ = true; }
  void add_non_whitespace() { non_whitespace_ = true; }
  void negate() { negated_ = !negated_; }

  // Sorts and merges the ranges for binary search, and tabulates ASCII, the common case.
  void finish() {
    std::sort(ranges_.begin(), ranges_.end());
    std::vector<std::pair<char32_t, char32_t>> merged;
    for (const auto& range : ranges_) {
      if (!merged.empty() && range.first <= merged.back().second + 1) {
        merged.back().second = std::max(merged.back().second, range.second);
      } else {
        merged.push_back(range);
      }
    }
    ranges_ = std::move(merged);
    for (char32_t c = 0; c < 128; ++c) ascii_[c] = compute(c, unicode::codepoint_flags(c));
  }

  bool contains(char32_t c, std::uint8_t flags) const {
    return c < 128 ? ascii_[c] : compute(c, flags);
  }

 private:
  bool compute(char32_t c, std::uint8_t flags) const {
    const bool space = (flags & unicode::tables::kWhitespace) != 0;
    bool in = (flags & categories_) != 0 || (whitespace_ && space) || (non_whitespace_ && !space);
    if (!in) {
      const char32_t literal = (c >= 0x80 && space) ? U'\v' : c;
      const auto after = std::upper_bound(
          ranges_.begin(), ranges_.end(), literal,
          [](char32_t value, const std::pair<char32_t, char32_t>& r) { return value < r.first; });
      in = after != ranges_.begin() && literal <= (after - 1)->second;
    }
    return in != negated_;
  }

  std::vector<std::pair<char32_t, char32_t>> ranges_;
  std::uint8_t categories_ = 0;
  bool whitespace_ = false;
  bool non_whitespace_ = false;
  bool negated_ = false;
  std::array<bool, 128> ascii_{};
};

class CodepointRegex {
 public:
  // Compiles `pattern`; throws smol::Error naming the pattern and what is not understood.
  explicit CodepointRegex(std::string_view pattern) : pattern_(pattern) {
    Parser parser{*this, unicode_codepoints(pattern)};
    Node root = parser.parse_alternation();
    if (parser.pos != parser.cps.size()) parser.error("unbalanced ')'");
    if (nullable(root)) parser.error("it can match the empty string");
    compile(root);
    code_.push_back({.op = Op::match});
    for (CodepointSet& set : sets_) set.finish();
  }

  const std::string& pattern() const { return pattern_; }

  // Splits the code points [begin, end) of `text` as llama.cpp's unicode_regex_split
  // does: each match is a piece and so is each stretch between matches. Appends the end
  // of every piece to `piece_ends`.
  void split(const ClassifiedText& text, std::size_t begin, std::size_t end,
             std::vector<std::size_t>& piece_ends) const {
    std::vector<Backtrack> stack;
    std::size_t gap_begin = begin;
    for (std::size_t pos = begin; pos < end;) {
      std::size_t match_end = 0;
      if (!match_at(text, pos, end, stack, match_end)) {
        ++pos;
        continue;
      }
      if (pos > gap_begin) piece_ends.push_back(pos);
      piece_ends.push_back(match_end);
      pos = gap_begin = match_end;
    }
    if (gap_begin < end) piece_ends.push_back(end);
  }

  // Whether the pattern matches at `pos` (anchored there); its end in `match_end`.
  bool match_at(const ClassifiedText& text, std::size_t pos, std::size_t end,
                std::size_t& match_end) const {
    std::vector<Backtrack> stack;
    return match_at(text, pos, end, stack, match_end);
  }

 private:
  static constexpr std::uint32_t kUnbounded = std::numeric_limits<std::uint32_t>::max();

  enum class Op : std::uint8_t {
    set,           // one code point of sets_[a]
    repeat,        // min..max code points of sets_[a], greedy, backing off one at a time
    split,         // try pc a, on failure pc b
    jump,          // go to pc a
    look_ahead,    // the sub-program at pc + 1 must (or, if negative, must not) match here;
                   // then go on at pc a
    end_of_piece,  // $
    match,         // the end of the program or of a look-ahead's sub-program
  };
  struct Instruction {
    Op op{};
    std::uint32_t a = 0;
    std::uint32_t b = 0;
    std::uint32_t min = 0;
    std::uint32_t max = 0;
    bool negative = false;
  };

  // A state to go back to: resume at `pc` with the position `pos`; a repeat's state
  // also says how far it may still back off (`low`), and is retried one shorter each time.
  struct Backtrack {
    std::uint32_t pc;
    std::size_t pos;
    std::size_t low;
  };

  struct Node {
    enum class Kind : std::uint8_t { alternation, sequence, set, repeat, look_ahead, end_of_piece };
    Kind kind{};
    std::vector<Node> children{};
    std::uint32_t set = 0;
    std::uint32_t min = 0;
    std::uint32_t max = 0;
    bool negative = false;
  };

  static std::vector<char32_t> unicode_codepoints(std::string_view text) {
    std::vector<char32_t> cps;
    for (std::size_t pos = 0; pos < text.size();) {
      const auto decoded = unicode::decode_utf8(text, pos);
      if (decoded.status != unicode::Utf8Status::valid) fail("regex: the pattern is not UTF-8");
      cps.push_back(decoded.codepoint);
      pos += decoded.length;
    }
    return cps;
  }

  struct Parser {
    CodepointRegex& regex;
    std::vector<char32_t> cps;
    std::size_t pos = 0;

    [[noreturn]] void error(std::string_view what) const {
      fail("regex \"", regex.pattern_, "\": ", what, " (at code point ", pos, ")");
    }
    bool at_end() const { return pos >= cps.size(); }
    char32_t peek() const { return at_end() ? 0 : cps[pos]; }
    bool take(char32_t c) {
      if (at_end() || cps[pos] != c) return false;
      ++pos;
      return true;
    }

    Node parse_alternation() {
      Node alternation{.kind = Node::Kind::alternation};
      alternation.children.push_back(parse_sequence());
      while (take(U'|')) alternation.children.push_back(parse_sequence());
      return alternation.children.size() == 1 ? std::move(alternation.children[0]) : alternation;
    }

    Node parse_sequence() {
      Node sequence{.kind = Node::Kind::sequence};
      while (!at_end() && peek() != U'|' && peek() != U')') {
        sequence.children.push_back(parse_quantified());
      }
      return sequence;
    }

    Node parse_quantified() {
      Node atom = parse_atom();
      std::uint32_t min = 0, max = 0;
      if (take(U'?')) {
        min = 0, max = 1;
      } else if (take(U'*')) {
        min = 0, max = kUnbounded;
      } else if (take(U'+')) {
        min = 1, max = kUnbounded;
      } else if (take(U'{')) {
        min = max = parse_number();
        if (take(U',')) max = peek() == U'}' ? kUnbounded : parse_number();
        if (!take(U'}') || max < min) error("a malformed {n,m}");
      } else {
        return atom;
      }
      if (peek() == U'?' || peek() == U'+') error("lazy and possessive quantifiers");
      if (atom.kind == Node::Kind::look_ahead || atom.kind == Node::Kind::end_of_piece) {
        error("a quantified assertion");
      }
      if (max == kUnbounded && nullable(atom)) error("a repeated group that can match nothing");
      Node repeat{.kind = Node::Kind::repeat};
      repeat.children.push_back(std::move(atom));
      repeat.min = min, repeat.max = max;
      return repeat;
    }

    std::uint32_t parse_number() {
      if (at_end() || peek() < U'0' || peek() > U'9') error("a number expected in {n,m}");
      std::uint32_t n = 0;
      while (!at_end() && peek() >= U'0' && peek() <= U'9') {
        n = n * 10 + static_cast<std::uint32_t>(cps[pos++] - U'0');
        if (n > 10000) error("a repetition count above 10000");
      }
      return n;
    }

    Node parse_atom() {
      if (at_end()) error("an atom expected");
      const char32_t c = cps[pos++];
      switch (c) {
        case U'(':
          return parse_group();
        case U'[':
          return set_node(parse_class());
        case U'$':
          return Node{.kind = Node::Kind::end_of_piece};
        case U'\\': {
          CodepointSet set;
          parse_escape().add_to(set);
          return set_node(std::move(set));
        }
        case U'.':
        case U'^':
        case U'*':
        case U'+':
        case U'?':
        case U'{':
        case U'}':
        case U']':
          --pos;
          error("an unsupported or misplaced metacharacter");
        default: {
          CodepointSet set;
          set.add_range(c, c);
          return set_node(std::move(set));
        }
      }
    }

    Node parse_group() {
      Node group{.kind = Node::Kind::sequence};
      if (take(U'?')) {
        if (peek() == U'=' || peek() == U'!') {
          group.kind = Node::Kind::look_ahead;
          group.negative = cps[pos++] == U'!';
        } else if (!take(U':')) {
          error("a group flag other than ?: ?= ?! (llama.cpp writes (?i:'s) as '[sS])");
        }
      }
      group.children.push_back(parse_alternation());
      if (!take(U')')) error("a missing ')'");
      return group;
    }

    CodepointSet parse_class() {
      CodepointSet set;
      if (take(U'^')) set.negate();
      for (bool first = true;; first = false) {
        if (at_end()) error("a missing ']'");
        char32_t start = cps[pos++];
        if (start == U']' && !first) break;
        if (start == U'\\') {
          const Escape escape = parse_escape();
          if (escape.character == 0) {  // \s, \p{L}, ...: a class of its own
            escape.add_to(set);
            continue;
          }
          start = escape.character;
        }
        char32_t last = start;
        if (peek() == U'-' && pos + 1 < cps.size() && cps[pos + 1] != U']') {
          ++pos;
          last = cps[pos++];
          if (last == U'\\') last = parse_escape().character;
          if (last == 0) error("a class escape as the end of a range");
          if (last < start) error("a range whose end comes before its start");
        }
        set.add_range(start, last);
      }
      return set;
    }

    // What a backslash escape stands for: one character, or a class (\s \S \d \p{X}).
    struct Escape {
      char32_t character = 0;
      std::uint8_t categories = 0;
      bool whitespace = false;
      bool non_whitespace = false;
      bool digit = false;

      void add_to(CodepointSet& set) const {
        if (character != 0) set.add_range(character, character);
        if (categories != 0) set.add_categories(categories);
        if (whitespace) set.add_whitespace();
        if (non_whitespace) set.add_non_whitespace();
        if (digit) set.add_range(U'0', U'9');
      }
    };

    // After a backslash.
    Escape parse_escape() {
      if (at_end()) error("a trailing backslash");
      const char32_t c = cps[pos++];
      switch (c) {
        case U's':
          return {.whitespace = true};
        case U'S':
          return {.non_whitespace = true};
        case U'd':
          return {.digit = true};
        case U'r':
          return {.character = U'\r'};
        case U'n':
          return {.character = U'\n'};
        case U't':
          return {.character = U'\t'};
        case U'f':
          return {.character = U'\f'};
        case U'v':
          return {.character = U'\v'};
        case U'p': {
          if (!take(U'{') || pos + 1 >= cps.size() || cps[pos + 1] != U'}') {
            error("a \\p{...} other than \\p{L}, \\p{N}, \\p{P}");
          }
          const char32_t name = cps[pos];
          pos += 2;
          if (name == U'L') return {.categories = unicode::tables::kLetter};
          if (name == U'N') return {.categories = unicode::tables::kNumber};
          if (name == U'P') return {.categories = unicode::tables::kPunctuation};
          error("a \\p{...} other than \\p{L}, \\p{N}, \\p{P}");
        }
        default: {
          const bool alphanumeric =
              (c >= U'0' && c <= U'9') || (c >= U'A' && c <= U'Z') || (c >= U'a' && c <= U'z');
          if (c >= 128 || alphanumeric) {
            --pos;
            error("an unsupported escape");
          }
          return {.character = c};  // escaped punctuation stands for itself
        }
      }
    }

    Node set_node(CodepointSet set) {
      regex.sets_.push_back(std::move(set));
      Node node{.kind = Node::Kind::set};
      node.set = static_cast<std::uint32_t>(regex.sets_.size() - 1);
      return node;
    }
  };

  static bool nullable(const Node& node) {
    switch (node.kind) {
      case Node::Kind::set:
        return false;
      case Node::Kind::look_ahead:
      case Node::Kind::end_of_piece:
        return true;
      case Node::Kind::repeat:
        return node.min == 0 || nullable(node.children[0]);
      case Node::Kind::sequence:
        return std::all_of(node.children.begin(), node.children.end(), nullable);
      case Node::Kind::alternation:
        return std::any_of(node.children.begin(), node.children.end(), nullable);
    }
    return true;
  }

  std::uint32_t here() const { return static_cast<std::uint32_t>(code_.size()); }

  void compile(const Node& node) {
    switch (node.kind) {
      case Node::Kind::set:
        code_.push_back({.op = Op::set, .a = node.set});
        break;
      case Node::Kind::end_of_piece:
        code_.push_back({.op = Op::end_of_piece});
        break;
      case Node::Kind::sequence:
        for (const Node& child : node.children) compile(child);
        break;
      case Node::Kind::alternation: {
        std::vector<std::uint32_t> jumps_to_end;
        for (std::size_t i = 0; i < node.children.size(); ++i) {
          const bool last = i + 1 == node.children.size();
          const std::uint32_t split = here();
          if (!last) code_.push_back({.op = Op::split, .a = split + 1});
          compile(node.children[i]);
          if (!last) {
            jumps_to_end.push_back(here());
            code_.push_back({.op = Op::jump});
            code_[split].b = here();
          }
        }
        for (const std::uint32_t jump : jumps_to_end) code_[jump].a = here();
        break;
      }
      case Node::Kind::look_ahead: {
        const std::uint32_t look = here();
        code_.push_back({.op = Op::look_ahead, .negative = node.negative});
        compile(node.children[0]);
        code_.push_back({.op = Op::match});
        code_[look].a = here();
        break;
      }
      case Node::Kind::repeat: {
        const Node& body = node.children[0];
        if (body.kind == Node::Kind::set) {
          code_.push_back({.op = Op::repeat, .a = body.set, .min = node.min, .max = node.max});
          break;
        }
        for (std::uint32_t i = 0; i < node.min; ++i) compile(body);
        if (node.max == kUnbounded) {
          const std::uint32_t loop = here();
          code_.push_back({.op = Op::split, .a = loop + 1});
          compile(body);
          code_.push_back({.op = Op::jump, .a = loop});
          code_[loop].b = here();
        } else {
          std::vector<std::uint32_t> splits;
          for (std::uint32_t i = node.min; i < node.max; ++i) {
            splits.push_back(here());
            code_.push_back({.op = Op::split, .a = here() + 1});
            compile(body);
          }
          for (const std::uint32_t split : splits) code_[split].b = here();
        }
        break;
      }
    }
  }

  bool in_set(std::uint32_t set, const ClassifiedText& text, std::size_t pos) const {
    return sets_[set].contains(text.at(pos), text.flags(pos));
  }

  bool match_at(const ClassifiedText& text, std::size_t start, std::size_t end,
                std::vector<Backtrack>& stack, std::size_t& match_end) const {
    stack.clear();
    return run(0, start, text, end, stack, match_end);
  }

  // Runs the program from `pc` at `pos`; the states it pushes above the stack's current
  // size are its own, so a look-ahead runs as a nested call on the same stack.
  bool run(std::uint32_t pc, std::size_t pos, const ClassifiedText& text, std::size_t end,
           std::vector<Backtrack>& stack, std::size_t& match_end) const {
    const std::size_t base = stack.size();
    const auto backtrack = [&]() {
      if (stack.size() == base) return false;
      Backtrack& state = stack.back();
      pc = state.pc;
      pos = state.pos;
      if (state.pos > state.low) {
        --state.pos;  // a repeat: next time, one code point shorter
      } else {
        stack.pop_back();
      }
      return true;
    };
    while (true) {
      const Instruction& in = code_[pc];
      bool ok = true;
      switch (in.op) {
        case Op::set:
          ok = pos < end && in_set(in.a, text, pos);
          if (ok) {
            ++pos;
            ++pc;
          }
          break;
        case Op::repeat: {
          const std::size_t first = pos;
          std::size_t count = 0;
          while (count < in.max && pos < end && in_set(in.a, text, pos)) {
            ++pos;
            ++count;
          }
          ok = count >= in.min;
          if (ok) {
            ++pc;
            if (count > in.min) stack.push_back({.pc = pc, .pos = pos - 1, .low = first + in.min});
          }
          break;
        }
        case Op::split:
          stack.push_back({.pc = in.b, .pos = pos, .low = pos});
          pc = in.a;
          break;
        case Op::jump:
          pc = in.a;
          break;
        case Op::look_ahead: {
          std::size_t ignored = 0;
          // The nested run leaves the stack as it found it: a look-ahead is atomic.
          const bool matched = run(pc + 1, pos, text, end, stack, ignored);
          ok = matched != in.negative;
          if (ok) pc = in.a;
          break;
        }
        case Op::end_of_piece:
          ok = pos == end;
          if (ok) ++pc;
          break;
        case Op::match:
          match_end = pos;
          stack.resize(base);
          return true;
      }
      if (!ok && !backtrack()) return false;
    }
  }

  std::string pattern_;
  std::vector<CodepointSet> sets_;
  std::vector<Instruction> code_;
};

}  // namespace smol
