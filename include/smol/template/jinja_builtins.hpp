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

// The budgets of one render.
struct RenderLimits {
  std::size_t max_steps = 10'000'000;        // expressions, statements and elements built
  std::size_t max_output_bytes = 64u << 20;  // the rendered text, and any one string
  int max_call_depth = 100;                  // nested macro calls
  int max_value_depth = 256;                 // nesting of a value tojson or repr writes
};

class Meter {
 public:
  explicit Meter(const RenderLimits& limits) : limits_(limits) {}

  void charge(std::size_t work) {
    steps_ += work;
    if (steps_ > limits_.max_steps) {
      fail("the template ran past its budget of ", limits_.max_steps, " steps");
    }
  }
  void check_size(std::size_t bytes) const {
    if (bytes > limits_.max_output_bytes) {
      fail("the template built a text of more than ", limits_.max_output_bytes, " bytes");
    }
  }
  const RenderLimits& limits() const { return limits_; }

 private:
  const RenderLimits& limits_;
  std::size_t steps_ = 0;
};

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
      for (std::size_t at = 0; at < text.size();) {
        const auto decoded = unicode::decode_utf8(text, at);
        characters.emplace_back(text.substr(at, decoded.length));
        at += decoded.length;
      }
      meter.charge(characters.size());
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

// value[key]: a list's or string's index, a dict's key. A missing key is undefined.
inline Value item(const Value& target, const Value& key) {
  switch (target.kind()) {
    case Value::Kind::dict: {
      const Value* found = target.as_dict().find(key);
      return found ? *found : Value::undefined(to_str(key));
    }
    case Value::Kind::list: {
      if (!key.is_int() && !key.is_bool()) {
        return Value::undefined("a list index must be an integer, not " +
                                std::string(key.type_name()));
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
      if (!key.is_int()) return Value::undefined("a string index must be an integer");
      const std::string& text = target.as_string();
      if (python::is_ascii(text)) {
        std::int64_t index = key.as_int();
        if (index < 0) index += static_cast<std::int64_t>(text.size());
        if (index < 0 || index >= static_cast<std::int64_t>(text.size())) {
          return Value::undefined("string index " + to_str(key));
        }
        return Value(std::string(1, text[static_cast<std::size_t>(index)]));
      }
      const auto points = python::code_points(text);
      std::int64_t index = key.as_int();
      if (index < 0) index += static_cast<std::int64_t>(points.size());
      if (index < 0 || index >= static_cast<std::int64_t>(points.size())) {
        return Value::undefined("string index " + to_str(key));
      }
      const auto at = static_cast<std::size_t>(index);
      return Value(python::from_code_points(points, at, at + 1));
    }
    case Value::Kind::name_space: {
      if (!key.is_string()) return Value::undefined("a namespace has no item " + to_str(key));
      const Value* found = target.namespace_attributes().find(key.as_string());
      return found ? *found : Value::undefined(key.as_string());
    }
    case Value::Kind::undefined:
      fail("'", target.undefined_name(), "' is undefined, so it has no item ", to_str(key));
    case Value::Kind::generator:
      fail("'generator' object is not subscriptable");
    default:
      fail("'", target.type_name(), "' object is not subscriptable");
  }
}

// value[start:stop:step], as Python computes the indices.
inline Value slice(const Value& target, const Value& start, const Value& stop, const Value& step,
                   Meter& meter) {
  const auto as_index = [](const Value& v, std::string_view what) -> std::optional<std::int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) fail("slice ", what, " must be an integer");
    return v.as_int();
  };
  const std::int64_t step_by = as_index(step, "step").value_or(1);
  if (step_by == 0) fail("slice step cannot be zero");
  const auto indices = [&](std::int64_t size) {
    const auto clamp = [&](std::optional<std::int64_t> index, std::int64_t if_absent) {
      if (!index) return if_absent;
      std::int64_t i = *index;
      if (i < 0) i += size;
      if (step_by > 0) return std::clamp<std::int64_t>(i, 0, size);
      return std::clamp<std::int64_t>(i, -1, size - 1);
    };
    const std::int64_t first = clamp(as_index(start, "start"), step_by > 0 ? 0 : size - 1);
    const std::int64_t last = clamp(as_index(stop, "stop"), step_by > 0 ? size : -1);
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
    return out;
  }
  if (target.is_string()) {
    const auto points = python::code_points(target.as_string());
    std::string out;
    for (const std::size_t i : indices(static_cast<std::int64_t>(points.size()))) {
      unicode::append_utf8(out, points[i]);
    }
    return out;
  }
  fail("'", target.type_name(), "' object cannot be sliced");
}

// ---- operators ----

