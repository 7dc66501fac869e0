// smol-bench: prefill and decode tokens/s of a GGUF model, llama-bench style, beside
// the decode ceiling that the machine's memory bandwidth allows, measured in the same
// run. See bench/README.md for how each figure is reproduced.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "../memory_read.hpp"
#include "decode_traffic.hpp"
#include "embedding.hpp"
#include "grammar_decode.hpp"
#include "model_summary.hpp"
#include "options.hpp"
#include "parallel.hpp"
#include "report.hpp"
#include "smol/grammar/gbnf.hpp"
#include "smol/grammar/json_schema.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/context.hpp"
#include "speculative.hpp"
#include "test_result.hpp"
#include "test_runner.hpp"
#include "text_file.hpp"

namespace smol_bench {

using namespace smol;
using namespace smol::bench;

std::uint64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::size_t largest(const std::vector<std::size_t>& values) {
  return *std::max_element(values.begin(), values.end());
}

// All tests at one thread count, appended to report.tests.
void run_tests(const Model& model, const BenchOptions& options, int threads, BenchReport& report) {
  Context context(threads, options.isa);
  RandomTokens tokens(options.seed, model.config().n_vocab);
  const std::size_t longest_test = std::max<std::size_t>(
      1, std::max(largest(options.prompt_tokens), largest(options.generated_tokens)));
  for (const std::size_t depth : options.depths) {
    // A session just large enough for the deepest test, so the bench also works on
    // models with short contexts; Transformer refuses one that exceeds the model's.
    TransformerOptions session;
    session.context = depth + longest_test;
    session.kv_type = options.kv_type;
    Transformer transformer(model, context, session);
    std::optional<Transformer> depth0;
    if (options.alternate_depth0 && depth > 0) {
      TransformerOptions shallow = session;
      shallow.context = longest_test;
      depth0.emplace(model, context, shallow);
    }
    TestRunner runner(transformer, tokens, options.repetitions, options.progress,
                      depth0 ? &*depth0 : nullptr);
    runner.fill(depth);

    const auto new_result = [&] {
      TestResult result;
      result.threads = context.threads();  // what runs, whatever was asked
      result.isa =
          std::string(isa_name(context.isa())) + (model.repacked().matrices() > 0 ? "+repack" : "");
      return result;
    };
    for (const std::size_t n : options.prompt_tokens) {
      if (n == 0) continue;
      TestResult result = new_result();
      runner.prefill(n, result);
      report.tests.push_back(std::move(result));
    }
    for (const std::size_t n : options.generated_tokens) {
      if (n == 0) continue;
      TestResult result = new_result();
      runner.decode(n, result);
      report.tests.push_back(std::move(result));
    }
  }
}

// -npl: llama-batched-bench's table, one row per (PP, TG, B) and thread count.
int run_parallel_tests(const Model& model, const BenchOptions& options) {
  std::vector<ParallelResult> results;
  for (const int threads : options.threads) {
    Context context(threads, options.isa);
    std::printf("threads %d, isa %s%s, kv %s\n\n", context.threads(),
                std::string(isa_name(context.isa())).c_str(),
                model.repacked().matrices() > 0 ? "+repack" : "",
                kv_types_text(options.kv_type).c_str());
    RandomTokens tokens(options.seed, model.config().n_vocab);
    results.clear();
    for (const std::size_t pp : options.parallel_prompt) {
      for (const std::size_t tg : options.parallel_gen) {
        for (const std::size_t b : options.parallel_sequences) {
          if (options.progress) {
            std::fprintf(stderr, "smol-bench: parallel PP %zu TG %zu B %zu\n", pp, tg, b);
          }
          results.push_back(run_parallel(model, context, tokens, pp, tg, b, options.kv_type));
        }
      }
    }
    print_parallel_table(results, stdout);
  }
  return 0;
}

// The grammar of --json-schema or --grammar-file, parsed before the model loads so that
// a bad file costs no wait; null when neither is given. Throws smol::Error naming the
// flag and the file.
std::shared_ptr<const Grammar> bench_grammar(const BenchOptions& options) {
  const auto flagged = [](const char* flag, const std::string& path, auto make) {
    try {
      return make(cli::read_text_file(path));
    } catch (const Error& error) {
      fail(flag, " ", path, ": ", error.what());
    }
  };
  if (options.json_schema_file) {
    return flagged("--json-schema", *options.json_schema_file,
                   [](const std::string& text) { return json_schema_grammar(text); });
  }
  if (options.grammar_file) {
    return flagged("--grammar-file", *options.grammar_file,
                   [](const std::string& text) { return parse_gbnf(text); });
  }
  return nullptr;
}

int run(const BenchOptions& options) {
  std::shared_ptr<const Grammar> grammar = bench_grammar(options);
  // auto asks the kernels of the ISA the tests run with (--isa, else the default).
  const Model model = Model::open(
      options.model_path,
      ModelOptions{.repack = options.repack, .rope = options.rope, .repack_for = options.isa});
  if (!options.parallel_sequences.empty()) return run_parallel_tests(model, options);
  if (options.embedding) {
    Context context(options.threads.front(), options.isa);
    std::printf("threads %d, isa %s%s, kv %s\n\n", context.threads(),
                std::string(isa_name(context.isa())).c_str(),
                model.repacked().matrices() > 0 ? "+repack" : "",
                kv_types_text(options.kv_type).c_str());
    RandomTokens tokens(options.seed, model.config().n_vocab);
    return run_embedding_test(model, context, tokens,
                              {.documents = options.embedding_documents,
                               .document_tokens = options.embedding_tokens,
                               .batch = options.embedding_batch},
                              options.repetitions, options.kv_type);
  }
  if (options.speculation.enabled()) return run_speculative_tests(model, options);
  BenchReport report;
  report.model = summarize_model(model, options.model_path);
  report.kv_type = kv_types_text(options.kv_type);
  report.repetitions = options.repetitions;
  report.seed = options.seed;

  // CPU time over wall time tells a reader of the report whether other tenants took the
  // cores away during the tests (it sits near the thread count when they did not).
  const double cpu_start = process_cpu_seconds();
  const auto wall_start = std::chrono::steady_clock::now();
  for (const int threads : options.threads) run_tests(model, options, threads, report);
  if (grammar) {
    report.grammar_source = options.json_schema_file ? "--json-schema " + *options.json_schema_file
                                                     : "--grammar-file " + *options.grammar_file;
    const auto setup_start = std::chrono::steady_clock::now();
    GrammarDecoder decoder(model, std::move(grammar));
    report.grammar_setup_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();
    report.grammar_vocabulary = decoder.vocabulary_size();
    for (const int threads : options.threads) {
      Context context(threads, options.isa);
      RandomTokens tokens(options.seed, model.config().n_vocab);
      for (const std::size_t n : options.generated_tokens) {
        if (n == 0) continue;
        report.grammar.push_back(decoder.run(model, context, tokens, n, options.repetitions,
                                             options.kv_type, options.progress));
      }
    }
  }
  report.busy_threads =
      (process_cpu_seconds() - cpu_start) /
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  // Before the bandwidth buffer exists: peak RSS is a high-water mark and the 1 GiB
  // buffer is the benchmark's, not the model's.
  report.peak_rss_bytes = peak_rss_bytes();

  const DecodeTraffic traffic = decode_traffic(model, options.kv_type);
  for (const int threads : options.threads) {
    if (options.progress) {
      std::fprintf(stderr, "smol-bench: memory read bandwidth, %d threads\n", threads);
    }
    Context context(threads, options.isa);
    const MemoryReadResult memory = measure_memory_read(context);
    report.memory_reads.emplace_back(threads, memory);
    for (TestResult& test : report.tests) {
      if (test.threads != threads || !test.is_decode()) continue;
      test.roofline =
          Roofline{memory.best_gbps, traffic.bytes_per_token(test.depth, test.generated_tokens)};
    }
  }

  write_report(report, options.output, stdout);
  return 0;
}

// smol-bench's entry: the executable's own main calls it (cmake/SmolPrograms.cmake).
int main(int argc, char** argv) {
  BenchOptions options;
  if (const std::optional<int> status = parse_options(argc, argv, options)) return *status;
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "smol-bench: %s\n", error.what());
    return 1;
  }
}

}  // namespace smol_bench
