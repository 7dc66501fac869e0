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
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/template/jinja_builtins.hpp"

namespace smol::jinja {

namespace builtins {

inline bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// str.startswith / endswith: a string or a tuple of strings.
inline bool affix(const std::string& text, const Value& test, bool at_start) {
  const auto one = [&](const Value& v) {
    if (!v.is_string()) fail(at_start ? "startswith" : "endswith", " needs a string");
    return at_start ? text.starts_with(v.as_string()) : text.ends_with(v.as_string());
  };
  if (test.is_list()) return std::any_of(test.as_list().begin(), test.as_list().end(), one);
  return one(test);
}

inline bool every_code_point(const std::string& text, bool (*holds)(char32_t)) {
  if (text.empty()) return false;
  for (const char32_t c : python::code_points(text)) {
    if (!holds(c)) return false;
  }
  return true;
}

// str.format with {}, {0} and {name} fields and {{ }} escapes; a format spec or a
// conversion (`{:>8}`, `{!r}`) is refused by name.
inline std::string format(const std::string& text, const Arguments& args) {
  std::string out;
  std::size_t next_auto = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') fail("format: single '}' encountered in the format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const std::size_t close = text.find('}', i);
    if (close == std::string::npos) fail("format: single '{' encountered in the format string");
    const std::string field = text.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      fail("format: the field {", field, "} uses a spec or conversion smol does not support");
    }
    const Value* value = nullptr;
    if (field.empty()) {
      value = argument(args, next_auto++, "");
    } else if (std::all_of(field.begin(), field.end(),
                           [](char d) { return d >= '0' && d <= '9'; })) {
      value = argument(args, static_cast<std::size_t>(std::stoul(field)), "");
    } else {
      value = argument(args, args.positional.size(), field);
    }
    if (!value) fail("format: no argument for the field {", field, "}");
    append_str(out, *value);
    i = close;
  }
  return out;
}

inline Value string_method(const std::string& text, std::string_view name, const Arguments& args,
                           Meter& meter) {
  const auto strip_chars = [&](python::StripSide side) {
    const Value* chars = argument(args, 0, "chars");
    if (!chars || chars->is_none() || chars->is_undefined()) return python::strip(text, side);
    if (!chars->is_string()) fail(name, ": arg must be None or str");
    const std::string_view set = chars->as_string();
    return python::strip(text, side, &set);
  };
  if (name == "strip") return strip_chars(python::StripSide::both);
  if (name == "lstrip") return strip_chars(python::StripSide::left);
  if (name == "rstrip") return strip_chars(python::StripSide::right);
  if (name == "split" || name == "rsplit") {
    const Value* separator = argument(args, 0, "sep");
    const std::int64_t max_split = int_argument(args, 1, "maxsplit", name, -1);
    std::vector<std::string> parts;
    if (!separator || separator->is_none()) {
      parts = python::split_whitespace(text, max_split);  // rsplit() of whitespace: rare
    } else {
      if (!separator->is_string()) fail(name, ": must be str or None");
      if (separator->as_string().empty()) fail(name, ": empty separator");
      parts = name == "split" ? python::split(text, separator->as_string(), max_split)
                              : python::rsplit(text, separator->as_string(), max_split);
    }
    meter.charge(parts.size());
    List out(parts.begin(), parts.end());
    return out;
  }
  if (name == "splitlines") {
    const auto lines = python::split_lines(text);
    return List(lines.begin(), lines.end());
  }
  if (name == "startswith" || name == "endswith") {
    if (args.positional.empty()) fail(name, " takes at least 1 argument");
    return affix(text, args.positional[0], name == "startswith");
  }
  if (name == "replace") {
    std::string out = python::replace(text, string_argument(args, 0, "old", "replace"),
                                      string_argument(args, 1, "new", "replace"),
                                      int_argument(args, 2, "count", "replace", -1));
    meter.check_size(out.size());
    return out;
  }
  if (name == "lower") return python::lower(text);
  if (name == "upper") return python::upper(text);
  if (name == "title") return python::title(text);
  if (name == "capitalize") return python::capitalize(text);
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const std::string needle = string_argument(args, 0, "sub", name);
    if (name == "count") {
      if (needle.empty()) return static_cast<std::int64_t>(python::length(text) + 1);
      std::int64_t count = 0;
      for (std::size_t at = text.find(needle); at != std::string::npos;
           at = text.find(needle, at + needle.size())) {
        ++count;
      }
      return count;
    }
    const bool reverse = name[0] == 'r';
    const std::size_t at = reverse ? text.rfind(needle) : text.find(needle);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") fail(name, ": substring not found");
      return -1;
    }
    return static_cast<std::int64_t>(python::length(std::string_view(text).substr(0, at)));
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
  if (name == "join") {
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
  if (name == "format") return format(text, args);
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
  if (name == "islower") return python::lower(text) == text && python::upper(text) != text;
  if (name == "isupper") return python::upper(text) == text && python::lower(text) != text;
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
  if (name == "items") {
    List pairs;
    for (const auto& [key, value] : dict.entries()) pairs.push_back(List{key, value});
    return pairs;
  }
  if (name == "keys") {
    List keys;
    for (const auto& entry : dict.entries()) keys.emplace_back(entry.first);
    return keys;
  }
  if (name == "values") {
    List values;
    for (const auto& entry : dict.entries()) values.push_back(entry.second);
    return values;
  }
  if (name == "copy") return target;
  fail("unsupported dict method '", name, "'");
}

inline Value list_method(const Value& target, std::string_view name, const Arguments& args) {
  const List& list = target.as_list();
  if (args.positional.empty()) fail(name, " takes exactly one argument");
  const Value& needle = args.positional[0];
  if (name == "count") {
    return static_cast<std::int64_t>(std::count_if(
        list.begin(), list.end(), [&](const Value& item) { return equal(item, needle); }));
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (equal(list[i], needle)) return static_cast<std::int64_t>(i);
  }
  fail("index: ", to_str(needle), " is not in list");
}

inline bool is_string_method(std::string_view name) {
  return is_one_of(name,
                   {"strip",        "lstrip",       "rstrip",  "split",   "rsplit",  "splitlines",
                    "startswith",   "endswith",     "replace", "lower",   "upper",   "title",
                    "capitalize",   "find",         "rfind",   "index",   "rindex",  "count",
                    "removeprefix", "removesuffix", "join",    "format",  "isdigit", "isnumeric",
                    "isdecimal",    "isalpha",      "isalnum", "isspace", "islower", "isupper"});
}

inline Value bound(const Value& target, std::string name, Meter& meter,
                   Value (*method)(const Value&, std::string_view, const Arguments&, Meter&)) {
  Meter* m = &meter;
  return Value::function(
      name, [target, name, method, m](Arguments& args) { return method(target, name, args, *m); });
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
      if (is_one_of(name, {"index", "count"})) {
        return bound(target, name, meter,
                     [](const Value& t, std::string_view n, const Arguments& a, Meter&) {
                       return list_method(t, n, a);
                     });
      }
      if (is_one_of(name,
                    {"append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear"})) {
        fail("list.", name, " is refused: chat templates run in an immutable sandbox");
      }
      return Value::undefined(name);
    case Value::Kind::name_space:
      return item(target, Value(name));
    case Value::Kind::undefined:
      fail("'", target.undefined_name(), "' is undefined, so it has no attribute '", name, "'");
    default:
      return Value::undefined(name);
  }
}

}  // namespace smol::jinja
