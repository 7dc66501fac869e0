// JSON text nested `levels` deep, for the tests of the nesting budgets: `open` repeated,
// then `inside`, then `close` repeated (e.g. `{"anyOf": [`, `{}`, `]}`).
#pragma once

#include <string>

namespace smol::test {

inline std::string nested(int levels, const std::string& open, const std::string& inside,
                          const std::string& close) {
  std::string text;
  for (int i = 0; i < levels; ++i) text += open;
  text += inside;
  for (int i = 0; i < levels; ++i) text += close;
  return text;
}

}  // namespace smol::test
