// What a template can do to a value: jinja2's filters and tests, Python's methods on
// str, dict and list, item and attribute lookup, operators, and transformers' tojson.
//
// Each follows the Python it stands for (jinja2 3.1's filters.py and tests.py, CPython's
// str methods, json.dumps as transformers calls it: ensure_ascii=False), since a chat
// template's output must match jinja2's byte for byte. What is not here is an error
// naming it, never a guess. Errors are thrown as plain smol::Error; the interpreter adds
// the line and column of the expression that failed.
//
// Work is metered: an operation that builds a value charges its size to the render's
// Meter, so no expression (a string repeated 10**9 times, a range of 10**12) can run
// away with time or memory.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/template/jinja_value.hpp"

namespace smol::jinja {

namespace builtins {

// ---- arguments ----

// The argument at `index` or named `name`, or null when the call gave neither.
inline const Value* argument(const Arguments& args, std::size_t index, std::string_view name) {
  if (index < args.positional.size()) return &args.positional[index];
  for (const auto& [key, value] : args.named) {
    if (key == name) return &value;
  }
  return nullptr;
}

inline void expect_at_most(const Arguments& args, std::size_t count, std::string_view what) {
  if (args.positional.size() > count) {
    fail(what, " takes at most ", count, " arguments (", args.positional.size(), " given)");
  }
}

inline std::string string_argument(const Arguments& args, std::size_t index, std::string_view name,
                                   std::string_view what, std::string fallback = {}) {
  const Value* value = argument(args, index, name);
  if (!value || value->is_undefined()) return fallback;
  if (!value->is_string()) {
    fail(what, ": argument '", name, "' must be a string, not ", value->type_name());
  }
  return value->as_string();
}

inline std::int64_t int_argument(const Arguments& args, std::size_t index, std::string_view name,
                                 std::string_view what, std::int64_t fallback) {
  const Value* value = argument(args, index, name);
  if (!value || value->is_undefined() || value->is_none()) return fallback;
  if (!value->is_int() && !value->is_bool()) {
    fail(what, ": argument '", name, "' must be an integer, not ", value->type_name());
  }
  return value->as_int();
}

inline bool bool_argument(const Arguments& args, std::size_t index, std::string_view name,
                          bool fallback) {
  const Value* value = argument(args, index, name);
  return value && !value->is_undefined() ? value->truthy() : fallback;
}

// The value of a run of decimal digits (an attribute path's index, a format field's
// number); an error past 64 bits, not an exception of another kind.
inline std::int64_t digits_value(std::string_view digits) {
  std::int64_t value = 0;
  for (const char c : digits) {
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, c - '0', &value)) {
      fail("the number ", digits, " is too large");
    }
  }
  return value;
}

// ---- iteration and lookup ----

// The items `for` walks: a list's items, a dict's keys, a string's characters; an
// undefined value is empty, as jinja2's Undefined iterates.
inline List iterate(const Value& value, Meter& meter) {
  switch (value.kind()) {
    case Value::Kind::list:
      return value.as_list();
    case Value::Kind::dict: {
      List keys;
      for (const auto& entry : value.as_dict().entries()) keys.emplace_back(entry.first);
      meter.charge(keys.size());
      return keys;
    }
    case Value::Kind::string: {
      List characters;
      const std::string& text = value.as_string();
      meter.charge(python::length(text));  // before the list is built
      for (std::size_t at = 0; at < text.size();) {
        const auto decoded = unicode::decode_utf8(text, at);
        characters.emplace_back(text.substr(at, decoded.length));
        at += decoded.length;
      }
      return characters;
    }
    case Value::Kind::undefined:
      return {};
    case Value::Kind::generator: {  // reading an iterator spends it
      GeneratorState& state = value.generator_state();
      List rest(state.items.begin() + static_cast<std::ptrdiff_t>(state.next), state.items.end());
      state.next = state.items.size();
      return rest;
    }
    default:
      fail("'", value.type_name(), "' object is not iterable");
  }
}

inline std::int64_t length(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::string:
      return static_cast<std::int64_t>(python::length(value.as_string()));
    case Value::Kind::list:
      return static_cast<std::int64_t>(value.as_list().size());
    case Value::Kind::dict:
      return static_cast<std::int64_t>(value.as_dict().size());
    case Value::Kind::undefined:
      return 0;
    default:
      fail("object of type '", value.type_name(), "' has no len()");
  }
}

// Python's index normalisation: -1 is the last.
inline std::size_t normalize_index(std::int64_t index, std::size_t size) {
  const std::int64_t n = static_cast<std::int64_t>(size);
  if (index < 0) index += n;
  if (index < 0 || index >= n) fail("index out of range");
  return static_cast<std::size_t>(index);
}

