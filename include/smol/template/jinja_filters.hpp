// jinja2's filters (`value | name(...)`) and tests (`value is name ...`), each as jinja2
// 3.1 defines it, plus transformers' tojson.
//
// Not here, and an error naming them: pprint (pformat's line wrapping), striptags (HTML's
// entity table), wordwrap (textwrap's algorithm), urlize and random.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/template/jinja_builtins.hpp"
#include "smol/template/jinja_methods.hpp"

namespace smol::jinja {

bool apply_test(std::string_view name, const Value& value, const Arguments& args, Meter& meter);
Value apply_filter(std::string_view name, const Value& value, const Arguments& args, Meter& meter);

namespace builtins {

// The names jinja2's environment knows, for the `filter` and `test` tests.
inline bool is_jinja_filter(std::string_view name) {
  return is_one_of(
      name, {"abs",    "attr",       "batch",       "capitalize", "center",   "count",
             "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
             "first",  "float",      "forceescape", "format",     "groupby",  "indent",
             "int",    "items",      "join",        "last",       "length",   "list",
             "lower",  "map",        "max",         "min",        "pprint",   "random",
             "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
             "select", "selectattr", "slice",       "sort",       "string",   "striptags",
             "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
             "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr"});
}
inline bool is_jinja_test(std::string_view name) {
  return is_one_of(
      name,
      {"!=",       "<",        "<=",          "==",       ">",           ">=",       "boolean",
       "callable", "defined",  "divisibleby", "eq",       "equalto",     "escaped",  "even",
       "false",    "filter",   "float",       "ge",       "greaterthan", "gt",       "in",
       "integer",  "iterable", "le",          "lessthan", "lower",       "lt",       "mapping",
       "ne",       "none",     "number",      "odd",      "sameas",      "sequence", "string",
       "test",     "true",     "undefined",   "upper"});
}

// The `attribute` of map, select, sort, join, sum, ...: a dotted path, each part an item
// (digits are integers, as in jinja2: "0" indexes a list, and finds no "0" key), else an
// attribute; what is not there is undefined, and a step into an undefined value fails.
// `fallback` (map's default=) replaces an undefined step.
inline Value attribute_path(const Value& value, std::string_view path, Meter& meter,
                            const Value* fallback = nullptr) {
  Value current = value;
  while (true) {
    const std::size_t dot = path.find('.');
    const std::string part(path.substr(0, dot));
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    Value key = digits ? Value(digits_value(part)) : Value(part);
    Value found = item(current, key);
    if (found.is_undefined() && !digits && !current.is_undefined()) {
      // jinja2's getitem falls back to the attribute (a method, groupby's grouper).
      found = attribute(current, part, meter);
    }
    current = std::move(found);
    if (fallback && current.is_undefined()) current = *fallback;
    if (dot == std::string_view::npos) return current;
    path.remove_prefix(dot + 1);
  }
}

// ignore_case: a string key compares in lower case.
inline Value ignore_case(Value key) {
  return key.is_string() ? Value(python::lower(key.as_string())) : key;
}

// The named and positional arguments past the first `skip` positional ones: what a test
// named by select, or a filter named by map, receives.
inline Arguments rest_of(const Arguments& args, std::size_t skip) {
  Arguments rest;
  rest.where = args.where;
  for (std::size_t i = skip; i < args.positional.size(); ++i) {
    rest.positional.push_back(args.positional[i]);
  }
  rest.named = args.named;
  return rest;
}

inline const Value* named_argument(const Arguments& args, std::string_view name) {
  for (const auto& [key, value] : args.named) {
    if (key == name) return &value;
  }
  return nullptr;
}

// select/reject/selectattr/rejectattr: the items for which the test (or truth) holds.
inline Value select(const Value& value, const Arguments& args, bool by_attribute, bool keep,
                    Meter& meter) {
  std::string attribute;
  std::size_t next = 0;
  if (by_attribute) {
    if (args.positional.empty()) fail("selectattr: missing parameter for attribute name");
    attribute = to_str(args.positional[0]);
    next = 1;
  }
  const Value* test = next < args.positional.size() ? &args.positional[next] : nullptr;
  if (test && !test->is_string()) fail("select: the test must be named by a string");
  const Arguments test_args = rest_of(args, next + 1);
  List out;
  if (!value.truthy()) return Value::generator({});  // jinja2: `if value:` first
  for (const Value& item : iterate(value, meter)) {
    const Value subject = by_attribute ? attribute_path(item, attribute, meter) : item;
    const bool holds =
        test ? apply_test(test->as_string(), subject, test_args, meter) : subject.truthy();
    if (holds == keep) out.push_back(item);
  }
  return Value::generator(std::move(out));
}

inline Value map(const Value& value, const Arguments& args, Meter& meter) {
  List out;
  if (!value.truthy()) return Value::generator({});  // jinja2: `if value:` first
  if (args.positional.empty()) {
    const Value* attribute = named_argument(args, "attribute");
    if (!attribute) fail("map requires a filter argument");
    const Value* fallback = named_argument(args, "default");
    if (fallback && fallback->is_none()) fallback = nullptr;
    for (const auto& [key, unused] : args.named) {
      if (key != "attribute" && key != "default") fail("map: unexpected keyword argument ", key);
    }
    for (const Value& item : iterate(value, meter)) {
      out.push_back(attribute_path(item, to_str(*attribute), meter, fallback));
    }
    return Value::generator(std::move(out));
  }
  if (!args.positional[0].is_string()) fail("map: name a filter or give attribute=");
  const Arguments filter_args = rest_of(args, 1);
  for (const Value& item : iterate(value, meter)) {
    out.push_back(apply_filter(args.positional[0].as_string(), item, filter_args, meter));
  }
  return Value::generator(std::move(out));
}

inline std::string join(const Value& value, const Arguments& args, Meter& meter) {
  const Value* separator = argument(args, 0, "d");
  const std::string between = separator ? to_str(*separator) : std::string();
  const Value* attribute = argument(args, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(value, meter)) {
    if (!first) out += between;
    first = false;
    append_str(out, attribute && !attribute->is_none()
                        ? attribute_path(item, to_str(*attribute), meter)
                        : item);
    meter.check_size(out.size());
  }
  return out;
}

// jinja2's indent: each line after the first gets the indentation (`width` spaces, or
// the string), an empty one only with blank=True; the first one too with first=True.
inline std::string indent(const Value& value, const Arguments& args, Meter& meter) {
  if (!value.is_string()) fail("indent: expected a string, got ", value.type_name());
  std::string prefix;
  const Value* width = argument(args, 0, "width");
  if (width && width->is_string()) {
    prefix = width->as_string();
  } else {
    const std::int64_t count = int_argument(args, 0, "width", "indent", 4);
    prefix.assign(static_cast<std::size_t>(std::clamp<std::int64_t>(count, 0, 4096)), ' ');
  }
  const bool first = bool_argument(args, 1, "first", false);
  const bool blank = bool_argument(args, 2, "blank", false);
  // jinja2 appends a newline and splits with str.splitlines(), which drops the last
  // piece and knows \r, \v, \f, U+2028 ... as line ends too.
  const std::vector<std::string> lines = python::split_lines(value.as_string() + "\n");
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) {
      out += '\n';
      if (blank || !lines[i].empty()) out += prefix;
    }
    out += lines[i];
    meter.check_size(out.size() + prefix.size());  // a long indent on many lines
  }
  return first ? prefix + out : out;
}

