// `value.name`: Python's methods on str, dict and list that templates call, else the
// dict's item (jinja2 looks an attribute up on the Python object first, then as an item,
// so `message.items` is the method and `message.content` the key).
//
// Methods that change a list or dict (append, update, pop, ...) are refused, as
// transformers' ImmutableSandboxedEnvironment refuses them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/template/jinja_builtins.hpp"

namespace smol::jinja {

inline Value attribute(const Value& target, const std::string& name, Meter& meter);

namespace builtins {

inline bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// text[start:end] for a str method's optional start and end (code points, clamped as a
// slice is): its byte offsets, or none when start lies past the end (Python then finds
// nothing, not even "").
struct ByteRange {
  std::size_t begin = 0, end = 0;
  bool valid = true;
};

inline ByteRange method_range(const std::string& text, const Arguments& args, std::size_t first,
                              std::string_view what) {
  const auto bound = [&](std::size_t index) -> std::optional<std::int64_t> {
    if (index >= args.positional.size() || args.positional[index].is_none()) return std::nullopt;
    const Value& v = args.positional[index];
    if (!v.is_int() && !v.is_bool()) {
      fail(what, ": slice indices must be integers or None");
    }
    return v.as_int();
  };
  const auto size = static_cast<std::int64_t>(python::length(text));
  const auto clamp = [&](std::optional<std::int64_t> i, std::int64_t absent) {
    if (!i) return absent;
    std::int64_t v = *i;
    if (v < 0) v = std::max<std::int64_t>(0, v + size);
    return std::min(v, size);
  };
  const std::optional<std::int64_t> start_given = bound(first);
  std::int64_t start = start_given ? *start_given : 0;
  if (start < 0) start = std::max<std::int64_t>(0, start + size);
  ByteRange out;
  if (start > size) {
    out.valid = false;
    return out;
  }
  const std::int64_t end = clamp(bound(first + 1), size);
  // code point indices to byte offsets
  std::int64_t index = 0;
  std::size_t at = 0;
  const auto advance_to = [&](std::int64_t target) {
    while (index < target && at < text.size()) {
      at += unicode::decode_utf8(text, at).length;
      ++index;
    }
    return at;
  };
  out.begin = advance_to(start);
  out.end = end <= start ? out.begin : advance_to(end);
  return out;
}

// str.startswith / endswith: a string or a tuple of strings, within [start, end).
inline bool affix(const std::string& text, const Arguments& args, bool at_start) {
  const std::string_view what = at_start ? "startswith" : "endswith";
  if (args.positional.empty()) fail(what, " takes at least 1 argument (0 given)");
  const Value& test = args.positional[0];
  const ByteRange range = method_range(text, args, 1, what);
  if (!range.valid) return false;
  const std::string_view part = std::string_view(text).substr(range.begin, range.end - range.begin);
  const auto one = [&](const Value& v) {
    if (!v.is_string()) {
      fail(what, " first arg must be str or a tuple of str, not ", v.type_name());
    }
    return at_start ? part.starts_with(v.as_string()) : part.ends_with(v.as_string());
  };
  if (test.is_tuple()) return std::any_of(test.as_list().begin(), test.as_list().end(), one);
  return one(test);
}

inline bool every_code_point(const std::string& text, bool (*holds)(char32_t)) {
  if (text.empty()) return false;
  for (const char32_t c : python::code_points(text)) {
    if (!holds(c)) return false;
  }
  return true;
}

// str.format: {}, {0} and {name} fields, each with .attribute and [key] steps, a !r, !s
// or !a conversion and a format spec (which may hold {fields} of its own, numbered on
// with the rest); {{ and }} escape the braces.
class Formatter {
 public:
  Formatter(const Arguments& args, Meter& meter) : args_(args), meter_(meter) {}

