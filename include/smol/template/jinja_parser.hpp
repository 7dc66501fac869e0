// Jinja's parser: tokens to statements and expressions, with jinja2's precedence.
//
// From loosest to tightest: `x if c else y`, or, and, not, comparisons (== != < <= > >=
// in, not in; chained), + -, ~, * / // %, **, unary - +, then a primary (literal, name,
// list, dict, tuple in parentheses) with its postfixes (.attr, [item], [a:b:c], (call))
// and its filters and tests (| name(...), is [not] name ...).
//
// Statements: if/elif/else, for (with `if`, `else`, tuple targets, `recursive`), set
// (names, a namespace's attribute, or a block with filters), macro, call, filter, with,
// print, break, continue, and transformers' {% generation %} (which only marks the
// assistant's text, so it renders its body). Any other statement ({% include %},
// {% extends %}, {% do %}, ...) is an error naming it and where it is: a chat template
// that needs it cannot be rendered faithfully, so smol says so rather than guessing.
// Nested unpacking in a for loop's targets (`for (a, b), c in ...`) is refused too.
//
// Nesting is bounded (kMaxDepth) so no template can exhaust the stack.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "smol/template/jinja_ast.hpp"
#include "smol/template/jinja_lexer.hpp"

namespace smol::jinja {

class Parser {
 public:
  static constexpr int kMaxDepth = 200;

  Parser(std::vector<Token> tokens, const LineIndex& lines)
      : tokens_(std::move(tokens)), lines_(lines) {}

  Body parse() {
    std::string_view ended_by;
    Body body = parse_body({}, ended_by);
    return body;
  }

 private:
  // Nesting guard, one per recursive descent.
  struct Deeper {
    explicit Deeper(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxDepth) {
        parser.fail(cat("the template nests deeper than ", kMaxDepth, " levels"));
      }
    }
    ~Deeper() { --parser.depth_; }
    Parser& parser;
  };

  const Token& peek(std::size_t ahead = 0) const {
    const std::size_t at = position_ + ahead;
    return tokens_[at < tokens_.size() ? at : tokens_.size() - 1];
  }
  const Token& next() {
    const Token& token = peek();
    if (position_ < tokens_.size() - 1) ++position_;
    return token;
  }
  bool at_op(std::string_view op) const {
    return peek().type == Token::Type::op && peek().text == op;
  }
  bool at_name(std::string_view name) const {
    return peek().type == Token::Type::name && peek().text == name;
  }
  bool take_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool take_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail(const std::string& message) const { fail_at(peek().offset, message); }
  [[noreturn]] void fail_at(std::size_t offset, const std::string& message) const {
    throw TemplateError(lines_.locate(offset), message);
  }

  static std::string describe(const Token& token) {
    switch (token.type) {
      case Token::Type::text:
        return "template text";
      case Token::Type::variable_begin:
        return "'{{'";
      case Token::Type::variable_end:
        return "'}}'";
      case Token::Type::block_begin:
        return "'{%'";
      case Token::Type::block_end:
        return "'%}'";
      case Token::Type::end:
        return "the end of the template";
      case Token::Type::string:
        return "a string";
      default:
        return "'" + token.text + "'";
    }
  }