// The sort key of an item: its attributes (sort's "a,b" names several), in lower case
// unless case_sensitive.
inline Value sort_key(const Value& item, const Value* attribute, bool case_sensitive, bool multi,
                      Meter& meter) {
  if (!attribute || attribute->is_none()) return case_sensitive ? item : ignore_case(item);
  const std::string path = to_str(*attribute);
  if (!multi) {
    Value key = attribute_path(item, path, meter);
    return case_sensitive ? key : ignore_case(key);
  }
  List keys;
  for (const std::string& part : python::split(path, ",", -1)) {
    Value key = attribute_path(item, part, meter);
    keys.push_back(case_sensitive ? key : ignore_case(key));
  }
  return keys;
}

// sorted(items, key=..., reverse=...): stable, and equal items keep their order even
// when reversed, as Python's does.
inline void python_sort(List& items, const std::vector<Value>& keys, bool reverse, Meter& meter) {
  std::vector<std::size_t> order(items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  meter.charge(items.size() * 8);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return reverse ? compare(keys[b], keys[a]) < 0 : compare(keys[a], keys[b]) < 0;
  });
  List sorted;
  for (const std::size_t i : order) sorted.push_back(std::move(items[i]));
  items = std::move(sorted);
}

inline Value sort(const Value& value, const Arguments& args, Meter& meter) {
  const bool reverse = bool_argument(args, 0, "reverse", false);
  const bool case_sensitive = bool_argument(args, 1, "case_sensitive", false);
  const Value* attribute = argument(args, 2, "attribute");
  List items = iterate(value, meter);
  std::vector<Value> keys;
  for (const Value& item : items) {
    keys.push_back(sort_key(item, attribute, case_sensitive, true, meter));
  }
  python_sort(items, keys, reverse, meter);
  return items;
}