  std::string run(const std::string& text, int depth = 0) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
        out += c;
        ++i;
        continue;
      }
      if (c == '}') fail("Single '}' encountered in format string");
      if (c != '{') {
        out += c;
        continue;
      }
      // the field ends at its matching '}' (a spec may nest {fields})
      std::size_t close = i + 1;
      for (int level = 1; close < text.size(); ++close) {
        if (text[close] == '{') ++level;
        if (text[close] == '}' && --level == 0) break;
      }
      if (close >= text.size()) fail("expected '}' before end of string");
      out += field(text.substr(i + 1, close - i - 1), depth);
      meter_.check_size(out.size());
      i = close;
    }
    return out;
  }

 private:
  std::string field(const std::string& field, int depth) {
    std::size_t name_end = 0;
    for (int brackets = 0; name_end < field.size(); ++name_end) {
      const char f = field[name_end];
      if (f == '[') ++brackets;
      if (f == ']') --brackets;
      if (brackets == 0 && (f == '!' || f == ':')) break;
    }
    const Value value = lookup(field.substr(0, name_end));
    char conversion = '\0';
    std::size_t at = name_end;
    if (at < field.size() && field[at] == '!') {
      if (at + 1 >= field.size()) fail("end of string while looking for conversion specifier");
      conversion = field[at + 1];
      at += 2;
      if (at < field.size() && field[at] != ':') fail("expected ':' after conversion specifier");
    }
    std::string spec = at < field.size() ? field.substr(at + 1) : std::string();
    if (spec.find('{') != std::string::npos) {
      if (depth >= 1) fail("Max string recursion exceeded");
      spec = run(spec, depth + 1);
    }
    if (conversion == '\0') return format_value(value, spec);
    std::string converted;
    if (conversion == 's') {
      converted = to_str(value);
    } else if (conversion == 'r') {
      append_repr(converted, value);
    } else if (conversion == 'a') {
      converted = ascii_repr(value);
    } else {
      fail("Unknown conversion specifier ", conversion);
    }
    // The converted text is a str: formatted as format(str, spec) formats it.
    if (spec.empty()) return converted;
    return python::format_string(converted, python::parse_format_spec(spec));
  }

  Value lookup(const std::string& field) {
    std::size_t end = field.find_first_of(".[");
    const std::string first = field.substr(0, end);
    Value value;
    if (first.empty() || is_digits(first)) {
      std::size_t index = 0;
      if (first.empty()) {
        if (manual_) {
          fail("cannot switch from manual field specification to automatic field numbering");
        }
        automatic_ = true;
        index = next_auto_++;
      } else {
        if (automatic_) {
          fail("cannot switch from automatic field numbering to manual field specification");
        }
        manual_ = true;
        index = static_cast<std::size_t>(digits_value(first));
      }
      if (index >= args_.positional.size()) {
        fail("Replacement index ", index, " out of range for positional args tuple");
      }
      value = args_.positional[index];
    } else {
      const Value* named = nullptr;
      for (const auto& [key, item] : args_.named) {
        if (key == first) named = &item;
      }
      if (!named) fail("KeyError: '", first, "'");
      value = *named;
    }
    while (end < field.size()) {
      if (field[end] == '.') {
        const std::size_t stop = field.find_first_of(".[", end + 1);
        const std::string name = field.substr(end + 1, stop - end - 1);
        if (name.empty()) fail("Empty attribute in format string");
        value = attribute(value, name, meter_);
        end = stop;
      } else {
        const std::size_t close = field.find(']', end);
        if (close == std::string::npos) fail("Missing ']' in format string");
        const std::string key = field.substr(end + 1, close - end - 1);
        value = item(value, is_digits(key) ? Value(digits_value(key)) : Value(key));
        end = close + 1;
        if (end < field.size() && field[end] != '.' && field[end] != '[') {
          fail("Only '.' or '[' may follow ']' in format field specifier");
        }
      }
    }
    return value;
  }

  static bool is_digits(const std::string& text) {
    return !text.empty() &&
           std::all_of(text.begin(), text.end(), [](char d) { return d >= '0' && d <= '9'; });
  }

  const Arguments& args_;
  Meter& meter_;
  std::size_t next_auto_ = 0;
  bool automatic_ = false, manual_ = false;
};

inline std::string zfill(const std::string& text, std::int64_t width) {
  const auto len = static_cast<std::int64_t>(python::length(text));
  if (width <= len) return text;
  const std::size_t sign = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  return text.substr(0, sign) + std::string(static_cast<std::size_t>(width - len), '0') +
         text.substr(sign);
}

