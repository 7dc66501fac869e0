// smol-bench's command line, spelled like llama-bench's so that the two tools can be
// run side by side with the same arguments.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "smol/core/error.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"
#include "smol/simd/isa.hpp"
#include "speculation.hpp"

namespace smol::bench {

inline constexpr const char* kDescription = R"(usage: smol-bench -m FILE [options]

Measures prefill (pp) and decode (tg) speed of a GGUF model in tokens per second,
like llama-bench, beside the decode ceiling that memory bandwidth allows.)";

inline constexpr const char* kFooter =
    R"(Every list option runs each combination, as llama-bench does; a list option given
twice runs the values of both. Exit status: 0 on success, 1 when the model cannot be
opened or run, 2 for a bad command line.)";

enum class OutputFormat { markdown, json, csv };

struct BenchOptions {
  std::string model_path;
  std::vector<std::size_t> prompt_tokens{512};
  std::vector<std::size_t> generated_tokens{128};
  std::vector<std::size_t> depths{0};
  std::vector<int> threads{2};  // each at most the CPUs there are (parse_options caps them)
  std::size_t repetitions = 5;
  KvTypes kv_type = KvType::f16;
  std::optional<Isa> isa;
  unsigned seed = 1234;
  OutputFormat output = OutputFormat::markdown;
  bool progress = false;
  // Each decode repetition at a depth is followed by one at depth 0 on a second, empty
  // cache, so the two are timed in the same minute.
  bool alternate_depth0 = false;
  Repack repack = Repack::when_faster;
  RopeOverrides rope;
  // llama-batched-bench's parallel test (-npl given): B sequences of PP prompt tokens
  // then TG generated tokens each, for every combination.
  std::vector<std::size_t> parallel_prompt{128};
  std::vector<std::size_t> parallel_gen{128};
  std::vector<std::size_t> parallel_sequences;
  // --spec-type (speculative.hpp): the cost of k-token passes, and greedy replies with and
  // without drafts, instead of the pp/tg tests.
  cli::SpeculationFlags speculation;
  // --json-schema FILE, --grammar-file FILE (grammar_decode.hpp): decode under the grammar
  // beside plain decode, and the grammar's time per token.
  std::optional<std::string> json_schema_file;
  std::optional<std::string> grammar_file;
  // --embedding (embedding.hpp): embedding throughput instead of the pp/tg tests.
  bool embedding = false;
  std::size_t embedding_documents = 256;
  std::size_t embedding_tokens = 200;
  std::size_t embedding_batch = 2048;
};