inline Value dictsort(const Value& value, const Arguments& args, Meter& meter) {
  if (!value.is_dict()) fail("dictsort: '", value.type_name(), "' object has no attribute 'items'");
  const bool case_sensitive = bool_argument(args, 0, "case_sensitive", false);
  const Value* by = argument(args, 1, "by");
  const std::string by_name = by ? to_str(*by) : "key";
  if (by_name != "key" && by_name != "value") {
    fail("dictsort: you can only sort by either \"key\" or \"value\"");
  }
  const bool reverse = bool_argument(args, 2, "reverse", false);
  List pairs;
  std::vector<Value> keys;
  for (const auto& [key, item] : value.as_dict().entries()) {
    pairs.push_back(Value::tuple({key, item}));
    const Value& k = by_name == "value" ? item : key;
    keys.push_back(case_sensitive ? k : ignore_case(k));
  }
  python_sort(pairs, keys, reverse, meter);
  return pairs;
}

inline Value unique(const Value& value, const Arguments& args, Meter& meter) {
  const bool case_sensitive = bool_argument(args, 0, "case_sensitive", false);
  const Value* attribute = argument(args, 1, "attribute");
  List out, seen;
  for (const Value& item : iterate(value, meter)) {
    const Value key = sort_key(item, attribute, case_sensitive, false, meter);
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
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const Value* best = &items[0];
  Value best_key = sort_key(items[0], attribute, case_sensitive, false, meter);
  for (const Value& item : items) {
    Value key = sort_key(item, attribute, case_sensitive, false, meter);
    if (ordered(want_max ? ">" : "<", key, best_key)) {
      best = &item;
      best_key = std::move(key);
    }
  }
  return *best;
}

// int(value) as jinja2's int filter tries it: int(text, base), else int(float(text)),
// else the default.
inline Value to_int(const Value& value, const Arguments& args) {
  const Value* fallback = argument(args, 0, "default");
  const Value otherwise = fallback ? *fallback : Value(0);
  const std::int64_t base = int_argument(args, 1, "base", "int", 10);
  if (value.is_undefined()) fail("'", value.undefined_name(), "' is undefined");
  const auto from_float = [&](double d) -> Value {
    if (std::isnan(d)) return otherwise;
    if (!std::isfinite(d)) fail("int: cannot convert float infinity to integer");
    if (std::fabs(d) >= 9.2e18) fail("int: ", d, " is beyond smol's 64-bit integers");
    return static_cast<std::int64_t>(d);
  };
  if (value.is_int() || value.is_bool()) return value.as_int();
  if (value.is_float()) return from_float(value.as_double());
  if (value.is_string()) {
    if (base < 2 || base > 36) fail("int() base must be >= 2 and <= 36, or 0");
    const python::ParsedInt parsed = python::parse_int(value.as_string(), static_cast<int>(base));
    if (parsed.valid && parsed.overflow) {
      fail("int: ", value.as_string(), " is beyond smol's 64-bit integers");
    }
    if (parsed.valid) return parsed.value;
    if (const auto d = python::parse_float(value.as_string())) return from_float(*d);
  }
  return otherwise;
}

inline Value to_float(const Value& value, const Arguments& args) {
  const Value* fallback = argument(args, 0, "default");
  if (value.is_undefined()) fail("'", value.undefined_name(), "' is undefined");
  if (value.is_number()) return value.as_double();
  if (value.is_string()) {
    if (const auto d = python::parse_float(value.as_string())) return *d;
  }
  return fallback ? *fallback : Value(0.0);
}

// round(value, precision): Python's round (ties to even, on the exact binary value);
// ceil and floor scale by 10**precision.
inline Value round(const Value& value, const Arguments& args) {
  const std::int64_t precision = int_argument(args, 0, "precision", "round", 0);
  const Value* method_value = argument(args, 1, "method");
  const std::string method = method_value ? to_str(*method_value) : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    fail("round: method must be common, ceil or floor");
  }
  if (!value.is_number()) fail("round: type ", value.type_name(), " doesn't define __round__");
  if (method == "common") {
    if (value.is_float()) return python::round_float(value.as_double(), precision);
    const std::int64_t n = value.as_int();
    if (precision >= 0) return n;
    if (precision < -18) return std::int64_t{0};
    std::int64_t unit = 1;
    for (std::int64_t i = 0; i < -precision; ++i) unit *= 10;
    std::int64_t quotient = n / unit, remainder = n % unit;
    if (remainder < 0) {
      --quotient;
      remainder += unit;
    }
    // ties to the even multiple
    if (remainder * 2 > unit || (remainder * 2 == unit && quotient % 2 != 0)) ++quotient;
    std::int64_t rounded = 0;
    const bool overflow = __builtin_mul_overflow(quotient, unit, &rounded);
    return checked(overflow, rounded);
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = value.as_double() * scale;
  return (method == "ceil" ? std::ceil(x) : std::floor(x)) / scale;
}

// jinja2's title: words start after whitespace and -({[<, unlike str.title(); each
// word's first character upper, the rest lower.
inline std::string title(const std::string& text) {
  std::string out, word;
  const auto flush = [&] {
    if (word.empty()) return;
    const std::size_t first = unicode::decode_utf8(word, 0).length;
    out += python::upper(std::string_view(word).substr(0, first));
    out += python::lower(std::string_view(word).substr(first));
    word.clear();
  };
  for (std::size_t at = 0; at < text.size();) {
    const auto decoded = unicode::decode_utf8(text, at);
    const char32_t c = decoded.codepoint;
    const std::string_view piece(text.data() + at, decoded.length);
    at += decoded.length;
    if (python::is_space(c) || (c < 0x80 && std::string_view("-({[<").find(static_cast<char>(c)) !=
                                                std::string_view::npos)) {
      flush();
      out += piece;
      continue;
    }
    word += piece;
  }
  flush();
  return out;
}

// \w+ runs: letters, digits and underscores.
inline std::int64_t wordcount(const std::string& text) {
  std::int64_t count = 0;
  bool in_word = false;
  for (const char32_t c : python::code_points(text)) {
    const bool word = c == '_' || unicode::is_letter(c) || unicode::is_number(c);
    if (word && !in_word) ++count;
    in_word = word;
  }
  return count;
}

inline Value truncate(const Value& value, const Arguments& args) {
  const std::int64_t length = int_argument(args, 0, "length", "truncate", 255);
  const bool killwords = bool_argument(args, 1, "killwords", false);
  const Value* end_value = argument(args, 2, "end");
  const std::string end = end_value ? to_str(*end_value) : "...";
  const std::int64_t leeway = int_argument(args, 3, "leeway", "truncate", 5);
  const auto end_length = static_cast<std::int64_t>(python::length(end));
  if (length < end_length) fail("truncate: expected length >= ", end_length, ", got ", length);
  if (leeway < 0) fail("truncate: expected leeway >= 0, got ", leeway);
  if (value.is_undefined()) return value;
  // len(s) first: a short list or dict comes back as it is
  if (!value.is_string()) {
    if ((value.is_list() || value.is_dict()) && builtins::length(value) - leeway <= length) {
      return value;
    }
    fail("truncate: expected a string, got ", value.type_name());
  }
  const auto points = python::code_points(value.as_string());
  // length + leeway saturates: both come from the template and may be near INT64_MAX.
  const std::int64_t room = length > std::numeric_limits<std::int64_t>::max() - leeway
                                ? std::numeric_limits<std::int64_t>::max()
                                : length + leeway;
  if (static_cast<std::int64_t>(points.size()) <= room) return value;
  std::string kept =
      python::from_code_points(points, 0, static_cast<std::size_t>(length - end_length));
  if (!killwords) kept = python::rsplit(kept, " ", 1)[0];
  return kept + end;
}

inline Value slice_filter(const Value& value, const Arguments& args, Meter& meter) {
  const std::int64_t slices = int_argument(args, 0, "slices", "slice", 0);
  if (slices <= 0) fail("slice: the number of slices must be positive");
  const Value* fill = argument(args, 1, "fill_with");
  const List items = iterate(value, meter);
  const auto length = static_cast<std::int64_t>(items.size());
  const std::int64_t per_slice = length / slices, with_extra = length % slices;
  meter.charge(static_cast<std::size_t>(std::min<std::int64_t>(slices, 1 << 30)));
  List out;
  std::int64_t offset = 0;
  for (std::int64_t n = 0; n < slices; ++n) {
    const std::int64_t start = offset + n * per_slice;
    if (n < with_extra) ++offset;
    const std::int64_t end = offset + (n + 1) * per_slice;
    List part(items.begin() + start, items.begin() + end);
    if (fill && !fill->is_none() && n >= with_extra) part.push_back(*fill);
    out.push_back(std::move(part));
  }
  return Value::generator(std::move(out));
}

inline Value batch(const Value& value, const Arguments& args, Meter& meter) {
  const std::int64_t size = int_argument(args, 0, "linecount", "batch", 0);
  const Value* fill = argument(args, 1, "fill_with");
  List out, current;
  for (const Value& item : iterate(value, meter)) {
    if (static_cast<std::int64_t>(current.size()) == size) {
      out.push_back(std::move(current));
      current.clear();
    }
    current.push_back(item);
  }
  if (!current.empty()) {
    if (fill && !fill->is_none()) {
      meter.charge(static_cast<std::size_t>(std::max<std::int64_t>(size, 0)));
      while (static_cast<std::int64_t>(current.size()) < size) current.push_back(*fill);
    }
    out.push_back(std::move(current));
  }
  return Value::generator(std::move(out));
}

// groupby: the items sorted by the attribute, then (grouper, list) for each run of equal
// keys; the grouper is the first item's own value (keys compare in lower case unless
// case_sensitive).
inline Value groupby(const Value& value, const Arguments& args, Meter& meter) {
  const Value* attribute = argument(args, 0, "attribute");
  if (!attribute) fail("groupby: missing the attribute");
  const Value* fallback = argument(args, 1, "default");
  if (fallback && fallback->is_none()) fallback = nullptr;
  const bool case_sensitive = bool_argument(args, 2, "case_sensitive", false);
  const std::string path = to_str(*attribute);
  List items = iterate(value, meter);
  std::vector<Value> keys;
  for (const Value& item : items) {
    const Value key = attribute_path(item, path, meter, fallback);
    keys.push_back(case_sensitive ? key : ignore_case(key));
  }
  python_sort(items, keys, false, meter);
  keys.clear();
  for (const Value& item : items) {
    const Value key = attribute_path(item, path, meter, fallback);
    keys.push_back(case_sensitive ? key : ignore_case(key));
  }
  List groups;
  for (std::size_t i = 0; i < items.size();) {
    std::size_t j = i + 1;
    while (j < items.size() && equal(keys[j], keys[i])) ++j;
    const Value grouper = attribute_path(items[i], path, meter, fallback);
    groups.push_back(
        Value::sequence({grouper, List(items.begin() + static_cast<std::ptrdiff_t>(i),
                                       items.begin() + static_cast<std::ptrdiff_t>(j))},
                        ListType::group));
    i = j;
  }
  return groups;
}

inline std::string filesizeformat(const Value& value, const Arguments& args) {
  double bytes = 0;
  if (value.is_number()) {
    bytes = value.as_double();
  } else if (const auto parsed =
                 value.is_string() ? python::parse_float(value.as_string()) : std::nullopt) {
    bytes = *parsed;
  } else {
    fail("filesizeformat: could not convert ", value.type_name(), " to float");
  }
  const bool binary = bool_argument(args, 0, "binary", false);
  const double base = binary ? 1024 : 1000;
  static constexpr const char* kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static constexpr const char* kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes == 1) return "1 Byte";
  if (bytes < base) {
    if (!std::isfinite(bytes)) fail("filesizeformat: cannot convert float to integer");
    return cat(static_cast<std::int64_t>(bytes), " Bytes");
  }
  double unit = base;
  int i = 0;
  for (; i < 8; ++i) {
    unit *= base;
    if (bytes < unit) break;
  }
  if (i == 8) i = 7;
  return python::c_format("%.1f %s", base * bytes / unit, binary ? kBinary[i] : kDecimal[i]);
}