// str.expandtabs: each tab to the next multiple of `size` columns (a line break resets).
inline std::string expandtabs(const std::string& text, std::int64_t size, const Meter& meter) {
  std::string out;
  std::int64_t column = 0;
  for (const char32_t c : python::code_points(text)) {
    if (c == '\t') {
      if (size > 0) {
        const std::int64_t spaces = size - column % size;
        meter.check_size(out.size() + static_cast<std::size_t>(spaces));
        out.append(static_cast<std::size_t>(spaces), ' ');
        column += spaces;
      }
    } else {
      unicode::append_utf8(out, c);
      column = c == '\n' || c == '\r' ? 0 : column + 1;
    }
  }
  return out;
}

// str.strip, lstrip and rstrip: whitespace, or the characters of the optional str.
inline Value strip_method(const std::string& text, std::string_view name, const Arguments& args,
                          python::StripSide side) {
  const Value* chars = argument(args, 0, "chars");
  if (!chars || chars->is_none() || chars->is_undefined()) return python::strip(text, side);
  if (!chars->is_string()) fail(name, ": arg must be None or str");
  const std::string_view set = chars->as_string();
  return python::strip(text, side, &set);
}

// split, rsplit and splitlines charge the pieces they will make before making them: a
// megabyte of commas is a million strings.
template <class IsBreak>
void charge_breaks(const std::string& text, Meter& meter, IsBreak is_break) {
  std::size_t breaks = 1;
  for (const char32_t c : python::code_points(text)) breaks += is_break(c);
  meter.charge(breaks);
}

// str.split and str.rsplit: on whitespace runs when sep is None, else on sep.
inline Value split_method(const std::string& text, std::string_view name, const Arguments& args,
                          Meter& meter) {
  const Value* separator = argument(args, 0, "sep");
  const std::int64_t max_split = int_argument(args, 1, "maxsplit", name, -1);
  if (!separator || separator->is_none()) {
    charge_breaks(text, meter, [](char32_t c) { return python::is_space(c); });
  } else if (separator->is_string() && !separator->as_string().empty()) {
    std::size_t found = 1;
    const std::string& sep = separator->as_string();
    for (std::size_t at = text.find(sep); at != std::string::npos;
         at = text.find(sep, at + sep.size())) {
      ++found;
    }
    meter.charge(found);
  }
  std::vector<std::string> parts;
  if (!separator || separator->is_none()) {
    parts = name == "split" ? python::split_whitespace(text, max_split)
                            : python::rsplit_whitespace(text, max_split);
  } else {
    if (!separator->is_string()) fail(name, ": must be str or None");
    if (separator->as_string().empty()) fail(name, ": empty separator");
    parts = name == "split" ? python::split(text, separator->as_string(), max_split)
                            : python::rsplit(text, separator->as_string(), max_split);
  }
  List out(parts.begin(), parts.end());
  return out;
}

// str.splitlines(keepends=True): each line with its break ("\r\n" kept whole).
inline List lines_with_ends(const std::string& text) {
  List lines;
  std::string line;
  for (std::size_t at = 0; at < text.size();) {
    const auto decoded = unicode::decode_utf8(text, at);
    line.append(text, at, decoded.length);
    at += decoded.length;
    if (python::is_line_break(decoded.codepoint)) {
      if (decoded.codepoint == '\r' && at < text.size() && text[at] == '\n') line += text[at++];
      lines.emplace_back(std::move(line));
      line.clear();
    }
  }
  if (!line.empty()) lines.emplace_back(std::move(line));
  return lines;
}

inline Value splitlines_method(const std::string& text, const Arguments& args, Meter& meter) {
  charge_breaks(text, meter, [](char32_t c) { return python::is_line_break(c); });
  if (bool_argument(args, 0, "keepends", false)) return lines_with_ends(text);
  const auto lines = python::split_lines(text);
  return List(lines.begin(), lines.end());
}

