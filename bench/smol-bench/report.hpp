// Writes smol-bench's results as a llama-bench-shaped markdown table, JSON or CSV.
//
// Field names follow llama-bench's JSON and CSV (n_prompt, n_gen, n_depth, avg_ts,
// stddev_ts, samples_ts, ...) so scripts written for one read the other; what
// llama-bench has no field for (the ISA, the roofline, peak RSS) is added beside them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../memory_read.hpp"
#include "grammar_decode.hpp"
#include "model_summary.hpp"
#include "options.hpp"
#include "smol/quant/kv_layout.hpp"
#include "test_result.hpp"

namespace smol::bench {

// The KV cache's types as the report shows them: "q8_0" when K and V agree, else
// "K/V" ("q8_0/f16").
inline std::string kv_types_text(KvTypes types) {
  std::string text(kv_type_name(types.key));
  if (types.value != types.key) text += "/" + std::string(kv_type_name(types.value));
  return text;
}

struct BenchReport {
  ModelSummary model;
  std::string kv_type;  // kv_types_text
  std::size_t repetitions = 0;
  unsigned seed = 0;
  std::uint64_t peak_rss_bytes = 0;
  double busy_threads = 0;  // process CPU seconds per wall second during the tests
  std::vector<std::pair<int, MemoryReadResult>> memory_reads;  // by thread count
  std::vector<TestResult> tests;
  // --json-schema / --grammar-file: the flag and file, the vocabulary the masks cover, the
  // time to build the token trie and mask table, and one result per thread count and n.
  std::string grammar_source;
  std::size_t grammar_vocabulary = 0;
  double grammar_setup_seconds = 0;
  std::vector<GrammarDecodeResult> grammar;
};

namespace detail {

template <class... Args>
std::string format(const char* pattern, Args... args) {
  char text[256];
  std::snprintf(text, sizeof text, pattern, args...);
  return text;
}

inline double gib(std::uint64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
}

// llama-bench's units: GiB from 1 GiB up, else MiB; billions of parameters from a
// billion up, else millions.
inline std::string size_text(std::uint64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024);
  return mib >= 1024 ? format("%.2f GiB", mib / 1024) : format("%.2f MiB", mib);
}

inline std::string params_text(std::uint64_t params) {
  const double count = static_cast<double>(params);
  return count >= 1e9 ? format("%.2f B", count / 1e9) : format("%.2f M", count / 1e6);
}

// Decode at depth d as a share of decode at depth 0 with the same length and threads:
// the number the attention over the KV cache is judged by.
inline const TestResult* shallow_twin(const std::vector<TestResult>& tests,
                                      const TestResult& deep) {
  for (const TestResult& test : tests) {
    if (test.is_decode() && test.depth == 0 && test.threads == deep.threads &&
        test.generated_tokens == deep.generated_tokens) {
      return &test;
    }
  }
  return nullptr;
}

inline std::string csv_field(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

inline std::vector<double> nanoseconds(const std::vector<double>& seconds) {
  std::vector<double> out;
  for (const double s : seconds) out.push_back(s * 1e9);
  return out;
}

}  // namespace detail

namespace detail {

inline void write_grammar_markdown(const BenchReport& report, std::FILE* out) {
  std::fprintf(out,
               "\ngrammar %s: %zu-token vocabulary, trie and mask table built in %.1f ms;\n"
               "plain and grammar decode runs alternate; mask build = allowed_tokens() + "
               "accept() per token\n\n",
               report.grammar_source.c_str(), report.grammar_vocabulary,
               1e3 * report.grammar_setup_seconds);
  std::fprintf(out,
               "| threads | test | plain t/s | grammar t/s | grammar/plain | mask build us "
               "median | p90 | cold median | cold p90 | apply us median | restarts |\n");
  std::fprintf(out, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const GrammarDecodeResult& g : report.grammar) {
    const auto rates = [&](const std::vector<double>& seconds) {
      std::vector<double> out_rates;
      for (const double s : seconds)
        out_rates.push_back(static_cast<double>(g.generated_tokens) / s);
      return sample_stats(out_rates);
    };
    const SampleStats plain = rates(g.plain_seconds);
    const SampleStats constrained = rates(g.grammar_seconds);
    const SampleStats ratio = sample_stats(g.ratios());
    std::fprintf(out,
                 "| %d | tg%zu | %.2f ± %.2f | %.2f ± %.2f | %.3f ± %.3f | %.1f | %.1f | %.1f | "
                 "%.1f | %.1f | %zu |\n",
                 g.threads, g.generated_tokens, plain.mean, plain.stddev, constrained.mean,
                 constrained.stddev, ratio.mean, ratio.stddev, median_of(g.mask_us),
                 quantile(g.mask_us, 0.9), median_of(g.cold_mask_us), quantile(g.cold_mask_us, 0.9),
                 median_of(g.apply_us), g.restarts);
    if (g.refusals > 0) {
      std::fprintf(out, "  (%zu sampled tokens refused by the grammar)\n", g.refusals);
    }
  }
  std::fprintf(out, "\n");
}

}  // namespace detail

inline void write_markdown(const BenchReport& report, std::FILE* out) {
  using detail::format;
  std::vector<std::string> header{"model", "size", "params", "threads", "isa"};
  // llama-bench shows a setting only when it differs from its default.
  const bool show_kv = report.kv_type != "f16";
  if (show_kv) header.push_back("type_kv");
  header.insert(header.end(), {"test", "t/s"});

  std::vector<std::vector<std::string>> rows;
  for (const TestResult& test : report.tests) {
    const SampleStats rate = sample_stats(test.tokens_per_second());
    std::vector<std::string> row{
        report.model.description, detail::size_text(report.model.size_bytes),
        detail::params_text(report.model.params), std::to_string(test.threads), test.isa};
    if (show_kv) row.push_back(report.kv_type);
    row.insert(row.end(), {test.name(), format("%.2f ± %.2f", rate.mean, rate.stddev)});
    rows.push_back(std::move(row));
  }

  // Column widths in characters on screen; "±" is two bytes but one column.
  const auto width = [](const std::string& text) {
    std::size_t columns = 0;
    for (const char c : text) columns += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return columns;
  };
  std::vector<std::size_t> widths(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    widths[c] = width(header[c]);
    for (const auto& row : rows) widths[c] = std::max(widths[c], width(row[c]));
  }
  // Text columns align left, numbers right, as in llama-bench.
  const auto is_text_column = [&](std::size_t c) {
    return header[c] == "model" || header[c] == "isa" || header[c] == "type_kv" ||
           header[c] == "test";
  };
  const auto print_row = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(widths[c] - width(cells[c]), ' ');
      std::fprintf(out, "| %s ", (is_text_column(c) ? cells[c] + pad : pad + cells[c]).c_str());
    }
    std::fprintf(out, "|\n");
  };
  print_row(header);
  for (std::size_t c = 0; c < header.size(); ++c) {
    const std::string dashes(widths[c], '-');
    std::fprintf(out, "| %s ", (is_text_column(c) ? dashes : dashes.substr(1) + ":").c_str());
  }
  std::fprintf(out, "|\n");
  for (const auto& row : rows) print_row(row);

  std::fprintf(out, "\n");
  for (const auto& [threads, memory] : report.memory_reads) {
    std::fprintf(
        out,
        "roofline, %d threads: memory read %.2f GB/s (%s loads, best of %d passes over %.2f GiB "
        "in huge pages)\n",
        threads, memory.best_gbps, memory.loads, memory.passes, detail::gib(memory.buffer_bytes));
    for (const TestResult& test : report.tests) {
      if (test.threads != threads || !test.roofline) continue;
      const double rate = sample_stats(test.tokens_per_second()).mean;
      const double ceiling = test.roofline->ceiling_tokens_per_second();
      std::fprintf(out,
                   "  %s: %.3f GB read per token -> ceiling %.2f t/s; measured %.2f t/s = %.1f %%",
                   test.name().c_str(), test.roofline->bytes_per_token / 1e9, ceiling, rate,
                   100.0 * rate / ceiling);
      if (const TestResult* twin =
              test.depth > 0 ? detail::shallow_twin(report.tests, test) : nullptr) {
        std::fprintf(out, "; %.1f %% of %s",
                     100.0 * rate / sample_stats(twin->tokens_per_second()).mean,
                     twin->name().c_str());
      }
      if (!test.depth0_seconds.empty()) {
        const SampleStats ratio = sample_stats(test.depth0_ratios());
        std::fprintf(out, "; %.1f ± %.1f %% of the depth-0 run beside each (%.2f t/s)",
                     100.0 * ratio.mean, 100.0 * ratio.stddev,
                     sample_stats(test.depth0_tokens_per_second()).mean);
      }
      std::fprintf(out, "\n");
    }
  }
  if (!report.grammar.empty()) detail::write_grammar_markdown(report, out);
  std::fprintf(out, "peak RSS %.2f GiB (the mapped model counts once it is read); KV cache %s\n",
               detail::gib(report.peak_rss_bytes), report.kv_type.c_str());
  // Worker threads that wait spin for a while, so a quiet machine shows close to the
  // thread count; much less means other processes had the cores.
  std::fprintf(out, "CPU busy: %.2f threads on average during the tests\n", report.busy_threads);
}

