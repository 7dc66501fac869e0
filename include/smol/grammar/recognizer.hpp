// GrammarRecognizer: which texts a Grammar accepts, read one byte at a time.
//
// It is a top-down recognizer that follows every way the grammar could have produced
// the text so far at once (like llama.cpp's grammar stacks): a *stack* is one such way,
// the positions still to be matched from the innermost rule outwards, and a
// GrammarState is the set of them. Reading a code point keeps the stacks whose top
// character class holds it, moves each past that element and expands the rules that
// come next until every stack again waits on a character class (or is empty: the whole
// grammar matched, so the text may end here).
//
// Stacks are persistent linked lists interned in a StackPool: a node is (position,
// parent node), so pushing, popping and comparing stacks cost O(1) and the many stacks
// that share their lower frames share memory. Like llama.cpp, a rule referenced last in
// an alternative does not leave a frame behind (a tail call), so a right-recursive
// repetition (R ::= S R | empty) keeps a constant depth.
//
// Input is UTF-8 bytes, because tokens are bytes and a token may end inside a
// character. The state carries the partial code point (Utf8Partial); a partial
// sequence is kept only while some completion of it is a character the grammar could
// take next, so a token that ends mid-character is allowed exactly when the rest of the
// character could follow. Ill-formed UTF-8 (overlongs, surrogates, stray continuation
// bytes, above U+10FFFF) never matches.
//
// The work is metered (grammar_limits.hpp): with a GrammarWork attached, every frame
// expanded and every stack looked at is charged to it, and it throws when a step needs
// more than its budget. An ambiguous grammar can need a stack per way of reading the
// text, and such ways multiply; the meter is what bounds them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/grammar/flat_index.hpp"
#include "smol/grammar/grammar.hpp"
#include "smol/grammar/grammar_limits.hpp"

namespace smol {

using StackId = std::uint32_t;
inline constexpr StackId kEmptyStack = 0;  // everything matched: the text may end

class StackPool {
 public:
  struct Node {
    std::uint32_t position;  // a characters element (the top) or a continuation
    StackId parent;
  };

  StackPool() { nodes_.push_back({0, kEmptyStack}); }  // node 0 stands for the empty stack

  StackId push(std::uint32_t position, StackId parent) {
    const std::uint64_t key = (std::uint64_t{position} << 32) | parent;
    const auto [id, added] = index_.emplace(key, static_cast<StackId>(nodes_.size()));
    if (added) nodes_.push_back({position, parent});
    return id;
  }
  const Node& node(StackId id) const { return nodes_[id]; }
  std::size_t size() const { return nodes_.size(); }
  std::size_t memory_bytes() const {
    return nodes_.capacity() * sizeof(Node) + index_.memory_bytes();
  }

 private:
  std::vector<Node> nodes_;
  FlatIndex index_;
};

// The bytes of a code point read so far: `remaining` more continuation bytes will
// complete `value` (its bits so far) into a code point of `length` bytes.
struct Utf8Partial {
  std::uint32_t value = 0;
  std::uint8_t remaining = 0;
  std::uint8_t length = 0;
  friend bool operator==(const Utf8Partial&, const Utf8Partial&) = default;
};

struct GrammarState {
  std::vector<StackId> stacks;  // sorted, unique; kEmptyStack (0) first when present
  Utf8Partial partial;
  friend bool operator==(const GrammarState&, const GrammarState&) = default;
};

class GrammarRecognizer {
 public:
  explicit GrammarRecognizer(std::shared_ptr<const Grammar> grammar)
      : grammar_(std::move(grammar)) {}

  // The meter each step's work is charged to; null (the default): unmetered.
  void meter(GrammarWork* work) { work_meter_ = work; }

  GrammarState initial() {
    GrammarState state;
    for (const std::uint32_t alternative : grammar_->rules()[grammar_->root()].alternatives) {
      work_.push_back({alternative, kEmptyStack});
    }
    expand(state.stacks);
    return state;
  }

  // The state after one more byte; false when no way of reading the text takes it.
  bool advance(const GrammarState& from, std::uint8_t byte, GrammarState& to) {
    to.stacks.clear();
    to.partial = {};
    if (from.partial.remaining > 0) {
      if ((byte & 0xC0) != 0x80) return false;
      Utf8Partial partial = from.partial;
      partial.value = (partial.value << 6) | (byte & 0x3Fu);
      --partial.remaining;
      if (partial.remaining == 0) return advance_code_point(from, partial.value, to);
      return keep_partial(from, partial, to);
    }
    if (byte < 0x80) return advance_code_point(from, byte, to);
    Utf8Partial partial;
    if (byte >= 0xC2 && byte <= 0xDF) {
      partial = {byte & 0x1Fu, 1, 2};
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      partial = {byte & 0x0Fu, 2, 3};
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      partial = {byte & 0x07u, 3, 4};
    } else {
      return false;  // a continuation byte, C0, C1 or F5..FF cannot start a character
    }
    return keep_partial(from, partial, to);
  }

  bool advance(GrammarState& state, std::string_view bytes) {
    GrammarState next;
    for (const char c : bytes) {
      if (!advance(state, static_cast<std::uint8_t>(c), next)) return false;
      std::swap(state, next);
    }
    return true;
  }

