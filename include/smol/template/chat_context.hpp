// What transformers' apply_chat_template adds to a chat template's context beyond the
// conversation: raise_exception(message), with which a template refuses a conversation,
// and strftime_now(format), with which Llama 3.x and others date their system prompt.
#pragma once

#include <ctime>
#include <optional>
#include <string>

#include "smol/template/jinja_value.hpp"

namespace smol {

// `fixed_utc`: the instant strftime_now formats, in UTC (tests pin it); absent, the
// local time now, as transformers' datetime.now() gives.
inline void add_transformers_globals(jinja::Dict& context,
                                     std::optional<std::time_t> fixed_utc = std::nullopt) {
  context.set("raise_exception",
              jinja::Value::function("raise_exception", [](jinja::Arguments& args) -> jinja::Value {
                throw jinja::TemplateRaised(args.positional.empty()
                                                ? "the template raised an exception"
                                                : jinja::to_str(args.positional[0]));
              }));
  context.set(
      "strftime_now",
      jinja::Value::function("strftime_now", [fixed_utc](jinja::Arguments& args) -> jinja::Value {
        if (args.positional.empty() || !args.positional[0].is_string()) {
          fail("strftime_now needs a format string");
        }
        std::tm parts{};
        if (fixed_utc) {
          gmtime_r(&*fixed_utc, &parts);
        } else {
          const std::time_t now = std::time(nullptr);
          localtime_r(&now, &parts);
        }
        char buffer[256];
        const std::size_t n =
            std::strftime(buffer, sizeof buffer, args.positional[0].as_string().c_str(), &parts);
        return std::string(buffer, n);
      }));
}

}  // namespace smol