// value[key]: a list's or string's index, a dict's key. What Python refuses (a missing
// key, an index out of range, a value with no items) is undefined, as jinja2's getitem
// makes it; only an undefined value fails.
inline Value item(const Value& target, const Value& key) {
  switch (target.kind()) {
    case Value::Kind::dict: {
      const Value* found = target.as_dict().find(key);
      return found ? *found : Value::undefined(to_str(key));
    }
    case Value::Kind::list: {
      if (!target.is_indexable_list() || (!key.is_int() && !key.is_bool())) {
        return Value::undefined(cat(target.type_name(), " has no item ", to_str(key)));
      }
      const List& list = target.as_list();
      std::int64_t index = key.as_int();
      if (index < 0) index += static_cast<std::int64_t>(list.size());
      if (index < 0 || index >= static_cast<std::int64_t>(list.size())) {
        return Value::undefined("list index " + to_str(key));
      }
      return list[static_cast<std::size_t>(index)];
    }
    case Value::Kind::string: {
      if (!key.is_int() && !key.is_bool())
        return Value::undefined("a string index must be an integer");
      const std::string& text = target.as_string();
      charge_render(text.size() / 64);  // decoding the code points to find the index
      const auto points = python::code_points(text);
      std::int64_t index = key.as_int();
      if (index < 0) index += static_cast<std::int64_t>(points.size());
      if (index < 0 || index >= static_cast<std::int64_t>(points.size())) {
        return Value::undefined("string index " + to_str(key));
      }
      const auto at = static_cast<std::size_t>(index);
      std::string character = python::from_code_points(points, at, at + 1);
      return target.is_markup() ? Value::markup(std::move(character)) : Value(std::move(character));
    }
    case Value::Kind::name_space: {
      if (!key.is_string()) return Value::undefined("a namespace has no item " + to_str(key));
      const Value* found = target.namespace_attributes().find(key.as_string());
      return found ? *found : Value::undefined(key.as_string());
    }
    case Value::Kind::callable: {  // an object's attribute, as jinja2's getitem falls back
      const Dict* attributes = target.as_callable().attributes.get();
      const Value* found = attributes && key.is_string() ? attributes->find(key) : nullptr;
      return found ? *found : Value::undefined(to_str(key));
    }
    case Value::Kind::undefined:
      fail("'", target.undefined_name(), "' is undefined, so it has no item ", to_str(key));
    default:
      return Value::undefined(cat("'", target.type_name(), "' object has no item ", to_str(key)));
  }
}

// value[start:stop:step], as Python computes the indices.
inline Value slice(const Value& target, const Value& start, const Value& stop, const Value& step,
                   Meter& meter) {
  // jinja2 slices with Python's own [a:b:c], not its getitem: what Python cannot slice
  // (an undefined value, a dict view, a number, a bound that is no integer) fails.
  if (target.is_undefined()) {
    fail("'", target.undefined_name(), "' is undefined, so it cannot be sliced");
  }
  const auto index_like = [](const Value& v) {
    return v.is_undefined() || v.is_none() || v.is_int() || v.is_bool();
  };
  if (!target.is_string() && !target.is_indexable_list()) {
    fail("'", target.type_name(), "' object is not subscriptable");
  }
  if (!index_like(start) || !index_like(stop) || !index_like(step)) {
    fail("slice indices must be integers or None");
  }
  const auto as_index = [](const Value& v) -> std::optional<std::int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    return v.as_int();
  };
  std::int64_t step_by = as_index(step).value_or(1);
  if (step_by == 0) fail("slice step cannot be zero");
  const auto indices = [&](std::int64_t size) {
    // A step beyond the size takes one item at most; bounding it keeps i from overflowing.
    step_by = std::clamp<std::int64_t>(step_by, -size - 1, size + 1);
    const auto clamp = [&](std::optional<std::int64_t> index, std::int64_t if_absent) {
      if (!index) return if_absent;
      std::int64_t i = *index;
      if (i < 0) i = i < -size ? -1 : i + size;
      if (step_by > 0) return std::clamp<std::int64_t>(i, 0, size);
      return std::clamp<std::int64_t>(i, -1, size - 1);
    };
    const std::int64_t first = clamp(as_index(start), step_by > 0 ? 0 : size - 1);
    const std::int64_t last = clamp(as_index(stop), step_by > 0 ? size : -1);
    std::vector<std::size_t> out;
    for (std::int64_t i = first; step_by > 0 ? i < last : i > last; i += step_by) {
      out.push_back(static_cast<std::size_t>(i));
    }
    meter.charge(out.size());
    return out;
  };
  if (target.is_list()) {
    const List& list = target.as_list();
    List out;
    for (const std::size_t i : indices(static_cast<std::int64_t>(list.size()))) {
      out.push_back(list[i]);
    }
    return Value::sequence(std::move(out), target.is_tuple() ? ListType::tuple : ListType::list);
  }
  const auto points = python::code_points(target.as_string());
  std::string out;
  for (const std::size_t i : indices(static_cast<std::int64_t>(points.size()))) {
    unicode::append_utf8(out, points[i]);
  }
  return target.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
}

