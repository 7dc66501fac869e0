// smol-bench's command line, spelled like llama-bench's so that the two tools can be
// run side by side with the same arguments.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"
#include "smol/simd/isa.hpp"

namespace smol::bench {

inline constexpr std::string_view kUsage = R"(usage: smol-bench -m FILE [options]

Measures prefill (pp) and decode (tg) speed of a GGUF model in tokens per second,
like llama-bench, beside the decode ceiling that memory bandwidth allows.

  -m, --model FILE        the GGUF model (required)
  -p, --n-prompt N,...    prompt tokens per prefill test; 0 skips it (default 512)
  -n, --n-gen N,...       tokens per decode test; 0 skips it (default 128)
  -d, --n-depth N,...     tokens already in the KV cache when a test starts (default 0)
  -t, --threads N,...     threads (default 2)
  -r, --repetitions N     timed runs per test, after one untimed warm-up (default 5)
  --kv-type f16|f32       KV cache element type (default f16)
  --isa NAME              force scalar, avx2, avx512, avx512vnni or amx
                          (default: $SMOL_ISA, else the best the CPU supports)
  --repack auto|on|off    interleave the Q4_K/Q6_K weights in groups of 8 rows at
                          load: auto (default) where the kernels run faster on them
                          (AVX2, AVX-512), on, off; the isa column then reads
                          e.g. "avx2+repack"
  -s, --seed N            seed of the random token ids (default 1234)
  -o, --output md|json|csv  report format (default md)
  --progress              say on stderr which test is running
  -h, --help              show this text

Every list option runs each combination, as llama-bench does. Exit status: 0 on
success, 1 when the model cannot be opened or run, 2 for a bad command line.
)";

enum class OutputFormat { markdown, json, csv };

struct BenchOptions {
  std::string model_path;
  std::vector<std::size_t> prompt_tokens{512};
  std::vector<std::size_t> generated_tokens{128};
  std::vector<std::size_t> depths{0};
  std::vector<int> threads{2};
  std::size_t repetitions = 5;
  KvType kv_type = KvType::f16;
  std::optional<Isa> isa;
  unsigned seed = 1234;
  OutputFormat output = OutputFormat::markdown;
  bool progress = false;
  Repack repack = Repack::when_faster;
  bool help = false;
};

// A command line smol-bench cannot act on; main() answers it with exit status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

namespace detail {

template <class... Parts>
[[noreturn]] void usage_error(const Parts&... parts) {
  throw UsageError(cat(parts...));
}

inline std::size_t parse_count(std::string_view flag, std::string_view text) {
  std::size_t value = 0;
  bool any_digit = false;
  for (const char c : text) {
    if (c < '0' || c > '9') {
      any_digit = false;
      break;
    }
    // Counts beyond a billion tokens are typos, not benchmarks; refusing them also
    // keeps the arithmetic below from overflowing.
    value = value * 10 + static_cast<std::size_t>(c - '0');
    any_digit = value <= 1'000'000'000;
    if (!any_digit) break;
  }
  if (!any_digit) {
    usage_error(flag, ": expected a non-negative integer, got \"", text, "\"");
  }
  return value;
}

inline std::vector<std::size_t> parse_count_list(std::string_view flag, std::string_view text) {
  std::vector<std::size_t> values;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = text.find(',', begin);
    values.push_back(parse_count(flag, text.substr(begin, comma - begin)));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  return values;
}

}  // namespace detail

inline BenchOptions parse_options(int argc, char** argv) {
  BenchOptions options;
  bool have_model = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    const auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) detail::usage_error(flag, " needs a value (see --help)");
      return argv[++i];
    };
    if (flag == "-h" || flag == "--help") {
      options.help = true;
    } else if (flag == "--progress") {
      options.progress = true;
    } else if (flag == "--repack") {
      const std::string_view mode = value();
      if (mode == "auto") {
        options.repack = Repack::when_faster;
      } else if (mode == "on") {
        options.repack = Repack::always;
      } else if (mode == "off") {
        options.repack = Repack::never;
      } else {
        detail::usage_error("--repack: expected auto, on or off, got ", mode);
      }
    } else if (flag == "-m" || flag == "--model") {
      options.model_path = value();
      have_model = true;
    } else if (flag == "-p" || flag == "--n-prompt") {
      options.prompt_tokens = detail::parse_count_list(flag, value());
    } else if (flag == "-n" || flag == "--n-gen") {
      options.generated_tokens = detail::parse_count_list(flag, value());
    } else if (flag == "-d" || flag == "--n-depth") {
      options.depths = detail::parse_count_list(flag, value());
    } else if (flag == "-t" || flag == "--threads") {
      options.threads.clear();
      for (const std::size_t threads : detail::parse_count_list(flag, value())) {
        if (threads == 0 || threads > 4096) {
          detail::usage_error(flag, ": thread counts must be between 1 and 4096, got ", threads);
        }
        options.threads.push_back(static_cast<int>(threads));
      }
    } else if (flag == "-r" || flag == "--repetitions") {
      options.repetitions = detail::parse_count(flag, value());
      if (options.repetitions == 0) detail::usage_error(flag, ": needs at least 1 repetition");
    } else if (flag == "--kv-type") {
      const std::string_view type = value();
      if (type == "f16") {
        options.kv_type = KvType::f16;
      } else if (type == "f32") {
        options.kv_type = KvType::f32;
      } else {
        detail::usage_error(flag, ": expected f16 or f32, got \"", type, "\"");
      }
    } else if (flag == "--isa") {
      const std::string_view name = value();
      try {
        options.isa = parse_isa(name);
      } catch (const Error& error) {
        detail::usage_error(flag, ": ", error.what());
      }
    } else if (flag == "-s" || flag == "--seed") {
      options.seed = static_cast<unsigned>(detail::parse_count(flag, value()));
    } else if (flag == "-o" || flag == "--output") {
      const std::string_view format = value();
      if (format == "md") {
        options.output = OutputFormat::markdown;
      } else if (format == "json") {
        options.output = OutputFormat::json;
      } else if (format == "csv") {
        options.output = OutputFormat::csv;
      } else {
        detail::usage_error(flag, ": expected md, json or csv, got \"", format, "\"");
      }
    } else {
      detail::usage_error("unknown option \"", flag, "\" (see --help)");
    }
  }
  if (!options.help && !have_model) detail::usage_error("no model given (-m FILE; see --help)");
  return options;
}

}  // namespace smol::bench
