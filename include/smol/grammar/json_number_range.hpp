// Bounded JSON numbers as GBNF: the texts of exactly the numbers between two decimal
// bounds (and, for integers, exactly the multiples of a whole modulus), for JSON Schema's
// minimum, maximum, exclusiveMinimum, exclusiveMaximum and multipleOf (json_schema.hpp
// turns the schema's bounds into the inclusive decimal bounds used here).
//
// The texts are JSON's: no leading zeros, no "+", a fraction of 1 to 16 digits for
// numbers (none for integers), no exponent. A magnitude range is written digit by digit:
// one rule per digit position that still equals a bound's digits, so that the grammar
// grows linearly with the bounds' digits (as the textbook regex for a numeric range
// does, but with shared rules instead of copied alternatives). A modulus adds the
// remainder of the digits read so far to each rule's state (a DFA of remainders);
// rules with the same body are one rule (the caller's add_rule), which merges the
// remainders a modulus like 100 cannot tell apart, so its rules stay few.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"

namespace smol::detail {

// A decimal number as text: sign, integral digits without leading zeros ("0" for zero)
// and fraction digits without trailing zeros. Zero is never negative.
struct Decimal {
  bool negative = false;
  std::string integral = "0";
  std::string fraction;

  bool is_zero() const { return integral == "0" && fraction.empty(); }
  friend bool operator==(const Decimal&, const Decimal&) = default;
};

// Reads "-12.50" (digits, an optional sign and point; no exponent) into its normal form.
inline Decimal decimal_from_text(std::string_view text) {
  Decimal d;
  if (!text.empty() && text.front() == '-') {
    d.negative = true;
    text.remove_prefix(1);
  }
  const std::size_t point = text.find('.');
  std::string_view whole = text.substr(0, point);
  std::string_view fraction = point == std::string_view::npos ? "" : text.substr(point + 1);
  while (whole.size() > 1 && whole.front() == '0') whole.remove_prefix(1);
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  d.integral = whole.empty() ? "0" : std::string(whole);
  d.fraction = std::string(fraction);
  if (d.is_zero()) d.negative = false;
  return d;
}

inline Decimal decimal_from_unsigned(std::uint64_t magnitude, bool negative) {
  Decimal d;
  d.integral = std::to_string(magnitude);
  d.negative = negative && magnitude != 0;
  return d;
}

// A double's value: exact when it is a whole number below 2^64, else its shortest
// decimal that reads back as the same double (std::to_chars). The caller relies on that
// round trip: a text at or above this decimal reads as a double at or above this one,
// since rounding to the nearest double never reverses an order.
inline Decimal decimal_from_double(double value) {
  const double magnitude = std::fabs(value);
  if (magnitude == std::floor(magnitude) && magnitude < 18446744073709551616.0) {
    return decimal_from_unsigned(static_cast<std::uint64_t>(magnitude), value < 0);
  }
  char buffer[512];
  const auto result =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed);
  if (result.ec != std::errc()) fail("JSON schema: a bound cannot be written as a decimal");
  return decimal_from_text(std::string_view(buffer, static_cast<std::size_t>(result.ptr - buffer)));
}

// Compares magnitudes (signs ignored).
inline int compare_magnitudes(const Decimal& a, const Decimal& b) {
  if (a.integral.size() != b.integral.size()) return a.integral.size() < b.integral.size() ? -1 : 1;
  if (const int c = a.integral.compare(b.integral); c != 0) return c < 0 ? -1 : 1;
  const int c = a.fraction.compare(b.fraction);  // no trailing zeros: text order is value order
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

inline int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int c = compare_magnitudes(a, b);
  return a.negative ? -c : c;
}

// The magnitude plus or minus one unit of the `digits`-th fraction digit (0: one). The
// magnitude must have at most `digits` fraction digits, and at least one unit to take.
inline Decimal step_magnitude(Decimal d, std::size_t digits, bool up) {
  std::string all = d.integral + d.fraction + std::string(digits - d.fraction.size(), '0');
  if (up) {
    std::size_t i = all.size();
    while (i > 0 && all[i - 1] == '9') all[--i] = '0';
    if (i == 0) {
      all.insert(all.begin(), '1');
    } else {
      ++all[i - 1];
    }
  } else {
    std::size_t i = all.size();
    while (i > 0 && all[i - 1] == '0') all[--i] = '9';
    --all[i - 1];
  }
  const std::size_t whole = all.size() - digits;
  Decimal out = decimal_from_text(all.substr(0, whole) + "." + all.substr(whole));
  out.negative = d.negative && !out.is_zero();
  return out;
}