// ---- operators ----

// compare(a, b): -1, 0 or 1, or kUnordered when a NaN takes part (then none of <, <=, >,
// >= holds); fails where Python's < does.
inline constexpr int kUnordered = 2;

inline int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() != b.is_float()) {  // exact, as Python compares an int with a float
      const int c = a.is_float() ? -python::compare_int_float(b.as_int(), a.as_double())
                                 : python::compare_int_float(a.as_int(), b.as_double());
      return c == kUnordered || c == -kUnordered ? kUnordered : c;
    }
    if (a.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : x == y ? 0 : kUnordered;
    }
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 sorts as code points do
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && a.is_indexable_list() &&
      b.is_indexable_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  fail("'<' is not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

// a op b for the ordering operators <, <=, >, >=.
inline bool ordered(std::string_view op, const Value& a, const Value& b) {
  const int c = compare(a, b);
  if (c == kUnordered) return false;
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

// Python's hash() refuses lists, dicts and dict views (and tuples holding them).
inline bool hashable(const Value& value) {
  if (value.is_dict()) return false;
  if (!value.is_list()) return true;
  if (!value.is_tuple()) return false;
  return std::all_of(value.as_list().begin(), value.as_list().end(),
                     [](const Value& item) { return hashable(item); });
}

inline bool contains(const Value& container, const Value& needle) {
  switch (container.kind()) {
    case Value::Kind::string:
      if (!needle.is_string()) {
        fail("'in <string>' requires a string as left operand, not ", needle.type_name());
      }
      // std::string::find is quadratic at worst (a needle of a's and one b in a's): the
      // search is charged for that worst case, in 64-byte units, before it runs.
      charge_render((container.as_string().size() / 64 + 1) * (needle.as_string().size() / 64 + 1));
      return container.as_string().find(needle.as_string()) != std::string::npos;
    case Value::Kind::list:
      // a dict's keys are a set: what is looked up there must be hashable
      if (container.list_type() == ListType::dict_keys && !hashable(needle)) {
        fail("unhashable type: '", needle.type_name(), "'");
      }
      return std::any_of(container.as_list().begin(), container.as_list().end(),
                         [&](const Value& item) { return equal(item, needle); });
    case Value::Kind::dict:
      if (!hashable(needle)) fail("unhashable type: '", needle.type_name(), "'");
      return container.as_dict().find(needle) != nullptr;
    case Value::Kind::undefined:
      return false;
    case Value::Kind::generator: {
      GeneratorState& state = container.generator_state();
      while (state.next < state.items.size()) {
        if (equal(state.items[state.next++], needle)) return true;
      }
      return false;
    }
    default:
      fail("argument of type '", container.type_name(), "' is not iterable");
  }
}

inline std::int64_t checked(bool overflow, std::int64_t value) {
  if (overflow) fail("integer overflow (smol's template integers are 64-bit)");
  return value;
}

// markupsafe's escape, what Markup + str applies to the str.
inline std::string html_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// str.replace, its result's size checked before it is built.
inline std::string replace(const std::string& text, const std::string& old, const std::string& with,
                           std::int64_t count, Meter& meter) {
  std::size_t found = 0;
  if (old.empty()) {
    found = python::length(text) + 1;
  } else {
    for (std::size_t at = text.find(old); at != std::string::npos;
         at = text.find(old, at + old.size())) {
      ++found;
    }
  }
  if (count >= 0) found = std::min(found, static_cast<std::size_t>(count));
  if (with.size() > old.size() && found > 0 &&
      (with.size() - old.size()) > meter.limits().max_output_bytes / found) {
    meter.check_size(std::numeric_limits<std::size_t>::max());
  }
  meter.check_size(text.size() + found * (with.size() > old.size() ? with.size() - old.size() : 0));
  return python::replace(text, old, with, count);
}

inline Value repeat(const Value& sequence, std::int64_t times, Meter& meter) {
  const std::size_t count = times > 0 ? static_cast<std::size_t>(times) : 0;
  if (sequence.is_string()) {
    const std::string& text = sequence.as_string();
    if (!text.empty() && count > meter.limits().max_output_bytes / text.size()) {
      meter.check_size(std::numeric_limits<std::size_t>::max());
    }
    meter.charge(count);
    std::string out;
    out.reserve(text.size() * count);
    for (std::size_t i = 0; i < count; ++i) out += text;
    return sequence.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
  }
  const List& list = sequence.as_list();
  if (list.empty() || count == 0) return Value::sequence({}, sequence.list_type());
  if (count > meter.limits().max_steps / list.size()) {
    meter.charge(std::numeric_limits<std::size_t>::max() / 2);
  }
  meter.charge(count * list.size());
  // Each copy copies the list's strings too: their bytes count against the text budget.
  std::size_t bytes = 0;
  for (const Value& item : list) bytes += item.is_string() ? item.as_string().size() : 0;
  if (bytes > 0 && count > meter.limits().max_output_bytes / bytes) {
    meter.check_size(std::numeric_limits<std::size_t>::max());
  }
  List out;
  for (std::size_t i = 0; i < count; ++i) out.insert(out.end(), list.begin(), list.end());
  return Value::sequence(std::move(out), sequence.list_type());
}

// ascii(): repr() with every code point above U+007F escaped.
inline std::string ascii_repr(const Value& value) {
  std::string text;
  append_repr(text, value);
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t at = 0; at < text.size();) {
    const auto decoded = unicode::decode_utf8(text, at);
    const char32_t c = decoded.codepoint;
    at += decoded.length;
    if (c < 0x80) {
      out += static_cast<char>(c);
      continue;
    }
    const int digits = c <= 0xFF ? 2 : c <= 0xFFFF ? 4 : 8;
    out += digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U";
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += kHex[(c >> shift) & 15];
  }
  return out;
}

// format(value, spec): what a str.format field writes.
inline std::string format_value(const Value& value, std::string_view spec) {
  if (spec.empty()) return to_str(value);
  const python::FormatSpec parsed = python::parse_format_spec(spec);
  switch (value.kind()) {
    case Value::Kind::string:
      return python::format_string(value.as_string(), parsed);
    case Value::Kind::boolean:
    case Value::Kind::integer:
      return python::format_int(value.as_int(), parsed);
    case Value::Kind::floating:
      return python::format_float(value.as_double(), parsed);
    default:
      fail("unsupported format string passed to ", value.type_name(), ".__format__");
  }
}

// A %-conversion's arguments: a tuple's items, else the one value, taken in order.
struct PercentArguments {
  List items;
  std::size_t next = 0;

  const Value& take() {
    if (next >= items.size()) fail("not enough arguments for format string");
    return items[next++];
  }
};

// One %-conversion's flags, width, precision (-1: none given) and conversion character.
struct PercentSpec {
  bool left = false, plus = false, space = false, alternate = false, zero = false;
  std::int64_t width = 0, precision = -1;
  char conversion = 0;
};

// %(name)s: the key between the parentheses (which may nest), looked up in the dict;
// `i` moves past the closing ')'.
inline const Value* percent_key(const std::string& format, std::size_t& i, const Value& values) {
  int depth = 1;
  const std::size_t begin = ++i;
  for (; i < format.size() && depth > 0; ++i) {
    depth += format[i] == '(' ? 1 : format[i] == ')' ? -1 : 0;
  }
  if (depth > 0) fail("incomplete format key");
  if (!values.is_dict()) fail("format requires a mapping");
  const std::string key = format.substr(begin, i - 1 - begin);
  const Value* keyed = values.as_dict().find(key);
  if (!keyed) fail("KeyError: '", key, "'");
  return keyed;
}

inline void percent_flags(const std::string& format, std::size_t& i, PercentSpec& spec) {
  for (; i < format.size(); ++i) {
    const char f = format[i];
    if (f == '-')
      spec.left = true;
    else if (f == '+')
      spec.plus = true;
    else if (f == ' ')
      spec.space = true;
    else if (f == '#')
      spec.alternate = true;
    else if (f == '0')
      spec.zero = true;
    else
      break;
  }
}

// A width or precision: digits, or '*' for the next argument. Both are capped so a
// template cannot ask for gigabytes of padding.
inline std::int64_t percent_number(const std::string& format, std::size_t& i,
                                   PercentArguments& arguments) {
  if (i < format.size() && format[i] == '*') {
    ++i;
    const Value& n = arguments.take();
    if (!n.is_int() && !n.is_bool()) fail("* wants int");
    if (n.as_int() > 100000 || n.as_int() < -100000) fail("width too big");
    return n.as_int();
  }
  std::int64_t n = 0;
  while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
    n = n * 10 + (format[i++] - '0');
    if (n > 100000) fail("width too big");
  }
  return n;
}

