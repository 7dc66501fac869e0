// Runs a parsed template: statements write text, expressions compute values.
//
// Scopes follow jinja2: a `for` body (each iteration afresh), a macro call and a `with`
// block each get a frame of their own, so `{% set %}` inside a loop does not change the
// variable outside it (templates carry state out of a loop in a `namespace()`); `if`
// makes no frame. A macro sees its parameters, its own sets and the frame it was
// defined in (the top level, or the loop iteration it was defined in), as it is when
// the macro runs.
//
// Frames are shared: a macro (or a call block's caller) keeps the frame it was defined
// in alive for as long as it can be called, which may outlive the statement that made
// it (a macro stored in a namespace). What refers to itself (a frame holding a macro
// that holds the frame, a namespace holding itself) is taken apart when the render ends.
//
// Every statement and expression is charged to the Meter, the text written is bounded,
// and macro calls nest at most RenderLimits::max_call_depth deep, so a template ends
// within its budgets whatever it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/template/jinja_ast.hpp"
#include "smol/template/jinja_filters.hpp"
#include "smol/template/jinja_lexer.hpp"
#include "smol/template/jinja_methods.hpp"

namespace smol::jinja {

class Interpreter {
 public:
  Interpreter(const LineIndex& lines, const Dict& context, const RenderLimits& limits)
      : lines_(lines), context_(context), meter_(limits) {}

  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Takes apart the cycles a render may leave: frames kept by the macros they hold, and
  // namespaces that hold themselves.
  ~Interpreter() {
    // Held first, then emptied, as the namespaces below: emptying one frame while the
    // others may go with it would free a chain of closures recursively.
    std::vector<FramePtr> frames;
    for (const auto& weak : captured_) {
      for (auto frame = weak.lock(); frame; frame = frame->parent) frames.push_back(frame);
    }
    for (const FramePtr& frame : frames) frame->variables.clear();
    // All held first, then emptied: emptying one while the others may go with it would
    // free a chain of them recursively.
    std::vector<std::shared_ptr<Dict>> held;
    for (const auto& weak : namespaces_) {
      if (auto attributes = weak.lock()) held.push_back(std::move(attributes));
    }
    for (const auto& attributes : held) *attributes = Dict();
  }

  std::string run(const Body& body) {
    const MeteredRender metered(meter_);
    std::string out;
    root_ = std::make_shared<Frame>();
    exec(body, *root_, out);  // the parser refuses break and continue outside a loop
    return out;
  }

 private:
  enum class Flow { normal, break_loop, continue_loop };

  struct Frame : std::enable_shared_from_this<Frame> {
    std::vector<std::pair<std::string, Value>> variables;
    std::shared_ptr<Frame> parent;

    Value* find(std::string_view name) {
      for (Frame* frame = this; frame; frame = frame->parent.get()) {
        for (auto& [key, value] : frame->variables) {
          if (key == name) return &value;
        }
      }
      return nullptr;
    }
    void set(const std::string& name, Value value) {
      for (auto& [key, existing] : variables) {
        if (key == name) {
          existing = std::move(value);
          return;
        }
      }
      variables.emplace_back(name, std::move(value));
    }
  };
  using FramePtr = std::shared_ptr<Frame>;

  static FramePtr child_of(Frame& parent) {
    auto frame = std::make_shared<Frame>();
    frame->parent = parent.shared_from_this();
    return frame;
  }

  // A frame a closure keeps: remembered, to be taken apart when the render ends (the
  // list drops the frames already gone as it grows).
  FramePtr capture(Frame& frame) {
    FramePtr kept = frame.shared_from_this();
    prune(captured_);
    captured_.push_back(kept);
    return kept;
  }

  template <typename T>
  static void prune(std::vector<std::weak_ptr<T>>& held) {
    if (held.size() < 1024 || (held.size() & (held.size() - 1)) != 0) return;  // at powers of 2
    std::erase_if(held, [](const std::weak_ptr<T>& weak) { return weak.expired(); });
  }