// Fills `options` from the command line. Returns the exit status when the program should
// stop there: 0 after --help, 2 after a bad command line (reported on stderr).
inline std::optional<int> parse_options(int argc, char** argv, BenchOptions& options) {
  cli::Program program("smol-bench", kDescription);
  CLI::App& app = program.app;
  app.footer(kFooter);
  cli::add_model(program, options.model_path, "the GGUF model (required)");
  const auto count_list = [&app](const std::string& names, std::vector<std::size_t>& values,
                                 const std::string& help) {
    app.add_option(names, values, help)
        ->type_name("N,...")
        ->delimiter(',')
        ->allow_extra_args(false)
        ->transform(cli::integer(0, cli::kMaxTokens));
  };
  count_list("-p,--n-prompt", options.prompt_tokens,
             "prompt tokens per prefill test; 0 skips it (default 512)");
  count_list("-n,--n-gen", options.generated_tokens,
             "tokens per decode test; 0 skips it (default 128)");
  count_list("-d,--n-depth", options.depths,
             "tokens already in the KV cache when a test starts\n(default 0)");
  // llama-batched-bench spells these with one dash.
  program.alias("-npp", "--n-pp");
  program.alias("-ntg", "--n-tg");
  program.alias("-npl", "--n-pl");
  count_list("--n-pp", options.parallel_prompt,
             "-npp: parallel test, prompt tokens per sequence\n(default 128)");
  count_list("--n-tg", options.parallel_gen,
             "-ntg: parallel test, generated tokens per sequence\n(default 128)");
  app.add_option("--n-pl", options.parallel_sequences,
                 "-npl: run llama-batched-bench's parallel test\ninstead, with B sequences at "
                 "once for each B\n(e.g. -npl 1,2,4,8)")
      ->type_name("B,...")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->transform(cli::integer(1, 256));
  app.add_flag("--embedding", options.embedding,
               "embedding throughput instead: --docs documents of\n--doc-tokens tokens each, "
               "--embd-batch tokens per\npass (the file's pooling)");
  app.add_option("--docs", options.embedding_documents, "--embedding: documents (default 256)")
      ->type_name("N")
      ->transform(cli::integer(1, 1 << 20));
  app.add_option("--doc-tokens", options.embedding_tokens,
                 "--embedding: tokens per document (default 200)")
      ->type_name("N")
      ->transform(cli::integer(1, cli::kMaxTokens));
  app.add_option("--embd-batch", options.embedding_batch,
                 "--embedding: tokens per pass (default 2048)")
      ->type_name("N")
      ->transform(cli::integer(1, cli::kMaxTokens));
  app.add_option("-t,--threads", options.threads,
                 "threads, 1 to the CPUs there are; more are capped\n(default 2)")
      ->type_name("N,...")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->transform(cli::thread_count(program, 1));
  app.add_option("-r,--repetitions", options.repetitions,
                 "timed runs per test, after one untimed warm-up,\n1 to 1000 (default 5)")
      ->type_name("N")
      ->transform(cli::integer(1, 1000));
  cli::add_kv_types(program, options.kv_type);
  app.add_option_function<std::string>(
         "--isa", [&options](const std::string& name) { options.isa = parse_isa(name); },
         "force scalar, avx2, avx512, avx512vnni or amx\n"
         "(default: $SMOL_ISA, else the best the CPU supports)")
      ->type_name("NAME")
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            try {
              parse_isa(name);
              return "";
            } catch (const Error& error) {
              return error.what();
            }
          },
          "", "isa"));
  cli::add_repack(program, options.repack);
  cli::add_rope_flags(program, options.rope);
  app.add_option("-s,--seed", options.seed,
                 "seed of the random token ids, 0 to 4294967295\n(default 1234)")
      ->type_name("N")
      ->transform(cli::integer(0, std::numeric_limits<unsigned>::max()));
  cli::add_choice(
      app, "-o,--output", options.output,
      {{"md", OutputFormat::markdown}, {"json", OutputFormat::json}, {"csv", OutputFormat::csv}},
      "report format (default md)");
  app.add_flag("--progress", options.progress, "say on stderr which test is running");
  app.add_flag("--alternate-depth-0", options.alternate_depth0,
               "follow each decode run at a depth with one at depth 0\n"
               "(a second, empty cache) and report their ratio: the\n"
               "memory read of a shared machine moves from minute to minute");
  cli::add_speculation_flags(program, options.speculation);
  CLI::Option* schema =
      app.add_option_function<std::string>(
             "--json-schema",
             [&options](const std::string& path) { options.json_schema_file = path; },
             "also decode under the grammar of this JSON schema\n"
             "file, alternating with plain decode, and report the\n"
             "t/s ratio and the mask build time per token")
          ->type_name("FILE");
  app.add_option_function<std::string>(
         "--grammar-file", [&options](const std::string& path) { options.grammar_file = path; },
         "the same with a GBNF grammar file (root rule 'root')")
      ->type_name("FILE")
      ->excludes(schema);
  // -t 4,1000 on four CPUs would run the same tests twice.
  program.check([&options] {
    std::vector<int> distinct;
    for (const int threads : options.threads) {
      if (std::find(distinct.begin(), distinct.end(), threads) == distinct.end()) {
        distinct.push_back(threads);
      }
    }
    options.threads = distinct;
  });
  return program.parse(argc, argv);
}

}  // namespace smol::bench
