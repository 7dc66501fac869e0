// libFuzzer target: the grammar engine's input parsers. The first byte picks what the
// rest is: GBNF text (parse_gbnf) or a JSON schema (json_schema_to_gbnf). Every input
// must end in a grammar or a smol::Error: never a crash, a hang or another exception.
// A grammar that parses is then run over the input's own bytes by the recognizer, and
// the GBNF a schema converts to must parse (else the converter wrote a broken grammar).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "smol/core/error.hpp"
#include "smol/grammar/gbnf.hpp"
#include "smol/grammar/json_schema.hpp"
#include "smol/grammar/recognizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    std::shared_ptr<const smol::Grammar> grammar;
    try {
      grammar = smol::parse_gbnf(text);
    } catch (const smol::Error&) {
      return 0;
    }
    smol::GrammarRecognizer recognizer(grammar);
    smol::GrammarState state = recognizer.initial();
    recognizer.advance(state, text.substr(0, 256));
    return 0;
  }
  std::string gbnf;
  try {
    gbnf = smol::json_schema_to_gbnf(text);
  } catch (const smol::Error&) {
    return 0;
  }
  try {
    smol::parse_gbnf(gbnf);
  } catch (const smol::Error&) {
    std::abort();  // a schema the converter took must give a grammar that parses
  }
  return 0;
}
