// smol-perplexity: perplexity of a model over a text, with llama-perplexity's
// protocol so the numbers compare: the tokens are cut into chunks of -c tokens,
// each chunk is evaluated from an empty cache (its first token replaced by bos when
// the model adds one), and only the second half of each chunk is scored, so every
// scored token sees at least c/2 tokens of context.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <optional>
#include <span>
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
#include "text_file.hpp"

namespace smol_perplexity {

constexpr const char* kDescription =
    "usage: smol-perplexity -m FILE (-f TEXT | --tokens-file IDS) [-c 512] [-b N] [-t N]\n"
    "       [--kv-type f32|f16|bf16|q8_0|q4_0] [--f32-activations]\n"
    "\n"
    "Perplexity of the model over a text, with llama-perplexity's protocol.\n"
    "IDS holds token ids separated by commas or white space.";

struct Options {
  std::string model_path;
  std::string text_path;
  std::string tokens_path;
  std::size_t n_ctx = 512;
  std::size_t n_batch = 0;  // 0: the whole chunk in one pass
  int threads = 0;
  smol::KvTypes kv_type = smol::KvType::f16;
  bool f32_activations = false;
  smol::RopeOverrides rope;
};

std::optional<int> parse_options(int argc, char** argv, Options& options) {
  smol::cli::Program program("smol-perplexity", kDescription);
  CLI::App& app = program.app;
  smol::cli::add_model(program, options.model_path, "GGUF model file");
  CLI::Option* text =
      app.add_option("-f,--file", options.text_path, "the text to score")->type_name("TEXT");
  CLI::Option* ids =
      app.add_option("--tokens-file", options.tokens_path, "token ids to score, instead of -f")
          ->type_name("IDS");
  smol::cli::add_context(program, options.n_ctx, 4,
                         "tokens per chunk, 4 to 16777216 (default 512)");
  app.add_option("-b,--batch-size", options.n_batch,
                 "tokens per forward pass, 1 to 16777216 (default: the chunk)")
      ->type_name("N")
      ->transform(smol::cli::integer(1, smol::cli::kMaxTokens));
  smol::cli::add_threads(program, options.threads);
  smol::cli::add_kv_types(program, options.kv_type);
  smol::cli::add_rope_flags(program, options.rope);
  app.add_flag("--f32-activations", options.f32_activations,
               "keep activations in f32 instead of quantizing them to Q8");
  program.check([text, ids] {
    if ((text->count() == 0) == (ids->count() == 0)) {
      smol::cli::usage_error("give exactly one of -f TEXT and --tokens-file IDS");
    }
  });
  return program.parse(argc, argv);
}

std::vector<std::int32_t> parse_ids(const std::string& text, const std::string& path) {
  std::vector<std::int32_t> ids;
  std::size_t at = 0;
  const auto separator = [](char c) {
    return c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t';
  };
  while (at < text.size()) {
    if (separator(text[at])) {
      ++at;
      continue;
    }
    std::size_t end = at;
    while (end < text.size() && !separator(text[end])) ++end;
    const std::string item = text.substr(at, end - at);
    if (item.find_first_not_of("0123456789") != std::string::npos || item.size() > 9) {
      smol::fail(path, ": \"", item, "\" is not a token id");
    }
    ids.push_back(static_cast<std::int32_t>(std::stol(item)));
    at = end;
  }
  return ids;
}

// -log p(target) under softmax(logits), computed stably.
double negative_log_likelihood(std::span<const float> logits, std::int32_t target) {
  float max = -std::numeric_limits<float>::infinity();
  for (const float v : logits) max = std::max(max, v);
  double sum = 0.0;
  for (const float v : logits) sum += std::exp(static_cast<double>(v - max));
  return std::log(sum) - static_cast<double>(logits[static_cast<std::size_t>(target)] - max);
}

int run(const Options& options) {
  const smol::Model model = smol::Model::open(options.model_path, {.rope = options.rope});
  const smol::ModelConfig& config = model.config();
  std::vector<std::int32_t> tokens;
  std::optional<std::int32_t> bos;
  bool add_bos = false;
  if (!options.text_path.empty()) {
    const smol::Tokenizer tokenizer(smol::load_vocabulary(model.file()));
    add_bos = tokenizer.vocabulary().add_bos && tokenizer.vocabulary().bos_id.has_value();
    bos = tokenizer.vocabulary().bos_id;
    tokens = tokenizer.encode(
        smol::cli::read_text_file(options.text_path));  // bos added as the model says
  } else {
    tokens = parse_ids(smol::cli::read_text_file(options.tokens_path), options.tokens_path);
    // Token ids come as they are; the model's bos rule still applies to each chunk.
    add_bos = model.file().get_optional<bool>("tokenizer.ggml.add_bos_token").value_or(false);
    if (const auto id = model.file().get_optional<std::uint32_t>("tokenizer.ggml.bos_token_id")) {
      bos = static_cast<std::int32_t>(*id);
    }
    add_bos = add_bos && bos.has_value();
  }

  const std::size_t n_ctx = options.n_ctx;
  smol::check_context_fits(config, n_ctx);
  if (tokens.size() < 2 * n_ctx) {
    smol::fail("need at least ", 2 * n_ctx, " tokens for a context of ", n_ctx, ", the input has ",
               tokens.size());
  }
  const std::size_t n_chunks = tokens.size() / n_ctx;
  const std::size_t first = n_ctx / 2;
  const std::size_t n_vocab = config.n_vocab;

  smol::Context context(options.threads);
  context.activation_precision =
      options.f32_activations ? smol::ActivationPrecision::f32 : smol::ActivationPrecision::q8;
  smol::Transformer session(model, context,
                            {.context = n_ctx,
                             .kv_type = options.kv_type,
                             .max_batch = options.n_batch == 0 ? n_ctx : options.n_batch});
  std::fprintf(stderr, "perplexity: %zu tokens, %zu chunks of %zu, scoring the last %zu of each\n",
               tokens.size(), n_chunks, n_ctx, n_ctx - 1 - first);

  double nll_sum = 0.0;
  double nll_squared_sum = 0.0;
  std::size_t count = 0;
  for (std::size_t chunk = 0; chunk < n_chunks; ++chunk) {
    std::vector<std::int32_t> window(
        tokens.begin() + static_cast<std::ptrdiff_t>(chunk * n_ctx),
        tokens.begin() + static_cast<std::ptrdiff_t>((chunk + 1) * n_ctx));
    if (add_bos) window[0] = *bos;
    // The first half only fills the cache; the second half's rows are scored.
    session.forward(std::span(window).first(first), 0, smol::LogitsFor::none);
    const std::span<const float> logits =
        session.forward(std::span(window).subspan(first), first, smol::LogitsFor::all);
    // Row r of `logits` sits at position first + r and predicts the token after it.
    for (std::size_t r = 0; r + first + 1 < n_ctx; ++r) {
      const double nll =
          negative_log_likelihood(logits.subspan(r * n_vocab, n_vocab), window[first + r + 1]);
      nll_sum += nll;
      nll_squared_sum += nll * nll;
      ++count;
    }
    const double mean = nll_sum / static_cast<double>(count);
    const double variance = nll_squared_sum / static_cast<double>(count) - mean * mean;
    const double ppl = std::exp(mean);
    const double error =
        count > 1 && variance > 0 ? std::sqrt(variance / static_cast<double>(count - 1)) * ppl : 0;
    std::printf("[%zu] %.4f +/- %.5f\n", chunk + 1, ppl, error);
    std::fflush(stdout);
    if (chunk + 1 == n_chunks) std::printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, error);
  }
  return 0;
}

// smol-perplexity's entry: the executable's own main calls it (cmake/SmolPrograms.cmake).
int main(int argc, char** argv) {
  Options options;
  if (const std::optional<int> status = parse_options(argc, argv, options)) return *status;
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "smol-perplexity: error: %s\n", error.what());
    return 1;
  }
}

}  // namespace smol_perplexity