  void expect_op(std::string_view op) {
    if (!take_op(op)) fail(cat("expected '", op, "', found ", describe(peek())));
  }
  std::string expect_name() {
    if (peek().type != Token::Type::name) fail(cat("expected a name, found ", describe(peek())));
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != Token::Type::block_end) {
      fail(cat("expected '%}', found ", describe(peek())));
    }
    next();
  }

  // Statements until a {% name %} with a name in `terminators`; leaves the parser just
  // after that name and reports it in `ended_by`. With no terminators, until the end.
  Body parse_body(std::initializer_list<std::string_view> terminators, std::string_view& ended_by) {
    Deeper guard(*this);
    Body body;
    while (true) {
      const Token& token = peek();
      switch (token.type) {
        case Token::Type::end:
          if (terminators.size() == 0) return body;
          // the last terminator is the block's own end: {% endif %}, not {% elif %}
          fail(cat("the template ends inside a block that needs {% ", *(terminators.end() - 1),
                   " %}"));
        case Token::Type::text: {
          auto stmt = make(Stmt::Kind::text, token.offset);
          stmt->text = next().text;
          body.push_back(std::move(stmt));
          break;
        }
        case Token::Type::variable_begin: {
          next();
          auto stmt = make(Stmt::Kind::print, token.offset);
          stmt->expr = tuple_expression(true);  // {{ a, b }} prints a tuple
          if (peek().type != Token::Type::variable_end) {
            fail(cat("expected '}}', found ", describe(peek())));
          }
          next();
          body.push_back(std::move(stmt));
          break;
        }
        case Token::Type::block_begin: {
          next();
          const Token& keyword = peek();
          if (keyword.type != Token::Type::name) {
            fail(cat("expected a statement name, found ", describe(keyword)));
          }
          for (const std::string_view terminator : terminators) {
            if (keyword.text == terminator) {
              ended_by = terminator;
              next();
              return body;
            }
          }
          body.push_back(statement());
          break;
        }
        default:
          fail(cat("unexpected ", describe(token)));
      }
    }
  }

  std::unique_ptr<Stmt> make(Stmt::Kind kind, std::size_t offset) {
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = kind;
    stmt->offset = offset;
    return stmt;
  }

  std::unique_ptr<Stmt> statement() {
    const Token& keyword = next();
    const std::string& name = keyword.text;
    if (name == "if") return if_statement(keyword.offset);
    if (name == "for") return for_statement(keyword.offset);
    if (name == "set") return set_statement(keyword.offset);
    if (name == "macro") return macro_statement(keyword.offset);
    if (name == "call") return call_statement(keyword.offset);
    if (name == "filter") return filter_statement(keyword.offset);
    if (name == "with") return with_statement(keyword.offset);
    if (name == "print") {
      // {% print a, b %} prints a, then b: a block of prints.
      auto block = make(Stmt::Kind::if_chain, keyword.offset);
      block->conditions.push_back(literal(true, keyword.offset));
      block->bodies.emplace_back();
      while (peek().type != Token::Type::block_end) {
        if (!block->bodies[0].empty()) expect_op(",");
        auto stmt = make(Stmt::Kind::print, peek().offset);
        stmt->expr = expression();
        block->bodies[0].push_back(std::move(stmt));
      }
      expect_block_end();
      return block;
    }
    if (name == "break" || name == "continue") {
      // Python's own rule, which jinja2 inherits when it compiles: only inside a loop's
      // body (not its else, not a macro defined in it).
      if (loop_depth_ == 0) fail_at(keyword.offset, cat("{% ", name, " %} outside a loop"));
      expect_block_end();
      return make(name == "break" ? Stmt::Kind::break_loop : Stmt::Kind::continue_loop,
                  keyword.offset);
    }
    if (name == "generation") {
      // transformers' AssistantTracker marks the assistant's text with this block; the
      // marks only matter to return_assistant_tokens_mask, so it renders its body.
      expect_block_end();
      std::string_view ended_by;
      auto stmt = make(Stmt::Kind::if_chain, keyword.offset);
      auto condition = std::make_unique<Expr>();
      condition->kind = Expr::Kind::literal;
      condition->offset = keyword.offset;
      condition->value = true;
      stmt->conditions.push_back(std::move(condition));
      stmt->bodies.push_back(parse_body({"endgeneration"}, ended_by));
      expect_block_end();
      return stmt;
    }
    static constexpr std::string_view kStrays[] = {
        "elif",    "else",      "endif",         "endfor", "endset", "endmacro",
        "endcall", "endfilter", "endgeneration", "endraw", "endwith"};
    for (const std::string_view stray : kStrays) {
      if (name == stray) fail_at(keyword.offset, cat("{% ", name, " %} without its opening block"));
    }
    fail_at(keyword.offset, cat("unsupported statement {% ", name,
                                " %}: chat templates rendered by smol may use if, for, set, "
                                "macro, call, filter, with, print, break, continue and "
                                "generation"));
  }

  // jinja2 reads an if's condition without `x if c else y` (an error there) and takes a
  // tuple (`{% if a, b %}`, always true).
  std::unique_ptr<Stmt> if_statement(std::size_t offset) {
    auto stmt = make(Stmt::Kind::if_chain, offset);
    stmt->conditions.push_back(tuple_expression(false));
    expect_block_end();
    while (true) {
      std::string_view ended_by;
      stmt->bodies.push_back(parse_body({"elif", "else", "endif"}, ended_by));
      if (ended_by == "elif") {
        stmt->conditions.push_back(tuple_expression(false));
        expect_block_end();
      } else if (ended_by == "else") {
        expect_block_end();
        stmt->bodies.push_back(parse_body({"endif"}, ended_by));
        expect_block_end();
        return stmt;
      } else {
        expect_block_end();
        return stmt;
      }
    }
  }

  std::vector<std::string> targets() {
    std::vector<std::string> names;
    const bool parenthesized = take_op("(");
    names.push_back(expect_name());
    while (take_op(",")) names.push_back(expect_name());
    if (parenthesized) expect_op(")");
    return names;
  }

  std::unique_ptr<Stmt> for_statement(std::size_t offset) {
    auto stmt = make(Stmt::Kind::for_loop, offset);
    stmt->targets = targets();
    if (!take_name("in")) fail(cat("expected 'in' in a for loop, found ", describe(peek())));
    // The iterable (a tuple without parentheses too) stops before `if` (a loop filter)
    // and `recursive`.
    stmt->expr = tuple_expression(false, "recursive");
    if (take_name("if")) stmt->filter = expression();
    stmt->recursive = take_name("recursive");
    expect_block_end();
    std::string_view ended_by;
    ++loop_depth_;
    stmt->bodies.push_back(parse_body({"else", "endfor"}, ended_by));
    --loop_depth_;
    if (ended_by == "else") {
      expect_block_end();
      stmt->bodies.push_back(parse_body({"endfor"}, ended_by));
    }
    expect_block_end();
    return stmt;
  }

  std::unique_ptr<Stmt> set_statement(std::size_t offset) {
    auto stmt = make(Stmt::Kind::set, offset);
    if (peek().type == Token::Type::name && peek(1).type == Token::Type::op &&
        peek(1).text == ".") {
      stmt->targets.push_back(next().text);  // {% set ns.attribute = ... %}
      next();
      stmt->text = expect_name();
    } else {
      stmt->targets = targets();
    }
    if (take_op("=")) {
      stmt->expr = tuple_expression(true);
      expect_block_end();
      return stmt;
    }
    if (!stmt->text.empty() || stmt->targets.size() != 1) {
      fail(cat("expected '=' in a set statement, found ", describe(peek())));
    }
    // {% set x | filter | ... %}: the block's text goes through the filters.
    if (take_op("|")) stmt->filter = filter_chain();
    expect_block_end();
    stmt->kind = Stmt::Kind::set_block;
    std::string_view ended_by;
    stmt->bodies.push_back(parse_body({"endset"}, ended_by));
    expect_block_end();
    return stmt;
  }

  // {% with a = 1, b = a %}...{% endwith %}: the values read the outer scope.
  std::unique_ptr<Stmt> with_statement(std::size_t offset) {
    auto stmt = make(Stmt::Kind::with_block, offset);
    while (peek().type != Token::Type::block_end) {
      if (!stmt->targets.empty()) expect_op(",");
      stmt->targets.push_back(expect_name());
      expect_op("=");
      stmt->conditions.push_back(expression());
    }
    expect_block_end();
    std::string_view ended_by;
    stmt->bodies.push_back(parse_body({"endwith"}, ended_by));
    expect_block_end();
    return stmt;
  }

  std::vector<Parameter> parameters() {
    std::vector<Parameter> out;
    expect_op("(");
    while (!take_op(")")) {
      if (!out.empty()) expect_op(",");
      if (take_op(")")) break;
      Parameter parameter;
      parameter.name = expect_name();
      if (take_op("=")) {
        parameter.default_value = expression();
      } else if (!out.empty() && out.back().default_value) {
        fail("non-default argument follows default argument");
      }
      out.push_back(std::move(parameter));
    }
    return out;
  }

  std::unique_ptr<Stmt> macro_statement(std::size_t offset) {
    auto stmt = make(Stmt::Kind::macro, offset);
    stmt->text = expect_name();
    stmt->parameters = parameters();
    expect_block_end();
    std::string_view ended_by;
    const int enclosing_loops = std::exchange(loop_depth_, 0);
    stmt->bodies.push_back(parse_body({"endmacro"}, ended_by));
    loop_depth_ = enclosing_loops;
    expect_block_end();
    special_names(*stmt);
    return stmt;
  }

  std::unique_ptr<Stmt> call_statement(std::size_t offset) {
    auto stmt = make(Stmt::Kind::call_block, offset);
    if (at_op("(")) stmt->parameters = parameters();
    stmt->expr = expression();
    if (stmt->expr->kind != Expr::Kind::call)
      fail_at(stmt->expr->offset, "{% call %} needs a call");
    expect_block_end();
    std::string_view ended_by;
    const int enclosing_loops = std::exchange(loop_depth_, 0);
    stmt->bodies.push_back(parse_body({"endcall"}, ended_by));
    loop_depth_ = enclosing_loops;
    expect_block_end();
    special_names(*stmt);
    return stmt;
  }

  // `name(args) | name2 ...`: a chain of filters with an empty place for the value.
  ExprPtr filter_chain() {
    ExprPtr chain = nullptr;
    do {
      chain = filter_call(std::move(chain), peek().offset);
    } while (take_op("|"));
    return chain;
  }

  // {% filter name(args) | name2 %}...{% endfilter %}
  std::unique_ptr<Stmt> filter_statement(std::size_t offset) {
    auto stmt = make(Stmt::Kind::filter_block, offset);
    stmt->expr = filter_chain();
    expect_block_end();
    std::string_view ended_by;
    stmt->bodies.push_back(parse_body({"endfilter"}, ended_by));
    expect_block_end();
    return stmt;
  }

  // Whether a macro's body reads caller, kwargs or varargs, as jinja2's
  // find_undeclared sees it: a read in source order, unless the name was assigned (or
  // made a parameter) before.
  struct SpecialScan {
    bool caller = false, kwargs = false, varargs = false;
    bool open_caller = true, open_kwargs = true, open_varargs = true;

    void load(const std::string& name) {
      if (name == "caller" && open_caller) caller = true;
      if (name == "kwargs" && open_kwargs) kwargs = true;
      if (name == "varargs" && open_varargs) varargs = true;
    }
    void store(const std::string& name) {
      if (name == "caller") open_caller = false;
      if (name == "kwargs") open_kwargs = false;
      if (name == "varargs") open_varargs = false;
    }
    void scan(const Expr* expr) {
      if (!expr) return;
      if (expr->kind == Expr::Kind::name) load(expr->name);
      for (const auto& item : expr->items) scan(item.get());
      for (const auto& argument : expr->positional) scan(argument.get());
      for (const auto& [name, argument] : expr->named) scan(argument.get());
    }
    void scan(const Body& body) {
      for (const auto& stmt : body) scan(*stmt);
    }
    void scan(const Stmt& stmt) {
      const bool stores_first = stmt.kind == Stmt::Kind::for_loop || stmt.kind == Stmt::Kind::set ||
                                stmt.kind == Stmt::Kind::set_block;
      if (stores_first && stmt.text.empty()) {
        for (const std::string& target : stmt.targets) store(target);
      }
      for (const Parameter& parameter : stmt.parameters) store(parameter.name);
      for (const Parameter& parameter : stmt.parameters) scan(parameter.default_value.get());
      scan(stmt.expr.get());
      for (std::size_t i = 0; i < stmt.conditions.size(); ++i) {
        scan(stmt.conditions[i].get());
        if (i < stmt.bodies.size() && stmt.kind == Stmt::Kind::if_chain) scan(stmt.bodies[i]);
      }
      if (stmt.kind == Stmt::Kind::with_block) {
        for (const std::string& target : stmt.targets) store(target);
      }
      for (std::size_t i = stmt.kind == Stmt::Kind::if_chain ? stmt.conditions.size() : 0;
           i < stmt.bodies.size(); ++i) {
        scan(stmt.bodies[i]);
      }
      scan(stmt.filter.get());
    }
  };

  static void special_names(Stmt& stmt) {
    SpecialScan scan;
    for (const Parameter& parameter : stmt.parameters) scan.store(parameter.name);
    scan.scan(stmt.bodies[0]);
    stmt.uses_caller = scan.caller;
    stmt.uses_kwargs = scan.kwargs;
    stmt.uses_varargs = scan.varargs;
  }

  // ---- expressions ----

  ExprPtr node(Expr::Kind kind, std::size_t offset) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->offset = offset;
    return expr;
  }

  // A finished node's depth from its children's, bounded: a loop such as additive()'s
  // builds `1+1+...+1` as a left-deep tree without recursing, and evaluating or freeing
  // such a tree recurses once per level.
  ExprPtr sealed(ExprPtr expr) {
    int deepest = 0;
    for (const ExprPtr& item : expr->items) {
      if (item) deepest = std::max(deepest, item->depth);
    }
    for (const ExprPtr& argument : expr->positional) deepest = std::max(deepest, argument->depth);
    for (const auto& [name, argument] : expr->named) deepest = std::max(deepest, argument->depth);
    expr->depth = deepest + 1;
    if (expr->depth > kMaxDepth) {
      fail_at(expr->offset, cat("an expression nests deeper than ", kMaxDepth, " levels"));
    }
    return expr;
  }

  ExprPtr expression() { return conditional(true); }

  // jinja2's parse_tuple: `a, b` (a trailing comma allowed) is a tuple where a print, a
  // set's value, an if's condition or a for's iterable stands; a single expression is
  // itself. Without `with_condexpr`, `x if c else y` is not read.
  ExprPtr tuple_expression(bool with_condexpr, std::string_view end_name = {}) {
    const std::size_t offset = peek().offset;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      const Token::Type type = peek().type;
      if (type == Token::Type::variable_end || type == Token::Type::block_end || at_op(")") ||
          (!end_name.empty() && at_name(end_name))) {
        break;
      }
      items.push_back(conditional(with_condexpr));
      if (!at_op(",")) break;
      is_tuple = true;
    }
    if (!is_tuple) {
      if (items.empty()) fail(cat("expected an expression, found ", describe(peek())));
      return std::move(items[0]);
    }
    auto tuple = node(Expr::Kind::tuple, offset);
    tuple->items = std::move(items);
    return sealed(std::move(tuple));
  }

  ExprPtr conditional(bool allow_if) {
    Deeper guard(*this);
    const std::size_t offset = peek().offset;
    ExprPtr value = logical_or();
    while (allow_if && take_name("if")) {
      auto expr = node(Expr::Kind::conditional, offset);
      expr->items.push_back(logical_or());
      expr->items.push_back(std::move(value));
      expr->items.push_back(take_name("else") ? conditional(true) : nullptr);
      value = sealed(std::move(expr));
    }
    return value;
  }

  ExprPtr logical_or() {
    const std::size_t offset = peek().offset;
    ExprPtr left = logical_and();
    while (take_name("or")) {
      auto expr = node(Expr::Kind::logical_or, offset);
      expr->items.push_back(std::move(left));
      expr->items.push_back(logical_and());
      left = sealed(std::move(expr));
    }
    return left;
  }

  ExprPtr logical_and() {
    const std::size_t offset = peek().offset;
    ExprPtr left = logical_not();
    while (take_name("and")) {
      auto expr = node(Expr::Kind::logical_and, offset);
      expr->items.push_back(std::move(left));
      expr->items.push_back(logical_not());
      left = sealed(std::move(expr));
    }
    return left;
  }

  ExprPtr logical_not() {
    Deeper guard(*this);
    const std::size_t offset = peek().offset;
    if (take_name("not")) {
      auto expr = node(Expr::Kind::logical_not, offset);
      expr->items.push_back(logical_not());
      return sealed(std::move(expr));
    }
    return comparison();
  }

  ExprPtr comparison() {
    const std::size_t offset = peek().offset;
    ExprPtr first = additive();
    ExprPtr chain;
    while (true) {
      std::string op;
      if (peek().type == Token::Type::op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
           peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (take_name("in")) {
        op = "in";
      } else if (at_name("not") && peek(1).type == Token::Type::name && peek(1).text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!chain) {
        chain = node(Expr::Kind::compare, offset);
        chain->items.push_back(std::move(first));
      }
      chain->ops.push_back(op);
      chain->items.push_back(additive());
    }
    return chain ? sealed(std::move(chain)) : std::move(first);
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, std::size_t offset) {
    auto expr = node(Expr::Kind::binary, offset);
    expr->name = std::move(op);
    expr->items.push_back(std::move(left));
    expr->items.push_back(std::move(right));
    return sealed(std::move(expr));
  }

  ExprPtr additive() {
    const std::size_t offset = peek().offset;
    ExprPtr left = concatenation();
    while (at_op("+") || at_op("-")) {
      std::string op = next().text;
      left = binary(op, std::move(left), concatenation(), offset);
    }
    return left;
  }

  ExprPtr concatenation() {
    const std::size_t offset = peek().offset;
    ExprPtr left = multiplicative();
    while (take_op("~")) left = binary("~", std::move(left), multiplicative(), offset);
    return left;
  }

  ExprPtr multiplicative() {
    const std::size_t offset = peek().offset;
    ExprPtr left = power();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      std::string op = next().text;
      left = binary(op, std::move(left), power(), offset);
    }
    return left;
  }

  ExprPtr power() {
    const std::size_t offset = peek().offset;
    ExprPtr left = unary(true);
    while (take_op("**")) left = binary("**", std::move(left), unary(true), offset);
    return left;
  }

  ExprPtr unary(bool with_filters) {
    Deeper guard(*this);
    const std::size_t offset = peek().offset;
    ExprPtr value;
    if (at_op("-") || at_op("+")) {
      const bool minus = next().text == "-";
      value = node(minus ? Expr::Kind::negate : Expr::Kind::plus, offset);
      value->items.push_back(unary(false));
      value = sealed(std::move(value));
    } else {
      value = primary();
    }
    value = postfix(std::move(value));
    if (with_filters) value = filters_and_tests(std::move(value));
    return value;
  }

  ExprPtr primary() {
    const Token& token = peek();
    switch (token.type) {
      case Token::Type::name: {
        next();
        const std::string& name = token.text;
        if (name == "true" || name == "True") return literal(true, token.offset);
        if (name == "false" || name == "False") return literal(false, token.offset);
        if (name == "none" || name == "None") return literal(None{}, token.offset);
        auto expr = node(Expr::Kind::name, token.offset);
        expr->name = name;
        return expr;
      }
      case Token::Type::string: {
        std::string text = next().text;
        while (peek().type == Token::Type::string) text += next().text;  // "a" "b" is "ab"
        return literal(Value(std::move(text)), token.offset);
      }
      case Token::Type::integer: {
        next();
        std::int64_t value = 0;
        const auto [end, error] =
            std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
        if (error != std::errc() || end != token.text.data() + token.text.size()) {
          fail_at(token.offset, cat("the integer ", token.text, " is too large"));
        }
        return literal(Value(value), token.offset);
      }
      case Token::Type::floating: {
        next();
        return literal(Value(std::strtod(token.text.c_str(), nullptr)), token.offset);
      }
      case Token::Type::op: {
        if (take_op("(")) {
          if (take_op(")")) return node(Expr::Kind::tuple, token.offset);
          ExprPtr first = expression();
          if (!at_op(",")) {
            expect_op(")");
            return first;
          }
          auto tuple = node(Expr::Kind::tuple, token.offset);
          tuple->items.push_back(std::move(first));
          while (take_op(",")) {
            if (at_op(")")) break;
            tuple->items.push_back(expression());
          }
          expect_op(")");
          return sealed(std::move(tuple));
        }
        if (take_op("[")) {
          auto list = node(Expr::Kind::list, token.offset);
          while (!take_op("]")) {
            if (!list->items.empty()) expect_op(",");
            if (take_op("]")) break;
            list->items.push_back(expression());
          }
          return sealed(std::move(list));
        }
        if (take_op("{")) {
          auto dict = node(Expr::Kind::dict, token.offset);
          while (!take_op("}")) {
            if (!dict->items.empty()) expect_op(",");
            if (take_op("}")) break;
            dict->items.push_back(expression());
            expect_op(":");
            dict->items.push_back(expression());
          }
          return sealed(std::move(dict));
        }
        break;
      }
      default:
        break;
    }
    fail(cat("expected a value, found ", describe(token)));
  }

  ExprPtr literal(Value value, std::size_t offset) {
    auto expr = node(Expr::Kind::literal, offset);
    expr->value = std::move(value);
    return expr;
  }

  ExprPtr postfix(ExprPtr value) {
    while (true) {
      const std::size_t offset = peek().offset;
      if (take_op(".")) {
        auto expr = node(Expr::Kind::attribute, offset);
        if (peek().type == Token::Type::integer) {  // foo.0 is foo[0]
          expr->kind = Expr::Kind::item;
          expr->items.push_back(std::move(value));
          expr->items.push_back(primary());
        } else {
          expr->name = expect_name();
          expr->items.push_back(std::move(value));
        }
        value = sealed(std::move(expr));
      } else if (take_op("[")) {
        value = subscript(std::move(value), offset);
      } else if (at_op("(")) {
        value = call(std::move(value), offset);
      } else {
        return value;
      }
    }
  }

  ExprPtr subscript(ExprPtr target, std::size_t offset) {
    ExprPtr parts[3];
    int colons = 0;
    while (!at_op("]")) {
      if (take_op(":")) {
        if (++colons > 2) fail("a slice has at most two ':'");
        continue;
      }
      if (parts[colons]) fail(cat("expected ']' or ':', found ", describe(peek())));
      parts[colons] = expression();
    }
    next();
    if (colons == 0) {
      if (!parts[0]) fail_at(offset, "an empty subscript []");
      auto expr = node(Expr::Kind::item, offset);
      expr->items.push_back(std::move(target));
      expr->items.push_back(std::move(parts[0]));
      return sealed(std::move(expr));
    }
    auto expr = node(Expr::Kind::slice, offset);
    expr->items.push_back(std::move(target));
    for (ExprPtr& part : parts) expr->items.push_back(std::move(part));
    return sealed(std::move(expr));
  }

  void arguments(Expr& expr) {
    expect_op("(");
    while (!take_op(")")) {
      if (!expr.positional.empty() || !expr.named.empty()) expect_op(",");
      if (take_op(")")) break;
      if (at_op("*") || at_op("**")) fail("*args and **kwargs in calls are not supported");
      if (peek().type == Token::Type::name && peek(1).type == Token::Type::op &&
          peek(1).text == "=") {
        std::string name = next().text;
        next();
        expr.named.emplace_back(std::move(name), expression());
      } else {
        if (!expr.named.empty()) fail("a positional argument after a keyword argument");
        expr.positional.push_back(expression());
      }
    }
  }

  ExprPtr call(ExprPtr callee, std::size_t offset) {
    auto expr = node(Expr::Kind::call, offset);
    expr->items.push_back(std::move(callee));
    arguments(*expr);
    return sealed(std::move(expr));
  }

  // `name` or `name(args)` after a '|'; `target` is null in a {% filter %} block.
  ExprPtr filter_call(ExprPtr target, std::size_t offset) {
    auto expr = node(Expr::Kind::filter, offset);
    expr->name = expect_name();
    while (take_op(".")) expr->name += "." + expect_name();
    expr->items.push_back(std::move(target));
    if (at_op("(")) arguments(*expr);
    return sealed(std::move(expr));
  }

  ExprPtr filters_and_tests(ExprPtr value) {
    while (true) {
      const std::size_t offset = peek().offset;
      if (take_op("|")) {
        value = filter_call(std::move(value), offset);
      } else if (take_name("is")) {
        auto expr = node(Expr::Kind::test, offset);
        expr->negated = take_name("not");
        expr->name = expect_name();
        expr->items.push_back(std::move(value));
        if (at_op("(")) {
          arguments(*expr);
        } else if ((peek().type == Token::Type::name || peek().type == Token::Type::string ||
                    peek().type == Token::Type::integer || peek().type == Token::Type::floating ||
                    at_op("[") || at_op("{")) &&
                   !at_name("else") && !at_name("or") && !at_name("and")) {
          if (at_name("is")) fail("tests cannot be chained with 'is'");
          expr->positional.push_back(postfix(primary()));
        }
        value = sealed(std::move(expr));
      } else if (at_op("(")) {
        value = call(std::move(value), offset);
      } else {
        return value;
      }
    }
  }

  std::vector<Token> tokens_;
  std::size_t position_ = 0;
  const LineIndex& lines_;
  int depth_ = 0;
  int loop_depth_ = 0;  // for bodies around the statement being parsed, within its macro
};

}  // namespace smol::jinja
