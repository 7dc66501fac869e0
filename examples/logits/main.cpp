// smol-logits: runs a model over a token sequence and writes its logits, in the
// fixtures' format (rows of n_vocab little-endian float32), for checking smol
// against llama.cpp or against itself.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"

namespace {

constexpr const char* kUsage =
    "usage: smol-logits -m FILE (--tokens 1,2,3 | --prompt TEXT) [--all-positions]\n"
    "                   [--kv-type f16|f32] [--f32-activations] [-t N] -o OUT.bin\n"
    "Writes the logits of the last position (or of every position) as little-endian\n"
    "float32 rows of n_vocab values and prints the top 5 tokens of each row.\n";

struct Options {
  std::string model_path;
  std::optional<std::string> tokens_text;
  std::optional<std::string> prompt;
  bool all_positions = false;
  smol::KvType kv_type = smol::KvType::f16;
  bool f32_activations = false;
  int threads = 0;
  std::string output_path;
};

std::vector<std::int32_t> parse_token_list(const std::string& text) {
  std::vector<std::int32_t> tokens;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    std::size_t used = 0;
    long value = 0;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || value < 0 || value > INT32_MAX) {
      smol::fail("--tokens: \"", item, "\" is not a token id");
    }
    tokens.push_back(static_cast<std::int32_t>(value));
    at = comma + 1;
  }
  return tokens;
}

Options parse_options(int argc, char** argv) {
  Options options;
  const auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) smol::fail(argv[i], " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-m" || arg == "--model") {
      options.model_path = value(i);
    } else if (arg == "--tokens") {
      options.tokens_text = value(i);
    } else if (arg == "-p" || arg == "--prompt") {
      options.prompt = value(i);
    } else if (arg == "--all-positions") {
      options.all_positions = true;
    } else if (arg == "--kv-type") {
      const std::string type = value(i);
      if (type != "f16" && type != "f32") smol::fail("--kv-type must be f16 or f32, not ", type);
      options.kv_type = type == "f16" ? smol::KvType::f16 : smol::KvType::f32;
    } else if (arg == "--f32-activations") {
      options.f32_activations = true;
    } else if (arg == "-t" || arg == "--threads") {
      const std::string count = value(i);
      if (count.empty() || count.size() > 4 ||
          count.find_first_not_of("0123456789") != std::string::npos) {
        smol::fail("-t needs a thread count, not \"", count, "\"");
      }
      options.threads = std::stoi(count);
    } else if (arg == "-o" || arg == "--output") {
      options.output_path = value(i);
    } else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      smol::fail("unknown argument ", arg, " (see --help)");
    }
  }
  if (options.model_path.empty()) smol::fail("-m FILE is required");
  if (options.output_path.empty()) smol::fail("-o OUT.bin is required");
  if (options.tokens_text.has_value() == options.prompt.has_value()) {
    smol::fail("give exactly one of --tokens and --prompt");
  }
  return options;
}

void write_rows(const std::string& path, std::span<const float> logits) {
  std::ofstream out(path, std::ios::binary);
  if (!out) smol::fail(path, ": cannot open for writing");
  static_assert(std::endian::native == std::endian::little, "the format is little-endian");
  out.write(reinterpret_cast<const char*>(logits.data()),
            static_cast<std::streamsize>(logits.size_bytes()));
  if (!out) smol::fail(path, ": write failed");
}

void print_top5(std::size_t pos, std::int32_t token, std::span<const float> row) {
  std::vector<std::int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto by_logit = [&](std::int32_t a, std::int32_t b) {
    return row[static_cast<std::size_t>(a)] > row[static_cast<std::size_t>(b)] ||
           (row[static_cast<std::size_t>(a)] == row[static_cast<std::size_t>(b)] && a < b);
  };
  const std::size_t shown = std::min<std::size_t>(5, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(shown), ids.end(),
                    by_logit);
  std::printf("pos %zu token %d:", pos, token);
  for (std::size_t k = 0; k < shown; ++k) {
    std::printf(" %d (%.4f)", ids[k], static_cast<double>(row[static_cast<std::size_t>(ids[k])]));
  }
  std::printf("\n");
}

int run(const Options& options) {
  const smol::Model model = smol::Model::open(options.model_path);
  std::vector<std::int32_t> tokens;
  if (options.tokens_text) {
    tokens = parse_token_list(*options.tokens_text);
  } else {
    const smol::Tokenizer tokenizer(smol::load_vocabulary(model.file()));
    tokens = tokenizer.encode(*options.prompt, {.parse_special = true});
  }
  if (tokens.empty()) smol::fail("the prompt has no tokens");

  smol::Context context(options.threads);
  context.activation_precision =
      options.f32_activations ? smol::ActivationPrecision::f32 : smol::ActivationPrecision::q8;
  smol::Transformer session(
      model, context,
      {.context = std::min(model.config().n_ctx_train, tokens.size()), .kv_type = options.kv_type});
  const auto which = options.all_positions ? smol::LogitsFor::all : smol::LogitsFor::last;
  const std::span<const float> logits = session.forward(tokens, 0, which);

  const std::size_t n_vocab = model.config().n_vocab;
  const std::size_t rows = logits.size() / n_vocab;
  const std::size_t first_pos = tokens.size() - rows;
  for (std::size_t r = 0; r < rows; ++r) {
    print_top5(first_pos + r, tokens[first_pos + r], logits.subspan(r * n_vocab, n_vocab));
  }
  write_rows(options.output_path, logits);
  std::fprintf(stderr, "wrote %zu rows of %zu logits to %s\n", rows, n_vocab,
               options.output_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_options(argc, argv));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "smol-logits: error: %s\n", error.what());
    return 1;
  }
}
