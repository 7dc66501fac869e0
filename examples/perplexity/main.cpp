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
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
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
    "usage: smol-perplexity -m FILE (-f TEXT | --tokens-file IDS) [-c 512] [-b N] [-t N]\n"
    "       [--kv-type f16|f32] [--f32-activations]\n"
    "IDS holds token ids separated by commas or white space.\n";

struct Options {
  std::string model_path;
  std::string text_path;
  std::string tokens_path;
  std::size_t n_ctx = 512;
  std::size_t n_batch = 0;  // 0: the whole chunk in one pass
  int threads = 0;
  smol::KvType kv_type = smol::KvType::f16;
  bool f32_activations = false;
};

std::size_t parse_count(const std::string& text, const char* flag) {
  std::size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value <= 0) smol::fail(flag, " needs a positive number, not ", text);
  return static_cast<std::size_t>(value);
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
    } else if (arg == "-f" || arg == "--file") {
      options.text_path = value(i);
    } else if (arg == "--tokens-file") {
      options.tokens_path = value(i);
    } else if (arg == "-c" || arg == "--ctx-size") {
      options.n_ctx = parse_count(value(i), "-c");
    } else if (arg == "-b" || arg == "--batch-size") {
      options.n_batch = parse_count(value(i), "-b");
    } else if (arg == "-t" || arg == "--threads") {
      options.threads = static_cast<int>(parse_count(value(i), "-t"));
    } else if (arg == "--kv-type") {
      const std::string type = value(i);
      if (type != "f16" && type != "f32") smol::fail("--kv-type must be f16 or f32, not ", type);
      options.kv_type = type == "f16" ? smol::KvType::f16 : smol::KvType::f32;
    } else if (arg == "--f32-activations") {
      options.f32_activations = true;
    } else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      smol::fail("unknown argument ", arg, " (see --help)");
    }
  }
  if (options.model_path.empty()) smol::fail("-m FILE is required");
  if (options.text_path.empty() == options.tokens_path.empty()) {
    smol::fail("give exactly one of -f TEXT and --tokens-file IDS");
  }
  if (options.n_ctx < 4) smol::fail("-c must be at least 4");
  return options;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) smol::fail(path, ": cannot open");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
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
  const smol::Model model = smol::Model::open(options.model_path);
  const smol::ModelConfig& config = model.config();
  std::vector<std::int32_t> tokens;
  std::optional<std::int32_t> bos;
  bool add_bos = false;
  if (!options.text_path.empty()) {
    const smol::Tokenizer tokenizer(smol::load_vocabulary(model.file()));
    add_bos = tokenizer.vocabulary().add_bos && tokenizer.vocabulary().bos_id.has_value();
    bos = tokenizer.vocabulary().bos_id;
    tokens = tokenizer.encode(read_file(options.text_path));  // bos added as the model says
  } else {
    tokens = parse_ids(read_file(options.tokens_path), options.tokens_path);
    // Token ids come as they are; the model's bos rule still applies to each chunk.
    add_bos = model.file().get_optional<bool>("tokenizer.ggml.add_bos_token").value_or(false);
    if (const auto id = model.file().get_optional<std::uint32_t>("tokenizer.ggml.bos_token_id")) {
      bos = static_cast<std::int32_t>(*id);
    }
    add_bos = add_bos && bos.has_value();
  }

  const std::size_t n_ctx = options.n_ctx;
  if (n_ctx > config.n_ctx_train) {
    smol::fail("-c ", n_ctx, " exceeds the model's context of ", config.n_ctx_train);
  }
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

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_options(argc, argv));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "smol-perplexity: error: %s\n", error.what());
    return 1;
  }
}
