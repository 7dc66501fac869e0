// smol-tokenize: the token ids of a text, like llama-tokenize.
//
//   smol-tokenize -m model.gguf "Hello world"
//   smol-tokenize -m model.gguf --ids -f prompt.txt
//
// Needs only the tokenizer metadata, so a vocabulary-only GGUF file works too.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/gguf/gguf_file.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"
#include "smol/text/unicode.hpp"

namespace {

constexpr std::string_view kUsage = R"(usage: smol-tokenize -m FILE [options] TEXT
       smol-tokenize -m FILE [options] -f TEXT_FILE

Prints the tokens of TEXT as "id -> 'piece'" lines, like llama-tokenize.

  -m, --model FILE   GGUF file with a tokenizer (one without tensors is enough)
  -f, --file FILE    tokenize the bytes of FILE exactly, instead of TEXT
  --ids              print only the ids, as a list: [1, 2, 3]
  --bos              start with the bos token (off by default)
  --no-special       special-token spellings in the text (<|im_start|>, ...) stay
                     plain text (llama-tokenize: --no-parse-special)
  -h, --help         show this text
)";

struct Options {
  std::string model;
  std::optional<std::string> text;
  std::optional<std::string> text_file;
  bool ids_only = false;
  bool bos = false;
  bool parse_special = true;
};

struct UsageError {
  std::string message;
};

Options parse_arguments(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{std::string(arg) + " needs a value"};
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage.data(), stdout);
      std::exit(0);
    } else if (arg == "-m" || arg == "--model") {
      options.model = value();
    } else if (arg == "-f" || arg == "--file") {
      options.text_file = value();
    } else if (arg == "--ids") {
      options.ids_only = true;
    } else if (arg == "--bos") {
      options.bos = true;
    } else if (arg == "--no-special" || arg == "--no-parse-special") {
      options.parse_special = false;
    } else if (arg.starts_with("-") && arg.size() > 1) {
      throw UsageError{"unknown option " + std::string(arg)};
    } else if (options.text) {
      throw UsageError{"give the text as one argument (quote it)"};
    } else {
      options.text = std::string(arg);
    }
  }
  if (options.model.empty()) throw UsageError{"no model: use -m FILE"};
  if (options.text.has_value() == options.text_file.has_value()) {
    throw UsageError{"give either a TEXT or -f FILE"};
  }
  return options;
}

std::string read_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) smol::fail(path, " is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) smol::fail("cannot open ", path);
  return std::string(std::istreambuf_iterator<char>(in), {});
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

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse_arguments(argc, argv);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "smol-tokenize: %s\n%s", error.message.c_str(), kUsage.data());
    return 2;
  }
  try {
    if (std::filesystem::is_directory(options.model)) {
      smol::fail(options.model, " is a directory, not a GGUF file");
    }
    const auto file = smol::gguf::GgufFile::open(options.model);
    const smol::Tokenizer tokenizer(smol::load_vocabulary(file));
    const std::string text = options.text ? *options.text : read_file(*options.text_file);
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