inline void write_json(const BenchReport& report, std::FILE* out) {
  // Keys in llama-bench's order. JSON has no NaN or infinity: nlohmann-json writes a
  // sample that produced one as null.
  using Json = nlohmann::ordered_json;
  Json memory_read = Json::array();
  for (const auto& [threads, memory] : report.memory_reads) {
    memory_read.push_back({{"n_threads", threads},
                           {"gbps", memory.best_gbps},
                           {"loads", memory.loads},
                           {"buffer_bytes", memory.buffer_bytes},
                           {"passes", memory.passes}});
  }
  Json tests = Json::array();
  for (const TestResult& test : report.tests) {
    const std::vector<double> rates = test.tokens_per_second();
    const SampleStats rate = sample_stats(rates);
    const std::vector<double> ns = detail::nanoseconds(test.seconds);
    const SampleStats time = sample_stats(ns);
    Json row = {{"test", test.name()},
                {"n_threads", test.threads},
                {"isa", test.isa},
                {"n_prompt", test.prompt_tokens},
                {"n_gen", test.generated_tokens},
                {"n_depth", test.depth},
                {"avg_ns", time.mean},
                {"stddev_ns", time.stddev},
                {"avg_ts", rate.mean},
                {"stddev_ts", rate.stddev},
                {"samples_ns", ns},
                {"samples_ts", rates}};
    if (test.roofline) {
      const double ceiling = test.roofline->ceiling_tokens_per_second();
      row["memory_read_gbps"] = test.roofline->memory_read_gbps;
      row["bytes_per_token"] = test.roofline->bytes_per_token;
      row["ceiling_ts"] = ceiling;
      row["percent_of_ceiling"] = 100.0 * rate.mean / ceiling;
    }
    if (!test.depth0_seconds.empty()) {
      const std::vector<double> ratios = test.depth0_ratios();
      row["depth0_samples_ts"] = test.depth0_tokens_per_second();
      row["vs_depth0_samples"] = ratios;
      row["vs_depth0"] = sample_stats(ratios).mean;
    }
    tests.push_back(std::move(row));
  }
  Json json = {{"model_filename", report.model.path},
               {"model_type", report.model.description},
               {"model_size", report.model.size_bytes},
               {"model_n_params", report.model.params},
               {"type_kv", report.kv_type},
               {"repetitions", report.repetitions},
               {"seed", report.seed},
               {"peak_rss_bytes", report.peak_rss_bytes},
               {"busy_threads", report.busy_threads},
               {"memory_read", std::move(memory_read)},
               {"tests", std::move(tests)}};
  if (!report.grammar.empty()) {
    Json grammar = Json::array();
    for (const GrammarDecodeResult& g : report.grammar) {
      const auto rates = [&](const std::vector<double>& seconds) {
        std::vector<double> out_rates;
        for (const double s : seconds)
          out_rates.push_back(static_cast<double>(g.generated_tokens) / s);
        return out_rates;
      };
      const std::vector<double> ratios = g.ratios();
      grammar.push_back({{"n_threads", g.threads},
                         {"n_gen", g.generated_tokens},
                         {"plain_samples_ts", rates(g.plain_seconds)},
                         {"grammar_samples_ts", rates(g.grammar_seconds)},
                         {"grammar_vs_plain_samples", ratios},
                         {"grammar_vs_plain", sample_stats(ratios).mean},
                         {"mask_build_us_median", median_of(g.mask_us)},
                         {"mask_build_us_p90", quantile(g.mask_us, 0.9)},
                         {"cold_mask_build_us_median", median_of(g.cold_mask_us)},
                         {"cold_mask_build_us_p90", quantile(g.cold_mask_us, 0.9)},
                         {"apply_us_median", median_of(g.apply_us)},
                         {"restarts", g.restarts},
                         {"refusals", g.refusals}});
    }
    json["grammar_source"] = report.grammar_source;
    json["grammar_vocabulary"] = report.grammar_vocabulary;
    json["grammar_setup_seconds"] = report.grammar_setup_seconds;
    json["grammar"] = std::move(grammar);
  }
  // A model path need not be UTF-8: bad bytes become U+FFFD, so the report stays JSON.
  const std::string text = json.dump(2, ' ', false, Json::error_handler_t::replace);
  std::fprintf(out, "%s\n", text.c_str());
}