  // The text read so far is a whole sentence of the grammar.
  static bool can_end(const GrammarState& state) {
    return state.partial.remaining == 0 && !state.stacks.empty() &&
           state.stacks.front() == kEmptyStack;
  }
  // Nothing more can be read: the grammar is complete and only ending is left.
  static bool exhausted(const GrammarState& state) {
    return state.partial.remaining == 0 && state.stacks.size() == 1 &&
           state.stacks.front() == kEmptyStack;
  }

  const Grammar& grammar() const { return *grammar_; }
  const StackPool& stacks() const { return pool_; }
  // What the recognizer holds: its stack frames, and the pairs a step has expanded.
  std::size_t memory_bytes() const { return pool_.memory_bytes() + seen_.memory_bytes(); }

 private:
  struct Pending {
    std::uint32_t position;
    StackId parent;
  };

  const CharClass& top_class(StackId stack) const {
    return grammar_->char_class(grammar_->element(pool_.node(stack).position).value);
  }

  bool advance_code_point(const GrammarState& from, std::uint32_t cp, GrammarState& to) {
    if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    charge((from.stacks.size() + 15) / 16, some_position(from));
    for (const StackId stack : from.stacks) {
      if (stack == kEmptyStack || !top_class(stack).contains(cp)) continue;
      const StackPool::Node& node = pool_.node(stack);
      work_.push_back({node.position + 1, node.parent});
    }
    expand(to.stacks);
    return !to.stacks.empty();
  }

  // Keeps the stacks whose top class holds some code point that `partial` can still
  // become (an interval, less the surrogates).
  bool keep_partial(const GrammarState& from, const Utf8Partial& partial, GrammarState& to) {
    static constexpr std::uint32_t kSmallest[5] = {0, 0, 0x80, 0x800, 0x10000};
    const unsigned free_bits = 6u * partial.remaining;
    std::uint32_t first = partial.value << free_bits;
    std::uint32_t last = first | ((1u << free_bits) - 1);
    first = std::max(first, kSmallest[partial.length]);  // no overlong encodings
    last = std::min(last, kMaxCodePoint);
    const auto takes = [&](const CharClass& c) {
      if (first > last) return false;
      if (first < 0xD800 && c.intersects(first, std::min(last, 0xD7FFu))) return true;
      return last > 0xDFFF && c.intersects(std::max(first, 0xE000u), last);
    };
    charge((from.stacks.size() + 15) / 16, some_position(from));
    for (const StackId stack : from.stacks) {
      if (stack != kEmptyStack && takes(top_class(stack))) to.stacks.push_back(stack);
    }
    if (to.stacks.empty()) return false;
    to.partial = partial;
    return true;
  }

  // Expands the pending (position, parent) pairs until each is a stack waiting on a
  // character class or the empty stack; appends them to `out`, sorted and unique.
  void expand(std::vector<StackId>& out) {
    seen_.clear();
    while (!work_.empty()) {
      const Pending p = work_.back();
      work_.pop_back();
      if (!seen_.emplace((std::uint64_t{p.position} << 32) | p.parent, 0).second) continue;
      const std::size_t frames = pool_.size();
      const GrammarElement& element = grammar_->element(p.position);
      switch (element.kind) {
        case GrammarElement::Kind::characters:
          out.push_back(pool_.push(p.position, p.parent));
          break;
        case GrammarElement::Kind::rule: {
          // What follows the rule; none when the rule ends this alternative (tail call).
          const StackId after = grammar_->element(p.position + 1).kind == GrammarElement::Kind::end
                                    ? p.parent
                                    : pool_.push(p.position + 1, p.parent);
          for (const std::uint32_t alternative : grammar_->rules()[element.value].alternatives) {
            work_.push_back({alternative, after});
          }
          break;
        }
        case GrammarElement::Kind::end:
          if (p.parent == kEmptyStack) {
            out.push_back(kEmptyStack);
          } else {
            const StackPool::Node& node = pool_.node(p.parent);
            work_.push_back({node.position, node.parent});
          }
          break;
      }
      // A new stack frame costs memory for the table's life: more than a visit.
      charge(1 + kNewFrameCost * (pool_.size() - frames), p.position);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }

  // Where one of the state's readings waits, for a message.
  std::uint32_t some_position(const GrammarState& state) const {
    return state.stacks.empty() ? 0 : pool_.node(state.stacks.back()).position;
  }

  // A step over its budget throws from here, leaving no half-expanded work behind.
  void charge(std::size_t units, std::uint32_t position) {
    if (work_meter_ == nullptr || !work_meter_->charge(units)) return;
    try {
      work_meter_->poll([&] { return grammar_->describe_position(position); });
    } catch (...) {
      work_.clear();
      seen_.clear();
      throw;
    }
  }

  static constexpr std::size_t kNewFrameCost = 4;

  std::shared_ptr<const Grammar> grammar_;
  GrammarWork* work_meter_ = nullptr;
  StackPool pool_;
  std::vector<Pending> work_;
  FlatIndex seen_;  // the (position, parent) pairs this step has expanded
};

}  // namespace smol