// str.find, rfind, index, rindex and count: a substring within the optional [start, end),
// positions in code points.
inline Value search_method(const std::string& text, std::string_view name, const Arguments& args) {
  if (args.positional.empty() || !args.positional[0].is_string()) {
    fail(name, ": must be str, not ",
         args.positional.empty() ? "nothing" : args.positional[0].type_name());
  }
  const std::string& needle = args.positional[0].as_string();
  const ByteRange range = method_range(text, args, 1, name);
  const std::string_view part =
      range.valid ? std::string_view(text).substr(range.begin, range.end - range.begin) : "";
  if (name == "count") {
    if (!range.valid) return std::int64_t{0};
    if (needle.empty()) return static_cast<std::int64_t>(python::length(part) + 1);
    std::int64_t count = 0;
    for (std::size_t at = part.find(needle); at != std::string::npos;
         at = part.find(needle, at + needle.size())) {
      ++count;
    }
    return count;
  }
  const bool reverse = name[0] == 'r';
  const std::size_t at = !range.valid ? std::string::npos
                         : reverse    ? part.rfind(needle)
                                      : part.find(needle);
  if (at == std::string::npos) {
    if (name == "index" || name == "rindex") fail(name, ": substring not found");
    return -1;
  }
  return static_cast<std::int64_t>(
      python::length(std::string_view(text).substr(0, range.begin + at)));
}

inline Value join_method(const std::string& text, const Arguments& args, Meter& meter) {
  if (args.positional.empty()) fail("join takes exactly one argument");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(args.positional[0], meter)) {
    if (!item.is_string()) fail("join: expected str instance, ", item.type_name(), " found");
    if (!first) out += text;
    first = false;
    out += item.as_string();
    meter.check_size(out.size());
  }
  return out;
}

// str.format_map: str.format with the mapping's items as the named arguments.
inline Value format_map_method(const std::string& text, const Arguments& args, Meter& meter) {
  if (args.positional.size() != 1 || !args.positional[0].is_dict()) {
    fail("format_map takes one mapping");
  }
  Arguments named;
  for (const auto& [key, value] : args.positional[0].as_dict().entries()) {
    named.named.emplace_back(to_str(key), value);
  }
  return Formatter(named, meter).run(text);
}

// str.center, ljust and rjust, the width capped so a template cannot ask for gigabytes.
inline Value pad_method(const std::string& text, std::string_view name, const Arguments& args) {
  const std::int64_t width = int_argument(args, 0, "width", name, 0);
  if (width > 100000) fail(name, ": width ", width, " is more than 100000");
  const Value* fill = argument(args, 1, "fillchar");
  if (fill && (!fill->is_string() || python::length(fill->as_string()) != 1)) {
    fail("The fill character must be exactly one character long");
  }
  const python::Align align = name == "center"  ? python::Align::center
                              : name == "ljust" ? python::Align::left
                                                : python::Align::right;
  return python::pad(text, width, align, fill ? fill->as_string() : " ");
}

inline Value partition_method(const std::string& text, std::string_view name,
                              const Arguments& args) {
  const std::string separator = string_argument(args, 0, "sep", name);
  if (separator.empty()) fail(name, ": empty separator");
  const std::size_t at = name == "partition" ? text.find(separator) : text.rfind(separator);
  if (at == std::string::npos) {
    return name == "partition" ? Value::tuple({text, "", ""}) : Value::tuple({"", "", text});
  }
  return Value::tuple({text.substr(0, at), separator, text.substr(at + separator.size())});
}

inline bool is_identifier(const std::string& text) {
  const auto points = python::code_points(text);
  if (points.empty() || !(points[0] == '_' || unicode::is_letter(points[0]))) return false;
  return std::all_of(points.begin(), points.end(), [](char32_t c) {
    return c == '_' || unicode::is_letter(c) || unicode::is_number(c);
  });
}

// The str predicates: isidentifier, isdigit, isalpha, islower and the like; none when
// `name` is none of them.
inline std::optional<Value> string_predicate(const std::string& text, std::string_view name) {
  if (name == "istitle") return python::is_title(text);
  if (name == "isascii") return python::is_ascii(text);
  if (name == "isidentifier") return is_identifier(text);
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") {
    return every_code_point(text, [](char32_t c) { return c >= '0' && c <= '9'; });
  }
  if (name == "isalpha")
    return every_code_point(text, [](char32_t c) { return unicode::is_letter(c); });
  if (name == "isalnum")
    return every_code_point(
        text, [](char32_t c) { return unicode::is_letter(c) || unicode::is_number(c); });
  if (name == "isspace")
    return every_code_point(text, [](char32_t c) { return python::is_space(c); });
  if (name == "islower") return python::is_lower(text);
  if (name == "isupper") return python::is_upper(text);
  return std::nullopt;
}

