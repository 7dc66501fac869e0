// smol-make-model: writes a synthetic SmolLM3, Llama, Qwen2, Qwen3, Qwen3-MoE, Gemma 3 or
// GPT-OSS GGUF file with random weights.
//
//   smol-make-model --preset tiny -o tiny.gguf
//   smol-make-model --preset smollm3-3b -o smollm3-3b-synthetic.gguf   (about 1.9 GB)
//   smol-make-model --arch llama --layers 4 --hidden 512 --type q8_0 -o llama.gguf
//   smol-make-model --preset qwen3-tiny --type f32 -o qwen3.gguf
//   smol-make-model --preset qwen3-30b-a3b --layers 8 -o qwen3-moe-part.gguf
//   smol-make-model --preset gpt-oss-20b --layers 8 -o gpt-oss-part.gguf
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "smol/testing/synthetic.hpp"

namespace smol_make_model {

constexpr const char* kDescription = R"(usage: smol-make-model [options] -o FILE

Writes a GGUF model with random weights, the real tensor layout and a small
byte-level BPE tokenizer.)";

struct Options {
  std::string preset = "tiny";
  std::string output;
  // The shape flags, applied over the preset once it is known.
  std::vector<std::function<void(smol::SyntheticSpec&)>> edits;
  smol::SyntheticSpec spec;  // the result
};

