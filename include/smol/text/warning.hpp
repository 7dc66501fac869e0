// Where the text layer reports recoverable surprises (an unknown pre-tokenizer or
// chat template): to a caller-supplied handler, or to stderr when there is none.
#pragma once

#include <functional>
#include <iostream>
#include <string_view>

namespace smol {

using WarningHandler = std::function<void(std::string_view)>;

inline void report_warning(const WarningHandler& handler, std::string_view message) {
  if (handler) {
    handler(message);
  } else {
    std::cerr << "smol: warning: " << message << '\n';
  }
}

}  // namespace smol