inline Value string_method(const std::string& text, std::string_view name, const Arguments& args,
                           Meter& meter) {
  if (name == "strip") return strip_method(text, name, args, python::StripSide::both);
  if (name == "lstrip") return strip_method(text, name, args, python::StripSide::left);
  if (name == "rstrip") return strip_method(text, name, args, python::StripSide::right);
  if (name == "split" || name == "rsplit") return split_method(text, name, args, meter);
  if (name == "splitlines") return splitlines_method(text, args, meter);
  if (name == "startswith" || name == "endswith") return affix(text, args, name == "startswith");
  if (name == "replace") {
    return replace(text, string_argument(args, 0, "old", "replace"),
                   string_argument(args, 1, "new", "replace"),
                   int_argument(args, 2, "count", "replace", -1), meter);
  }
  if (name == "lower") return python::lower(text);
  if (name == "upper") return python::upper(text);
  if (name == "title") return python::title(text);
  if (name == "capitalize") return python::capitalize(text);
  if (is_one_of(name, {"find", "rfind", "index", "rindex", "count"})) {
    return search_method(text, name, args);
  }
  if (name == "removeprefix") {
    const std::string prefix = string_argument(args, 0, "prefix", name);
    return text.starts_with(prefix) ? text.substr(prefix.size()) : text;
  }
  if (name == "removesuffix") {
    const std::string suffix = string_argument(args, 0, "suffix", name);
    return !suffix.empty() && text.ends_with(suffix) ? text.substr(0, text.size() - suffix.size())
                                                     : text;
  }
  if (name == "join") return join_method(text, args, meter);
  if (name == "format") return Formatter(args, meter).run(text);
  if (name == "format_map") return format_map_method(text, args, meter);
  if (name == "center" || name == "ljust" || name == "rjust") return pad_method(text, name, args);
  if (name == "zfill") {
    const std::int64_t width = int_argument(args, 0, "width", name, 0);
    if (width > 100000) fail(name, ": width ", width, " is more than 100000");
    return zfill(text, width);
  }
  if (name == "partition" || name == "rpartition") return partition_method(text, name, args);
  if (name == "swapcase") return python::swapcase(text);
  if (name == "casefold") return python::lower(text);
  if (name == "expandtabs") {
    const std::int64_t size = int_argument(args, 0, "tabsize", name, 8);
    if (size > 100000) fail(name, ": tabsize ", size, " is more than 100000");
    std::string out = expandtabs(text, size, meter);
    meter.check_size(out.size());
    return out;
  }
  if (auto predicate = string_predicate(text, name)) return *std::move(predicate);
  fail("unsupported string method '", name, "'");
}

inline Value dict_method(const Value& target, std::string_view name, const Arguments& args,
                         Meter& meter) {
  const Dict& dict = target.as_dict();
  if (name == "get") {
    if (args.positional.empty()) fail("get expected at least 1 argument");
    const Value& key = args.positional[0];
    const Value* found = dict.find(key);
    if (found) return *found;
    return args.positional.size() > 1 ? args.positional[1] : Value(None{});
  }
  meter.charge(dict.size());
  // dict views: they iterate and print as Python's, and cannot be indexed
  if (name == "items") {
    List pairs;
    for (const auto& [key, value] : dict.entries()) pairs.push_back(Value::tuple({key, value}));
    return Value::sequence(std::move(pairs), ListType::dict_items);
  }
  if (name == "keys") {
    List keys;
    for (const auto& entry : dict.entries()) keys.emplace_back(entry.first);
    return Value::sequence(std::move(keys), ListType::dict_keys);
  }
  if (name == "values") {
    List values;
    for (const auto& entry : dict.entries()) values.push_back(entry.second);
    return Value::sequence(std::move(values), ListType::dict_values);
  }
  if (name == "copy") return target;
  fail("unsupported dict method '", name, "'");
}

