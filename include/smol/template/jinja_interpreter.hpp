// Runs a parsed template: statements write text, expressions compute values.
//
// Scopes follow jinja2: a `for` body and a macro call each get a frame of their own, so
// `{% set %}` inside a loop does not change the variable outside it (templates carry
// state out of a loop in a `namespace()`); `if` makes no frame. A macro sees its
// parameters, its own sets and the template's top level.
//
// Every statement and expression is charged to the Meter, the text written is bounded,
// and macro calls nest at most RenderLimits::max_call_depth deep, so a template ends
// within its budgets whatever it is given.
#pragma once

#include <cstddef>
#include <cstdint>
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

  std::string run(const Body& body) {
    std::string out;
    Frame root{{}, nullptr};
    root_ = &root;
    if (exec(body, root, out) != Flow::normal) {
      fail_at(0, "{% break %} or {% continue %} outside a loop");
    }
    return out;
  }

 private:
  enum class Flow { normal, break_loop, continue_loop };

  struct Frame {
    std::vector<std::pair<std::string, Value>> variables;
    Frame* parent;

    Value* find(std::string_view name) {
      for (Frame* frame = this; frame; frame = frame->parent) {
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

  Flow exec(const Stmt& stmt, Frame& frame, std::string& out) {
    meter_.charge(1);
    switch (stmt.kind) {
      case Stmt::Kind::text:
        write(out, stmt.text, stmt.offset);
        return Flow::normal;
      case Stmt::Kind::print: {
        const Value value = eval(*stmt.expr, frame);
        const std::size_t before = out.size();
        append_str(out, value);
        if (out.size() != before) check_output(out, stmt.offset);
        return Flow::normal;
      }
      case Stmt::Kind::if_chain:
        for (std::size_t i = 0; i < stmt.bodies.size(); ++i) {
          if (i >= stmt.conditions.size() || eval(*stmt.conditions[i], frame).truthy()) {
            return exec(stmt.bodies[i], frame, out);
          }
        }
        return Flow::normal;
      case Stmt::Kind::for_loop:
        return for_loop(stmt, frame, out);
      case Stmt::Kind::set: {
        Value value = eval(*stmt.expr, frame);
        if (!stmt.text.empty()) {
          Value* target = frame.find(stmt.targets[0]);
          if (!target || !target->is_namespace()) {
            fail_at(stmt.offset, cat("cannot set an attribute of '", stmt.targets[0],
                                     "': only a namespace() has attributes to set"));
          }
          target->namespace_attributes().set(stmt.text, std::move(value));
          return Flow::normal;
        }
        assign(stmt.targets, std::move(value), frame, stmt.offset);
        return Flow::normal;
      }
      case Stmt::Kind::set_block: {
        std::string captured;
        exec_captured(stmt.bodies[0], frame, captured, stmt.offset);
        frame.set(stmt.targets[0], Value(std::move(captured)));
        return Flow::normal;
      }
      case Stmt::Kind::macro:
        frame.set(stmt.text, macro(stmt, nullptr));
        return Flow::normal;
      case Stmt::Kind::call_block: {
        const Value caller = macro(stmt, &frame);
        Frame with_caller{{{"caller", caller}}, &frame};
        write(out, to_str(eval(*stmt.expr, with_caller)), stmt.offset);
        return Flow::normal;
      }
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
    const List items = value.is_list() ? value.as_list() : builtins::iterate(value, meter_);
    if (items.size() != targets.size()) {
      fail_at(offset,
              cat("cannot unpack ", items.size(), " values into ", targets.size(), " names"));
    }
    for (std::size_t i = 0; i < targets.size(); ++i) frame.set(targets[i], items[i]);
  }

  Flow for_loop(const Stmt& stmt, Frame& frame, std::string& out) {
    const Value iterable = eval(*stmt.expr, frame);
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
        Frame scope{{}, &frame};
        assign(stmt.targets, item, scope, stmt.offset);
        if (eval(*stmt.filter, scope).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      if (stmt.bodies.size() > 1) {
        Frame scope{{}, &frame};
        exec(stmt.bodies[1], scope, out);
      }
      return Flow::normal;
    }
    const auto length = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < length; ++i) {
      meter_.charge(1);
      Frame scope{{}, &frame};
      assign(stmt.targets, items[static_cast<std::size_t>(i)], scope, stmt.offset);
      scope.set("loop", loop_object(items, i));
      const Flow flow = exec(stmt.bodies[0], scope, out);
      if (flow == Flow::break_loop) break;
    }
    return Flow::normal;
  }

  Value loop_object(const List& items, std::int64_t i) {
    const auto length = static_cast<std::int64_t>(items.size());
    Dict loop;
    loop.set("index", i + 1);
    loop.set("index0", i);
    loop.set("revindex", length - i);
    loop.set("revindex0", length - i - 1);
    loop.set("first", i == 0);
    loop.set("last", i == length - 1);
    loop.set("length", length);
    loop.set("depth", 1);
    loop.set("depth0", 0);
    loop.set("previtem",
             i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value::undefined("loop.previtem"));
    loop.set("nextitem", i + 1 < length ? items[static_cast<std::size_t>(i + 1)]
                                        : Value::undefined("loop.nextitem"));
    loop.set("cycle", Value::function("loop.cycle", [i](Arguments& args) -> Value {
               if (args.positional.empty()) fail("loop.cycle needs at least one value");
               return args.positional[static_cast<std::size_t>(i) % args.positional.size()];
             }));
    return loop;
  }

  // A macro (or a call block's `caller`) as a callable value. A macro sees the top
  // level; a caller sees the frame of its call block.
  Value macro(const Stmt& stmt, Frame* enclosing) {
    const Stmt* definition = &stmt;
    Interpreter* self = this;
    return Value::function(stmt.text.empty() ? "caller" : stmt.text,
                           [self, definition, enclosing](Arguments& args) -> Value {
                             return self->call_macro(*definition, enclosing, args);
                           });
  }

  Value call_macro(const Stmt& stmt, Frame* enclosing, Arguments& args) {
    if (++call_depth_ > meter_.limits().max_call_depth) {
      --call_depth_;
      fail_at(stmt.offset,
              cat("macro calls nest deeper than ", meter_.limits().max_call_depth, " levels"));
    }
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{call_depth_};
    Frame scope{{}, enclosing ? enclosing : root_};
    const std::string& name = stmt.text.empty() ? std::string("caller") : stmt.text;
    if (args.positional.size() > stmt.parameters.size()) {
      fail_at(stmt.offset, cat("macro '", name, "' takes at most ", stmt.parameters.size(),
                               " arguments (", args.positional.size(), " given)"));
    }
    for (std::size_t i = 0; i < stmt.parameters.size(); ++i) {
      const Parameter& parameter = stmt.parameters[i];
      Value value;
      bool given = false;
      if (i < args.positional.size()) {
        value = args.positional[i];
        given = true;
      }
      for (const auto& [key, named] : args.named) {
        if (key == parameter.name) {
          value = named;
          given = true;
        }
      }
      if (!given) {
        value = parameter.default_value ? eval(*parameter.default_value, scope)
                                        : Value::undefined(parameter.name);
      }
      scope.set(parameter.name, std::move(value));
    }
    for (const auto& [key, named] : args.named) {
      bool known = false;
      for (const Parameter& parameter : stmt.parameters) known |= parameter.name == key;
      if (!known) {
        fail_at(stmt.offset, cat("macro '", name, "' takes no keyword argument '", key, "'"));
      }
    }
    std::string out;
    exec_captured(stmt.bodies[0], scope, out, stmt.offset);
    return out;
  }

  // ---- expressions ----

  Value lookup(const std::string& name, Frame& frame) {
    if (Value* local = frame.find(name)) return *local;
    if (const Value* given = context_.find(name)) return *given;
    if (name == "range") return range_function();
    if (name == "namespace") return namespace_function();
    if (name == "dict") return dict_function();
    return Value::undefined(name);
  }

  Value range_function() {
    Meter* meter = &meter_;
    return Value::function("range", [meter](Arguments& args) -> Value {
      std::int64_t start = 0, stop = 0, step = 1;
      const auto integer = [](const Value& v) {
        if (!v.is_int() && !v.is_bool()) fail("range: '", v.type_name(), "' is not an integer");
        return v.as_int();
      };
      if (args.positional.size() == 1) {
        stop = integer(args.positional[0]);
      } else if (args.positional.size() == 2 || args.positional.size() == 3) {
        start = integer(args.positional[0]);
        stop = integer(args.positional[1]);
        if (args.positional.size() == 3) step = integer(args.positional[2]);
      } else {
        fail("range expects 1 to 3 integer arguments");
      }
      if (step == 0) fail("range: step must not be zero");
      const double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) /
                                     static_cast<double>(step));
      if (count > 0) meter->charge(static_cast<std::size_t>(std::min(count, 1e18)));
      List out;
      for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
      return out;
    });
  }

  static Value namespace_function() {
    return Value::function("namespace", [](Arguments& args) -> Value {
      auto attributes = std::make_shared<Dict>();
      for (const Value& given : args.positional) {
        if (!given.is_dict()) fail("namespace: a positional argument must be a dict");
        for (const auto& [key, value] : given.as_dict().entries()) attributes->set(key, value);
      }
      for (auto& [key, value] : args.named) attributes->set(key, value);
      return Namespace{std::move(attributes)};
    });
  }

  static Value dict_function() {
    return Value::function("dict", [](Arguments& args) -> Value {
      Dict dict;
      for (const Value& given : args.positional) {
        if (!given.is_dict()) fail("dict: a positional argument must be a dict");
        for (const auto& [key, value] : given.as_dict().entries()) dict.set(key, value);
      }
      for (auto& [key, value] : args.named) dict.set(key, value);
      return dict;
    });
  }

  Value eval(const Expr& expr, Frame& frame) {
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

  // Applies a {% filter %} block's chain (whose innermost target is empty) to `value`.
  Value apply_filter_chain(const Expr& chain, Value value, Frame& frame) {
    if (chain.items[0]) value = apply_filter_chain(*chain.items[0], std::move(value), frame);
    const Arguments args = arguments(chain, frame);
    return apply_filter(chain.name, value, args, meter_);
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
        return items;
      }
      case Expr::Kind::dict: {
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
      case Expr::Kind::attribute:
        return attribute(eval(*expr.items[0], frame), expr.name, meter_);
      case Expr::Kind::item: {
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
        if (callee.is_undefined()) {
          fail_at(expr.offset, cat("'", callee.undefined_name(),
                                   "' is undefined, so it cannot "
                                   "be called"));
        }
        if (!callee.is_callable()) {
          fail_at(expr.offset, cat("'", callee.type_name(), "' object is not callable"));
        }
        return (*callee.as_callable().function)(args);
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
      case Expr::Kind::plus: {
        const Value value = eval(*expr.items[0], frame);
        if (!value.is_number()) {
          fail_at(expr.offset,
                  cat("bad operand type for unary ", expr.kind == Expr::Kind::negate ? "-" : "+",
                      ": '", value.type_name(), "'"));
        }
        if (expr.kind == Expr::Kind::plus) return value.is_bool() ? Value(value.as_int()) : value;
        if (value.is_float()) return -value.as_double();
        return builtins::arithmetic("-", Value(0), value, meter_);
      }
      case Expr::Kind::logical_not:
        return !eval(*expr.items[0], frame).truthy();
      case Expr::Kind::binary:
        return builtins::arithmetic(expr.name, eval(*expr.items[0], frame),
                                    eval(*expr.items[1], frame), meter_);
      case Expr::Kind::compare: {
        Value left = eval(*expr.items[0], frame);
        for (std::size_t i = 0; i < expr.ops.size(); ++i) {
          Value right = eval(*expr.items[i + 1], frame);
          if (!compare_holds(expr.ops[i], left, right)) return false;
          left = std::move(right);
        }
        return true;
      }
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
    const int c = builtins::compare(a, b);
    if (op == "<") return c < 0;
    if (op == "<=") return c <= 0;
    if (op == ">") return c > 0;
    return c >= 0;
  }

  const LineIndex& lines_;
  const Dict& context_;
  Meter meter_;
  Frame* root_ = nullptr;
  int call_depth_ = 0;
};

}  // namespace smol::jinja