// urllib's quote: letters, digits and _.-~ (and / unless in a query) stay; each other
// UTF-8 byte is %XX; a query's spaces are "+".
inline std::string url_quote(const std::string& text, bool for_query) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 && byte < 0x80) {
      out += c;
    } else if (c == '_' || c == '.' || c == '-' || c == '~' || (c == '/' && !for_query)) {
      out += c;
    } else if (c == ' ' && for_query) {
      out += '+';
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

inline std::string urlencode(const Value& value, Meter& meter) {
  const bool iterable =
      value.is_list() || value.is_dict() || value.is_generator() || value.is_undefined();
  if (!iterable) return url_quote(to_str(value), false);  // a string, a number, ...
  List pairs;
  if (value.is_dict()) {
    for (const auto& [key, item] : value.as_dict().entries()) pairs.push_back(List{key, item});
  } else {
    pairs = iterate(value, meter);
  }
  std::string out;
  for (const Value& pair : pairs) {
    const List two = iterate(pair, meter);
    if (two.size() != 2) fail("urlencode: expected (key, value) pairs");
    if (!out.empty()) out += '&';
    out += url_quote(to_str(two[0]), true) + "=" + url_quote(to_str(two[1]), true);
  }
  return out;
}

inline std::string xmlattr(const Value& value, const Arguments& args) {
  if (!value.is_dict()) fail("xmlattr: '", value.type_name(), "' object has no attribute 'items'");
  const bool autospace = bool_argument(args, 0, "autospace", true);
  std::string out;
  for (const auto& [key, item] : value.as_dict().entries()) {
    if (item.is_none() || item.is_undefined()) continue;
    const std::string name = to_str(key);
    for (const char32_t c : python::code_points(name)) {
      if (c == '/' || c == '>' || c == '=' || (c < 0x80 && python::is_space(c))) {
        fail("Invalid character in attribute name: ", python::string_repr(name));
      }
    }
    if (!out.empty()) out += ' ';
    out += html_escape(name) + "=\"" +
           (item.is_markup() ? item.as_string() : html_escape(to_str(item))) + "\"";
  }
  return autospace && !out.empty() ? " " + out : out;
}

// trim(chars=None): both ends, of whitespace or of the given characters.
inline Value trim_filter(const Value& value, const Arguments& args) {
  const Value* chars = argument(args, 0, "chars");
  if (chars && !chars->is_none() && !chars->is_string()) {
    fail("trim: strip arg must be None or str");
  }
  const std::string_view set =
      chars && chars->is_string() ? std::string_view(chars->as_string()) : std::string_view();
  return python::strip(to_str(value), python::StripSide::both,
                       chars && chars->is_string() ? &set : nullptr);
}

// first: a generator gives up its next item, as next(iter(value)) does.
inline Value first_filter(const Value& value, Meter& meter) {
  if (value.is_generator()) {
    GeneratorState& state = value.generator_state();
    if (state.next == state.items.size()) return Value::undefined("No first item");
    return state.items[state.next++];
  }
  if (value.is_list()) {
    const List& items = value.as_list();
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  }
  const List items = iterate(value, meter);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

inline Value last_filter(const Value& value, Meter& meter) {
  if (value.is_generator()) fail("last: 'generator' object is not reversible");
  if (value.is_list()) {
    const List& items = value.as_list();
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  }
  const List items = iterate(value, meter);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

// default(default_value='', boolean=False): the fallback for an undefined value, or
// with boolean=True for a falsy one too.
inline Value default_filter(const Value& value, const Arguments& args) {
  const Value* fallback = argument(args, 0, "default_value");
  const bool boolean = bool_argument(args, 1, "boolean", false);
  if (value.is_undefined() || (boolean && !value.truthy())) {
    return fallback ? *fallback : Value(std::string());
  }
  return value;
}

inline Value abs_filter(const Value& value) {
  if (value.is_float()) return std::fabs(value.as_double());
  if (value.is_int() || value.is_bool()) {
    if (value.as_int() == std::numeric_limits<std::int64_t>::min()) checked(true, 0);
    return value.as_int() < 0 ? -value.as_int() : value.as_int();
  }
  fail("abs: bad operand type '", value.type_name(), "'");
}

// replace(old, new, count=None): on the value's str().
inline Value replace_filter(const Value& value, const Arguments& args, Meter& meter) {
  const Value* old = argument(args, 0, "old");
  const Value* with = argument(args, 1, "new");
  if (!old || !with) fail("replace: needs the old and the new text");
  const Value* count_value = argument(args, 2, "count");
  const std::int64_t count =
      count_value && !count_value->is_none() ? int_argument(args, 2, "count", "replace", -1) : -1;
  return builtins::replace(to_str(value), to_str(*old), to_str(*with), count, meter);
}

// items: a mapping's (key, value) pairs, as an iterator (an undefined value has none).
inline Value items_filter(const Value& value, Meter& meter) {
  if (value.is_undefined()) return Value::generator({});
  if (!value.is_dict()) fail("items: can only get item pairs from a mapping");
  List pairs;
  for (const auto& [key, item] : value.as_dict().entries()) {
    pairs.push_back(Value::tuple({key, item}));
  }
  meter.charge(pairs.size());
  return Value::generator(std::move(pairs));
}

inline Value reverse_filter(const Value& value, Meter& meter) {
  if (value.is_string()) {
    auto points = python::code_points(value.as_string());
    std::reverse(points.begin(), points.end());
    std::string out = python::from_code_points(points, 0, points.size());
    return value.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out));
  }
  // reversed() where Python can (an iterator), else list(value) reversed (a list).
  const bool reversible = !value.is_generator();
  List items = iterate(value, meter);
  std::reverse(items.begin(), items.end());
  if (!reversible) return items;
  return Value::generator(std::move(items));
}

// sum(attribute=None, start=0): Python's +, item by item, so the types mix as they would.
inline Value sum_filter(const Value& value, const Arguments& args, Meter& meter) {
  const Value* attribute = argument(args, 0, "attribute");
  Value total = argument(args, 1, "start") ? *argument(args, 1, "start") : Value(0);
  if (total.is_string()) fail("sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : iterate(value, meter)) {
    total = arithmetic(
        "+", total,
        attribute && !attribute->is_none() ? attribute_path(item, to_str(*attribute), meter) : item,
        meter);
  }
  return total;
}

inline Value attr_filter(const Value& value, const Arguments& args, Meter& meter) {
  const Value* attribute_name = argument(args, 0, "name");
  if (!attribute_name || !attribute_name->is_string()) fail("attr: needs a name");
  if (value.is_undefined()) {
    fail("'", value.undefined_name(), "' is undefined, so it has no attribute '",
         attribute_name->as_string(), "'");
  }
  // getattr only: a dict's key is no attribute.
  if (value.is_dict() || value.is_list()) {
    Value found = attribute(value, attribute_name->as_string(), meter);
    return found.is_callable() ? found : Value::undefined(attribute_name->as_string());
  }
  return attribute(value, attribute_name->as_string(), meter);
}

// format(*args) or format(**kwargs): printf-style, value % args.
inline Value format_filter(const Value& value, const Arguments& args, Meter& meter) {
  if (!args.positional.empty() && !args.named.empty()) {
    fail("format: can't handle positional and keyword arguments at the same time");
  }
  const Value format = value.is_markup() ? value : Value(to_str(value));
  if (!args.named.empty()) {
    Dict named;
    for (const auto& [key, item] : args.named) named.set(key, item);
    return percent_format(format, named, meter);
  }
  return percent_format(format, Value::tuple(args.positional), meter);
}

}  // namespace builtins