// What follows '%' (and any (key)): flags, width, .precision, a length modifier Python
// ignores, and the conversion character; `i` is left on the conversion character.
inline PercentSpec parse_percent_spec(const std::string& format, std::size_t& i,
                                      PercentArguments& arguments) {
  PercentSpec spec;
  percent_flags(format, i, spec);
  spec.width = percent_number(format, i, arguments);
  if (spec.width < 0) {  // a negative '*' width left-aligns
    spec.left = true;
    spec.width = -spec.width;
  }
  if (i < format.size() && format[i] == '.') {
    ++i;
    spec.precision = std::max<std::int64_t>(0, percent_number(format, i, arguments));
  }
  if (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
  if (i >= format.size()) fail("incomplete format");
  spec.conversion = format[i];
  return spec;
}

// A converted argument before padding: the sign (and 0x-style prefix) goes before the
// zeros of the width, the body after them; only numeric fields pad with zeros.
struct PercentField {
  std::string sign, body;
  bool numeric = true;
};

// %s, %r and %a: str(), repr() or ascii(), cut to the precision, escaped under Markup.
inline PercentField percent_text(const PercentSpec& spec, const Value& arg, bool markup) {
  PercentField field;
  field.numeric = false;
  if (spec.conversion == 's') {
    field.body = to_str(arg);
  } else if (spec.conversion == 'r') {
    append_repr(field.body, arg);
  } else {
    field.body = ascii_repr(arg);
  }
  if (spec.precision >= 0) {
    const auto points = python::code_points(field.body);
    if (static_cast<std::size_t>(spec.precision) < points.size()) {
      field.body = python::from_code_points(points, 0, static_cast<std::size_t>(spec.precision));
    }
  }
  if (markup && !arg.is_markup()) field.body = html_escape(field.body);
  return field;
}

// The integer an integer conversion prints: %d, %i and %u also take a float, truncated.
inline std::int64_t percent_integer_value(char conversion, const Value& arg) {
  const bool decimal = conversion == 'd' || conversion == 'i' || conversion == 'u';
  if (arg.is_int() || arg.is_bool()) return arg.as_int();
  if (arg.is_float() && decimal) {
    const double d = arg.as_double();
    if (std::isnan(d)) fail("cannot convert float NaN to integer");
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) fail("cannot convert float to integer");
    return static_cast<std::int64_t>(d);
  }
  if (decimal) fail("%", conversion, " format: a real number is required, not ", arg.type_name());
  fail("%", conversion, " format: an integer is required, not ", arg.type_name());
}