  // A scope ends. Its frame goes with it unless something else holds it: a macro defined
  // in it, which keeps it (a cycle), or such a macro copied elsewhere (a namespace), which
  // must go on seeing it. When the frame's own macros are all that hold it, its
  // variables are cleared, and the cycle with them.
  static void release(const FramePtr& frame) {
    long own = 0;
    for (const auto& [name, value] : frame->variables) {
      if (!value.is_callable() || value.as_callable().owner != frame.get()) continue;
      if (value.as_callable().function.use_count() != 1) return;  // copied elsewhere
      ++own;
    }
    if (own > 0 && frame.use_count() == 1 + own) frame->variables.clear();
  }

  [[noreturn]] void fail_at(std::size_t offset, const std::string& message) const {
    throw TemplateError(lines_.locate(offset), message);
  }

  // ---- statements ----

  Flow exec(const Body& body, Frame& frame, std::string& out) {
    for (const auto& stmt : body) {
      const Flow flow = exec(*stmt, frame, out);
      if (flow != Flow::normal) return flow;
    }
    return Flow::normal;
  }

  // A statement's own failures (a budget met, a value too deep to print) carry its place;
  // an expression's carry their own, and a raise_exception its message alone.
  // One level of statements, expressions and macro calls inside one another.
  struct Nested {
    Nested(Interpreter& in, std::size_t offset) : interpreter(in) {
      if (++interpreter.nesting_ > interpreter.meter_.limits().max_nesting) {
        --interpreter.nesting_;
        interpreter.fail_at(
            offset, cat("the template nests deeper than ", interpreter.meter_.limits().max_nesting,
                        " levels of statements, expressions and macro calls"));
      }
    }
    ~Nested() { --interpreter.nesting_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;
    Interpreter& interpreter;
  };

  Flow exec(const Stmt& stmt, Frame& frame, std::string& out) {
    const Nested nested(*this, stmt.offset);
    try {
      return exec_statement(stmt, frame, out);
    } catch (const TemplateError&) {
      throw;
    } catch (const TemplateRaised&) {
      throw;
    } catch (const Error& e) {
      fail_at(stmt.offset, e.what());
    }
  }

  void exec_print(const Stmt& stmt, Frame& frame, std::string& out) {
    const Value value = eval(*stmt.expr, frame);
    const std::size_t before = out.size();
    append_str(out, value);
    if (out.size() != before) check_output(out, stmt.offset);
  }

  // {% set x = ... %}, {% set a, b = ... %}, or {% set ns.attr = ... %} (stmt.text names
  // the attribute) on a namespace().
  void exec_set(const Stmt& stmt, Frame& frame) {
    Value value = eval(*stmt.expr, frame);
    if (!stmt.text.empty()) {
      Value* target = frame.find(stmt.targets[0]);
      if (!target || !target->is_namespace()) {
        fail_at(stmt.offset, cat("cannot set an attribute of '", stmt.targets[0],
                                 "': only a namespace() has attributes to set"));
      }
      target->namespace_attributes().set(stmt.text, std::move(value));
      return;
    }
    assign(stmt.targets, std::move(value), frame, stmt.offset);
  }

  // {% with a = x, b = y %}: the values are evaluated in the outer scope, then set in a
  // scope of the body's own.
  Flow exec_with_block(const Stmt& stmt, Frame& frame, std::string& out) {
    std::vector<Value> values;
    for (const auto& value : stmt.conditions) values.push_back(eval(*value, frame));
    const FramePtr scope = child_of(frame);
    for (std::size_t i = 0; i < values.size(); ++i) scope->set(stmt.targets[i], values[i]);
    const Flow flow = exec(stmt.bodies[0], *scope, out);
    release(scope);
    return flow;
  }

  // {% call(params) m(args) %}body{% endcall %}: m(args, caller=<the body>)
  void exec_call_block(const Stmt& stmt, Frame& frame, std::string& out) {
    const Expr& call = *stmt.expr;
    const Value callee = eval(*call.items[0], frame);
    Arguments args = arguments(call, frame);
    args.named.emplace_back("caller", macro(stmt, frame));
    write(out, to_str(invoke(callee, args, call.offset)), stmt.offset);
  }

