// The values a Jinja template computes with: Python's, as jinja2 hands them around.
//
// Undefined (a name or key that is not there: prints as nothing, fails when used), None,
// bool, int (64 bits: Python's larger ones are an error), float, str, list (which also
// stands for a tuple, a dict view or a groupby pair: ListType), dict and callables
// (macros, filters-as-functions, bound methods, jinja2's loop and cycler objects). Lists
// and dicts are shared and immutable, as in transformers' sandbox
// (ImmutableSandboxedEnvironment refuses list.append and dict.update; smol refuses
// list.pop and list.clear too, which the sandbox lets through), so a copy is a pointer
// copy. The one mutable value is a `namespace()`, which `{% set ns.x = ... %}` changes in
// place for every holder, as Python's reference semantics do.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/template/python_text.hpp"

namespace smol::jinja {

// Where in the template something is: 1-based line and column (in code points).
struct SourceLocation {
  std::size_t line = 0, column = 0;
};

// A template that cannot run: a syntax error, an unsupported construct, a type error,
// an exceeded budget. The message names the line and column.
class TemplateError : public Error {
 public:
  TemplateError(SourceLocation where, const std::string& message)
      : Error(where.line ? cat("line ", where.line, ", column ", where.column, ": ", message)
                         : message),
        where_(where) {}
  SourceLocation where() const { return where_; }

 private:
  SourceLocation where_;
};

// The template itself refused the conversation: it called raise_exception(message).
class TemplateRaised : public Error {
 public:
  using Error::Error;
};

class Value;
using List = std::vector<Value>;

class Dict;

// A call's arguments: positional, then named.
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
  SourceLocation where;
};

using Function = std::function<Value(Arguments&)>;

struct Undefined {
  std::string name;  // what was looked up, for the error when it is used
};
struct None {};
struct Namespace {
  std::shared_ptr<Dict> attributes;
};
// A function, a macro, a bound method, or one of jinja2's objects (a loop, a cycler):
// `function` is what a call runs (an object that cannot be called has none),
// `attributes` what `.name` finds on it, `repr` how it prints (else "<function name>").
struct Callable {
  std::shared_ptr<const Function> function;
  std::string name;
  std::shared_ptr<Dict> attributes;
  std::string repr;
  const void* owner = nullptr;  // the scope a macro keeps alive (the interpreter's to read)
};
// What jinja2's map, select, selectattr, reject, rejectattr, unique, batch, items and
// reverse return: a Python iterator, not a list. Templates meet its Python semantics:
// it is true even when empty, it has no len() and no JSON, and a second loop over it
// finds it spent. The items are computed at once; `next` is how far it has been read.
struct GeneratorState {
  std::vector<Value> items;
  std::size_t next = 0;
};
struct Generator {
  std::shared_ptr<GeneratorState> state;
};

// Which Python sequence a list value stands for: they iterate alike, but print, compare,
// index and serialize differently ((1, 2) is not [1, 2]; dict.items() prints as
// dict_items([...]) and cannot be indexed). `group` is groupby's (grouper, list) pair, a
// tuple with those two names as attributes.
enum class ListType : std::uint8_t { list, tuple, dict_keys, dict_values, dict_items, group };

class Value {
 public:
  enum class Kind : std::uint8_t {
    undefined,
    none,
    boolean,
    integer,
    floating,
    string,
    list,
    dict,
    name_space,
    callable,
    generator
  };

