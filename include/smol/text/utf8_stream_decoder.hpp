// Turns a stream of token pieces (arbitrary bytes) into printable UTF-8.
//
// A byte-level token often ends in the middle of a character ("🙂" is four bytes
// spread over several tokens), so a streaming printer must hold back an incomplete
// sequence until the rest arrives. Bytes that can never become valid UTF-8 are
// replaced by U+FFFD here, so raw invalid bytes never reach a terminal.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "smol/text/unicode.hpp"

namespace smol {

class Utf8StreamDecoder {
 public:
  // Returns the text that is complete so far; keeps an unfinished character.
  std::string push(std::string_view bytes) {
    pending_.append(bytes);
    std::string out;
    std::size_t pos = 0;
    while (pos < pending_.size()) {
      const auto decoded = unicode::decode_utf8(pending_, pos);
      if (decoded.status == unicode::Utf8Status::incomplete) break;
      if (decoded.status == unicode::Utf8Status::valid) {
        out.append(pending_, pos, decoded.length);
      } else {
        unicode::append_utf8(out, unicode::kReplacementCharacter);
      }
      pos += decoded.length;
    }
    pending_.erase(0, pos);
    return out;
  }

  // End of stream: an unfinished character can no longer complete.
  std::string flush() {
    std::string out =
        pending_.empty() ? std::string() : unicode::to_utf8(unicode::kReplacementCharacter);
    pending_.clear();
    return out;
  }

  bool has_pending() const { return !pending_.empty(); }

 private:
  std::string pending_;  // at most 3 bytes: a well-formed prefix of one character
};

}  // namespace smol