  Flow exec_statement(const Stmt& stmt, Frame& frame, std::string& out) {
    meter_.charge(1);
    switch (stmt.kind) {
      case Stmt::Kind::text:
        write(out, stmt.text, stmt.offset);
        return Flow::normal;
      case Stmt::Kind::print:
        exec_print(stmt, frame, out);
        return Flow::normal;
      case Stmt::Kind::if_chain:
        for (std::size_t i = 0; i < stmt.bodies.size(); ++i) {
          if (i >= stmt.conditions.size() || eval(*stmt.conditions[i], frame).truthy()) {
            return exec(stmt.bodies[i], frame, out);
          }
        }
        return Flow::normal;
      case Stmt::Kind::for_loop: {
        const Value iterable = eval(*stmt.expr, frame);
        for_loop(stmt, frame, iterable, 0, out);
        return Flow::normal;
      }
      case Stmt::Kind::set:
        exec_set(stmt, frame);
        return Flow::normal;
      case Stmt::Kind::set_block: {
        std::string captured;
        exec_captured(stmt.bodies[0], frame, captured, stmt.offset);
        Value value(std::move(captured));
        if (stmt.filter) value = apply_filter_chain(*stmt.filter, std::move(value), frame);
        frame.set(stmt.targets[0], std::move(value));
        return Flow::normal;
      }
      case Stmt::Kind::with_block:
        return exec_with_block(stmt, frame, out);
      case Stmt::Kind::macro:
        frame.set(stmt.text, macro(stmt, frame));
        return Flow::normal;
      case Stmt::Kind::call_block:
        exec_call_block(stmt, frame, out);
        return Flow::normal;
      case Stmt::Kind::filter_block: {
        std::string captured;
        exec_captured(stmt.bodies[0], frame, captured, stmt.offset);
        write(out, to_str(apply_filter_chain(*stmt.expr, Value(std::move(captured)), frame)),
              stmt.offset);
        return Flow::normal;
      }
      case Stmt::Kind::break_loop:
        return Flow::break_loop;
      case Stmt::Kind::continue_loop:
        return Flow::continue_loop;
    }
    return Flow::normal;
  }

  void write(std::string& out, std::string_view text, std::size_t offset) {
    out += text;
    check_output(out, offset);
  }

  void check_output(const std::string& out, std::size_t offset) {
    if (out.size() > meter_.limits().max_output_bytes) {
      fail_at(offset,
              cat("the template wrote more than ", meter_.limits().max_output_bytes, " bytes"));
    }
  }

  void exec_captured(const Body& body, Frame& frame, std::string& out, std::size_t offset) {
    if (exec(body, frame, out) != Flow::normal) {
      fail_at(offset, "{% break %} or {% continue %} outside a loop");
    }
  }

  void assign(const std::vector<std::string>& targets, Value value, Frame& frame,
              std::size_t offset) {
    if (targets.size() == 1) {
      frame.set(targets[0], std::move(value));
      return;
    }
    List items;
    try {
      items = value.is_list() ? value.as_list() : builtins::iterate(value, meter_);
    } catch (const TemplateError&) {
      throw;
    } catch (const Error& e) {
      fail_at(offset, cat("cannot unpack: ", e.what()));
    }
    if (items.size() != targets.size()) {
      fail_at(offset,
              cat("cannot unpack ", items.size(), " values into ", targets.size(), " names"));
    }
    for (std::size_t i = 0; i < targets.size(); ++i) frame.set(targets[i], items[i]);
  }

