// Grammar: a context-free grammar over Unicode code points, compiled into one flat
// array of elements, the form the recognizer walks. It is made by parse_gbnf
// (grammar/gbnf.hpp), which is also how JSON schemas become grammars, and is immutable
// once made: many requests share one through a shared_ptr.
//
// Layout (close to llama.cpp's, so that its GBNF means the same here): each rule has
// alternatives, each alternative is a run of elements in `elements` ended by an `end`
// element. An element is a character class (a terminal: one code point of the class) or
// a reference to a rule. A *position* is an index into `elements`; a position on a
// character class is where the recognizer waits for input.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace smol {

inline constexpr std::uint32_t kMaxCodePoint = 0x10FFFF;

// A set of code points as sorted, disjoint, non-adjacent closed ranges. Negation
// (`[^...]`) and `.` are resolved when the grammar is built, so matching is one binary
// search whatever the source syntax was.
class CharClass {
 public:
  struct Range {
    std::uint32_t first, last;  // inclusive
    friend auto operator<=>(const Range&, const Range&) = default;
  };

  CharClass() = default;
  static CharClass any() {
    CharClass c;
    c.ranges_.push_back({0, kMaxCodePoint});
    return c;
  }
  static CharClass single(std::uint32_t cp) {
    CharClass c;
    c.ranges_.push_back({cp, cp});
    return c;
  }

  // A class of many ranges at once, sorted and merged once (add() does it per range).
  static CharClass of(std::vector<Range> ranges) {
    CharClass c;
    for (Range& r : ranges) r.last = std::min(r.last, kMaxCodePoint);
    c.ranges_ = std::move(ranges);
    c.normalize();
    return c;
  }

  void add(std::uint32_t first, std::uint32_t last) {
    if (first > last) std::swap(first, last);
    ranges_.push_back({first, std::min(last, kMaxCodePoint)});
    normalize();
  }

  CharClass complement() const {
    CharClass c;
    std::uint32_t next = 0;
    for (const Range& r : ranges_) {
      if (r.first > next) c.ranges_.push_back({next, r.first - 1});
      next = r.last + 1;
    }
    if (next <= kMaxCodePoint) c.ranges_.push_back({next, kMaxCodePoint});
    return c;
  }

  bool contains(std::uint32_t cp) const {
    // The first range that ends at or after cp.
    const auto it = std::lower_bound(ranges_.begin(), ranges_.end(), cp,
                                     [](const Range& r, std::uint32_t v) { return r.last < v; });
    return it != ranges_.end() && it->first <= cp;
  }

  // Whether any code point in [first, last] is in the class: a partial UTF-8 sequence
  // stands for such an interval of possible code points.
  bool intersects(std::uint32_t first, std::uint32_t last) const {
    const auto it = std::lower_bound(ranges_.begin(), ranges_.end(), first,
                                     [](const Range& r, std::uint32_t v) { return r.last < v; });
    return it != ranges_.end() && it->first <= last;
  }

  bool empty() const { return ranges_.empty(); }
  const std::vector<Range>& ranges() const { return ranges_; }
  friend bool operator==(const CharClass&, const CharClass&) = default;

 private:
  void normalize() {
    std::sort(ranges_.begin(), ranges_.end(),
              [](const Range& a, const Range& b) { return a.first < b.first; });
    std::vector<Range> merged;
    for (const Range& r : ranges_) {
      if (!merged.empty() && r.first <= merged.back().last + 1) {
        merged.back().last = std::max(merged.back().last, r.last);
      } else {
        merged.push_back(r);
      }
    }
    ranges_ = std::move(merged);
  }

  std::vector<Range> ranges_;
};

struct GrammarElement {
  enum class Kind : std::uint8_t {
    characters,  // one code point of classes[value]
    rule,        // rules[value], any of its alternatives
    end,         // the end of an alternative
  };
  Kind kind = Kind::end;
  std::uint32_t value = 0;
};

struct GrammarRule {
  std::string name;  // as written, or "<parent>_<n>" for groups and repetitions
  std::vector<std::uint32_t> alternatives;  // the position of each alternative's first element
  std::string origin;      // the rule as written that a group or repetition helper belongs to
  std::uint32_t line = 0;  // where `origin` is defined in the grammar's text; 0: generated text
};

class Grammar {
 public:
  Grammar(std::vector<GrammarRule> rules, std::vector<GrammarElement> elements,
          std::vector<CharClass> classes, std::uint32_t root)
      : rules_(std::move(rules)),
        elements_(std::move(elements)),
        classes_(std::move(classes)),
        root_(root) {
    for (const GrammarRule& rule : rules_) {
      first_positions_.push_back(rule.alternatives.empty() ? kNoPosition
                                                           : rule.alternatives.front());
    }
  }

  const std::vector<GrammarRule>& rules() const { return rules_; }
  const GrammarElement& element(std::uint32_t position) const { return elements_[position]; }
  const CharClass& char_class(std::uint32_t index) const { return classes_[index]; }
  std::size_t element_count() const { return elements_.size(); }
  std::uint32_t root() const { return root_; }

  // The rule whose alternatives hold `position`, described for a message: its name as
  // written, and the line it is defined on when the grammar was written by hand.
  std::string describe_position(std::uint32_t position) const {
    // Rules lie in `elements` one after another, in their order.
    std::size_t rule = rules_.size();
    for (std::size_t r = 0; r < rules_.size(); ++r) {
      if (first_positions_[r] != kNoPosition && first_positions_[r] <= position) rule = r;
    }
    if (rule == rules_.size()) return "the grammar's start";
    const GrammarRule& r = rules_[rule];
    const std::string& name = r.origin.empty() ? r.name : r.origin;
    return r.line == 0 ? "rule '" + name + "'"
                       : "rule '" + name + "' (line " + std::to_string(r.line) + ")";
  }

 private:
  static constexpr std::uint32_t kNoPosition = 0xFFFFFFFFu;

  std::vector<std::uint32_t> first_positions_;  // each rule's first element
  std::vector<GrammarRule> rules_;
  std::vector<GrammarElement> elements_;
  std::vector<CharClass> classes_;
  std::uint32_t root_;
};

}  // namespace smol
