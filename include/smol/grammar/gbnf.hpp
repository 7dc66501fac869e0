// parse_gbnf: llama.cpp's GBNF grammar text -> Grammar, so that the .gbnf files people
// already have work unchanged.
//
//   root   ::= object                  # a rule: name ::= alternatives, to the end of line
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   ws     ::= [ \t\n]{0,20}           # classes, ranges, [^...] negation, `.` any char
//   pair   ::= string ":" ws value |   # `|` (or an open group) continues on the next line
//              "\u00e9" [\x00-\x1F]    # escapes: \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH
//
// Postfix operators `* + ? {m} {m,} {m,n}` apply to the element or group before them;
// like llama.cpp they are rewritten into right-recursive helper rules (S* becomes
// R ::= S R | empty), so the recognizer only ever sees rules and character classes.
// Names are letters, digits and '-'; the generated helpers are named "<rule>_<n>".
//
// Counted repetition costs its count in elements, never its count times the element's
// size: a repeated sequence of several elements (a literal "abc"{50}) becomes one helper
// rule first, and each copy is one reference to it. The grammar's size is bounded
// (GrammarLimits::max_elements) and counted as it is built, so "a"{2000} nested three
// deep is refused when the count passes the bound, not after building billions.
//
// A malformed grammar throws smol::Error naming the line and column and what was
// expected there; a reference to a rule that is never defined names the rule and where it
// is used; a left-recursive rule (one that can reach itself without reading a character,
// which a top-down recognizer would expand forever) is refused by name, as llama.cpp does.
// Text that a program wrote (a JSON schema's grammar) is not the user's: its mistakes
// name the rule rather than a line and column the user never saw (GbnfOptions).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/grammar/grammar.hpp"
#include "smol/grammar/grammar_limits.hpp"
#include "smol/text/unicode.hpp"

namespace smol {

struct GbnfOptions {
  GrammarLimits limits{};
  // The text was written by a program (json_schema.hpp): errors name rules, not places.
  bool generated = false;
};

namespace detail {

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const GbnfOptions& options) : text_(text), options_(options) {}

  Grammar parse() {
    skip_space(true);
    while (!at_end()) {
      parse_rule();
      skip_space(true);
    }
    return finish();
  }

 private:
  // Bounds that keep hostile input from exhausting the stack (the size has its budget
  // in GbnfOptions::limits).
  static constexpr int kMaxNesting = 200;
  static constexpr std::uint32_t kMaxRepetition = 2000;  // llama.cpp's threshold too

  struct Item {
    bool is_rule = false;
    std::uint32_t value = 0;  // a rule id, or an index into classes_
  };
  using Sequence = std::vector<Item>;

  struct RuleDraft {
    std::string name;
    std::string origin;  // the user's rule a generated helper belongs to
    bool defined = false;
    std::size_t defined_at = 0, first_used_at = 0;
    std::vector<Sequence> alternatives;
  };

  // ---- errors --------------------------------------------------------------------
  [[noreturn]] void error_at(std::size_t offset, const std::string& message) const {
    if (options_.generated) {
      const std::string rule = current_rule_.empty() ? "" : "rule '" + current_rule_ + "': ";
      fail("grammar: ", rule, message);
    }
    const auto [line, column] = line_and_column(offset);
    fail("grammar: line ", line, ", column ", column, ": ", message);
  }