  // One run of a for loop over `iterable` (a recursive loop's loop(...) runs it again,
  // one level deeper, in the same frame). jinja2 runs the `else` body when no iteration
  // reached the end of the loop body: none ran, or each ended in break or continue.
  void for_loop(const Stmt& stmt, Frame& frame, const Value& iterable, std::int64_t depth,
                std::string& out) {
    List items;
    try {
      items = builtins::iterate(iterable, meter_);
    } catch (const TemplateError&) {
      throw;
    } catch (const Error& e) {
      fail_at(stmt.expr->offset, e.what());
    }
    if (stmt.filter) {  // `for x in xs if cond`: the loop sees only what passes
      List kept;
      for (Value& item : items) {
        const FramePtr scope = child_of(frame);
        assign(stmt.targets, item, *scope, stmt.offset);
        if (eval(*stmt.filter, *scope).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    auto shared_items = std::make_shared<const List>(std::move(items));
    auto last_changed = std::make_shared<std::optional<List>>();
    bool completed = false;
    const auto length = static_cast<std::int64_t>(shared_items->size());
    for (std::int64_t i = 0; i < length; ++i) {
      meter_.charge(1);
      const FramePtr scope = child_of(frame);
      assign(stmt.targets, (*shared_items)[static_cast<std::size_t>(i)], *scope, stmt.offset);
      scope->set("loop", loop_object(stmt, frame, shared_items, i, depth, last_changed));
      const Flow flow = exec(stmt.bodies[0], *scope, out);
      release(scope);
      if (flow == Flow::normal) completed = true;
      if (flow == Flow::break_loop) break;
    }
    if (!completed && stmt.bodies.size() > 1) {
      const FramePtr scope = child_of(frame);
      exec(stmt.bodies[1], *scope, out);
      release(scope);
    }
  }

  // jinja2's LoopContext: index, first, length, previtem, cycle(), changed(), ...; and
  // for a recursive loop, loop(items) renders the loop over them one level deeper.
  Value loop_object(const Stmt& stmt, Frame& frame, const std::shared_ptr<const List>& items,
                    std::int64_t i, std::int64_t depth,
                    const std::shared_ptr<std::optional<List>>& last_changed) {
    const auto length = static_cast<std::int64_t>(items->size());
    auto loop = std::make_shared<Dict>();
    loop->set("index", i + 1);
    loop->set("index0", i);
    loop->set("revindex", length - i);
    loop->set("revindex0", length - i - 1);
    loop->set("first", i == 0);
    loop->set("last", i == length - 1);
    loop->set("length", length);
    loop->set("depth", depth + 1);
    loop->set("depth0", depth);
    loop->set("previtem", i > 0 ? (*items)[static_cast<std::size_t>(i - 1)]
                                : Value::undefined("there is no previous item"));
    loop->set("nextitem", i + 1 < length ? (*items)[static_cast<std::size_t>(i + 1)]
                                         : Value::undefined("there is no next item"));
    loop->set("cycle", Value::function("loop.cycle", [i](Arguments& args) -> Value {
                if (args.positional.empty()) fail("no items for cycling given");
                return args.positional[static_cast<std::size_t>(i) % args.positional.size()];
              }));
    loop->set("changed", Value::function("loop.changed", [last_changed](Arguments& args) -> Value {
                const List now = args.positional;
                const Value as_list(now);
                if (*last_changed && equal(Value(**last_changed), as_list)) return false;
                *last_changed = now;
                return true;
              }));
    Function call;
    if (stmt.recursive) {
      const FramePtr kept = capture(frame);
      const Stmt* definition = &stmt;
      call = [this, definition, kept, depth](Arguments& args) -> Value {
        if (args.positional.size() != 1) fail("loop() takes one iterable");
        if (++call_depth_ > meter_.limits().max_call_depth) {
          --call_depth_;
          fail("recursive loops nest deeper than ", meter_.limits().max_call_depth, " levels");
        }
        struct Leave {
          int& depth;
          ~Leave() { --depth; }
        } leave{call_depth_};
        std::string out;
        for_loop(*definition, *kept, args.positional[0], depth + 1, out);
        return out;
      };
    } else {
      call = [](Arguments&) -> Value {
        fail("Tried to call non recursive loop. Maybe you forgot the 'recursive' modifier.");
      };
    }
    return Value::object("LoopContext", cat("<LoopContext ", i + 1, "/", length, ">"),
                         std::move(loop), std::move(call));
  }

  // A macro (or a call block's `caller`) as a callable value, which keeps the frame it
  // was defined in.
  Value macro(const Stmt& stmt, Frame& frame) {
    const Stmt* definition = &stmt;
    const FramePtr enclosing = capture(frame);
    const std::string name = stmt.text.empty() ? "caller" : stmt.text;
    auto fn = [this, definition, enclosing](Arguments& args) -> Value {
      return call_macro(*definition, enclosing, args);
    };
    return Value::object(name, cat("<Macro '", name, "'>"), nullptr, std::move(fn), &frame);
  }

  // jinja2's Macro.__call__: positional arguments fill the parameters in order, keyword
  // ones the rest; a parameter neither gives takes its default (evaluated in the macro's
  // scope, after the parameters before it) or is undefined. Extra positional arguments
  // are `varargs` and extra keyword ones `kwargs` when the body reads those names, else
  // an error; `caller` likewise.
  Value call_macro(const Stmt& stmt, const FramePtr& enclosing, Arguments& args) {
    if (++call_depth_ > meter_.limits().max_call_depth) {
      --call_depth_;
      fail_at(stmt.offset,
              cat("macro calls nest deeper than ", meter_.limits().max_call_depth, " levels"));
    }
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{call_depth_};
    const FramePtr scope = child_of(*enclosing);
    const std::string name = stmt.text.empty() ? std::string("caller") : stmt.text;
    std::vector<std::pair<std::string, Value>> named = args.named;
    const auto take_named = [&](const std::string& key) -> std::optional<Value> {
      for (auto it = named.begin(); it != named.end(); ++it) {
        if (it->first == key) {
          Value value = std::move(it->second);
          named.erase(it);
          return value;
        }
      }
      return std::nullopt;
    };
    const std::size_t count = stmt.parameters.size();
    bool found_caller = false;
    for (std::size_t i = 0; i < count; ++i) {
      const Parameter& parameter = stmt.parameters[i];
      std::optional<Value> value;
      if (i < args.positional.size()) {
        value = args.positional[i];
      } else {
        value = take_named(parameter.name);
        found_caller = found_caller || parameter.name == "caller";
      }
      if (!value) {
        value = parameter.default_value
                    ? eval(*parameter.default_value, *scope)
                    : Value::undefined(cat("parameter '", parameter.name, "' was not provided"));
      }
      scope->set(parameter.name, std::move(*value));
    }
    if (args.positional.size() >= count) {
      for (const Parameter& parameter : stmt.parameters) {
        found_caller = found_caller || parameter.name == "caller";
      }
    }
    if (stmt.uses_caller && !found_caller) {
      std::optional<Value> caller = take_named("caller");
      scope->set("caller", caller && !caller->is_none() ? std::move(*caller)
                                                        : Value::undefined("No caller defined"));
    }
    if (stmt.uses_kwargs) {
      Dict kwargs;
      for (auto& [key, value] : named) kwargs.set(key, std::move(value));
      scope->set("kwargs", std::move(kwargs));
    } else if (!named.empty()) {
      for (const auto& [key, value] : named) {
        if (key == "caller") {
          fail_at(stmt.offset, cat("macro '", name,
                                   "' was invoked with two values for the special caller "
                                   "argument (its body does not call caller())"));
        }
      }
      fail_at(stmt.offset,
              cat("macro '", name, "' takes no keyword argument '", named.front().first, "'"));
    }
    if (stmt.uses_varargs) {
      List extra;
      for (std::size_t i = count; i < args.positional.size(); ++i) {
        extra.push_back(args.positional[i]);
      }
      scope->set("varargs", Value::tuple(std::move(extra)));
    } else if (args.positional.size() > count) {
      fail_at(stmt.offset, cat("macro '", name, "' takes not more than ", count, " argument(s)"));
    }
    std::string out;
    exec_captured(stmt.bodies[0], *scope, out, stmt.offset);
    release(scope);
    return out;
  }

  // ---- expressions ----

  Value lookup(const std::string& name, Frame& frame) {
    if (Value* local = frame.find(name)) return *local;
    if (const Value* given = context_.find(name)) return *given;
    if (name == "range") return range_function();
    if (name == "namespace") return namespace_function();
    if (name == "dict") return dict_function();
    if (name == "cycler") return cycler_function();
    if (name == "joiner") return joiner_function();
    if (name == "lipsum") {
      return Value::function("lipsum", [](Arguments&) -> Value {
        fail("lipsum() writes random text; smol does not support it");
      });
    }
    return Value::undefined(name);
  }

  Value range_function() {
    Meter* meter = &meter_;
    return Value::function("range", [meter](Arguments& args) -> Value {
      std::int64_t start = 0, stop = 0, step = 1;
      const auto integer = [](const Value& v) {
        if (!v.is_int() && !v.is_bool()) {
          fail("'", v.type_name(), "' object cannot be interpreted as an integer");
        }
        return v.as_int();
      };
      if (!args.named.empty()) fail("range() takes no keyword arguments");
      if (args.positional.size() == 1) {
        stop = integer(args.positional[0]);
      } else if (args.positional.size() == 2 || args.positional.size() == 3) {
        start = integer(args.positional[0]);
        stop = integer(args.positional[1]);
        if (args.positional.size() == 3) step = integer(args.positional[2]);
      } else {
        fail("range expected 1 to 3 integer arguments, got ", args.positional.size());
      }
      if (step == 0) fail("range() arg 3 must not be zero");
      const double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) /
                                     static_cast<double>(step));
      if (count > 0) meter->charge(static_cast<std::size_t>(std::min(count, 1e18)));
      List out;
      for (std::int64_t i = start; step > 0 ? i < stop : i > stop;) {
        out.emplace_back(i);
        if (__builtin_add_overflow(i, step, &i)) break;
      }
      return out;
    });
  }

  Value namespace_function() {
    return Value::function("namespace", [this](Arguments& args) -> Value {
      auto attributes = make_namespace_attributes();
      for (const Value& given : args.positional) {
        if (!given.is_dict()) fail("namespace: a positional argument must be a dict");
        for (const auto& [key, value] : given.as_dict().entries()) attributes->set(key, value);
      }
      for (auto& [key, value] : args.named) attributes->set(key, value);
      prune(namespaces_);
      namespaces_.push_back(attributes);
      return Namespace{std::move(attributes)};
    });
  }

  static Value dict_function() {
    return Value::function("dict", [](Arguments& args) -> Value {
      Dict dict;
      if (args.positional.size() > 1) fail("dict expected at most 1 argument");
      for (const Value& given : args.positional) {
        if (given.is_dict()) {
          for (const auto& [key, value] : given.as_dict().entries()) dict.set(key, value);
        } else if (given.is_list()) {
          for (const Value& pair : given.as_list()) {
            if (!pair.is_list() || pair.as_list().size() != 2) {
              fail("dict: each item must be a (key, value) pair");
            }
            dict.set(pair.as_list()[0], pair.as_list()[1]);
          }
        } else {
          fail("dict: '", given.type_name(), "' object is not iterable");
        }
      }
      for (auto& [key, value] : args.named) dict.set(key, value);
      return dict;
    });
  }

  // jinja2's Cycler: next() gives the items in turn, `current` the one next() gives next.
  static Value cycler_function() {
    return Value::function("cycler", [](Arguments& args) -> Value {
      if (args.positional.empty()) fail("at least one item has to be provided");
      struct State {
        List items;
        std::size_t position = 0;
      };
      auto state = std::make_shared<State>();
      state->items = args.positional;
      auto attributes = std::make_shared<Dict>();
      const std::weak_ptr<Dict> weak = attributes;
      attributes->set("current", state->items[0]);
      std::uint16_t deepest = 0;
      for (const Value& item : state->items) deepest = std::max(deepest, item.depth());
      attributes->set("next", Value::function("next", [state, weak](Arguments&) -> Value {
                                Value now = state->items[state->position];
                                state->position = (state->position + 1) % state->items.size();
                                if (auto held = weak.lock()) {
                                  held->set("current", state->items[state->position]);
                                }
                                return now;
                              }).holding(deepest));
      attributes->set("reset", Value::function("reset", [state, weak](Arguments&) -> Value {
                                 state->position = 0;
                                 if (auto held = weak.lock()) held->set("current", state->items[0]);
                                 return None{};
                               }).holding(deepest));
      return Value::object("Cycler", "<jinja2.utils.Cycler object>", std::move(attributes));
    });
  }

  // jinja2's joiner(sep): "" the first time it is called, `sep` after.
  static Value joiner_function() {
    return Value::function("joiner", [](Arguments& args) -> Value {
      const Value* separator = builtins::argument(args, 0, "sep");
      const std::string text = separator ? to_str(*separator) : ", ";
      auto used = std::make_shared<bool>(false);
      return Value::function("joiner", [text, used](Arguments&) -> Value {
        if (!*used) {
          *used = true;
          return std::string();
        }
        return text;
      });
    });
  }

  Value eval(const Expr& expr, Frame& frame) {
    const Nested nested(*this, expr.offset);
    meter_.charge(1);
    try {
      return eval_node(expr, frame);
    } catch (const TemplateError&) {
      throw;
    } catch (const TemplateRaised&) {
      throw;
    } catch (const Error& e) {
      fail_at(expr.offset, e.what());
    }
  }

  Arguments arguments(const Expr& expr, Frame& frame) {
    Arguments args;
    args.where = lines_.locate(expr.offset);
    for (const auto& argument : expr.positional) args.positional.push_back(eval(*argument, frame));
    for (const auto& [name, argument] : expr.named) {
      args.named.emplace_back(name, eval(*argument, frame));
    }
    return args;
  }

  Value invoke(const Value& callee, Arguments& args, std::size_t offset) {
    if (callee.is_undefined()) {
      fail_at(offset, cat("'", callee.undefined_name(), "' is undefined, so it cannot be called"));
    }
    if (!callee.is_callable() || !callee.as_callable().function) {
      fail_at(offset,
              cat("'", callee.is_callable() ? callee.as_callable().name : callee.type_name(),
                  "' object is not callable"));
    }
    return (*callee.as_callable().function)(args);
  }

  // Applies a filter chain (whose innermost target is empty) to `value`.
  Value apply_filter_chain(const Expr& chain, Value value, Frame& frame) {
    if (chain.items[0]) value = apply_filter_chain(*chain.items[0], std::move(value), frame);
    const Arguments args = arguments(chain, frame);
    return apply_filter(chain.name, value, args, meter_);
  }

  // {k: v, ...}: the keys must be hashable (str, a number or None).
  Value eval_dict(const Expr& expr, Frame& frame) {
    Dict dict;
    for (std::size_t i = 0; i < expr.items.size(); i += 2) {
      Value key = eval(*expr.items[i], frame);
      if (!key.is_string() && !key.is_number() && !key.is_none()) {
        fail_at(expr.items[i]->offset, cat("unhashable type: '", key.type_name(), "'"));
      }
      dict.set(std::move(key), eval(*expr.items[i + 1], frame));
    }
    return dict;
  }

  Value eval_item(const Expr& expr, Frame& frame) {
    const Value target = eval(*expr.items[0], frame);
    const Value key = eval(*expr.items[1], frame);
    Value found = builtins::item(target, key);
    // jinja2 falls back to the attribute: d['items'] is the method when no such key.
    if (found.is_undefined() && key.is_string() && (target.is_dict() || target.is_string())) {
      Value method = attribute(target, key.as_string(), meter_);
      if (method.is_callable()) return method;
    }
    return found;
  }

  // Unary - and +: numbers only; +True is 1.
  Value eval_sign(const Expr& expr, Frame& frame) {
    const Value value = eval(*expr.items[0], frame);
    if (!value.is_number()) {
      fail_at(expr.offset,
              cat("bad operand type for unary ", expr.kind == Expr::Kind::negate ? "-" : "+", ": '",
                  value.type_name(), "'"));
    }
    if (expr.kind == Expr::Kind::plus) return value.is_bool() ? Value(value.as_int()) : value;
    if (value.is_float()) return -value.as_double();
    return builtins::arithmetic("-", Value(0), value, meter_);
  }

  // a < b <= c: each comparison on its neighbours, each operand evaluated once, stopping
  // at the first that fails.
  bool eval_compare(const Expr& expr, Frame& frame) {
    Value left = eval(*expr.items[0], frame);
    for (std::size_t i = 0; i < expr.ops.size(); ++i) {
      Value right = eval(*expr.items[i + 1], frame);
      if (!compare_holds(expr.ops[i], left, right)) return false;
      left = std::move(right);
    }
    return true;
  }

  Value eval_node(const Expr& expr, Frame& frame) {
    switch (expr.kind) {
      case Expr::Kind::literal:
        return expr.value;
      case Expr::Kind::name:
        return lookup(expr.name, frame);
      case Expr::Kind::list:
      case Expr::Kind::tuple: {
        List items;
        for (const auto& item : expr.items) items.push_back(eval(*item, frame));
        if (expr.kind == Expr::Kind::tuple) return Value::tuple(std::move(items));
        return items;
      }
      case Expr::Kind::dict:
        return eval_dict(expr, frame);
      case Expr::Kind::attribute:
        return attribute(eval(*expr.items[0], frame), expr.name, meter_);
      case Expr::Kind::item:
        return eval_item(expr, frame);
      case Expr::Kind::slice: {
        const Value target = eval(*expr.items[0], frame);
        const auto part = [&](std::size_t i) {
          return expr.items[i] ? eval(*expr.items[i], frame) : Value(None{});
        };
        return builtins::slice(target, part(1), part(2), part(3), meter_);
      }
      case Expr::Kind::call: {
        const Value callee = eval(*expr.items[0], frame);
        Arguments args = arguments(expr, frame);
        return invoke(callee, args, expr.offset);
      }
      case Expr::Kind::filter: {
        const Value target = eval(*expr.items[0], frame);
        const Arguments args = arguments(expr, frame);
        return apply_filter(expr.name, target, args, meter_);
      }
      case Expr::Kind::test: {
        const Value target = eval(*expr.items[0], frame);
        const Arguments args = arguments(expr, frame);
        return apply_test(expr.name, target, args, meter_) != expr.negated;
      }
      case Expr::Kind::negate:
      case Expr::Kind::plus:
        return eval_sign(expr, frame);
      case Expr::Kind::logical_not:
        return !eval(*expr.items[0], frame).truthy();
      case Expr::Kind::binary:
        return builtins::arithmetic(expr.name, eval(*expr.items[0], frame),
                                    eval(*expr.items[1], frame), meter_);
      case Expr::Kind::compare:
        return eval_compare(expr, frame);
      case Expr::Kind::logical_and: {
        Value left = eval(*expr.items[0], frame);
        return left.truthy() ? eval(*expr.items[1], frame) : left;
      }
      case Expr::Kind::logical_or: {
        Value left = eval(*expr.items[0], frame);
        return left.truthy() ? left : eval(*expr.items[1], frame);
      }
      case Expr::Kind::conditional:
        if (eval(*expr.items[0], frame).truthy()) return eval(*expr.items[1], frame);
        return expr.items[2] ? eval(*expr.items[2], frame) : Value::undefined("an if without else");
    }
    return Value();
  }

  static bool compare_holds(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equal(a, b);
    if (op == "!=") return !equal(a, b);
    if (op == "in") return builtins::contains(b, a);
    if (op == "not in") return !builtins::contains(b, a);
    return builtins::ordered(op, a, b);
  }

  const LineIndex& lines_;
  const Dict& context_;
  Meter meter_;
  FramePtr root_;
  int call_depth_ = 0;
  int nesting_ = 0;
  std::vector<std::weak_ptr<Frame>> captured_;
  std::vector<std::weak_ptr<Dict>> namespaces_;
};

}  // namespace smol::jinja
