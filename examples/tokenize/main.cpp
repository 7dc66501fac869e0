// smol-tokenize: the token ids of a text, like llama-tokenize.
//
//   smol-tokenize -m model.gguf "Hello world"
//   smol-tokenize -m model.gguf --ids -f prompt.txt
//
// Needs only the tokenizer metadata, so a vocabulary-only GGUF file works too.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"
#include "smol/text/unicode.hpp"
#include "text_file.hpp"

namespace smol_tokenize {

constexpr const char* kDescription = R"(usage: smol-tokenize -m FILE [options] TEXT
       smol-tokenize -m FILE [options] -f TEXT_FILE

Prints the tokens of TEXT as "id -> 'piece'" lines, like llama-tokenize. A TEXT that
starts with a dash follows -- (smol-tokenize -m FILE -- "-x").)";

struct Options {
  std::string model;
  std::vector<std::string> text;  // the positional arguments: one is right
  std::optional<std::string> text_file;
  bool ids_only = false;
  bool bos = false;
  bool parse_special = true;
};

std::optional<int> parse_arguments(int argc, char** argv, Options& options) {
  smol::cli::Program program("smol-tokenize", kDescription);
  CLI::App& app = program.app;
  smol::cli::add_model(program, options.model,
                       "GGUF file with a tokenizer (one without tensors is enough)");
  app.add_option_function<std::string>(
         "-f,--file", [&options](const std::string& path) { options.text_file = path; },
         "tokenize the bytes of FILE exactly, instead of TEXT")
      ->type_name("FILE");
  app.add_flag("--ids", options.ids_only, "print only the ids, as a list: [1, 2, 3]");
  app.add_flag("--bos", options.bos, "start with the bos token (off by default)");
  app.add_flag_callback(
      "--no-special,--no-parse-special", [&options] { options.parse_special = false; },
      "special-token spellings in the text (<|im_start|>, ...) stay\n"
      "plain text (llama-tokenize: --no-parse-special)");
  app.add_option("text", options.text)->group("");  // described in the usage line
  program.check([&options] {
    if (options.text.size() > 1) smol::cli::usage_error("give the text as one argument (quote it)");
    if (options.text.empty() == !options.text_file) {
      smol::cli::usage_error("give either a TEXT or -f FILE");
    }
  });
  return program.parse(argc, argv);
}

// A piece as llama-tokenize shows it, except that bytes which are not valid UTF-8 on
// their own (half a character) are written as \xNN rather than sent raw.
std::string printable(std::string_view bytes) {
  std::string out;
  for (std::size_t pos = 0; pos < bytes.size();) {
    const auto decoded = smol::unicode::decode_utf8(bytes, pos);
    if (decoded.status == smol::unicode::Utf8Status::valid) {
      out.append(bytes.substr(pos, decoded.length));
      pos += decoded.length;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(bytes[pos]));
      out += escaped;
      ++pos;
    }
  }
  return out;
}

// smol-tokenize's entry: the executable's own main calls it (cmake/SmolPrograms.cmake).
int main(int argc, char** argv) {
  Options options;
  if (const std::optional<int> status = parse_arguments(argc, argv, options)) return *status;
  try {
    if (std::filesystem::is_directory(options.model)) {
      smol::fail(options.model, " is a directory, not a GGUF file");
    }
    const auto file = smol::gguf::GgufFile::open(options.model);
    const smol::Tokenizer tokenizer(smol::load_vocabulary(file));
    const std::string text =
        options.text_file ? smol::cli::read_text_file(*options.text_file) : options.text.front();
    const auto ids =
        tokenizer.encode(text, {.parse_special = options.parse_special, .add_bos = options.bos});
    if (options.ids_only) {
      std::string list = "[";
      for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) list += ", ";
        list += std::to_string(ids[i]);
      }
      std::printf("%s]\n", list.c_str());
    } else {
      for (const smol::TokenId id : ids) {
        const std::string piece = tokenizer.token_to_piece(id, {.render_special = true});
        std::printf("%6d -> '%s'\n", id, printable(piece).c_str());
      }
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "smol-tokenize: %s\n", error.what());
    return 1;
  }
}

}  // namespace smol_tokenize
