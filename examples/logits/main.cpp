// smol-logits: runs a model over a token sequence and writes its logits, in the
// fixtures' format (rows of n_vocab little-endian float32), for checking smol
// against llama.cpp or against itself.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "smol/core/error.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "smol/text/gguf_vocabulary.hpp"
#include "smol/text/tokenizer.hpp"

namespace smol_logits {

constexpr const char* kDescription =
    "usage: smol-logits -m FILE (--tokens 1,2,3 | --prompt TEXT) [--all-positions]\n"
    "                   [--decode-from N] [--kv-type f32|f16|bf16|q8_0|q4_0]\n"
    "                   [--f32-activations] [-t N] -o OUT.bin\n"
    "\n"
    "Writes the logits of the last position (or of every position) as little-endian\n"
    "float32 rows of n_vocab values and prints the top 5 tokens of each row. The tokens\n"
    "run as one prefill, or with --decode-from N the first N as one prefill and each\n"
    "later token as a decode step of its own, as a generated reply runs.\n"
    "Exit status: 0 done, 1 a file that cannot be read or written, 2 a bad command line.";

struct Options {
  std::string model_path;
  std::vector<std::int32_t> tokens;
  std::optional<std::string> prompt;
  bool all_positions = false;
  std::optional<std::size_t> decode_from;  // tokens in the prefill; the rest decoded one by one
  smol::KvTypes kv_type = smol::KvType::f16;
  bool f32_activations = false;
  int threads = 0;
  std::string output_path;
  smol::RopeOverrides rope;
};

std::optional<int> parse_options(int argc, char** argv, Options& options) {
  smol::cli::Program program("smol-logits", kDescription);
  CLI::App& app = program.app;
  smol::cli::add_model(program, options.model_path, "GGUF model file");
  CLI::Option* tokens =
      app.add_option("--tokens", options.tokens, "the token ids to run, separated by commas")
          ->type_name("IDS")
          ->delimiter(',')
          ->allow_extra_args(false)
          ->transform(smol::cli::integer(0, INT32_MAX));
  CLI::Option* prompt =
      app.add_option_function<std::string>(
             "-p,--prompt", [&options](const std::string& text) { options.prompt = text; },
             "tokenize TEXT (special tokens parsed) and run that")
          ->type_name("TEXT");
  app.add_flag("--all-positions", options.all_positions,
               "a row for every position, not only the last");
  app.add_option_function<std::size_t>(
         "--decode-from", [&options](std::size_t n) { options.decode_from = n; },
         "prefill the first N tokens, then run each later one as a\n"
         "decode step (the path a generated reply takes)")
      ->type_name("N")
      ->transform(smol::cli::integer(1, INT32_MAX));
  smol::cli::add_kv_types(program, options.kv_type);
  smol::cli::add_rope_flags(program, options.rope);
  app.add_flag("--f32-activations", options.f32_activations,
               "keep activations in f32 instead of quantizing them to Q8");
  smol::cli::add_threads(program, options.threads);
  CLI::Option* output =
      app.add_option("-o,--output", options.output_path, "where to write the rows (required)")
          ->type_name("OUT.bin");
  program.check([tokens, prompt, output] {
    if (output->count() == 0) smol::cli::usage_error("no output given: use -o OUT.bin");
    if ((tokens->count() == 0) == (prompt->count() == 0)) {
      smol::cli::usage_error("give exactly one of --tokens and --prompt");
    }
  });
  return program.parse(argc, argv);
}

// Opened before the model is read, so that a path that cannot be written fails at once.
std::ofstream open_output(const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) smol::fail(path, ": cannot open for writing (", std::strerror(errno), ")");
  return out;
}

void write_rows(std::ofstream& out, const std::string& path, std::span<const float> logits) {
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
  std::ofstream out = open_output(options.output_path);
  const smol::Model model = smol::Model::open(options.model_path, {.rope = options.rope});
  std::vector<std::int32_t> tokens;
  if (!options.prompt) {
    tokens = options.tokens;
  } else {
    const smol::Tokenizer tokenizer(smol::load_vocabulary(model.file()));
    tokens = tokenizer.encode(*options.prompt, {.parse_special = true});
  }
  if (tokens.empty()) smol::fail("the prompt has no tokens");
  const std::size_t prefilled = options.decode_from.value_or(tokens.size());
  if (prefilled > tokens.size()) {
    std::fprintf(stderr, "smol-logits: --decode-from %zu: there are only %zu tokens\n", prefilled,
                 tokens.size());
    return 2;
  }

  smol::Context context(options.threads);
  context.activation_precision =
      options.f32_activations ? smol::ActivationPrecision::f32 : smol::ActivationPrecision::q8;
  smol::Transformer session(model, context,
                            {.context = std::min(model.config().max_context(), tokens.size()),
                             .kv_type = options.kv_type});
  const auto which = options.all_positions ? smol::LogitsFor::all : smol::LogitsFor::last;
  const std::span<const std::int32_t> all_tokens(tokens);
  const std::span<const float> prefill = session.forward(all_tokens.first(prefilled), 0, which);
  std::vector<float> kept(prefill.begin(), prefill.end());
  for (std::size_t pos = prefilled; pos < tokens.size(); ++pos) {
    const std::span<const float> step = session.forward(all_tokens.subspan(pos, 1), pos);
    if (!options.all_positions) kept.clear();  // only the last row is written
    kept.insert(kept.end(), step.begin(), step.end());
  }
  const std::span<const float> logits(kept);

  const std::size_t n_vocab = model.config().n_vocab;
  const std::size_t rows = logits.size() / n_vocab;
  const std::size_t first_pos = tokens.size() - rows;
  for (std::size_t r = 0; r < rows; ++r) {
    print_top5(first_pos + r, tokens[first_pos + r], logits.subspan(r * n_vocab, n_vocab));
  }
  write_rows(out, options.output_path, logits);
  std::fprintf(stderr, "wrote %zu rows of %zu logits to %s\n", rows, n_vocab,
               options.output_path.c_str());
  return 0;
}

// smol-logits's entry: the executable's own main calls it (cmake/SmolPrograms.cmake).
int main(int argc, char** argv) {
  Options options;
  if (const std::optional<int> status = parse_options(argc, argv, options)) return *status;
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "smol-logits: error: %s\n", error.what());
    return 1;
  }
}

}  // namespace smol_logits