  Value() : data_(Undefined{}) {}
  Value(None) : data_(None{}) {}            // NOLINT: implicit
  Value(bool b) : data_(b) {}               // NOLINT: implicit
  Value(std::int64_t i) : data_(i) {}       // NOLINT: implicit
  Value(int i) : data_(std::int64_t{i}) {}  // NOLINT: implicit
  Value(double f) : data_(f) {}             // NOLINT: implicit
  // Strings are shared, not copied: a value is copied on every name lookup, argument and
  // item, and a template's strings can be megabytes long.
  Value(std::string s) : data_(std::make_shared<const std::string>(std::move(s))) {}  // NOLINT
  Value(std::string_view s) : Value(std::string(s)) {}  // NOLINT: implicit
  Value(const char* s) : Value(std::string(s)) {}       // NOLINT: implicit
  Value(List list)
      : depth_(depth_of(list)), data_(std::make_shared<const List>(std::move(list))) {}  // NOLINT
  Value(Dict dict);                              // NOLINT: implicit
  Value(Namespace ns) : data_(std::move(ns)) {}  // NOLINT: implicit
  // Callables are boxed: they are rare and large, and every value pays the variant's
  // largest member (a Value is 48 bytes with them boxed, 128 without).
  Value(Callable fn) : data_(std::make_shared<const Callable>(std::move(fn))) {}  // NOLINT
  Value(Generator g) : data_(std::move(g)) {}  // NOLINT: implicit
  static Value generator(List items) {
    const std::uint16_t depth = depth_of(items);
    auto state = std::make_shared<GeneratorState>();
    state->items = std::move(items);
    Value v = Generator{std::move(state)};
    v.depth_ = depth;
    return v;
  }
  // How deep lists, tuples, dicts and generators nest in this value (a namespace, which
  // can change after it is made, counts as one level). Bounded by kMaxValueDepth as values
  // are built, so that no value is too deep to copy, compare, print or free: each of those
  // walks recurse, and freeing a list of lists a million deep overflows any stack.
  static constexpr std::uint16_t kMaxValueDepth = 512;
  std::uint16_t depth() const { return depth_; }
  // Whether the two are one list or dict object (Python's `is`).
  bool shares_with(const Value& other) const {
    if (is_list() && other.is_list()) {
      return std::get<std::shared_ptr<const List>>(data_) ==
             std::get<std::shared_ptr<const List>>(other.data_);
    }
    if (is_dict() && other.is_dict()) {
      return std::get<std::shared_ptr<const Dict>>(data_) ==
             std::get<std::shared_ptr<const Dict>>(other.data_);
    }
    return false;
  }
  // markupsafe's Markup: text marked safe (`|safe`, `|e`). Adding plain text to it
  // HTML-escapes the plain text, as Python's Markup.__add__ does, even with autoescape
  // off; one template of the corpus (Functionary v3.1) prints such escapes.
  static Value markup(std::string s) {
    Value v(std::move(s));
    v.markup_ = true;
    return v;
  }
  bool is_markup() const { return markup_ && is_string(); }
  // A tuple, a dict view or a groupby pair: a list value of another Python type.
  static Value sequence(List items, ListType type) {
    Value v(std::move(items));
    v.list_type_ = type;
    return v;
  }
  static Value tuple(List items) { return sequence(std::move(items), ListType::tuple); }
  ListType list_type() const { return is_list() ? list_type_ : ListType::list; }
  bool is_tuple() const { return list_type() == ListType::tuple || list_type() == ListType::group; }
  // list and tuple have len() and [index]; dict views only iterate.
  bool is_indexable_list() const {
    return is_list() && (list_type_ == ListType::list || is_tuple());
  }
  static Value undefined(std::string name) { return Value(Undefined{std::move(name)}); }
  static Value function(std::string name, Function fn) {
    return Callable{
        std::make_shared<const Function>(std::move(fn)), std::move(name), nullptr, {}, nullptr};
  }