// %d, %i, %u, %o, %x and %X: the precision is a minimum count of digits.
inline PercentField percent_integer(const PercentSpec& spec, const Value& arg) {
  const std::int64_t n = percent_integer_value(spec.conversion, arg);
  python::FormatSpec format;
  format.type = spec.conversion == 'o'   ? 'o'
                : spec.conversion == 'x' ? 'x'
                : spec.conversion == 'X' ? 'X'
                                         : 'd';
  format.alternate = spec.alternate;
  std::string digits = python::format_int(n, format);
  if (n < 0) digits.erase(0, 1);  // the sign goes before the zeros of the width
  std::string prefix;
  if (spec.alternate && format.type != 'd') {
    prefix = digits.substr(0, 2);
    digits = digits.substr(2);
  }
  if (spec.precision > static_cast<std::int64_t>(digits.size())) {
    digits.insert(0, static_cast<std::size_t>(spec.precision) - digits.size(), '0');
  }
  PercentField field;
  field.sign = (n < 0 ? "-" : spec.plus ? "+" : spec.space ? " " : "") + prefix;
  field.body = digits;
  return field;
}

// %e, %f and %g: C's printf does these exactly as Python does, padding included.
inline std::string percent_float(const PercentSpec& spec, const Value& arg) {
  if (!arg.is_number()) fail("must be real number, not ", arg.type_name());
  std::string format = "%";
  if (spec.left) format += '-';
  if (spec.plus) format += '+';
  if (spec.space) format += ' ';
  if (spec.alternate) format += '#';
  if (spec.zero) format += '0';
  format +=
      std::to_string(spec.width) + "." + std::to_string(spec.precision < 0 ? 6 : spec.precision);
  format += spec.conversion;
  return python::c_format(format.c_str(), arg.as_double());
}

// %c: a code point given as an int, or a one-character string.
inline PercentField percent_char(const Value& arg) {
  PercentField field;
  field.numeric = false;
  if (arg.is_int() || arg.is_bool()) {
    if (arg.as_int() < 0 || arg.as_int() > 0x10FFFF) fail("%c arg not in range(0x110000)");
    unicode::append_utf8(field.body, static_cast<char32_t>(arg.as_int()));
  } else if (arg.is_string() && python::length(arg.as_string()) == 1) {
    field.body = arg.as_string();
  } else {
    fail("%c requires int or char");
  }
  return field;
}