inline Value apply_filter(std::string_view name, const Value& value, const Arguments& args,
                          Meter& meter) {
  using namespace builtins;
  meter.charge(1);
  if (name == "tojson") return tojson(value, args, meter);
  if (name == "trim") return trim_filter(value, args);
  if (name == "length" || name == "count") return length(value);
  if (name == "join") return join(value, args, meter);
  if (name == "map") return map(value, args, meter);
  if (name == "select") return select(value, args, false, true, meter);
  if (name == "reject") return select(value, args, false, false, meter);
  if (name == "selectattr") return select(value, args, true, true, meter);
  if (name == "rejectattr") return select(value, args, true, false, meter);
  if (name == "first") return first_filter(value, meter);
  if (name == "last") return last_filter(value, meter);
  if (name == "default" || name == "d") return default_filter(value, args);
  if (name == "string") return value.is_markup() ? value : Value(to_str(value));
  if (name == "safe") return value.is_markup() ? value : Value::markup(to_str(value));
  if (name == "int") return to_int(value, args);
  if (name == "float") return to_float(value, args);
  if (name == "abs") return abs_filter(value);
  if (name == "round") return round(value, args);
  if (name == "list") {
    List items = iterate(value, meter);
    return items;
  }
  if (name == "unique") return unique(value, args, meter);
  if (name == "upper") return python::upper(to_str(value));
  if (name == "lower") return python::lower(to_str(value));
  if (name == "capitalize") return python::capitalize(to_str(value));
  if (name == "title") return title(to_str(value));
  if (name == "replace") return replace_filter(value, args, meter);
  if (name == "items") return items_filter(value, meter);
  if (name == "dictsort") return dictsort(value, args, meter);
  if (name == "sort") return sort(value, args, meter);
  if (name == "reverse") return reverse_filter(value, meter);
  if (name == "min" || name == "max") return minmax(value, args, name == "max", meter);
  if (name == "sum") return sum_filter(value, args, meter);
  if (name == "indent") {
    std::string out = indent(value, args, meter);
    meter.check_size(out.size());
    return out;
  }
  if (name == "wordcount") return wordcount(to_str(value));
  if (name == "escape" || name == "e") {
    if (value.is_markup()) return value;
    std::string escaped = html_escape(to_str(value));
    meter.check_size(escaped.size());
    return Value::markup(std::move(escaped));
  }
  if (name == "forceescape") {
    std::string escaped = html_escape(to_str(value));
    meter.check_size(escaped.size());
    return Value::markup(std::move(escaped));
  }
  if (name == "attr") return attr_filter(value, args, meter);
  if (name == "batch") return batch(value, args, meter);
  if (name == "slice") return slice_filter(value, args, meter);
  if (name == "groupby") return groupby(value, args, meter);
  if (name == "center") {
    const std::int64_t width = int_argument(args, 0, "width", "center", 80);
    if (width > 100000) fail("center: width ", width, " is more than 100000");
    return python::pad(to_str(value), width, python::Align::center);
  }
  if (name == "format") return format_filter(value, args, meter);
  if (name == "truncate") return truncate(value, args);
  if (name == "filesizeformat") return filesizeformat(value, args);
  if (name == "urlencode") return urlencode(value, meter);
  if (name == "xmlattr") return xmlattr(value, args);
  fail("unsupported filter '", name, "'");
}

