// The parsed form of a Jinja template: expressions and statements.
//
// One struct per kind of node would spread the interpreter across as many classes; a
// node here is one struct with a kind, the children the kind needs, and its place in
// the source, and the interpreter is one switch per family (jinja_interpreter.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "smol/template/jinja_value.hpp"

namespace smol::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    literal,      // value
    name,         // name
    list,         // items
    tuple,        // items
    dict,         // items: key, value, key, value, ...
    attribute,    // items[0].name
    item,         // items[0][items[1]]
    slice,        // items[0][items[1]:items[2]:items[3]] (absent parts are null)
    call,         // items[0](arguments)
    filter,       // items[0] | name(arguments)
    test,         // items[0] is [not] name(arguments)
    negate,       // -items[0]
    plus,         // +items[0]
    logical_not,  // not items[0]
    binary,       // items[0] op items[1]: + - * / // % ** ~
    compare,      // items[0] ops[0] items[1] ops[1] items[2] ...
    logical_and,  // items[0] and items[1]
    logical_or,   // items[0] or items[1]
    conditional,  // items[1] if items[0] else items[2] (items[2] may be null)
  };
  Kind kind;
  std::size_t offset;  // where it starts in the source
  std::string name;    // a name, an attribute, a filter, a test, or a binary operator
  Value value;         // a literal
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;                        // compare's operators
  std::vector<ExprPtr> positional;                     // call, filter and test arguments
  std::vector<std::pair<std::string, ExprPtr>> named;  // keyword arguments
  bool negated = false;                                // `is not`
  int depth = 1;  // the levels of nodes down to its deepest leaf (Parser bounds it)
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

// A macro's parameter: its name and default (null when it has none).
struct Parameter {
  std::string name;
  ExprPtr default_value;
};

struct Stmt {
  enum class Kind {
    text,          // text
    print,         // {{ expr }}
    if_chain,      // conditions[i] -> bodies[i]; a last body without condition is `else`
    for_loop,      // for targets in expr [if filter] [recursive]: bodies[0], else bodies[1]
    set,           // set targets = expr, or set target.attribute = expr
    set_block,     // set targets[0] [| filters] %}bodies[0]{% endset (the filters in `filter`)
    with_block,    // with targets[i] = conditions[i], ...: bodies[0]
    macro,         // macro name(parameters): bodies[0]
    call_block,    // call(parameters) expr: bodies[0] is `caller`
    filter_block,  // filter expr: bodies[0]
    break_loop,
    continue_loop,
  };
  Kind kind;
  std::size_t offset;
  std::string text;                 // text; macro name; set's attribute
  ExprPtr expr;                     // print, for's iterable, set's value, call, filter
  ExprPtr filter;                   // for's `if`; set_block's filters
  std::vector<ExprPtr> conditions;  // if_chain
  std::vector<Body> bodies;
  std::vector<std::string> targets;   // for and set names (several unpack a tuple)
  std::vector<Parameter> parameters;  // macro, call_block
  // A macro's (or call block's) body reads `caller`, `kwargs`, `varargs`: jinja2 then
  // takes a caller, extra keyword arguments, extra positional ones.
  bool uses_caller = false, uses_kwargs = false, uses_varargs = false;
  bool recursive = false;  // for ... recursive
};

}  // namespace smol::jinja
