// A Jinja template, parsed once and rendered many times: smol's own engine for the chat
// templates GGUF files carry.
//
// Why write one: a chat template is a small program in jinja2's language, and every
// model family's prompt layout, tool format and reasoning switch lives in its template.
// There is no maintained C++ Jinja library in Debian, and the prompt must match what
// Hugging Face's jinja2 renders byte for byte (Python's str, repr and json.dumps
// included), so smol implements the part of the language chat templates use, and
// refuses the rest by name and place (jinja_parser.hpp lists it).
//
//   jinja::Template chat(file_template_text);          // throws TemplateError
//   jinja::Dict context;
//   context.set("messages", ...);
//   std::string prompt = chat.render(context);          // TemplateError, TemplateRaised
//
// The context is jinja2's: what the caller passes (messages, tools, add_generation_prompt,
// bos_token, raise_exception, ...) and jinja2's own globals (range, namespace, dict).
#pragma once

#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

#include "smol/template/jinja_ast.hpp"
#include "smol/template/jinja_interpreter.hpp"
#include "smol/template/jinja_lexer.hpp"
#include "smol/template/jinja_parser.hpp"
#include "smol/template/jinja_value.hpp"

namespace smol::jinja {

class Template {
 public:
  static constexpr std::size_t kMaxSourceBytes = 1u << 20;

  explicit Template(std::string_view source)
      : source_(check_source(source)), lines_(source_), body_(parse(source_, lines_)) {}

  // Not copyable: the parsed body points into nothing, but the line index views source_.
  Template(const Template&) = delete;
  Template& operator=(const Template&) = delete;

  std::string render(const Dict& context, const RenderLimits& limits = {}) const {
    try {
      Interpreter interpreter(lines_, context, limits);
      return interpreter.run(body_);
    } catch (const std::bad_alloc&) {
      // The budgets bound what a template builds; this is the net under them (a
      // machine with less memory than they allow).
      throw TemplateError({}, "the template ran out of memory");
    } catch (const std::length_error&) {
      throw TemplateError({}, "the template built a value longer than memory allows");
    }
  }

  const std::string& source() const { return source_; }

 private:
  static std::string check_source(std::string_view source) {
    if (source.size() > kMaxSourceBytes) {
      throw TemplateError(
          {}, cat("the template is ", source.size(), " bytes, more than ", kMaxSourceBytes));
    }
    for (std::size_t at = 0; at < source.size();) {
      const auto decoded = unicode::decode_utf8(source, at);
      if (decoded.status != unicode::Utf8Status::valid) {
        throw TemplateError({}, cat("the template is not valid UTF-8 at byte ", at));
      }
      at += decoded.length;
    }
    return normalize_newlines(source);
  }

  static Body parse(std::string_view source, const LineIndex& lines) {
    Lexer lexer(source, lines);
    Parser parser(lexer.tokens(), lines);
    return parser.parse();
  }

  std::string source_;
  LineIndex lines_;
  Body body_;
};

}  // namespace smol::jinja
