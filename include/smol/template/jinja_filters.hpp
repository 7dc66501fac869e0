// jinja2's filters (`value | name(...)`) and tests (`value is name ...`), those chat
// templates use, each as jinja2 3.1 defines it, plus transformers' tojson.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/template/jinja_builtins.hpp"

namespace smol::jinja {

bool apply_test(std::string_view name, const Value& value, const Arguments& args, Meter& meter);
Value apply_filter(std::string_view name, const Value& value, const Arguments& args, Meter& meter);

namespace builtins {

// `attribute` of map/selectattr/sort/join/sum: a dotted path of keys ("function.name";
// digits index lists).
inline Value attribute_path(const Value& value, std::string_view path) {
  Value current = value;
  while (true) {
    const std::size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    if (digits && current.is_list()) {
      current = item(current, Value(static_cast<std::int64_t>(std::stoll(std::string(part)))));
    } else if (current.is_dict() || current.is_namespace()) {
      current = item(current, Value(part));
    } else {
      return Value::undefined(std::string(part));
    }
    if (dot == std::string_view::npos) return current;
    path.remove_prefix(dot + 1);
  }
}

// The rest of a filter's arguments after the first `skip`, as a test's or filter's own.
inline Arguments rest_of(const Arguments& args, std::size_t skip) {
  Arguments rest;
  rest.where = args.where;
  for (std::size_t i = skip; i < args.positional.size(); ++i) {
    rest.positional.push_back(args.positional[i]);
  }
  return rest;
}

// select/reject/selectattr/rejectattr: the items for which the test (or truth) holds.
inline Value select(const Value& value, const Arguments& args, bool by_attribute, bool keep,
                    Meter& meter) {
  std::string attribute;
  std::size_t next = 0;
  if (by_attribute) {
    attribute = string_argument(args, 0, "attribute", "selectattr");
    next = 1;
  }
  const Value* test = argument(args, next, "");
  if (test && !test->is_string()) fail("select: the test must be named by a string");
  const Arguments test_args = rest_of(args, next + 1);
  List out;
  if (!value.truthy()) return Value::generator({});  // jinja2: `if value:` first
  for (const Value& item : iterate(value, meter)) {
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    const bool holds =
        test ? apply_test(test->as_string(), subject, test_args, meter) : subject.truthy();
    if (holds == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

inline Value map(const Value& value, const Arguments& args, Meter& meter) {
  List out;
  if (!value.truthy()) return Value::generator({});  // jinja2: `if value:` first
  if (const Value* attribute = argument(args, 99, "attribute")) {
    const Value* fallback = argument(args, 99, "default");
    for (const Value& item : iterate(value, meter)) {
      Value mapped = attribute_path(item, to_str(*attribute));
      if (mapped.is_undefined() && fallback) mapped = *fallback;
      out.push_back(std::move(mapped));
    }
    return Value::generator(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    fail("map: name a filter or give attribute=");
  }
  const Arguments filter_args = rest_of(args, 1);
  for (const Value& item : iterate(value, meter)) {
    out.push_back(apply_filter(args.positional[0].as_string(), item, filter_args, meter));
  }
  return Value::generator(std::move(out));
}

inline std::string join(const Value& value, const Arguments& args, Meter& meter) {
  const std::string separator = string_argument(args, 0, "d", "join");
  const Value* attribute = argument(args, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(value, meter)) {
    if (!first) out += separator;
    first = false;
    append_str(out, attribute ? attribute_path(item, to_str(*attribute)) : item);
    meter.check_size(out.size());
  }
  return out;
}

// jinja2's indent: every line but the first (unless first=True) gets `width` spaces (or
// the string), blank lines only with blank=True.
inline std::string indent(const Value& value, const Arguments& args) {
  std::string prefix;
  const Value* width = argument(args, 0, "width");
  if (width && width->is_string()) {
    prefix = width->as_string();
  } else {
    const std::int64_t count = int_argument(args, 0, "width", "indent", 4);
    prefix.assign(static_cast<std::size_t>(std::clamp<std::int64_t>(count, 0, 256)), ' ');
  }
  const bool first = bool_argument(args, 1, "first", false);
  const bool blank = bool_argument(args, 2, "blank", false);
  std::string text = to_str(value);
  std::string newline = "\n";
  text += newline;  // jinja2 appends a newline, splits, and drops the last piece
  const std::vector<std::string> lines = python::split_lines(text);
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) out += newline;
    const bool pad = (i > 0 || first) && (blank || !python::strip(lines[i]).empty());
    if (pad) out += prefix;
    out += lines[i];
  }
  return out;
}

inline Value sort(const Value& value, const Arguments& args, Meter& meter) {
  const bool reverse = bool_argument(args, 0, "reverse", false);
  const bool case_sensitive = bool_argument(args, 1, "case_sensitive", false);
  const Value* attribute = argument(args, 2, "attribute");
  List items = iterate(value, meter);
  const auto key = [&](const Value& item) {
    Value k = attribute ? attribute_path(item, to_str(*attribute)) : item;
    if (!case_sensitive && k.is_string()) k = Value(python::lower(k.as_string()));
    return k;
  };
  meter.charge(items.size() * 8);
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? compare(key(b), key(a)) < 0 : compare(key(a), key(b)) < 0;
  });
  return items;
}

inline Value dictsort(const Value& value, const Arguments& args, Meter& meter) {
  if (!value.is_dict()) fail("dictsort: expected a dict, got ", value.type_name());
  const bool case_sensitive = bool_argument(args, 0, "case_sensitive", false);
  const std::string by = string_argument(args, 1, "by", "dictsort", "key");
  const bool reverse = bool_argument(args, 2, "reverse", false);
  List pairs;
  for (const auto& [key, item] : value.as_dict().entries()) pairs.push_back(List{key, item});
  meter.charge(pairs.size() * 8);
  const std::size_t index = by == "value" ? 1 : 0;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    Value x = a.as_list()[index], y = b.as_list()[index];
    if (!case_sensitive && x.is_string()) x = Value(python::lower(x.as_string()));
    if (!case_sensitive && y.is_string()) y = Value(python::lower(y.as_string()));
    return reverse ? compare(y, x) < 0 : compare(x, y) < 0;
  });
  return pairs;
}