inline Value list_method(const Value& target, std::string_view name, const Arguments& args) {
  const List& list = target.as_list();
  if (name == "copy") return List(list);
  if (args.positional.empty()) fail(name, " takes exactly one argument");
  const Value& needle = args.positional[0];
  if (name == "count") {
    return static_cast<std::int64_t>(std::count_if(
        list.begin(), list.end(), [&](const Value& item) { return equal(item, needle); }));
  }
  // index(x, start, end), the bounds clamped as a slice's
  const auto size = static_cast<std::int64_t>(list.size());
  const auto bound = [&](std::size_t i, std::int64_t absent) {
    if (i >= args.positional.size()) return absent;
    const Value& v = args.positional[i];
    if (!v.is_int() && !v.is_bool()) fail("index: slice indices must be integers");
    std::int64_t b = v.as_int();
    if (b < 0) b = std::max<std::int64_t>(0, b + size);
    return std::min(b, size);
  };
  for (std::int64_t i = bound(1, 0), end = bound(2, size); i < end; ++i) {
    if (equal(list[static_cast<std::size_t>(i)], needle)) return i;
  }
  fail("index: ", to_str(needle), " is not in ", target.type_name());
}

inline bool is_string_method(std::string_view name) {
  return is_one_of(name, {"strip",      "lstrip",     "rstrip",     "split",        "rsplit",
                          "splitlines", "startswith", "endswith",   "replace",      "lower",
                          "upper",      "title",      "capitalize", "find",         "rfind",
                          "index",      "rindex",     "count",      "removeprefix", "removesuffix",
                          "join",       "format",     "format_map", "isdigit",      "isnumeric",
                          "isdecimal",  "isalpha",    "isalnum",    "isspace",      "islower",
                          "isupper",    "istitle",    "isascii",    "isidentifier", "center",
                          "ljust",      "rjust",      "zfill",      "partition",    "rpartition",
                          "swapcase",   "casefold",   "expandtabs"});
}

inline Value bound(const Value& target, std::string name, Meter& meter,
                   Value (*method)(const Value&, std::string_view, const Arguments&, Meter&)) {
  Meter* m = &meter;
  return Value::function(name, [target, name, method,
                                m](Arguments& args) { return method(target, name, args, *m); })
      .holding(target.depth());
}

}  // namespace builtins

// value.name, as jinja2's sandbox resolves it.
inline Value attribute(const Value& target, const std::string& name, Meter& meter) {
  using namespace builtins;
  switch (target.kind()) {
    case Value::Kind::string:
      if (is_string_method(name)) {
        return bound(target, name, meter,
                     [](const Value& t, std::string_view n, const Arguments& a, Meter& m) {
                       return string_method(t.as_string(), n, a, m);
                     });
      }
      return Value::undefined(name);
    case Value::Kind::dict:
      if (is_one_of(name, {"get", "items", "keys", "values", "copy"})) {
        return bound(target, name, meter, dict_method);
      }
      if (is_one_of(name, {"update", "pop", "popitem", "setdefault", "clear"})) {
        fail("dict.", name, " is refused: chat templates run in an immutable sandbox");
      }
      return item(target, Value(name));
    case Value::Kind::list:
      if (!target.is_indexable_list()) return Value::undefined(name);  // a dict view
      if (is_one_of(name, {"index", "count"}) || (name == "copy" && !target.is_tuple())) {
        return bound(target, name, meter,
                     [](const Value& t, std::string_view n, const Arguments& a, Meter&) {
                       return list_method(t, n, a);
                     });
      }
      if (target.list_type() == ListType::group && (name == "grouper" || name == "list")) {
        return target.as_list()[name == "grouper" ? 0 : 1];  // groupby's named pair
      }
      if (!target.is_tuple() && is_one_of(name, {"append", "extend", "insert", "pop", "remove",
                                                 "sort", "reverse", "clear"})) {
        fail("list.", name, " is refused: chat templates run in an immutable sandbox");
      }
      return Value::undefined(name);
    case Value::Kind::name_space:
    case Value::Kind::callable:
      return item(target, Value(name));
    case Value::Kind::undefined:
      fail("'", target.undefined_name(), "' is undefined, so it has no attribute '", name, "'");
    case Value::Kind::boolean:
    case Value::Kind::integer:
    case Value::Kind::floating:
      // a number's real and imaginary parts (an int's numerator and denominator too)
      if (name == "real") return target.is_float() ? target : Value(target.as_int());
      if (name == "imag") return target.is_float() ? Value(0.0) : Value(0);
      if (!target.is_float() && name == "numerator") return target.as_int();
      if (!target.is_float() && name == "denominator") return 1;
      return Value::undefined(name);
    default:
      return Value::undefined(name);
  }
}

}  // namespace smol::jinja