// Pads the field to the width: on the right when left-aligned, with zeros between the
// sign and the digits for a 0-flagged number, else with spaces on the left.
inline void append_padded(std::string& out, const PercentField& field, const PercentSpec& spec,
                          Meter& meter) {
  meter.check_size(out.size() + field.sign.size() + field.body.size());
  const auto len =
      static_cast<std::int64_t>(python::length(field.sign) + python::length(field.body));
  const std::size_t padding = spec.width > len ? static_cast<std::size_t>(spec.width - len) : 0;
  if (spec.left) {
    out += field.sign + field.body + std::string(padding, ' ');
  } else if (spec.zero && field.numeric) {
    out += field.sign + std::string(padding, '0') + field.body;
  } else {
    out += std::string(padding, ' ') + field.sign + field.body;
  }
}

inline void append_percent_conversion(std::string& out, const PercentSpec& spec, const Value& arg,
                                      bool markup, Meter& meter) {
  switch (spec.conversion) {
    case 's':
    case 'r':
    case 'a':
      append_padded(out, percent_text(spec, arg, markup), spec, meter);
      return;
    case 'd':
    case 'i':
    case 'u':
    case 'o':
    case 'x':
    case 'X':
      append_padded(out, percent_integer(spec, arg), spec, meter);
      return;
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      out += percent_float(spec, arg);
      meter.check_size(out.size());
      return;
    case 'c':
      append_padded(out, percent_char(arg), spec, meter);
      return;
    default:
      fail("unsupported format character '", spec.conversion, "'");
  }
}

// printf-style formatting, Python's str % values: a tuple's items are the arguments, a
// dict (or any non-tuple with items) feeds %(name)s, anything else is the one argument.
// With Markup on the left, the arguments are HTML-escaped, as Markup.__mod__ does.
inline Value percent_format(const Value& format_value, const Value& values, Meter& meter) {
  const std::string& format = format_value.as_string();
  const bool markup = format_value.is_markup();
  PercentArguments arguments;
  if (values.is_tuple()) {
    arguments.items = values.as_list();
  } else {
    arguments.items.push_back(values);
  }
  const bool mapping = values.is_dict() || (values.is_list() && !values.is_tuple());
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) fail("incomplete format");
    const Value* keyed = format[i] == '(' ? percent_key(format, i, values) : nullptr;
    const PercentSpec spec = parse_percent_spec(format, i, arguments);
    if (spec.conversion == '%') {
      out += '%';
      continue;
    }
    const Value& arg = keyed ? *keyed : arguments.take();
    append_percent_conversion(out, spec, arg, markup, meter);
  }
  if (arguments.next < arguments.items.size() && !mapping) {
    fail("not all arguments converted during string formatting");
  }
  return markup ? Value::markup(std::move(out)) : Value(std::move(out));
}

// +, * and % on strings and sequences: concatenation, repetition and printf-style
// formatting; none when the operands are not such.
inline std::optional<Value> sequence_arithmetic(std::string_view op, const Value& a, const Value& b,
                                                Meter& meter) {
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      meter.check_size(a.as_string().size() + b.as_string().size());
      if (a.is_markup() || b.is_markup()) {
        return Value::markup((a.is_markup() ? a.as_string() : html_escape(a.as_string())) +
                             (b.is_markup() ? b.as_string() : html_escape(b.as_string())));
      }
      return a.as_string() + b.as_string();
    }
    // list + list and tuple + tuple; Python refuses the mix and dict views.
    if (a.is_list() && b.is_list() && a.is_indexable_list() && b.is_indexable_list() &&
        a.is_tuple() == b.is_tuple()) {
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      meter.charge(out.size());
      return Value::sequence(std::move(out), a.is_tuple() ? ListType::tuple : ListType::list);
    }
  }
  if (op == "*") {
    const auto repeatable = [](const Value& v) {
      return v.is_string() || (v.is_list() && v.is_indexable_list());
    };
    if (repeatable(a) && (b.is_int() || b.is_bool())) {
      const Value out = repeat(a, b.as_int(), meter);
      return out.is_list() && a.is_tuple() ? Value::tuple(out.as_list()) : out;
    }
    if (repeatable(b) && (a.is_int() || a.is_bool())) {
      const Value out = repeat(b, a.as_int(), meter);
      return out.is_list() && b.is_tuple() ? Value::tuple(out.as_list()) : out;
    }
  }
  if (op == "%" && a.is_string()) {
    Value out = percent_format(a, b, meter);
    meter.check_size(out.as_string().size());
    return out;
  }
  return std::nullopt;
}