// `d` moved to a multiple of 10^-digits: up (toward +infinity) or down.
inline Decimal round_to_grid(const Decimal& d, std::size_t digits, bool up) {
  if (d.fraction.size() <= digits) return d;
  Decimal cut = d;
  cut.fraction.resize(digits);
  cut = decimal_from_text((cut.negative ? "-" : "") + cut.integral + "." + cut.fraction);
  // Cutting moves a positive number down and a negative one up; one unit more away
  // from zero undoes that where the other direction was asked.
  if (up != d.negative) {
    Decimal magnitude = cut;
    magnitude.negative = false;
    Decimal out = step_magnitude(magnitude, digits, true);
    out.negative = d.negative;
    return out;
  }
  return cut;
}

// `d` plus (up) or minus one unit of the grid (10^-digits); `d` must be on the grid.
inline Decimal step(const Decimal& d, std::size_t digits, bool up) {
  Decimal magnitude = d;
  magnitude.negative = false;
  if (d.is_zero()) {
    Decimal one = step_magnitude(magnitude, digits, true);
    one.negative = !up;
    return one;
  }
  Decimal out = step_magnitude(magnitude, digits, up != d.negative);
  out.negative = d.negative && !out.is_zero();
  return out;
}

// Writes the GBNF of magnitude ranges. `add_rule` stores a rule body and returns its
// name (the same name for the same body); every expression returned refers only to
// rules stored through it.
class DigitRanges {
 public:
  using AddRule = std::function<std::string(const std::string& body)>;
  static constexpr std::size_t kFractionDigits = 16;

  // `fraction`: numbers (a fraction may follow); else integers, multiples of `modulus`.
  // `max_states`: how many states of the construction may be looked at (a modulus
  // multiplies them), past which smol::Error, which names the schema's place `where`.
  DigitRanges(AddRule add_rule, bool fraction, std::uint64_t modulus, std::size_t max_states,
              std::string where)
      : add_rule_(std::move(add_rule)),
        fraction_(fraction),
        modulus_(modulus),
        max_states_(max_states),
        where_(std::move(where)) {}

  // The texts of the magnitudes m with a <= m <= b (a and b non-negative, on the grid:
  // whole for integers, at most 16 fraction digits for numbers), without a sign; nullopt
  // when there are none (only a modulus can empty a range with a <= b).
  std::optional<std::string> magnitudes(const Decimal& a, const Decimal& b) {
    lower_fraction_ = a.fraction;
    upper_fraction_ = b.fraction;
    const std::size_t la = a.integral.size(), lb = b.integral.size();
    std::vector<std::string> alternatives;
    const auto add = [&](const std::optional<std::string>& e) {
      if (e) alternatives.push_back(e->empty() ? "\"\"" : *e);
    };
    if (la == lb) {
      add(fixed_length(a.integral, b.integral, true, true));
    } else {
      add(fixed_length(a.integral, std::string(la, '9'), true, false));
      // The lengths strictly between: a first digit 1-9, then any digits.
      if (modulus_ == 1) {
        if (lb - la >= 2) {
          add(join("[1-9] " + digits_expression(la, lb - 2), free_tail()));
        }
      } else {
        for (std::size_t n = la + 1; n < lb; ++n) add(first_digit_then_free(n));
      }
      add(fixed_length("1" + std::string(lb - 1, '0'), b.integral, false, true));
    }
    if (alternatives.empty()) return std::nullopt;
    std::string out;
    for (const std::string& a2 : alternatives) out += (out.empty() ? "" : " | ") + a2;
    return out;
  }

 private:
  static std::string join(const std::string& a, const std::string& b) {
    if (a.empty()) return b;
    if (b.empty()) return a;
    return a + " " + b;
  }

  // [0-9] repeated min to max times ("" for none).
  static std::string digits_expression(std::size_t min, std::size_t max) {
    if (max == 0) return "";
    if (min == max) return min == 1 ? "[0-9]" : "[0-9]{" + std::to_string(min) + "}";
    return "[0-9]{" + std::to_string(min) + "," + std::to_string(max) + "}";
  }

  // A class of the digits in `set` (bit d for digit d).
  static std::string digit_class(unsigned set) {
    std::string out = "[";
    for (int d = 0; d <= 9;) {
      if (!(set >> d & 1U)) {
        ++d;
        continue;
      }
      int e = d;
      while (e + 1 <= 9 && (set >> (e + 1) & 1U)) ++e;
      out += static_cast<char>('0' + d);
      if (e > d) {
        out += '-';
        out += static_cast<char>('0' + e);
      }
      d = e + 1;
    }
    return out + "]";
  }