  std::pair<std::size_t, std::size_t> line_and_column(std::size_t offset) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < offset && i < text_.size(); ++i) {
      const auto byte = static_cast<unsigned char>(text_[i]);
      if (byte == '\n') {
        ++line;
        column = 1;
      } else if ((byte & 0xC0) != 0x80) {  // count characters, not UTF-8 bytes
        ++column;
      }
    }
    return {line, column};
  }

  [[noreturn]] void expected(const std::string& what) const {
    error_at(pos_, cat("expected ", what, ", found ", describe_here()));
  }

  std::string describe_here() const {
    if (at_end()) return "the end of the grammar";
    const char c = text_[pos_];
    if (c == '\n' || c == '\r') return "the end of the line";
    if (static_cast<unsigned char>(c) < 0x20) return cat("byte 0x", std::hex, int(c));
    return cat("'", std::string(1, c), "'");
  }

  // ---- lexing --------------------------------------------------------------------
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(std::size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  // Spaces, tabs and comments; newlines only where a rule may continue on the next line
  // (inside a group, after `|`, between rules). Elsewhere a newline ends the rule.
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name(const char* what) {
    const std::size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) expected(what);
    return std::string(text_.substr(start, pos_ - start));
  }

  std::uint32_t parse_count() {
    if (!is_digit(peek())) expected("a number");
    const std::size_t start = pos_;
    std::uint64_t value = 0;
    while (is_digit(peek())) {
      value = value * 10 + static_cast<std::uint64_t>(peek() - '0');
      if (value > kMaxRepetition) {
        error_at(start, cat("a repetition count is at most ", kMaxRepetition));
      }
      ++pos_;
    }
    return static_cast<std::uint32_t>(value);
  }

  std::uint32_t parse_hex(int digits) {
    std::uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int digit = -1;
      if (c >= '0' && c <= '9') digit = c - '0';
      if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      if (digit < 0) expected(cat(digits, " hexadecimal digits"));
      value = value * 16 + static_cast<std::uint32_t>(digit);
      ++pos_;
    }
    return value;
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  std::uint32_t parse_char() {
    if (at_end()) expected("a character");
    const std::size_t start = pos_;
    if (peek() == '\\') {
      ++pos_;
      const char c = peek();
      ++pos_;
      std::uint32_t value = 0;
      switch (c) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '\\':
        case '"':
        case '[':
        case ']':
          return static_cast<unsigned char>(c);
        case 'x':
          value = parse_hex(2);
          break;
        case 'u':
          value = parse_hex(4);
          break;
        case 'U':
          value = parse_hex(8);
          break;
        default:
          --pos_;
          expected("an escape (\\n \\r \\t \\\\ \\\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH)");
      }
      if (value > kMaxCodePoint) error_at(start, "a code point above U+10FFFF");
      return value;
    }
    const unicode::DecodedCodepoint decoded = unicode::decode_utf8(text_, pos_);
    if (decoded.status != unicode::Utf8Status::valid) expected("valid UTF-8");
    pos_ += decoded.length;
    return static_cast<std::uint32_t>(decoded.codepoint);
  }

  // ---- rules ---------------------------------------------------------------------
  std::uint32_t rule_named(const std::string& name, std::size_t used_at) {
    const auto [it, added] = ids_.emplace(name, static_cast<std::uint32_t>(drafts_.size()));
    if (added) {
      RuleDraft draft;
      draft.name = draft.origin = name;
      draft.first_used_at = used_at;
      drafts_.push_back(std::move(draft));
    }
    return it->second;
  }

  std::uint32_t new_helper_rule(std::uint32_t parent) {
    const auto id = static_cast<std::uint32_t>(drafts_.size());
    RuleDraft draft;
    draft.name = cat(drafts_[parent].origin, "_", id);
    draft.origin = drafts_[parent].origin;
    draft.defined = true;
    draft.defined_at = pos_;
    drafts_.push_back(std::move(draft));
    return id;
  }

  void parse_rule() {
    const std::size_t start = pos_;
    const std::string name = parse_name("a rule name");
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") expected("'::='");
    pos_ += 3;
    skip_space(true);
    const std::uint32_t id = rule_named(name, start);
    if (drafts_[id].defined) {
      error_at(start, cat("rule '", name, "' is defined twice"));
    }
    current_rule_ = name;
    drafts_[id].defined = true;
    drafts_[id].defined_at = start;
    std::vector<Sequence> alternatives = parse_alternatives(id, false, 0);
    drafts_[id].alternatives = std::move(alternatives);
    if (!at_end() && peek() != '\n' && peek() != '\r') {
      expected("an element, '|' or the end of the line");
    }
  }

  std::vector<Sequence> parse_alternatives(std::uint32_t rule, bool nested, int depth) {
    std::vector<Sequence> alternatives;
    alternatives.push_back(parse_sequence(rule, nested, depth));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alternatives.push_back(parse_sequence(rule, nested, depth));
    }
    return alternatives;
  }

  // Classes are shared: a literal's characters repeat (every "\"" of a JSON grammar), and
  // a class is a heap block of its own.
  std::uint32_t add_class(CharClass c) {
    const auto [it, added] =
        class_ids_.emplace(c.ranges(), static_cast<std::uint32_t>(classes_.size()));
    if (added) classes_.push_back(std::move(c));
    return it->second;
  }

  void count_items(std::size_t n) {
    items_ += n;
    if (items_ > options_.limits.max_elements) {
      throw GrammarLimitError(
          GrammarLimitError::Budget::elements,
          describe_at(pos_, cat("the grammar has more than ", options_.limits.max_elements,
                                " elements with its repetitions expanded")));
    }
  }

  std::string describe_at(std::size_t offset, const std::string& message) const {
    try {
      error_at(offset, message);
    } catch (const Error& error) {
      return error.what();
    }
    return message;
  }

  // A string literal "...", from its opening quote: one class per character.
  void parse_literal(Sequence& sequence) {
    ++pos_;
    while (peek() != '"') {
      if (at_end() || peek() == '\n') expected("'\"' to close the string");
      sequence.push_back({false, add_class(CharClass::single(parse_char()))});
      count_items(1);
    }
    ++pos_;
  }

  // A character class [...] or [^...], from its opening bracket (at `start`).
  CharClass parse_char_class(std::size_t start) {
    ++pos_;
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<CharClass::Range> ranges;  // sorted once at the end, not per range
    while (peek() != ']') {
      if (at_end() || peek() == '\n') expected("']' to close the character class");
      const std::uint32_t first = parse_char();
      std::uint32_t last = first;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        last = parse_char();
        if (last < first) error_at(start, "a character range whose end is before its start");
      }
      ranges.push_back({first, last});
    }
    ++pos_;
    const CharClass chars = CharClass::of(std::move(ranges));
    return negated ? chars.complement() : chars;
  }

  // A group ( ... ), from its opening parenthesis (at `start`): a helper rule of `rule`
  // holding its alternatives.
  std::uint32_t parse_group(std::uint32_t rule, int depth, std::size_t start) {
    if (depth >= kMaxNesting) error_at(start, "groups are nested too deeply");
    ++pos_;
    skip_space(true);
    const std::uint32_t group = new_helper_rule(rule);
    std::vector<Sequence> alternatives = parse_alternatives(group, true, depth + 1);
    drafts_[group].alternatives = std::move(alternatives);
    if (peek() != ')') expected("')' to close the group");
    ++pos_;
    return group;
  }

  // How often a postfix operator repeats its element.
  struct Repetition {
    std::uint32_t min = 0, max = 0;
    bool unbounded = false;
  };

  // The postfix operator `op` (* + ? or {m}, {m,}, {m,n}), from its first character (at
  // `start`).
  Repetition parse_repetition(char op, bool nested, std::size_t start) {
    ++pos_;
    Repetition r;
    if (op == '*') {
      r.unbounded = true;
    } else if (op == '+') {
      r.min = 1, r.unbounded = true;
    } else if (op == '?') {
      r.max = 1;
    } else {
      skip_space(nested);
      r.min = r.max = parse_count();
      skip_space(nested);
      if (peek() == ',') {
        ++pos_;
        skip_space(nested);
        if (is_digit(peek())) {
          r.max = parse_count();
          if (r.max < r.min) error_at(start, "a repetition {m,n} with n smaller than m");
          skip_space(nested);
        } else {
          r.unbounded = true;
        }
      }
      if (peek() != '}') expected("'}' to close the repetition");
      ++pos_;
    }
    return r;
  }

  Sequence parse_sequence(std::uint32_t rule, bool nested, int depth) {
    Sequence sequence;
    std::size_t last_symbol = 0;  // where the element a postfix operator applies to starts
    bool have_symbol = false;
    // One element (a class, a rule or a group): what a postfix operator would repeat.
    const auto push_symbol = [&](Item item) {
      last_symbol = sequence.size();
      sequence.push_back(item);
      count_items(1);
      have_symbol = true;
    };
    for (;;) {
      const char c = peek();
      const std::size_t start = pos_;
      if (at_end()) break;
      if (c == '"') {
        last_symbol = sequence.size();
        parse_literal(sequence);
        // An empty literal "" is no element: nothing for a postfix operator to repeat.
        have_symbol = sequence.size() > last_symbol;
      } else if (c == '[') {
        push_symbol({false, add_class(parse_char_class(start))});
      } else if (c == '.') {
        ++pos_;
        push_symbol({false, add_class(CharClass::any())});
      } else if (is_name_char(c)) {
        const std::string name = parse_name("a rule name");
        push_symbol({true, rule_named(name, start)});
      } else if (c == '(') {
        push_symbol({true, parse_group(rule, depth, start)});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_symbol) expected(cat("an element before '", std::string(1, c), "'"));
        const Repetition r = parse_repetition(c, nested, start);
        repeat(sequence, last_symbol, rule, r.min, r.max, r.unbounded);
        // A repeated element is no element for another operator ("a**" is an error in
        // llama.cpp too, where the second operator finds no preceding item).
        have_symbol = false;
      } else {
        break;
      }
      skip_space(nested);
    }
    return sequence;
  }

  // Rewrites sequence[from..] (one element or group) as `min` copies, then either a
  // right-recursive helper (unbounded: R ::= S R | empty) or a chain of max - min
  // nested optional helpers (R1 ::= S | empty, Rk ::= S R(k-1) | empty).
  // A symbol of several elements (a literal) is made one helper rule first, so that each
  // copy costs one element.
  void repeat(Sequence& sequence, std::size_t from, std::uint32_t rule, std::uint32_t min,
              std::uint32_t max, bool unbounded) {
    Sequence symbol(sequence.begin() + static_cast<std::ptrdiff_t>(from), sequence.end());
    sequence.resize(from);
    if (symbol.size() > 1 && (unbounded || max > 1)) {
      const std::uint32_t whole = new_helper_rule(rule);
      drafts_[whole].alternatives = {std::move(symbol)};
      symbol = {{true, whole}};
      count_items(2);
    }
    for (std::uint32_t i = 0; i < min; ++i) {
      count_items(symbol.size());
      sequence.insert(sequence.end(), symbol.begin(), symbol.end());
    }
    if (unbounded) {
      const std::uint32_t helper = new_helper_rule(rule);
      Sequence again = symbol;
      again.push_back({true, helper});
      drafts_[helper].alternatives = {std::move(again), Sequence{}};
      sequence.push_back({true, helper});
      count_items(symbol.size() + 2);
      return;
    }
    std::uint32_t inner = 0;
    for (std::uint32_t k = 0; k < max - min; ++k) {
      const std::uint32_t helper = new_helper_rule(rule);
      Sequence once = symbol;
      if (k > 0) once.push_back({true, inner});
      drafts_[helper].alternatives = {std::move(once), Sequence{}};
      count_items(symbol.size() + 1);
      inner = helper;
    }
    if (max > min) sequence.push_back({true, inner});
  }

  // ---- checks and lowering -------------------------------------------------------
  Grammar finish() {
    current_rule_.clear();  // what follows is about the whole grammar, not the last rule
    const auto root = ids_.find("root");
    if (root == ids_.end() || !drafts_[root->second].defined) {
      fail("grammar: there is no rule named 'root' (generation starts there)");
    }
    for (const RuleDraft& draft : drafts_) {
      if (!draft.defined) {
        error_at(draft.first_used_at, cat("rule '", draft.name, "' is used but never defined"));
      }
    }
    refuse_left_recursion();

    std::vector<std::size_t> line_ends;  // the offset of each '\n'
    for (std::size_t i = 0; i < text_.size(); ++i) {
      if (text_[i] == '\n') line_ends.push_back(i);
    }
    std::vector<GrammarRule> rules(drafts_.size());
    std::vector<GrammarElement> elements;
    elements.reserve(items_ + drafts_.size() * 2);
    for (std::size_t r = 0; r < drafts_.size(); ++r) {
      rules[r].name = drafts_[r].name;
      rules[r].origin = drafts_[r].origin;
      if (!options_.generated) {
        const std::size_t at = drafts_[ids_.at(drafts_[r].origin)].defined_at;
        rules[r].line = static_cast<std::uint32_t>(
            1 + (std::lower_bound(line_ends.begin(), line_ends.end(), at) - line_ends.begin()));
      }
      for (const Sequence& alternative : drafts_[r].alternatives) {
        rules[r].alternatives.push_back(static_cast<std::uint32_t>(elements.size()));
        for (const Item& item : alternative) {
          elements.push_back(
              {item.is_rule ? GrammarElement::Kind::rule : GrammarElement::Kind::characters,
               item.value});
        }
        elements.push_back({GrammarElement::Kind::end, 0});
      }
    }
    return Grammar(std::move(rules), std::move(elements), std::move(classes_), root->second);
  }

  // A rule is left-recursive when it can reach itself through the first elements of its
  // alternatives, skipping elements that can match nothing (nullable rules).
  void refuse_left_recursion() const {
    const std::size_t n = drafts_.size();
    const std::vector<bool> nullable = nullable_rules();
    std::vector<std::vector<std::uint32_t>> starts(n);  // rules an alternative may begin with
    for (std::size_t r = 0; r < n; ++r) {
      for (const Sequence& alternative : drafts_[r].alternatives) {
        for (const Item& item : alternative) {
          if (!item.is_rule) break;
          starts[r].push_back(item.value);
          if (!nullable[item.value]) break;
        }
      }
    }
    enum class Mark : std::uint8_t { unseen, open, done };
    std::vector<Mark> marks(n, Mark::unseen);
    // Iterative depth-first search (a deep chain of helpers must not overflow the stack).
    for (std::uint32_t start = 0; start < n; ++start) {
      if (marks[start] != Mark::unseen) continue;
      std::vector<std::pair<std::uint32_t, std::size_t>> path{{start, 0}};
      marks[start] = Mark::open;
      while (!path.empty()) {
        auto& [rule, next] = path.back();
        if (next == starts[rule].size()) {
          marks[rule] = Mark::done;
          path.pop_back();
          continue;
        }
        const std::uint32_t target = starts[rule][next++];
        if (marks[target] == Mark::open) {
          fail("grammar: rule '", drafts_[target].origin,
               "' is left-recursive (it can reach itself before reading a character); "
               "rewrite it with repetition, e.g. list ::= item (\",\" item)*");
        }
        if (marks[target] == Mark::unseen) {
          marks[target] = Mark::open;
          path.push_back({target, 0});
        }
      }
    }
  }

  // Which rules can match the empty text, in time linear in the grammar (a chain of
  // optional helpers, one per schema property, makes repeated sweeps quadratic): each
  // alternative counts its elements not yet known to be nullable, and a rule found
  // nullable lowers the count of every alternative that uses it.
  std::vector<bool> nullable_rules() const {
    const std::size_t n = drafts_.size();
    std::vector<bool> nullable(n, false);
    struct Alternative {
      std::uint32_t rule;
      std::size_t unknown;  // elements not yet known nullable; a character class never is
    };
    std::vector<Alternative> alternatives;
    std::vector<std::vector<std::uint32_t>> used_by(n);  // rule -> alternatives, per use
    std::vector<std::uint32_t> found;
    for (std::uint32_t r = 0; r < n; ++r) {
      for (const Sequence& sequence : drafts_[r].alternatives) {
        const auto a = static_cast<std::uint32_t>(alternatives.size());
        bool has_class = false;
        for (const Item& item : sequence) {
          if (item.is_rule) {
            used_by[item.value].push_back(a);
          } else {
            has_class = true;
          }
        }
        alternatives.push_back({r, has_class ? std::size_t{1} << 62 : sequence.size()});
        if (sequence.empty() && !nullable[r]) {
          nullable[r] = true;
          found.push_back(r);
        }
      }
    }
    while (!found.empty()) {
      const std::uint32_t rule = found.back();
      found.pop_back();
      for (const std::uint32_t a : used_by[rule]) {
        if (--alternatives[a].unknown == 0 && !nullable[alternatives[a].rule]) {
          nullable[alternatives[a].rule] = true;
          found.push_back(alternatives[a].rule);
        }
      }
    }
    return nullable;
  }

  std::string_view text_;
  const GbnfOptions& options_;
  std::size_t pos_ = 0;
  std::size_t items_ = 0;
  std::string current_rule_;
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::vector<RuleDraft> drafts_;
  std::vector<CharClass> classes_;
  std::map<std::vector<CharClass::Range>, std::uint32_t> class_ids_;
};

}  // namespace detail

// Parses GBNF text; throws smol::Error naming the line and column of a mistake, and
// GrammarLimitError when the grammar is larger than options.limits allows.
inline std::shared_ptr<const Grammar> parse_gbnf(std::string_view text,
                                                 const GbnfOptions& options = {}) {
  return std::make_shared<const Grammar>(detail::GbnfParser(text, options).parse());
}

}  // namespace smol