// +, -, *, **, // and % when either operand is a float (/ is the caller's).
inline Value float_arithmetic(std::string_view op, double x, double y) {
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (op == "**") {
    if (x == 0 && y < 0) fail("0.0 cannot be raised to a negative power");
    if (x < 0 && y != std::floor(y) && std::isfinite(y)) {
      fail("a negative number to a fractional power is complex (not supported)");
    }
    const double r = std::pow(x, y);
    if (std::isinf(r) && std::isfinite(x) && std::isfinite(y))
      fail("Numerical result out of range");
    return r;
  }
  if (y == 0) fail(op == "%" ? "float modulo" : "float floor division", " by zero");
  if (op == "//") return python::float_floordiv(x, y);
  return python::float_mod(x, y);
}

// int ** int: a float for a negative exponent, as Python gives, else exact or an overflow.
inline Value int_power(std::int64_t x, std::int64_t y) {
  if (y < 0) {
    if (x == 0) fail("0.0 cannot be raised to a negative power");
    return std::pow(static_cast<double>(x), static_cast<double>(y));
  }
  std::int64_t r = 1;  // by squaring: y may be huge when x is -1, 0 or 1
  std::int64_t base = x;
  for (std::int64_t e = y; e > 0; e >>= 1) {
    if ((e & 1) && __builtin_mul_overflow(r, base, &r)) checked(true, 0);
    if (e > 1 && __builtin_mul_overflow(base, base, &base)) checked(true, 0);
  }
  return r;
}

// +, -, *, **, // and % on two ints: 64-bit, an overflow is an error, // and % floor.
inline Value int_arithmetic(std::string_view op, std::int64_t x, std::int64_t y) {
  std::int64_t r = 0;
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
  if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
  if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
  if (op == "+" || op == "-" || op == "*") return checked(overflow, r);
  if (op == "**") return int_power(x, y);
  if (y == 0) fail(op == "%" ? "integer modulo" : "integer division", " by zero");
  if (x == std::numeric_limits<std::int64_t>::min() && y == -1) checked(true, 0);
  std::int64_t quotient = x / y, remainder = x % y;
  if (remainder != 0 && ((remainder < 0) != (y < 0))) {  // Python floors
    --quotient;
    remainder += y;
  }
  return op == "//" ? quotient : remainder;
}

inline Value arithmetic(std::string_view op, const Value& a, const Value& b, Meter& meter) {
  if (op == "~") {
    std::string out = to_str(a);
    out += to_str(b);
    meter.check_size(out.size());
    return out;
  }
  if (a.is_undefined() || b.is_undefined()) {
    fail("'", a.is_undefined() ? a.undefined_name() : b.undefined_name(),
         "' is undefined, so it cannot be used with '", op, "'");
  }
  if (std::optional<Value> out = sequence_arithmetic(op, a, b, meter)) return *std::move(out);
  if (!a.is_number() || !b.is_number()) {
    fail("unsupported operand types for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
  }
  const bool floats = a.is_float() || b.is_float();
  if (op == "/") {
    if (b.as_double() == 0) fail("division by zero");
    if (!floats) return python::int_true_divide(a.as_int(), b.as_int());
    return a.as_double() / b.as_double();
  }
  if (floats) return float_arithmetic(op, a.as_double(), b.as_double());
  return int_arithmetic(op, a.as_int(), b.as_int());
}

// ---- tojson: json.dumps(value, ensure_ascii=False, indent, separators, sort_keys) ----

struct JsonStyle {
  std::int64_t indent = -1;  // -1: None (one line)
  std::string indent_text;   // indent given as a string
  std::string item_separator = ", ", key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;  // transformers' default is False: UTF-8 as it is
};

// json.dumps turns a non-string key into a string: 1 -> "1", True -> "true".
inline std::string json_key(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::string:
      return key.as_string();
    case Value::Kind::integer:
      return std::to_string(key.as_int());
    case Value::Kind::floating:
      return python::json_float(key.as_double());
    case Value::Kind::boolean:
      return key.as_bool() ? "true" : "false";
    case Value::Kind::none:
      return "null";
    default:
      fail("tojson: keys must be str, int, float, bool or None, not ", key.type_name());
  }
}

inline void append_json(std::string& out, const Value& value, const JsonStyle& style, int depth,
                        Meter& meter);

// A line break and `level` indents, before each item of an indented array or object.
inline void json_newline(std::string& out, const JsonStyle& style, int level, Meter& meter) {
  out += '\n';
  for (int i = 0; i < level; ++i) {
    if (!style.indent_text.empty()) {
      out += style.indent_text;
    } else {
      out.append(static_cast<std::size_t>(style.indent), ' ');
    }
    meter.check_size(out.size());  // a long indent string, deep: checked as it grows
  }
}