  void count_state() {
    if (++states_ > max_states_) {
      fail("JSON schema: the number's bounds and multipleOf need a grammar of more than ",
           max_states_, " states (at ", where_, ")");
    }
  }

  // Alternatives "[digits] continuation", the digits with one continuation together, in
  // the order of their first digit; nullopt when none (each continuation nullopt: dead).
  std::optional<std::string> rule_of(const std::vector<std::pair<unsigned, std::string>>& groups) {
    if (groups.empty()) return std::nullopt;
    std::string body;
    for (const auto& [set, next] : groups) {
      body += (body.empty() ? "" : " | ") + join(digit_class(set), next);
    }
    return add_rule_(body);
  }

  static void add_to_group(std::vector<std::pair<unsigned, std::string>>& groups, int digit,
                           const std::string& next) {
    for (auto& [set, continuation] : groups) {
      if (continuation == next) {
        set |= 1U << digit;
        return;
      }
    }
    groups.emplace_back(1U << digit, next);
  }

  // What may follow a whole integral part that equals no bound: any fraction, or for
  // integers nothing.
  std::string free_tail() const {
    return fraction_ ? "( \".\" [0-9]{1," + std::to_string(kFractionDigits) + "} )?" : "";
  }

  // 10^j modulo the modulus.
  std::uint64_t power_of_ten(std::size_t j) const {
    std::uint64_t p = 1 % modulus_;
    for (std::size_t i = 0; i < j; ++i) p = p * 10 % modulus_;
    return p;
  }

  // `remaining` more digits, any, after digits whose remainder is `remainder`; "" for
  // nothing more to write, nullopt when no completion is a multiple.
  std::optional<std::string> free_digits(std::size_t remaining, std::uint64_t remainder) {
    return free_shifted(remaining, remainder * power_of_ten(remaining) % modulus_);
  }

  // The same, by what the digits so far leave of the whole number modulo the modulus
  // (their remainder times 10^remaining): the completions depend on nothing else, so
  // prefixes a modulus like 1000 cannot tell apart (all but their last digits) share
  // one state, and only a modulus coprime to 10 needs one per remainder and position.
  std::optional<std::string> free_shifted(std::size_t remaining, std::uint64_t shifted) {
    if (remaining == 0) {
      if (fraction_) return free_tail();
      return shifted == 0 ? std::optional<std::string>("") : std::nullopt;
    }
    if (modulus_ == 1) return join(digits_expression(remaining, remaining), free_tail());
    // No completion below 10^remaining reaches a multiple: dead, without a look (a
    // modulus like 100000 leaves most prefixes so).
    std::uint64_t span = 1;  // 10^remaining, or more than the modulus
    for (std::size_t i = 0; i < remaining && span <= modulus_; ++i) span *= 10;
    if ((modulus_ - shifted) % modulus_ >= span) return std::nullopt;
    const auto key = std::make_pair(remaining, shifted);
    if (const auto it = free_memo_.find(key); it != free_memo_.end()) return it->second;
    count_state();
    const std::uint64_t place = power_of_ten(remaining - 1);
    std::vector<std::pair<unsigned, std::string>> groups;
    for (int d = 0; d <= 9; ++d) {
      const auto next = free_shifted(remaining - 1, (shifted + d * place) % modulus_);
      if (next) add_to_group(groups, d, *next);
    }
    return free_memo_[key] = rule_of(groups);
  }

  // An integral part of n >= 2 digits that equals no bound, for a modulus.
  std::optional<std::string> first_digit_then_free(std::size_t n) {
    std::vector<std::pair<unsigned, std::string>> groups;
    for (int d = 1; d <= 9; ++d) {
      const auto next = free_digits(n - 1, d % modulus_);
      if (next) add_to_group(groups, d, *next);
    }
    if (groups.empty()) return std::nullopt;
    std::string out;
    for (const auto& [set, next] : groups) {
      out += (out.empty() ? "" : " | ") + join(digit_class(set), next);
    }
    return groups.size() == 1 ? out : "( " + out + " )";
  }

  // Integral parts of one length between `lower` and `upper` (that many digits each;
  // `lower` starts with a nonzero digit unless it is "0"). `*_is_bound`: whether
  // equalling it makes the fraction matter (the range's own bound, not a length's edge).
  std::optional<std::string> fixed_length(std::string lower, std::string upper, bool lower_is_bound,
                                          bool upper_is_bound) {
    lower_ = std::move(lower);
    upper_ = std::move(upper);
    lower_is_bound_ = lower_is_bound;
    upper_is_bound_ = upper_is_bound;
    tight_memo_.clear();
    return integral_state(0, 0, true, true);
  }