  // An object with attributes, callable when `fn` is given.
  static Value object(std::string name, std::string repr, std::shared_ptr<Dict> attributes,
                      Function fn = nullptr, const void* owner = nullptr);
  // This callable, counted as holding values `depth` deep (what its function captured):
  // a chain of callables, each holding the one before, is bounded like nested lists.
  Value holding(std::uint16_t depth) const {
    Value v = *this;
    v.depth_ = deeper(depth);
    return v;
  }

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::undefined; }
  bool is_none() const { return kind() == Kind::none; }
  bool is_bool() const { return kind() == Kind::boolean; }
  bool is_int() const { return kind() == Kind::integer; }
  bool is_float() const { return kind() == Kind::floating; }
  // Python's bool is an int: True + 1 == 2.
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::string; }
  bool is_list() const { return kind() == Kind::list; }
  bool is_dict() const { return kind() == Kind::dict; }
  bool is_namespace() const { return kind() == Kind::name_space; }
  bool is_callable() const { return kind() == Kind::callable; }
  bool is_generator() const { return kind() == Kind::generator; }

  bool as_bool() const { return std::get<bool>(data_); }
  std::int64_t as_int() const {
    return is_bool() ? std::int64_t{as_bool()} : std::get<std::int64_t>(data_);
  }
  double as_double() const {
    return is_float() ? std::get<double>(data_) : static_cast<double>(as_int());
  }
  const std::string& as_string() const {
    return *std::get<std::shared_ptr<const std::string>>(data_);
  }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Dict& namespace_attributes() const { return *std::get<Namespace>(data_).attributes; }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  GeneratorState& generator_state() const { return *std::get<Generator>(data_).state; }
  const std::string& undefined_name() const { return std::get<Undefined>(data_).name; }

  bool dict_empty() const;  // after Dict, which needs Value complete
  // Python's truth: empty, zero, None and undefined are false.
  bool truthy() const {
    switch (kind()) {
      case Kind::undefined:
      case Kind::none:
        return false;
      case Kind::boolean:
        return as_bool();
      case Kind::integer:
        return as_int() != 0;
      case Kind::floating:
        return as_double() != 0.0;
      case Kind::string:
        return !as_string().empty();
      case Kind::list:
        return !as_list().empty();
      case Kind::dict:
        return !dict_empty();
      case Kind::name_space:
      case Kind::callable:
      case Kind::generator:
        return true;
    }
    return false;
  }

  // Python's type name, for error messages.
  std::string_view type_name() const {
    static constexpr std::string_view kNames[] = {"undefined", "NoneType", "bool",     "int",
                                                  "float",     "str",      "list",     "dict",
                                                  "Namespace", "function", "generator"};
    static constexpr std::string_view kListNames[] = {"list",        "tuple",      "dict_keys",
                                                      "dict_values", "dict_items", "tuple"};
    if (is_list()) return kListNames[static_cast<int>(list_type_)];
    if (is_markup()) return "Markup";
    return kNames[data_.index()];
  }

 private:
  explicit Value(Undefined u) : data_(std::move(u)) {}

  static std::uint16_t depth_of(const List& items) {
    std::uint16_t deepest = 0;
    for (const Value& item : items) deepest = std::max(deepest, item.depth_);
    return deeper(deepest);
  }
  static std::uint16_t deeper(std::uint16_t depth) {
    if (depth >= kMaxValueDepth) fail("a value nests deeper than ", kMaxValueDepth, " levels");
    return static_cast<std::uint16_t>(depth + 1);
  }

  std::uint16_t depth_ = 0;

  std::variant<Undefined, None, bool, std::int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<const List>, std::shared_ptr<const Dict>, Namespace,
               std::shared_ptr<const Callable>, Generator>
      data_;
  bool markup_ = false;
  ListType list_type_ = ListType::list;
};