// Fills options.spec from the command line: the preset, then the flags over it.
std::optional<int> parse_arguments(int argc, char** argv, Options& options) {
  smol::cli::Program program("smol-make-model", kDescription);
  CLI::App& app = program.app;
  using Spec = smol::SyntheticSpec;
  const auto edit = [&options](auto field) {
    return [&options, field](auto value) {
      options.edits.push_back([field, value](Spec& spec) { spec.*field = value; });
    };
  };
  // Bounds far above any real model, far below what would overflow a tensor's size.
  const auto count = [&](const std::string& names, std::size_t Spec::*field, std::int64_t min,
                         std::int64_t max, const std::string& help) {
    app.add_option_function<std::size_t>(names, edit(field), help)
        ->type_name("N")
        ->transform(smol::cli::integer(min, max));
  };
  const auto number = [&](const std::string& names, float Spec::*field, const std::string& help) {
    app.add_option_function<float>(names, edit(field), help)
        ->type_name("X")
        ->transform(smol::cli::number(0, std::numeric_limits<float>::max(), true));
  };

  app.add_option("-o,--output", options.output, "where to write the model (required)")
      ->type_name("FILE");
  CLI::Option* preset =
      smol::cli::add_choice(app, "--preset", options.preset,
                            {{"tiny", std::string("tiny")},
                             {"smollm3-3b", std::string("smollm3-3b")},
                             {"qwen3-30b-a3b", std::string("qwen3-30b-a3b")},
                             {"gpt-oss-20b", std::string("gpt-oss-20b")},
                             {"qwen2-tiny", std::string("qwen2-tiny")},
                             {"qwen3-tiny", std::string("qwen3-tiny")},
                             {"qwen3moe-tiny", std::string("qwen3moe-tiny")},
                             {"qwen3-moe-tiny", std::string("qwen3-moe-tiny")},
                             {"gemma3-tiny", std::string("gemma3-tiny")},
                             {"gpt-oss-tiny", std::string("gpt-oss-tiny")},
                             {"qwen3-embedding-tiny", std::string("qwen3-embedding-tiny")},
                             {"qwen3-embedding-0.6b", std::string("qwen3-embedding-0.6b")},
                             {"qwen3-reranker-tiny", std::string("qwen3-reranker-tiny")},
                             {"bert-tiny", std::string("bert-tiny")},
                             {"bert-reranker-tiny", std::string("bert-reranker-tiny")},
                             {"nomic-bert-tiny", std::string("nomic-bert-tiny")},
                             {"bge-base", std::string("bge-base")}},
                            "tiny (8 layers, 256 hidden, like the test fixture),\n"
                            "smollm3-3b (the SmolLM3-3B shape, Q4_K_M, ~1.9 GB; implies --fast),\n"
                            "qwen3-30b-a3b (Qwen3-30B-A3B's shape: 128 experts, 8 used, Q4_K_M,\n"
                            "~17 GB at 48 layers; --layers N for part of it; implies --fast),\n"
                            "gpt-oss-20b (gpt-oss-20b's shape: 32 experts, 4 used, MXFP4 experts,\n"
                            "the rest Q8_0, ~12 GB at 24 layers; --layers N; implies --fast),\n"
                            "qwen2-tiny, qwen3-tiny, qwen3moe-tiny (also qwen3-moe-tiny: 16\n"
                            "experts, 4 used), gemma3-tiny or gpt-oss-tiny (16 experts, 4 used)\n"
                            "(the tiny shape in that family's layout), qwen3-embedding-tiny\n"
                            "(qwen3-tiny pooling its last token, eos added) or\n"
                            "qwen3-embedding-0.6b (Qwen3-Embedding-0.6B's shape, Q8_0, fast),\n"
                            "qwen3-reranker-tiny (qwen3-tiny with Qwen3-Reranker's head: rank\n"
                            "pooling of the last token, a rerank prompt template),\n"
                            "bert-tiny (a BERT encoder pooling [CLS], WordPiece),\n"
                            "bert-reranker-tiny (with a classifier head: rank pooling),\n"
                            "nomic-bert-tiny (RoPE, fused QKV, SwiGLU; mean pooling) or\n"
                            "bge-base (BGE-base-en-v1.5's shape, F16, ~220 MB)");
  preset->type_name("NAME");
  std::string arch;
  CLI::Option* arch_option =
      smol::cli::add_choice(app, "--arch", arch,
                            {{"smollm3", std::string("smollm3")},
                             {"llama", std::string("llama")},
                             {"qwen2", std::string("qwen2")},
                             {"qwen3", std::string("qwen3")},
                             {"qwen3moe", std::string("qwen3moe")},
                             {"gemma3", std::string("gemma3")},
                             {"gpt-oss", std::string("gpt-oss")},
                             {"bert", std::string("bert")},
                             {"nomic-bert", std::string("nomic-bert")}},
                            "smollm3 (default), llama, qwen2 (QKV biases), qwen3 (Q/K norms),\n"
                            "qwen3moe (Qwen3 with a mixture of experts), gemma3 (post norms,\n"
                            "GeGLU, a sliding window of 16) or gpt-oss (biases, sinks, a window\n"
                            "of 16, YaRN, a mixture of clamped-SwiGLU experts) or bert (an\n"
                            "encoder: post-norm blocks, learned positions, WordPiece) or\n"
                            "nomic-bert (that encoder with RoPE and SwiGLU)");
  arch_option->type_name("NAME");
  app.add_option_function<std::string>("--name", edit(&Spec::name), "general.name")
      ->type_name("TEXT");
  count("--layers", &Spec::layers, 1, 1024, "blocks, 1 to 1024 (default 8)");
  count("--hidden", &Spec::hidden, 1, 65536, "embedding size, up to 65536 (default 256)");
  count("--ffn", &Spec::ffn, 1, 262144, "feed-forward size, up to 262144 (default 768)");
  count("--heads", &Spec::heads, 1, 1024, "query heads, up to 1024 (default 4)");
  count("--kv-heads", &Spec::kv_heads, 1, 1024, "key/value heads, up to 1024 (default 1)");
  count("--head-dim", &Spec::head_dim, 0, 4096,
        "head size, up to 4096; 0 = hidden / heads (default 0)");
  count("--vocab", &Spec::vocab, 1, smol::cli::kMaxTokens,
        "vocabulary size, 262 to 16777216 (default 1024)");
  count("--context", &Spec::context, 1, smol::cli::kMaxTokens,
        "context length, up to 16777216 (default 4096)");
  count("--experts", &Spec::experts, 1, 1024,
        "experts per block of a mixture (qwen3moe, gpt-oss), up to 1024 (default 16)");
  count("--experts-used", &Spec::experts_used, 1, 1024,
        "experts chosen per token, up to --experts (default 4)");
  count("--expert-ffn", &Spec::expert_ffn, 1, 262144,
        "one expert's feed-forward size (default ffn / 3)");
  number("--rope-base", &Spec::rope_base, "RoPE frequency base, > 0 (default 5e6)");
  number("--eps", &Spec::rms_eps, "RMSNorm epsilon, > 0 (default 1e-6)");
  app.add_option_function<std::uint64_t>("--seed", edit(&Spec::seed), "random seed (default 1)")
      ->type_name("N")
      ->transform(smol::cli::integer(0, std::numeric_limits<std::int64_t>::max()));
  smol::Pooling pooling{};
  CLI::Option* pooling_option =
      smol::cli::add_choice(app, "--pooling", pooling,
                            {{"none", smol::Pooling::none},
                             {"mean", smol::Pooling::mean},
                             {"cls", smol::Pooling::cls},
                             {"last", smol::Pooling::last}},
                            "an embedding model's <arch>.pooling_type: none, mean, cls or last\n"
                            "(default: no key, or the preset's)");
  pooling_option->type_name("NAME");
  app.add_flag_callback(
      "--non-causal",
      [&options] { options.edits.push_back([](Spec& spec) { spec.causal = false; }); },
      "write <arch>.attention.causal = false: every token sees its whole sequence");
  app.add_flag_callback(
      "--add-eos", [&options] { options.edits.push_back([](Spec& spec) { spec.add_eos = true; }); },
      "write tokenizer.ggml.add_eos_token = true: embedding inputs end in eos");
  smol::SyntheticWeights weights{};
  CLI::Option* type = smol::cli::add_choice(app, "--type", weights,
                                            {{"f32", smol::SyntheticWeights::f32},
                                             {"f16", smol::SyntheticWeights::f16},
                                             {"q8_0", smol::SyntheticWeights::q8_0},
                                             {"q4_0", smol::SyntheticWeights::q4_0},
                                             {"q4_1", smol::SyntheticWeights::q4_1},
                                             {"q5_0", smol::SyntheticWeights::q5_0},
                                             {"q5_1", smol::SyntheticWeights::q5_1},
                                             {"q4_k_m", smol::SyntheticWeights::q4_k_m},
                                             {"q5_k_m", smol::SyntheticWeights::q5_k_m},
                                             {"iq4_xs", smol::SyntheticWeights::iq4_xs},
                                             {"iq4_nl", smol::SyntheticWeights::iq4_nl},
                                             {"q3_k_m", smol::SyntheticWeights::q3_k_m},
                                             {"q2_k", smol::SyntheticWeights::q2_k},
                                             {"mxfp4_moe", smol::SyntheticWeights::mxfp4_moe}},
                                            "f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m,\n"
                                            "q5_k_m, iq4_xs, iq4_nl, q3_k_m, q2_k (default\n"
                                            "q4_k_m) or mxfp4_moe (a mixture's experts MXFP4,\n"
                                            "the other matrices Q8_0)");
  type->type_name("T");
  bool tied = true, fast = false;
  CLI::Option* tied_option = app.add_flag(
      "--tied,!--no-tied", tied, "share token_embd as the LM head (default: the family's habit)");
  CLI::Option* fast_option =
      app.add_flag("--fast,!--no-fast", fast,
                   "fill quantized tensors with random valid blocks instead of\n"
                   "quantizing Gaussian weights (much faster; for benchmarks)");

  program.check([&, preset, arch_option, type, tied_option, fast_option, pooling_option] {
    if (options.output.empty()) smol::cli::usage_error("no output file given: use -o FILE");
    smol::SyntheticSpec spec = smol::synthetic_preset(options.preset);
    if (preset->count() == 0) spec.name = "smol-synthetic";
    // The family's optional tensors, pre-tokenizer and LM head (SmolLM3 and Qwen tie
    // it to the embeddings; Llama models usually do not).
    smol::set_synthetic_family(spec, arch_option->count() > 0 ? arch : spec.arch);
    for (const auto& apply : options.edits) apply(spec);
    if (type->count() > 0) spec.weights = weights;
    if (tied_option->count() > 0) spec.tied = tied;
    if (fast_option->count() > 0) spec.fast = fast;
    if (pooling_option->count() > 0) spec.pooling = pooling;
    try {
      spec.validate();
    } catch (const smol::Error& error) {
      smol::cli::usage_error(error.what());
    }
    options.spec = spec;
  });
  return program.parse(argc, argv);
}

// smol-make-model's entry: the executable's own main calls it (cmake/SmolPrograms.cmake).
int main(int argc, char** argv) {
  Options options;
  if (const std::optional<int> status = parse_arguments(argc, argv, options)) return *status;
  try {
    const smol::SyntheticSpec& spec = options.spec;

    const auto start = std::chrono::steady_clock::now();
    const smol::gguf::GgufWriter writer = smol::make_synthetic_writer(spec);
    writer.write(options.output);
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
                options.output.c_str(), spec.arch.c_str(), spec.layers, spec.hidden, spec.ffn,
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

}  // namespace smol_make_model