inline Value unique(const Value& value, const Arguments& args, Meter& meter) {
  const bool case_sensitive = bool_argument(args, 0, "case_sensitive", false);
  const Value* attribute = argument(args, 1, "attribute");
  List out, seen;
  for (const Value& item : iterate(value, meter)) {
    Value key = attribute ? attribute_path(item, to_str(*attribute)) : item;
    if (!case_sensitive && key.is_string()) key = Value(python::lower(key.as_string()));
    meter.charge(seen.size());
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::generator(std::move(out));
}

inline Value minmax(const Value& value, const Arguments& args, bool want_max, Meter& meter) {
  const bool case_sensitive = bool_argument(args, 0, "case_sensitive", false);
  const Value* attribute = argument(args, 1, "attribute");
  const List items = iterate(value, meter);
  if (items.empty()) return Value::undefined("the min or max of an empty sequence");
  const Value* best = &items[0];
  const auto key = [&](const Value& item) {
    Value k = attribute ? attribute_path(item, to_str(*attribute)) : item;
    if (!case_sensitive && k.is_string()) k = Value(python::lower(k.as_string()));
    return k;
  };
  for (const Value& item : items) {
    const int c = compare(key(item), key(*best));
    if (want_max ? c > 0 : c < 0) best = &item;
  }
  return *best;
}

inline Value to_int(const Value& value, const Arguments& args) {
  const std::int64_t fallback = int_argument(args, 0, "default", "int", 0);
  if (value.is_int() || value.is_bool()) return value.as_int();
  if (value.is_float()) {
    const double d = value.as_double();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return fallback;
    return static_cast<std::int64_t>(d);
  }
  if (value.is_string()) {
    const std::string text = python::strip(value.as_string());
    std::int64_t parsed = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
    if (error == std::errc() && end == text.data() + text.size() && !text.empty()) return parsed;
    char* float_end = nullptr;
    const double d = std::strtod(text.c_str(), &float_end);
    if (!text.empty() && float_end == text.c_str() + text.size() && std::isfinite(d) &&
        std::fabs(d) < 9.2e18) {
      return static_cast<std::int64_t>(d);
    }
  }
  return fallback;
}

inline Value to_float(const Value& value, const Arguments& args) {
  const Value* fallback = argument(args, 0, "default");
  if (value.is_number()) return value.as_double();
  if (value.is_string()) {
    const std::string text = python::strip(value.as_string());
    char* end = nullptr;
    const double d = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size()) return d;
  }
  return fallback ? fallback->as_double() : 0.0;
}

}  // namespace builtins