inline int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 sorts as code points do
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  fail("'<' is not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

inline bool contains(const Value& container, const Value& needle) {
  switch (container.kind()) {
    case Value::Kind::string:
      if (!needle.is_string()) {
        fail("'in <string>' requires a string as left operand, not ", needle.type_name());
      }
      return container.as_string().find(needle.as_string()) != std::string::npos;
    case Value::Kind::list:
      return std::any_of(container.as_list().begin(), container.as_list().end(),
                         [&](const Value& item) { return equal(item, needle); });
    case Value::Kind::dict:
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
  if (!list.empty() && count > meter.limits().max_steps / list.size()) {
    meter.charge(std::numeric_limits<std::size_t>::max() / 2);
  }
  meter.charge(count * list.size());
  List out;
  for (std::size_t i = 0; i < count; ++i) out.insert(out.end(), list.begin(), list.end());
  return out;
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
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      meter.check_size(a.as_string().size() + b.as_string().size());
      if (a.is_markup() || b.is_markup()) {
        return Value::markup((a.is_markup() ? a.as_string() : html_escape(a.as_string())) +
                             (b.is_markup() ? b.as_string() : html_escape(b.as_string())));
      }
      return a.as_string() + b.as_string();
    }
    if (a.is_list() && b.is_list()) {
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      meter.charge(out.size());
      return out;
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) {
      return repeat(a, b.as_int(), meter);
    }
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) {
      return repeat(b, a.as_int(), meter);
    }
  }
  if (!a.is_number() || !b.is_number()) {
    fail("unsupported operand types for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
  }
  const bool floats = a.is_float() || b.is_float();
  if (op == "/") {
    if (b.as_double() == 0) fail("division by zero");
    return a.as_double() / b.as_double();
  }
  if (floats) {
    const double x = a.as_double(), y = b.as_double();
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "**") return std::pow(x, y);
    if (y == 0) fail(op == "%" ? "float modulo" : "float floor division", " by zero");
    if (op == "//") return std::floor(x / y);
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return r;
  }
  const std::int64_t x = a.as_int(), y = b.as_int();
  std::int64_t r = 0;
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
  if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
  if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
  if (op == "+" || op == "-" || op == "*") return checked(overflow, r);
  if (op == "**") {
    if (y < 0) return std::pow(static_cast<double>(x), static_cast<double>(y));
    r = 1;  // by squaring: y may be huge when x is -1, 0 or 1
    std::int64_t base = x;
    for (std::int64_t e = y; e > 0; e >>= 1) {
      if ((e & 1) && __builtin_mul_overflow(r, base, &r)) checked(true, 0);
      if (e > 1 && __builtin_mul_overflow(base, base, &base)) checked(true, 0);
    }
    return r;
  }
  if (y == 0) fail(op == "%" ? "integer modulo" : "integer division", " by zero");
  if (x == std::numeric_limits<std::int64_t>::min() && y == -1) checked(true, 0);
  std::int64_t quotient = x / y, remainder = x % y;
  if (remainder != 0 && ((remainder < 0) != (y < 0))) {  // Python floors
    --quotient;
    remainder += y;
  }
  return op == "//" ? quotient : remainder;
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
                        Meter& meter) {
  if (depth > meter.limits().max_value_depth) {
    fail("tojson: the value nests deeper than ", meter.limits().max_value_depth,
         " levels (or holds itself)");
  }
  meter.charge(1);
  const bool pretty = style.indent >= 0 || !style.indent_text.empty();
  const auto newline = [&](int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) {
      if (!style.indent_text.empty()) {
        out += style.indent_text;
      } else {
        out.append(static_cast<std::size_t>(style.indent), ' ');
      }
    }
  };
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
    case Value::Kind::list: {
      const List& list = value.as_list();
      if (list.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (i) out += style.item_separator;
        if (pretty) newline(depth + 1);
        append_json(out, list[i], style, depth + 1, meter);
      }
      if (pretty) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::dict:
    case Value::Kind::name_space: {
      if (value.is_namespace()) fail("tojson: Object of type Namespace is not JSON serializable");
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& entry : value.as_dict().entries()) entries.push_back(&entry);
      if (entries.empty()) {
        out += "{}";
        return;
      }
      if (style.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return compare(a->first, b->first) < 0; });
      }
      out += '{';
      for (std::size_t i = 0; i < entries.size(); ++i) {
        if (i) out += style.item_separator;
        if (pretty) newline(depth + 1);
        python::append_json_string(out, json_key(entries[i]->first), style.ensure_ascii);
        out += style.key_separator;
        append_json(out, entries[i]->second, style, depth + 1, meter);
      }
      if (pretty) newline(depth);
      out += '}';
      return;
    }
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
    } else if (indent->is_int()) {
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