namespace builtins {

// The tests of one argument take it by position, or by its name where jinja2's own
// function has one (operator.eq and the like take no keywords); the others take none.
inline void check_test_arguments(std::string_view name, const Arguments& args) {
  const bool operator_test =
      is_one_of(name, {"==", "eq", "equalto", "!=", "ne", "<", "lt", "lessthan", "<=", "le", ">",
                       "gt", "greaterthan", ">=", "ge"});
  const std::string_view parameter = name == "divisibleby" ? "num"
                                     : name == "sameas"    ? "other"
                                     : name == "in"        ? "seq"
                                                           : "";
  const bool takes_one = operator_test || !parameter.empty();
  if (args.positional.size() + args.named.size() > (takes_one ? 1u : 0u)) {
    fail("the test '", name, "' takes ", takes_one ? "one argument" : "no arguments");
  }
  for (const auto& [key, unused] : args.named) {
    if (key != parameter || parameter.empty()) {
      fail("the test '", name, "' takes no keyword argument '", key, "'");
    }
  }
}

// The one argument of a test that takes one, by position or by name.
inline const Value& test_argument(std::string_view name, const Arguments& args) {
  if (!args.positional.empty()) return args.positional[0];
  if (!args.named.empty()) return args.named[0].second;
  fail("the test '", name, "' needs an argument");
}

// The tests of the value's type and kind (defined, string, mapping, iterable, ...);
// none when `name` is none of them.
inline std::optional<bool> kind_test(std::string_view name, const Value& value) {
  if (name == "defined") return !value.is_undefined();
  if (name == "undefined") return value.is_undefined();
  if (name == "none") return value.is_none();
  if (name == "string") return value.is_string();
  if (name == "number") return value.is_number();
  if (name == "integer") return value.is_int();
  if (name == "float") return value.is_float();
  if (name == "boolean") return value.is_bool();
  if (name == "true") return value.is_bool() && value.as_bool();
  if (name == "false") return value.is_bool() && !value.as_bool();
  if (name == "mapping") return value.is_dict();
  // len() and [] (an undefined value has both); iter() (a generator and a dict view too)
  if (name == "sequence") {
    return value.is_indexable_list() || value.is_string() || value.is_dict() ||
           value.is_undefined();
  }
  if (name == "iterable") {
    return value.is_list() || value.is_string() || value.is_dict() || value.is_undefined() ||
           value.is_generator();
  }
  if (name == "callable") {
    return (value.is_callable() && value.as_callable().function) || value.is_undefined();
  }
  if (name == "escaped") return value.is_markup();
  if (name == "filter" || name == "test") {  // `value in env.filters`: a dict lookup
    if (!hashable(value)) fail("unhashable type: '", value.type_name(), "'");
    if (!value.is_string()) return false;
    return name == "filter" ? is_jinja_filter(value.as_string()) : is_jinja_test(value.as_string());
  }
  return std::nullopt;
}

// Python's `is`: None, True and False are single objects, and CPython keeps one object
// per small integer; other values are the same only as the same container.
inline bool same_as(const Value& value, const Value& o) {
  if (value.is_none() || value.is_bool() || o.is_none() || o.is_bool()) {
    return value.kind() == o.kind() && equal(value, o);
  }
  if (value.is_int() && o.is_int()) {
    return value.as_int() == o.as_int() && value.as_int() >= -5 && value.as_int() <= 256;
  }
  if (value.kind() != o.kind()) return false;
  if (value.is_list()) return &value.as_list() == &o.as_list();
  if (value.is_dict()) return &value.as_dict() == &o.as_dict();
  if (value.is_namespace()) return &value.namespace_attributes() == &o.namespace_attributes();
  return false;
}

}  // namespace builtins