inline Value apply_filter(std::string_view name, const Value& value, const Arguments& args,
                          Meter& meter) {
  using namespace builtins;
  meter.charge(1);
  if (name == "tojson") return tojson(value, args, meter);
  if (name == "trim") {
    const std::string chars = string_argument(args, 0, "chars", "trim");
    const std::string_view set = chars;
    return python::strip(to_str(value), python::StripSide::both, chars.empty() ? nullptr : &set);
  }
  if (name == "length" || name == "count") return length(value);
  if (name == "join") return join(value, args, meter);
  if (name == "map") return map(value, args, meter);
  if (name == "select") return select(value, args, false, true, meter);
  if (name == "reject") return select(value, args, false, false, meter);
  if (name == "selectattr") return select(value, args, true, true, meter);
  if (name == "rejectattr") return select(value, args, true, false, meter);
  if (name == "first" && value.is_generator()) {
    GeneratorState& state = value.generator_state();
    if (state.next == state.items.size()) return Value::undefined("the first item of nothing");
    return state.items[state.next++];
  }
  if (name == "last" && value.is_generator()) fail("last: 'generator' object is not reversible");
  if (name == "first" || name == "last") {
    if (value.is_dict() || value.is_string() || value.is_undefined()) {
      const List items = iterate(value, meter);
      if (items.empty()) return Value::undefined("the first item of an empty sequence");
      return name == "first" ? items.front() : items.back();
    }
    if (!value.is_list()) fail(name, ": '", value.type_name(), "' object is not a sequence");
    const List& items = value.as_list();
    if (items.empty()) return Value::undefined("the first item of an empty sequence");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "default" || name == "d") {
    const Value* fallback = argument(args, 0, "default_value");
    const bool boolean = bool_argument(args, 1, "boolean", false);
    if (value.is_undefined() || (boolean && !value.truthy())) {
      return fallback ? *fallback : Value(std::string());
    }
    return value;
  }
  if (name == "string") return to_str(value);
  if (name == "safe") return Value::markup(to_str(value));
  if (name == "int") return to_int(value, args);
  if (name == "float") return to_float(value, args);
  if (name == "abs") {
    if (value.is_float()) return std::fabs(value.as_double());
    if (value.is_int() || value.is_bool()) {
      return checked(value.as_int() == std::numeric_limits<std::int64_t>::min(),
                     value.as_int() < 0 ? -value.as_int() : value.as_int());
    }
    fail("abs: bad operand type '", value.type_name(), "'");
  }
  if (name == "round") {
    const std::int64_t precision = int_argument(args, 0, "precision", "round", 0);
    const std::string method = string_argument(args, 1, "method", "round", "common");
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = value.as_double() * scale;
    const double r = method == "ceil"    ? std::ceil(x)
                     : method == "floor" ? std::floor(x)
                                         : std::round(x);
    return r / scale;
  }
  if (name == "list") return iterate(value, meter);
  if (name == "unique") return unique(value, args, meter);
  if (name == "upper") return python::upper(to_str(value));
  if (name == "lower") return python::lower(to_str(value));
  if (name == "capitalize") return python::capitalize(to_str(value));
  if (name == "title") {
    // jinja2's own title: words start after whitespace and -({[<, unlike str.title().
    std::string text = to_str(value);
    bool word_start = true;
    for (char& c : text) {
      const bool separator = python::is_space(static_cast<unsigned char>(c)) ||
                             std::string_view("-({[<").find(c) != std::string_view::npos;
      if (separator) {
        word_start = true;
        continue;
      }
      c = word_start ? python::ascii_upper(c) : python::ascii_lower(c);
      word_start = false;
    }
    return text;
  }
  if (name == "replace") {
    const std::string old = string_argument(args, 0, "old", "replace");
    const std::string with = string_argument(args, 1, "new", "replace");
    const std::int64_t count = int_argument(args, 2, "count", "replace", -1);
    std::string out = python::replace(to_str(value), old, with, count);
    meter.check_size(out.size());
    return out;
  }
  if (name == "items") {
    if (value.is_undefined()) return Value::generator({});
    if (!value.is_dict()) fail("items: expected a dict, got ", value.type_name());
    List pairs;
    for (const auto& [key, item] : value.as_dict().entries()) pairs.push_back(List{key, item});
    meter.charge(pairs.size());
    return Value::generator(std::move(pairs));
  }
  if (name == "dictsort") return dictsort(value, args, meter);
  if (name == "sort") return sort(value, args, meter);
  if (name == "reverse") {
    if (value.is_string()) {
      auto points = python::code_points(value.as_string());
      std::reverse(points.begin(), points.end());
      return python::from_code_points(points, 0, points.size());
    }
    if (value.is_generator()) fail("reverse: 'generator' object is not reversible");
    List items = iterate(value, meter);
    std::reverse(items.begin(), items.end());
    return Value::generator(std::move(items));
  }
  if (name == "min" || name == "max") return minmax(value, args, name == "max", meter);
  if (name == "sum") {
    const Value* attribute = argument(args, 0, "attribute");
    Value total = argument(args, 1, "start") ? *argument(args, 1, "start") : Value(0);
    for (const Value& item : iterate(value, meter)) {
      total = arithmetic("+", total, attribute ? attribute_path(item, to_str(*attribute)) : item,
                         meter);
    }
    return total;
  }
  if (name == "indent") {
    std::string out = indent(value, args);
    meter.check_size(out.size());
    return out;
  }
  if (name == "wordcount") {
    return static_cast<std::int64_t>(python::split_whitespace(to_str(value), -1).size());
  }
  if (name == "escape" || name == "e" || name == "forceescape") {
    if (value.is_markup() && name != "forceescape") return value;
    return Value::markup(html_escape(to_str(value)));
  }
  if (name == "attr") return attribute_path(value, string_argument(args, 0, "name", "attr"));
  if (name == "batch") {
    const std::int64_t size = int_argument(args, 0, "linecount", "batch", 1);
    if (size <= 0) fail("batch: the size must be positive");
    List out, current;
    for (const Value& item : iterate(value, meter)) {
      current.push_back(item);
      if (static_cast<std::int64_t>(current.size()) == size) {
        out.push_back(std::move(current));
        current.clear();
      }
    }
    if (!current.empty()) {
      if (const Value* fill = argument(args, 1, "fill_with"); fill && !fill->is_none()) {
        while (static_cast<std::int64_t>(current.size()) < size) current.push_back(*fill);
      }
      out.push_back(std::move(current));
    }
    return Value::generator(std::move(out));
  }
  if (name == "center") {
    const std::int64_t width = int_argument(args, 0, "width", "center", 80);
    const std::string text = to_str(value);
    const std::int64_t len = static_cast<std::int64_t>(python::length(text));
    if (width <= len) return text;
    if (width > 4096) fail("center: width ", width, " is more than 4096");
    // str.center puts the extra space on the right, unless the padding and width are odd.
    const std::int64_t pad = width - len;
    const std::int64_t left = pad / 2 + (pad & width & 1);
    return std::string(static_cast<std::size_t>(left), ' ') + text +
           std::string(static_cast<std::size_t>(pad - left), ' ');
  }
  fail("unsupported filter '", name, "'");
}