inline void write_csv(const BenchReport& report, std::FILE* out) {
  std::fprintf(out,
               "model_filename,model_type,model_size,model_n_params,n_threads,isa,type_kv,test,"
               "n_prompt,n_gen,n_depth,avg_ts,stddev_ts,memory_read_gbps,bytes_per_token,"
               "ceiling_ts,percent_of_ceiling,peak_rss_bytes\n");
  for (const TestResult& test : report.tests) {
    const SampleStats rate = sample_stats(test.tokens_per_second());
    std::string roofline = ",,,";
    if (test.roofline) {
      const double ceiling = test.roofline->ceiling_tokens_per_second();
      roofline =
          detail::format("%.4f,%.0f,%.4f,%.2f", test.roofline->memory_read_gbps,
                         test.roofline->bytes_per_token, ceiling, 100.0 * rate.mean / ceiling);
    }
    std::fprintf(out, "%s,%s,%llu,%llu,%d,%s,%s,%s,%zu,%zu,%zu,%.4f,%.4f,%s,%llu\n",
                 detail::csv_field(report.model.path).c_str(),
                 detail::csv_field(report.model.description).c_str(),
                 static_cast<unsigned long long>(report.model.size_bytes),
                 static_cast<unsigned long long>(report.model.params), test.threads,
                 test.isa.c_str(), report.kv_type.c_str(), detail::csv_field(test.name()).c_str(),
                 test.prompt_tokens, test.generated_tokens, test.depth, rate.mean, rate.stddev,
                 roofline.c_str(), static_cast<unsigned long long>(report.peak_rss_bytes));
  }
}

inline void write_report(const BenchReport& report, OutputFormat format, std::FILE* out) {
  switch (format) {
    case OutputFormat::markdown:
      write_markdown(report, out);
      return;
    case OutputFormat::json:
      write_json(report, out);
      return;
    case OutputFormat::csv:
      write_csv(report, out);
      return;
  }
}

}  // namespace smol::bench