// A dict in insertion order (Python's). Keys are JSON's strings, or a dict literal's
// numbers, booleans and None (1, 1.0 and True are one key, as in Python).
class Dict {
 public:
  const Value* find(std::string_view key) const;
  const Value* find(const std::string& key) const { return find(std::string_view(key)); }
  const Value* find(const char* key) const { return find(std::string_view(key)); }
  const Value* find(const Value& key) const;
  void set(Value key, Value value);
  // For readers that know their keys are new (or where they stand): no search.
  void append(Value key, Value value) { entries_.emplace_back(std::move(key), std::move(value)); }
  void replace_at(std::size_t index, Value value) { entries_[index].second = std::move(value); }
  std::size_t size() const { return entries_.size(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<Value, Value>> entries_;
};

// Frees a namespace's attributes without recursing into the namespaces they hold: a
// template can chain namespaces a million long ({% set ns = namespace(next=ns) %} in a
// loop), and freeing the head would otherwise free the chain one stack frame per link.
// Each freed namespace's own namespaces wait in a list this loop drains.
struct NamespaceDeleter {
  void operator()(Dict* attributes) const {
    thread_local std::vector<Dict*> pending;
    thread_local bool draining = false;
    pending.push_back(attributes);
    if (draining) return;
    draining = true;
    while (!pending.empty()) {
      Dict* next = pending.back();
      pending.pop_back();
      delete next;  // may add the namespaces it held to `pending`
    }
    draining = false;
  }
};

inline std::shared_ptr<Dict> make_namespace_attributes() {
  return std::shared_ptr<Dict>(new Dict(), NamespaceDeleter{});
}

inline Value::Value(Dict dict) {
  std::uint16_t deepest = 0;
  for (const auto& [key, value] : dict.entries()) {
    deepest = std::max({deepest, key.depth_, value.depth_});
  }
  depth_ = deeper(deepest);
  data_ = std::make_shared<const Dict>(std::move(dict));
}

inline Value Value::object(std::string name, std::string repr, std::shared_ptr<Dict> attributes,
                           Function fn, const void* owner) {
  std::uint16_t deepest = 0;
  if (attributes) {
    for (const auto& [key, value] : attributes->entries())
      deepest = std::max(deepest, value.depth_);
  }
  Value v = Callable{fn ? std::make_shared<const Function>(std::move(fn)) : nullptr,
                     std::move(name), std::move(attributes), std::move(repr), owner};
  v.depth_ = deeper(deepest);
  return v;
}

inline bool Value::dict_empty() const {
  return as_dict().size() == 0;
}

inline const Value* Dict::find(std::string_view key) const {
  for (const auto& [name, value] : entries_) {
    if (name.is_string() && name.as_string() == key) return &value;
  }
  return nullptr;
}

// The budgets of one render.
struct RenderLimits {
  std::size_t max_steps = 10'000'000;  // expressions, statements and elements built
  // The rendered text, and any one string built on the way (a prompt is a few hundred
  // kilobytes at most: 8 MiB is some two million tokens).
  std::size_t max_output_bytes = 8u << 20;
  int max_call_depth = 100;   // nested macro calls
  int max_value_depth = 256;  // nesting of a value tojson or repr writes
  // Statements, expressions and macro calls nested inside one another, across macro
  // calls: what bounds the interpreter's stack (each expression and block is also
  // bounded by the parser, but a macro may call itself from deep inside both).
  int max_nesting = 1000;
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

// The meter of the render running on this thread. equal() and repr(), which Python's
// semantics reach from every operator, filter and test, charge it for each part they
// visit: a value may share its parts ([l, l] nested forty times is 2**40 parts to walk
// from a few bytes of template), and threading the meter through every caller of ==
// would burden every signature for the sake of two walks.
inline thread_local Meter* render_meter = nullptr;

inline void charge_render(std::size_t work) {
  if (render_meter) render_meter->charge(work);
}

inline void check_render_size(std::size_t bytes) {
  if (render_meter) render_meter->check_size(bytes);
}

// Makes `meter` the thread's render meter for its lifetime (renders may nest: a macro
// is no render, but a template may be rendered from inside a callback).
class MeteredRender {
 public:
  explicit MeteredRender(Meter& meter) : previous_(render_meter) { render_meter = &meter; }
  ~MeteredRender() { render_meter = previous_; }
  MeteredRender(const MeteredRender&) = delete;
  MeteredRender& operator=(const MeteredRender&) = delete;

 private:
  Meter* previous_;
};

// Python's ==: numbers by value across int, float and bool; containers deeply; an
// undefined equals another undefined (jinja2's Undefined.__eq__).
inline bool equal(const Value& a, const Value& b) {
  charge_render(1);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() && b.is_float()) return a.as_double() == b.as_double();
    if (a.is_float()) return python::compare_int_float(b.as_int(), a.as_double()) == 0;
    if (b.is_float()) return python::compare_int_float(a.as_int(), b.as_double()) == 0;
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none:
      return true;
    case Value::Kind::string:
      return a.as_string() == b.as_string();
    case Value::Kind::list: {
      if (a.shares_with(b)) return true;  // Python's `is` comes first in ==
      const auto python_type = [](const Value& v) {
        return v.list_type() == ListType::group ? ListType::tuple : v.list_type();
      };
      if (python_type(a) != python_type(b)) return false;  // (1, 2) != [1, 2]
      if (a.list_type() == ListType::dict_values) {
        return &a.as_list() == &b.as_list();  // values views compare by identity
      }
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::dict: {
      if (a.shares_with(b)) return true;
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.find(key);
        if (!other || !equal(value, *other)) return false;
      }
      return true;
    }
    case Value::Kind::name_space:
      return &a.namespace_attributes() == &b.namespace_attributes();
    case Value::Kind::callable:
      return a.as_callable().function == b.as_callable().function &&
             a.as_callable().attributes == b.as_callable().attributes;
    case Value::Kind::generator:
      return &a.generator_state() == &b.generator_state();
    default:
      return false;
  }
}

inline const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [name, value] : entries_) {
    if (!name.is_string() && equal(name, key)) return &value;
  }
  return nullptr;
}