inline bool json_pretty(const JsonStyle& style) {
  return style.indent >= 0 || !style.indent_text.empty();
}

inline void append_json_array(std::string& out, const Value& value, const JsonStyle& style,
                              int depth, Meter& meter) {
  if (!value.is_indexable_list()) {
    fail("tojson: Object of type ", value.type_name(), " is not JSON serializable");
  }
  const List& list = value.as_list();
  if (list.empty()) {
    out += "[]";
    return;
  }
  const bool pretty = json_pretty(style);
  out += '[';
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (i) out += style.item_separator;
    if (pretty) json_newline(out, style, depth + 1, meter);
    append_json(out, list[i], style, depth + 1, meter);
  }
  if (pretty) json_newline(out, style, depth, meter);
  out += ']';
}

inline void append_json_object(std::string& out, const Value& value, const JsonStyle& style,
                               int depth, Meter& meter) {
  if (value.is_namespace()) fail("tojson: Object of type Namespace is not JSON serializable");
  std::vector<const std::pair<Value, Value>*> entries;
  for (const auto& entry : value.as_dict().entries()) entries.push_back(&entry);
  if (entries.empty()) {
    out += "{}";
    return;
  }
  if (style.sort_keys) {
    std::stable_sort(entries.begin(), entries.end(),
                     [](const std::pair<Value, Value>* a, const std::pair<Value, Value>* b) {
                       return compare(a->first, b->first) < 0;
                     });
  }
  const bool pretty = json_pretty(style);
  out += '{';
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i) out += style.item_separator;
    if (pretty) json_newline(out, style, depth + 1, meter);
    python::append_json_string(out, json_key(entries[i]->first), style.ensure_ascii);
    out += style.key_separator;
    append_json(out, entries[i]->second, style, depth + 1, meter);
  }
  if (pretty) json_newline(out, style, depth, meter);
  out += '}';
}

inline void append_json(std::string& out, const Value& value, const JsonStyle& style, int depth,
                        Meter& meter) {
  if (depth > meter.limits().max_value_depth) {
    fail("tojson: the value nests deeper than ", meter.limits().max_value_depth,
         " levels (or holds itself)");
  }
  meter.charge(1);
  meter.check_size(out.size());
  switch (value.kind()) {
    case Value::Kind::none:
      out += "null";
      return;
    case Value::Kind::boolean:
      out += value.as_bool() ? "true" : "false";
      return;
    case Value::Kind::integer:
      out += std::to_string(value.as_int());
      return;
    case Value::Kind::floating:
      out += python::json_float(value.as_double());
      return;
    case Value::Kind::string:
      python::append_json_string(out, value.as_string(), style.ensure_ascii);
      return;
    case Value::Kind::list:
      append_json_array(out, value, style, depth, meter);
      return;
    case Value::Kind::dict:
    case Value::Kind::name_space:
      append_json_object(out, value, style, depth, meter);
      return;
    case Value::Kind::undefined:
      fail("tojson: '", value.undefined_name(),
           "' is undefined (Undefined is not JSON serializable)");
    case Value::Kind::callable:
      fail("tojson: Object of type function is not JSON serializable");
    case Value::Kind::generator:
      fail("tojson: Object of type generator is not JSON serializable (add | list)");
  }
}

inline Value tojson(const Value& value, const Arguments& args, Meter& meter) {
  JsonStyle style;
  if (const Value* indent = argument(args, 1, "indent");
      indent && !indent->is_none() && !indent->is_undefined()) {
    if (indent->is_string()) {
      style.indent_text = indent->as_string();
      if (style.indent_text.empty()) style.indent = 0;
    } else if (indent->is_int() || indent->is_bool()) {
      style.indent = std::max<std::int64_t>(0, indent->as_int());
      if (style.indent > 64) fail("tojson: indent ", style.indent, " is more than 64");
    } else {
      fail("tojson: indent must be an integer or a string");
    }
    style.item_separator = ",";
  }
  if (const Value* separators = argument(args, 2, "separators");
      separators && !separators->is_none() && !separators->is_undefined()) {
    if (!separators->is_list() || separators->as_list().size() != 2 ||
        !separators->as_list()[0].is_string() || !separators->as_list()[1].is_string()) {
      fail("tojson: separators must be a pair of strings");
    }
    style.item_separator = separators->as_list()[0].as_string();
    style.key_separator = separators->as_list()[1].as_string();
  }
  style.sort_keys = bool_argument(args, 3, "sort_keys", false);
  style.ensure_ascii = bool_argument(args, 0, "ensure_ascii", false);
  std::string out;
  append_json(out, value, style, 0, meter);
  meter.check_size(out.size());
  return out;
}

}  // namespace builtins
}  // namespace smol::jinja