inline bool apply_test(std::string_view name, const Value& value, const Arguments& args,
                       Meter& meter) {
  using namespace builtins;
  meter.charge(1);
  check_test_arguments(name, args);
  const auto other = [&]() -> const Value& { return test_argument(name, args); };
  if (const std::optional<bool> result = kind_test(name, value)) return *result;
  // value % 2 == 1, value % n == 0: Python's %, so floats count and strings fail
  if (name == "odd") return equal(arithmetic("%", value, Value(2), meter), Value(1));
  if (name == "even") return equal(arithmetic("%", value, Value(2), meter), Value(0));
  if (name == "divisibleby") return equal(arithmetic("%", value, other(), meter), Value(0));
  if (name == "eq" || name == "equalto" || name == "==") return equal(value, other());
  if (name == "ne" || name == "!=") return !equal(value, other());
  if (name == "lt" || name == "lessthan" || name == "<") return ordered("<", value, other());
  if (name == "le" || name == "<=") return ordered("<=", value, other());
  if (name == "gt" || name == "greaterthan" || name == ">") return ordered(">", value, other());
  if (name == "ge" || name == ">=") return ordered(">=", value, other());
  if (name == "in") return contains(other(), value);
  if (name == "sameas") return same_as(value, other());
  if (name == "lower") return python::is_lower(to_str(value));
  if (name == "upper") return python::is_upper(to_str(value));
  fail("unsupported test '", name, "'");
}

}  // namespace smol::jinja