inline void Dict::set(Value key, Value value) {
  for (auto& [name, existing] : entries_) {
    if (equal(name, key)) {
      existing = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

// repr(): how Python writes a value inside a container (strings quoted). A namespace
// can hold itself, so the depth is bounded.
inline constexpr int kMaxReprDepth = 256;
void append_repr(std::string& out, const Value& value, int depth = 0);

// str(): what `{{ value }}` prints. Undefined prints as nothing, as jinja2's default
// Undefined does.
inline void append_str(std::string& out, const Value& value) {
  switch (value.kind()) {
    case Value::Kind::undefined:
      return;
    case Value::Kind::string:
      out += value.as_string();
      return;
    default:
      append_repr(out, value);
  }
}

inline std::string to_str(const Value& value) {
  std::string out;
  append_str(out, value);
  return out;
}

inline void append_repr(std::string& out, const Value& value, int depth) {
  if (depth > kMaxReprDepth) fail("a value nests deeper than ", kMaxReprDepth, " levels");
  charge_render(1);
  check_render_size(out.size());
  switch (value.kind()) {
    case Value::Kind::undefined:
      out += "Undefined";  // in a container (str() of it alone is empty: append_str)
      return;
    case Value::Kind::none:
      out += "None";
      return;
    case Value::Kind::boolean:
      out += value.as_bool() ? "True" : "False";
      return;
    case Value::Kind::integer:
      out += std::to_string(value.as_int());
      return;
    case Value::Kind::floating:
      out += python::float_repr(value.as_double());
      return;
    case Value::Kind::string:
      if (value.is_markup()) out += "Markup(";
      out += python::string_repr(value.as_string());
      if (value.is_markup()) out += ')';
      return;
    case Value::Kind::list: {
      static constexpr std::string_view kOpen[] = {
          "[", "(", "dict_keys([", "dict_values([", "dict_items([", "("};
      static constexpr std::string_view kClose[] = {"]", ")", "])", "])", "])", ")"};
      const auto type = static_cast<int>(value.list_type());
      out += kOpen[type];
      bool first = true;
      for (const Value& item : value.as_list()) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, item, depth + 1);
      }
      if (value.is_tuple() && value.as_list().size() == 1) out += ',';  // (1,)
      out += kClose[type];
      return;
    }
    case Value::Kind::dict:
    case Value::Kind::name_space: {
      const Dict& dict = value.is_dict() ? value.as_dict() : value.namespace_attributes();
      out += value.is_dict() ? "{" : "<Namespace {";
      bool first = true;
      for (const auto& [key, item] : dict.entries()) {
        if (!first) out += ", ";
        first = false;
        append_repr(out, key, depth + 1);
        out += ": ";
        append_repr(out, item, depth + 1);
      }
      out += value.is_dict() ? "}" : "}>";
      return;
    }
    case Value::Kind::callable:
      if (!value.as_callable().repr.empty()) {
        out += value.as_callable().repr;
      } else {
        out += "<function " + value.as_callable().name + ">";
      }
      return;
    case Value::Kind::generator:
      out += "<generator object>";
      return;
  }
}

}  // namespace smol::jinja