  // Whether equalling the lower bound from digit k on constrains nothing more: its
  // remaining digits are zeros and, if it is the range's bound, it has no fraction.
  bool lower_vacuous(std::size_t k) const {
    return std::all_of(lower_.begin() + static_cast<std::ptrdiff_t>(k), lower_.end(),
                       [](char c) { return c == '0'; }) &&
           (!lower_is_bound_ || lower_fraction_.empty());
  }
  bool upper_vacuous(std::size_t k) const {
    const bool nines = std::all_of(upper_.begin() + static_cast<std::ptrdiff_t>(k), upper_.end(),
                                   [](char c) { return c == '9'; });
    return nines && (!upper_is_bound_ || !fraction_ || upper_fraction_all_nines());
  }
  bool upper_fraction_all_nines() const {
    return upper_fraction_.size() == kFractionDigits &&
           upper_fraction_.find_first_not_of('9') == std::string::npos;
  }

  // Digits k.. of the integral part, the digits before them having `remainder`, still
  // equal to the lower (`low`) or upper (`high`) bound's digits.
  std::optional<std::string> integral_state(std::size_t k, std::uint64_t remainder, bool low,
                                            bool high) {
    if (low && lower_vacuous(k)) low = false;
    if (high && upper_vacuous(k)) high = false;
    const std::size_t n = lower_.size();
    if (!low && !high) return free_digits(n - k, remainder);
    if (k == n) return fraction_tail(low, high);  // numbers only: integers are vacuous here
    const auto key = std::make_tuple(k, remainder, low, high);
    if (const auto it = tight_memo_.find(key); it != tight_memo_.end()) return it->second;
    count_state();
    const int from = low ? lower_[k] - '0' : 0, to = high ? upper_[k] - '0' : 9;
    std::vector<std::pair<unsigned, std::string>> groups;
    for (int d = from; d <= to; ++d) {
      const auto next =
          integral_state(k + 1, (remainder * 10 + d) % modulus_, low && d == from, high && d == to);
      if (next) add_to_group(groups, d, *next);
    }
    return tight_memo_[key] = rule_of(groups);
  }

  // The fraction after an integral part equal to the lower bound's (`low`: the fraction
  // must be at least its fraction) or the upper's (`high`: at most).
  std::optional<std::string> fraction_tail(bool low, bool high) {
    if (low && lower_fraction_.empty()) low = false;
    if (high && upper_fraction_all_nines()) high = false;
    if (!low && !high) return free_tail();
    const auto digits = fraction_state(0, low, high);
    if (!digits) return low ? std::nullopt : std::optional<std::string>("");
    const std::string dot = "\".\" " + *digits;
    return low ? dot : "( " + dot + " )?";  // no fraction is fraction 0: too small for `low`
  }

  // Fraction digit k (at least one digit is written after the point) and those after.
  std::optional<std::string> fraction_state(std::size_t k, bool low, bool high) {
    if (low && k >= lower_fraction_.size()) low = false;
    const std::size_t left = kFractionDigits - k;  // digits that may still be written
    if (!low && !high) return digits_expression(1, left);
    count_state();
    const auto digit_of = [](const std::string& s, std::size_t i) {
      return i < s.size() ? s[i] - '0' : 0;
    };
    const int from = low ? digit_of(lower_fraction_, k) : 0;
    const int to = high ? digit_of(upper_fraction_, k) : 9;
    std::vector<std::pair<unsigned, std::string>> groups;
    for (int d = from; d <= to; ++d) {
      const bool next_low = low && d == from, next_high = high && d == to;
      // Ending here pads with zeros: too small only while the lower fraction goes on.
      const bool can_end = !(next_low && k + 1 < lower_fraction_.size());
      if (!next_low && !next_high) {
        add_to_group(groups, d, digits_expression(can_end ? 0 : 1, left - 1));
        continue;
      }
      const auto more =
          left > 1 ? fraction_state(k + 1, next_low, next_high) : std::optional<std::string>();
      if (more) {
        add_to_group(groups, d, can_end ? "( " + *more + " )?" : *more);
      } else if (can_end) {
        add_to_group(groups, d, "");
      }
    }
    return rule_of(groups);
  }

  AddRule add_rule_;
  bool fraction_;
  std::uint64_t modulus_;
  std::size_t max_states_;
  std::string where_;
  std::size_t states_ = 0;
  std::string lower_, upper_, lower_fraction_, upper_fraction_;
  bool lower_is_bound_ = false, upper_is_bound_ = false;
  std::map<std::pair<std::size_t, std::uint64_t>, std::optional<std::string>> free_memo_;
  std::map<std::tuple<std::size_t, std::uint64_t, bool, bool>, std::optional<std::string>>
      tight_memo_;
};

}  // namespace smol::detail
