// How deeply JSON text nests, read before it is parsed.
//
// Why: parsing deep JSON is safe with nlohmann-json (its parser keeps its own stack), but
// most of what is done with the value afterwards recurses once per level: copying it,
// dumping it, comparing it, converting a schema. A request of a few kilobytes can nest
// thousands of levels deep, and each level costs a stack frame or more, so the depth is
// bounded before any of that runs. A scan over the bytes is all it takes: brackets
// outside strings, with string escapes skipped. Text that is not valid JSON may be
// measured wrongly, which is harmless: the parser refuses it next.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace smol {

// The byte offset of the first `[` or `{` that opens level `limit + 1` (the outermost
// value's bracket is level 1); nullopt when the text nests `limit` levels or fewer.
inline std::optional<std::size_t> json_nesting_beyond(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > limit) return i;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return std::nullopt;
}

}  // namespace smol
