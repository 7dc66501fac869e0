// smol-make-model: writes a synthetic SmolLM3 or Llama GGUF file with random weights.
//
//   smol-make-model --preset tiny -o tiny.gguf
//   smol-make-model --preset smollm3-3b -o smollm3-3b-synthetic.gguf   (about 1.9 GB)
//   smol-make-model --arch llama --layers 4 --hidden 512 --type q8_0 -o llama.gguf
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/model/synthetic.hpp"

namespace {

constexpr std::string_view kUsage = R"(usage: smol-make-model [options] -o FILE

Writes a GGUF model with random weights, the real tensor layout and a small
byte-level BPE tokenizer.

  -o, --output FILE     where to write the model (required)
  --preset NAME         tiny (8 layers, 256 hidden, like the test fixture) or
                        smollm3-3b (the SmolLM3-3B shape, Q4_K_M, ~1.9 GB; implies --fast)
  --arch NAME           smollm3 (default) or llama
  --name TEXT           general.name
  --layers N            blocks (default 8)
  --hidden N            embedding size (default 256)
  --ffn N               feed-forward size (default 768)
  --heads N             query heads (default 4)
  --kv-heads N          key/value heads (default 1)
  --head-dim N          head size (default hidden / heads)
  --vocab N             vocabulary size, at least 262 (default 1024)
  --context N           context length (default 4096)
  --rope-base X         RoPE frequency base (default 5e6)
  --eps X               RMSNorm epsilon (default 1e-6)
  --seed N              random seed (default 1)
  --type T              f32, f16, q8_0 or q4_k_m (default q4_k_m)
  --tied, --no-tied     share token_embd as the LM head (default: tied for smollm3)
  --fast, --no-fast     fill quantized tensors with random valid blocks instead of
                        quantizing Gaussian weights (much faster; for benchmarks)
  -h, --help            show this text
)";

std::size_t parse_size(std::string_view flag, const std::string& text) {
  try {
    std::size_t used = 0;
    const unsigned long long value = std::stoull(text, &used);
    if (used == text.size() && text.find('-') == std::string::npos) {
      return static_cast<std::size_t>(value);
    }
  } catch (const std::exception&) {
  }
  smol::fail(flag, ": expected a non-negative integer, got \"", text, "\"");
}

float parse_float(std::string_view flag, const std::string& text) {
  try {
    std::size_t used = 0;
    const float value = std::stof(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  smol::fail(flag, ": expected a number, got \"", text, "\"");
}

smol::SyntheticWeights parse_weights(const std::string& text) {
  if (text == "f32") return smol::SyntheticWeights::f32;
  if (text == "f16") return smol::SyntheticWeights::f16;
  if (text == "q8_0") return smol::SyntheticWeights::q8_0;
  if (text == "q4_k_m") return smol::SyntheticWeights::q4_k_m;
  smol::fail("--type: expected f32, f16, q8_0 or q4_k_m, got \"", text, "\"");
}

struct Options {
  std::optional<std::string> preset;
  std::optional<std::string> output;
  std::map<std::string, std::string> values;  // flag -> value, applied over the preset
  std::optional<bool> tied;
  std::optional<bool> fast;
  bool help = false;
};

Options parse_arguments(int argc, char** argv) {
  static const std::vector<std::string> kValueFlags = {
      "--arch",     "--name",  "--layers",  "--hidden",    "--ffn", "--heads", "--kv-heads",
      "--head-dim", "--vocab", "--context", "--rope-base", "--eps", "--seed",  "--type"};
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) smol::fail(arg, " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      options.help = true;
    } else if (arg == "-o" || arg == "--output") {
      options.output = value();
    } else if (arg == "--preset") {
      options.preset = value();
    } else if (arg == "--tied" || arg == "--no-tied") {
      options.tied = arg == "--tied";
    } else if (arg == "--fast" || arg == "--no-fast") {
      options.fast = arg == "--fast";
    } else if (std::find(kValueFlags.begin(), kValueFlags.end(), arg) != kValueFlags.end()) {
      options.values[arg] = value();
    } else {
      smol::fail("unknown option \"", arg, "\" (see --help)");
    }
  }
  return options;
}

smol::SyntheticSpec make_spec(const Options& options) {
  smol::SyntheticSpec spec = smol::synthetic_preset(options.preset.value_or("tiny"));
  if (!options.preset) spec.name = "smol-synthetic";
  for (const auto& [flag, text] : options.values) {
    if (flag == "--arch") spec.arch = text;
    if (flag == "--name") spec.name = text;
    if (flag == "--layers") spec.layers = parse_size(flag, text);
    if (flag == "--hidden") spec.hidden = parse_size(flag, text);
    if (flag == "--ffn") spec.ffn = parse_size(flag, text);
    if (flag == "--heads") spec.heads = parse_size(flag, text);
    if (flag == "--kv-heads") spec.kv_heads = parse_size(flag, text);
    if (flag == "--head-dim") spec.head_dim = parse_size(flag, text);
    if (flag == "--vocab") spec.vocab = parse_size(flag, text);
    if (flag == "--context") spec.context = parse_size(flag, text);
    if (flag == "--rope-base") spec.rope_base = parse_float(flag, text);
    if (flag == "--eps") spec.rms_eps = parse_float(flag, text);
    if (flag == "--seed") spec.seed = parse_size(flag, text);
    if (flag == "--type") spec.weights = parse_weights(text);
  }
  // SmolLM3 ties the LM head to the embeddings; Llama models usually do not.
  spec.tied = options.tied.value_or(spec.arch == "smollm3");
  if (options.fast) spec.fast = *options.fast;
  spec.validate();
  return spec;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse_arguments(argc, argv);
    if (options.help) {
      std::fputs(kUsage.data(), stdout);
      return 0;
    }
    if (!options.output) smol::fail("no output file given (-o FILE; see --help)");
    const smol::SyntheticSpec spec = make_spec(options);

    const auto start = std::chrono::steady_clock::now();
    const smol::gguf::GgufWriter writer = smol::make_synthetic_writer(spec);
    writer.write(*options.output);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;

    std::map<std::string_view, int> types;
    for (const auto& tensor : smol::plan_synthetic_tensors(spec)) {
      ++types[smol::ggml_type_name(tensor.type)];
    }
    std::string mix;
    for (const auto& [name, count] : types) {
      mix += (mix.empty() ? "" : ", ") + std::to_string(count) + " " + std::string(name);
    }
    std::printf("%s: %s %zu layers, hidden %zu, ffn %zu, heads %zu/%zu, vocab %zu%s%s\n",
                options.output->c_str(), spec.arch.c_str(), spec.layers, spec.hidden, spec.ffn,
                spec.heads, spec.kv_heads, spec.vocab, spec.tied ? ", tied" : "",
                spec.fast ? ", fast random blocks" : "");
    std::printf("%zu tensors (%s), %llu bytes, written in %.1f s\n", writer.tensor_count(),
                mix.c_str(), static_cast<unsigned long long>(writer.file_size()), elapsed.count());
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "smol-make-model: %s\n", error.what());
    return 1;
  }
}