inline bool apply_test(std::string_view name, const Value& value, const Arguments& args,
                       Meter& meter) {
  using namespace builtins;
  meter.charge(1);
  const auto other = [&]() -> const Value& {
    if (args.positional.empty()) fail("the test '", name, "' needs an argument");
    return args.positional[0];
  };
  if (name == "defined") return !value.is_undefined();
  if (name == "undefined") return value.is_undefined();
  if (name == "none") return value.is_none();
  if (name == "string") return value.is_string();
  if (name == "number") return value.is_int() || value.is_float() || value.is_bool();
  if (name == "integer") return value.is_int();
  if (name == "float") return value.is_float();
  if (name == "boolean") return value.is_bool();
  if (name == "true") return value.is_bool() && value.as_bool();
  if (name == "false") return value.is_bool() && !value.as_bool();
  if (name == "mapping") return value.is_dict();
  if (name == "sequence") return value.is_list() || value.is_string() || value.is_dict();
  if (name == "iterable") {
    return value.is_list() || value.is_string() || value.is_dict() || value.is_undefined();
  }
  if (name == "callable") return value.is_callable();
  if (name == "odd" || name == "even") {
    if (!value.is_int() && !value.is_bool()) fail("the test '", name, "' needs an integer");
    return (value.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& by = other();
    if (!by.is_int() || by.as_int() == 0) fail("divisibleby needs a non-zero integer");
    return value.as_int() % by.as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(value, other());
  if (name == "ne" || name == "!=") return !equal(value, other());
  if (name == "lt" || name == "lessthan" || name == "<") return compare(value, other()) < 0;
  if (name == "le" || name == "<=") return compare(value, other()) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(value, other()) > 0;
  if (name == "ge" || name == ">=") return compare(value, other()) >= 0;
  if (name == "in") return contains(other(), value);
  if (name == "sameas") {
    const Value& o = other();
    if (value.is_none() || value.is_bool() || o.is_none() || o.is_bool()) {
      return value.kind() == o.kind() && equal(value, o);
    }
    return value.kind() == o.kind() && (value.is_list() || value.is_dict() || value.is_namespace())
               ? equal(value, o)
               : false;
  }
  if (name == "lower")
    return value.is_string() && python::lower(value.as_string()) == value.as_string();
  if (name == "upper")
    return value.is_string() && python::upper(value.as_string()) == value.as_string();
  fail("unsupported test '", name, "'");
}

}  // namespace smol::jinja
