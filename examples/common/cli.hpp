// The command line of every smol program: CLI11 with the conventions the programs share,
// and one definition of the flags several of them take (model, threads, context, KV cache
// type, weight layout, sampling), spelled as llama.cpp spells them.
//
//   smol::cli::Program program("smol-x", "usage: smol-x -m FILE [options]\n\nWhat it does.");
//   smol::cli::add_model(program, options.model, "GGUF model file");
//   smol::cli::add_threads(program, options.threads);
//   program.app.add_option("-n", options.count, "how many")
//       ->type_name("N")
//       ->transform(smol::cli::integer(0, 100));
//   if (const std::optional<int> status = program.parse(argc, argv)) return *status;
//
// Conventions: -h/--help prints the help on stdout and exits 0; a command line the program
// cannot act on prints one line, "smol-x: <what is wrong> (see smol-x --help)", on stderr
// and exits 2. Numbers are decimal and range-checked before anything runs. A flag given
// twice keeps its last value; a list flag (smol-bench's -p 128,512, smol-chat's --stop)
// collects every value, as llama-bench and llama-cli do. A value that starts with a dash
// is taken as it is (-p -x prompts "-x").
#pragma once

#include <oneapi/tbb/info.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/generate/sampler.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"

namespace smol::cli {

// Thread counts above 4096 and token counts above 2^24 are typos, not requests; refusing
// them also keeps every later sum and product of counts far from overflowing.
inline constexpr std::int64_t kMaxThreads = 4096;
inline constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;  // 16777216

// A command line the program cannot act on. Thrown from a Program::check, or from
// anything CLI11 runs while parsing, it becomes the one-line message and exit status 2.
template <class... Parts>
[[noreturn]] void usage_error(const Parts&... parts) {
  throw CLI::ValidationError(smol::cat(parts...));
}

namespace detail {

inline std::string quoted(std::string_view text) {
  return "\"" + std::string(text) + "\"";
}

inline std::string_view without_plus(std::string_view text) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  return text;
}

// Decimal only, the whole text. CLI11 2.1's own conversion is strtoll with base 0 (010 is
// 8, 0x10 is 16), skips leading blanks and saturates on overflow instead of failing, so
// the validators below hand it only text they have checked and rewritten.
inline std::optional<std::int64_t> parse_integer(std::string_view text) {
  text = without_plus(text);
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return value;
}

// Finite decimal numbers: no inf, nan or hexadecimal floats, which strtod would take.
inline std::optional<double> parse_number(std::string_view text) {
  text = without_plus(text);
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

inline std::string integer_range(std::int64_t min, std::int64_t max) {
  if (max == std::numeric_limits<std::int64_t>::max()) return smol::cat(" >= ", min);
  return smol::cat(" from ", min, " to ", max);
}

// The shortest text that reads back as the same value (a float's default: 0.6, not
// 0.6000000238418579).
template <class Float>
std::string number_text(Float value) {
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  return error == std::errc() ? std::string(text, end) : std::to_string(value);
}

inline std::string number_range(double min, double max, bool above_min) {
  const double any = std::numeric_limits<float>::max();
  const std::string low = number_text(min), high = number_text(max);
  if (max >= any) {
    if (min <= -any) return "";
    return (above_min ? " > " : " >= ") + low;
  }
  return (above_min ? " above " + low + " and up to " : " from " + low + " to ") + high;
}

}  // namespace detail

// A value of an integer flag: decimal, in [min, max]. `adjust` may change an accepted
// value (the thread cap); the flag's variable receives the result.
inline CLI::Validator integer(std::int64_t min, std::int64_t max,
                              std::function<std::int64_t(std::int64_t)> adjust = {}) {
  return CLI::Validator(
      [min, max, adjust](std::string& text) -> std::string {
        const std::optional<std::int64_t> value = detail::parse_integer(text);
        if (!value || *value < min || *value > max) {
          return "expected an integer" + detail::integer_range(min, max) + ", got " +
                 detail::quoted(text);
        }
        text = std::to_string(adjust ? adjust(*value) : *value);
        return "";
      },
      "", "integer");
}

// A value of a number flag: finite, decimal, in [min, max] (or (min, max] when
// above_min). Bounds of ±FLT_MAX mean "no bound": every such flag is stored in a float.
inline CLI::Validator number(double min = -std::numeric_limits<float>::max(),
                             double max = std::numeric_limits<float>::max(),
                             bool above_min = false) {
  return CLI::Validator(
      [min, max, above_min](std::string& text) -> std::string {
        const std::optional<double> value = detail::parse_number(text);
        if (!value || *value < min || *value > max || (above_min && *value == min)) {
          return "expected a number" + detail::number_range(min, max, above_min) + ", got " +
                 detail::quoted(text);
        }
        text = detail::number_text(*value);
        return "";
      },
      "", "number");
}

// A flag whose value is one of a few names, each standing for a value of T:
//   add_choice(app, "--repack", repack, {{"auto", Repack::when_faster}, ...}, "...")
// A name that is not in the list reads "--repack: expected auto, on or off, got "x"".
template <class T>
CLI::Option* add_choice(CLI::App& app, const std::string& names, T& target,
                        std::vector<std::pair<std::string, T>> choices, const std::string& help) {
  std::string spelled, type;  // "auto, on or off", "auto|on|off"
  for (std::size_t i = 0; i < choices.size(); ++i) {
    spelled += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i].first;
    type += (i == 0 ? "" : "|") + choices[i].first;
  }
  const auto find = [choices](const std::string& text) -> const T* {
    for (const auto& [name, value] : choices) {
      if (name == text) return &value;
    }
    return nullptr;
  };
  return app
      .add_option_function<std::string>(
          names, [&target, find](const std::string& text) { target = *find(text); }, help)
      ->type_name(type)
      ->check(CLI::Validator(
          [find, spelled](std::string& text) -> std::string {
            return find(text) ? "" : "expected " + spelled + ", got " + detail::quoted(text);
          },
          "", "choice"));
}

// The help text: the program's usage and description as written, then each group of
// flags as "  -m, --model FILE   what it is", then the footer. Positional arguments are
// described in the usage line.
class HelpFormatter : public CLI::FormatterBase {
 public:
  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    std::string out = app->get_description() + "\n";
    for (const std::string& group : app->get_groups()) {
      const std::vector<const CLI::Option*> options =
          app->get_options([&group](const CLI::Option* option) {
            return option->get_group() == group && option->nonpositional();
          });
      if (group.empty() || options.empty()) continue;
      out += "\n" + group + ":\n";
      for (const CLI::Option* option : options) out += line(*option);
    }
    if (!app->get_footer().empty()) out += "\n" + app->get_footer() + "\n";
    return out;
  }

 private:
  static constexpr std::size_t kColumn = 27;  // where the descriptions start

  static std::string line(const CLI::Option& option) {
    std::string names = " ";
    for (const std::string& name : option.get_snames()) names += " -" + name + ",";
    for (const std::string& name : option.get_lnames()) names += " --" + name + ",";
    names.pop_back();
    if (option.get_expected_min() > 0) names += " " + option.get_type_name();
    names += names.size() + 1 < kColumn ? std::string(kColumn - names.size(), ' ')
                                        : "\n" + std::string(kColumn, ' ');
    std::string out = names;
    for (const char c : option.get_description()) {
      out += c;
      if (c == '\n') out += std::string(kColumn, ' ');
    }
    return out + "\n";
  }
};

// One program's command line: a CLI::App (add the flags to `app`) with the conventions
// above.
class Program {
 public:
  // description: the help's first lines, usage included, as they should be printed.
  Program(std::string name, std::string description)
      : app(std::move(description), name), name_(std::move(name)) {
    app.formatter(std::make_shared<HelpFormatter>());
    app.set_help_flag();  // parse() adds it back, last, so that the help lists it last
    app.allow_extras();   // parse() reports them as "unknown option ..."
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    group("options");
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  CLI::App app;

  const std::string& name() const { return name_; }

  // The help section of the flags added from now on.
  void group(const std::string& title) { app.option_defaults()->group(title); }

  // A single-dash spelling of more than one letter (llama.cpp's -sys), which CLI11 cannot
  // declare: parse() replaces an argument equal to `spelling` by `flag` before parsing.
  void alias(std::string spelling, std::string flag) {
    aliases_[std::move(spelling)] = std::move(flag);
  }

  // A rule over several flags (one of -f and --tokens-file, a required -m), run after a
  // successful parse; it reports a violation with usage_error().
  void check(std::function<void()> rule) { checks_.push_back(std::move(rule)); }

  // A line for stderr once the command line is known to be good (a capped thread count).
  void note(std::string text) { notes_.push_back(std::move(text)); }

  // Parses the arguments into the flags' variables. Returns the exit status when the
  // program should stop here (0 after --help, 2 after a usage error, both reported),
  // nothing when it should go on.
  std::optional<int> parse(int argc, const char* const* argv) {
    std::string help_group = "options";
    for (const CLI::Option* option : app.get_options()) {
      if (!option->get_group().empty()) help_group = option->get_group();
    }
    app.set_help_flag("-h,--help", "show this text")->group(help_group);
    std::vector<std::string> args;  // CLI11 takes them last first
    for (int i = argc - 1; i > 0; --i) {
      const auto alias = aliases_.find(argv[i]);
      args.emplace_back(alias != aliases_.end() ? alias->second : std::string(argv[i]));
    }
    notes_.clear();
    try {
      check_last_value(args);
      app.parse(args);
      for (const std::string& extra : app.remaining()) {
        if (extra == "--") continue;  // CLI11 keeps the end-of-options mark among them
        if (extra.size() > 1 && extra[0] == '-') usage_error("unknown option ", extra);
        usage_error("unexpected argument ", detail::quoted(extra));
      }
      for (const auto& rule : checks_) rule();
    } catch (const CLI::CallForHelp&) {
      std::fputs(app.help().c_str(), stdout);
      return 0;
    } catch (const CLI::ParseError& error) {
      std::fprintf(stderr, "%s: %s (see %s --help)\n", name_.c_str(), error.what(), name_.c_str());
      return 2;
    }
    for (const std::string& note : notes_)
      std::fprintf(stderr, "%s: %s\n", name_.c_str(), note.c_str());
    return std::nullopt;
  }

 private:
  // CLI11 says "--threads: 1 required N missing" when the last argument is a flag whose
  // value never came; this says it plainly. (A flag's value may itself start with a
  // dash, hence the look at the argument before it.)
  void check_last_value(const std::vector<std::string>& reversed) {
    const auto takes_value = [this](const std::string& arg) {
      if (arg.size() < 2 || arg[0] != '-') return false;
      const CLI::Option* option = app.get_option_no_throw(arg);
      return option != nullptr && option->get_expected_min() > 0;
    };
    if (reversed.empty() || !takes_value(reversed[0])) return;
    if (reversed.size() > 1 && takes_value(reversed[1])) return;  // it is that flag's value
    usage_error(reversed[0], " needs a value");
  }

  std::string name_;
  std::map<std::string, std::string> aliases_;
  std::vector<std::function<void()>> checks_;
  std::vector<std::string> notes_;
};

// ---- the flags several programs share ----------------------------------------------

// -m/--model FILE into a std::string or std::optional<std::string>. Required unless the
// program has a default model.
template <class Path>
CLI::Option* add_model(Program& program, Path& path, const std::string& help,
                       bool required = true) {
  CLI::Option* option =
      program.app
          .add_option_function<std::string>(
              "-m,--model", [&path](const std::string& file) { path = file; }, help)
          ->type_name("FILE");
  if (required) {
    program.check([option] {
      if (option->count() == 0) usage_error("no model given: use -m FILE");
    });
  }
  return option;
}

// The CPUs this process may run on. It is what a thread count of 0 ("all") means, since
// smol::Context asks oneTBB the same question; unlike std::thread::hardware_concurrency
// the answer respects the CPU affinity mask (taskset, container cpusets).
inline int available_cpus() {
  return std::max(1, tbb::info::default_concurrency());
}

// More threads than CPUs only makes them wait for each other (and oneTBB would run no more
// than the CPUs anyway, while the program reported the number asked for): run with the
// CPUs there are, and say so.
inline std::int64_t cap_threads(Program& program, std::string_view flag, std::int64_t threads) {
  const int cpus = available_cpus();
  if (threads <= cpus) return threads;
  program.note(smol::cat(flag, " ", threads, ": this machine has ", cpus,
                         cpus == 1 ? " CPU" : " CPUs", "; using ", cpus));
  return cpus;
}

// A value of a thread-count flag: min (0 = all, or 1) to kMaxThreads, capped at the CPUs.
inline CLI::Validator thread_count(Program& program, std::int64_t min) {
  return integer(min, kMaxThreads,
                 [&program](std::int64_t threads) { return cap_threads(program, "-t", threads); });
}

// -t/--threads N; 0 = every CPU (smol::Context's meaning).
inline CLI::Option* add_threads(Program& program, int& threads) {
  return program.app
      .add_option("-t,--threads", threads,
                  "CPU threads, up to the CPUs there are; 0 = all\n(default: all)")
      ->type_name("N")
      ->transform(thread_count(program, 0));
}

// -c/--ctx-size N, from min to kMaxTokens.
inline CLI::Option* add_context(Program& program, std::size_t& context, std::int64_t min,
                                const std::string& help) {
  return program.app.add_option("-c,--ctx-size", context, help)
      ->type_name("N")
      ->transform(integer(min, kMaxTokens));
}

// The KV cache's element types, with llama.cpp's flags: -ctk/--cache-type-k and
// -ctv/--cache-type-v (f32, f16, bf16, q8_0, q4_0), and --kv-type for both at once
// (given first, so that -ctk/-ctv refine it whatever their order on the line).
inline void add_kv_types(Program& program, KvTypes& types) {
  std::vector<std::pair<std::string, KvType>> choices;
  std::vector<std::pair<std::string, KvTypes>> both;
  for (const KvType type : kAllKvTypes) {
    choices.emplace_back(std::string(kv_type_name(type)), type);
    both.emplace_back(std::string(kv_type_name(type)), KvTypes(type));
  }
  const auto by_default = [](KvType type) {
    return "\n(default " + std::string(kv_type_name(type)) + ")";
  };
  add_choice(program.app, "--kv-type", types, both,
             "the K and the V cache's type at once: -ctk and -ctv");
  program.alias("-ctk", "--cache-type-k");
  program.alias("-ctv", "--cache-type-v");
  add_choice(
      program.app, "--cache-type-k", types.key, choices,
      "-ctk: K cache type; q8_0 takes 53 % of f16's\nmemory, q4_0 28 %" + by_default(types.key));
  add_choice(program.app, "--cache-type-v", types.value, choices,
             "-ctv: V cache type" + by_default(types.value));
}

inline CLI::Option* add_repack(Program& program, Repack& repack) {
  return add_choice(program.app, "--repack", repack,
                    {{"auto", Repack::when_faster}, {"on", Repack::always}, {"off", Repack::never}},
                    "copy the weights into huge pages at load, the K-quants\n"
                    "interleaved by 8 rows, Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/IQ4\n"
                    "by 16, the rest in the file's order (on: always; auto, the\n"
                    "default: where the CPU's kernels run faster on them, x86;\n"
                    "off: read the file only)");
}

// llama.cpp's RoPE flags, for every program that runs a model: scaling to run past the
// trained context (SmolLM3-3B: --rope-scaling yarn --rope-scale 2 -c 131072) and
// overrides of the file's values.
inline void add_rope_flags(Program& program, RopeOverrides& rope) {
  CLI::App& app = program.app;
  add_choice<std::optional<RopeScalingType>>(app, "--rope-scaling", rope.type,
                                             {{"none", RopeScalingType::none},
                                              {"linear", RopeScalingType::linear},
                                              {"yarn", RopeScalingType::yarn}},
                                             "RoPE scaling past the trained context (default: "
                                             "the file's)");
  app.add_option_function<float>(
         "--rope-scale", [&rope](float value) { rope.factor = value; },
         "context multiplier of the RoPE scaling (frequencies / N)")
      ->type_name("N")
      ->transform(number(1.0, 1024.0));
  app.add_option_function<float>(
         "--rope-freq-scale", [&rope](float value) { rope.factor = 1.0f / value; },
         "the same as a frequency factor: --rope-freq-scale 0.5 = --rope-scale 2")
      ->type_name("F")
      ->transform(number(1.0 / 1024.0, 1.0));
  app.add_option_function<float>(
         "--rope-freq-base", [&rope](float value) { rope.freq_base = value; },
         "RoPE base frequency (default: the file's)")
      ->type_name("N")
      ->transform(number(0.0, std::numeric_limits<float>::max(), true));
  app.add_option_function<std::int64_t>(
         "--yarn-orig-ctx",
         [&rope](std::int64_t value) { rope.original_context = static_cast<std::size_t>(value); },
         "YaRN: the context trained without scaling (default: the file's)")
      ->type_name("N")
      ->transform(integer(1, kMaxTokens));
  app.add_option_function<float>(
         "--yarn-ext-factor", [&rope](float value) { rope.ext_factor = value; },
         "YaRN: weight of the extrapolation ramp (default 1)")
      ->type_name("F")
      ->transform(number(0.0, 1.0));
  app.add_option_function<float>(
         "--yarn-attn-factor", [&rope](float value) { rope.attn_factor = value; },
         "YaRN: extra magnitude scale (default 1)")
      ->type_name("F")
      ->transform(number(0.0, 100.0, true));
  app.add_option_function<float>(
         "--yarn-beta-fast", [&rope](float value) { rope.beta_fast = value; },
         "YaRN: turns that mark the fast end of the ramp (default 32)")
      ->type_name("N")
      ->transform(number(0.0, 1e6, true));
  app.add_option_function<float>(
         "--yarn-beta-slow", [&rope](float value) { rope.beta_slow = value; },
         "YaRN: turns that mark the slow end of the ramp (default 1)")
      ->type_name("N")
      ->transform(number(0.0, 1e6, true));
}

// --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --seed, with llama.cpp's
// meanings; the defaults shown are those `settings` holds now. --repeat-last-n -1 (the
// whole context) is stored as -1: the program resolves it once the context is known.
inline void add_sampling(Program& program, SamplerSettings& settings) {
  CLI::App& app = program.app;
  const auto shown = [](float value) { return detail::number_text(value); };
  app.add_option("--temp", settings.temperature,
                 "temperature; <= 0 = greedy (default " + shown(settings.temperature) + ")")
      ->type_name("X")
      ->transform(number());
  app.add_option("--top-k", settings.top_k,
                 smol::cat("keep the N most likely tokens; 0 = off (default ", settings.top_k, ")"))
      ->type_name("N")
      ->transform(integer(0, std::numeric_limits<int>::max()));
  app.add_option("--top-p", settings.top_p,
                 "nucleus sampling, 0 to 1; 1 = off (default " + shown(settings.top_p) + ")")
      ->type_name("X")
      ->transform(number(0, 1));
  app.add_option("--min-p", settings.min_p,
                 "drop tokens below X times the best, 0 to 1; 0 = off\n(default " +
                     shown(settings.min_p) + ")")
      ->type_name("X")
      ->transform(number(0, 1));
  app.add_option(
         "--repeat-penalty", settings.repeat_penalty,
         "penalize recent tokens, > 0; 1 = off (default " + shown(settings.repeat_penalty) + ")")
      ->type_name("X")
      ->transform(number(0, std::numeric_limits<float>::max(), true));
  app.add_option("--repeat-last-n", settings.penalty_window,
                 smol::cat("how many recent tokens the penalty sees; 0 = none,\n"
                           "-1 = the whole context (default ",
                           settings.penalty_window, ")"))
      ->type_name("N")
      ->transform(integer(-1, std::numeric_limits<int>::max()));
  app.add_option_function<std::int64_t>(
         "--seed",
         [&settings](std::int64_t seed) {
           settings.seed = seed < 0
                               ? std::nullopt
                               : std::optional<std::uint64_t>(static_cast<std::uint64_t>(seed));
         },
         settings.seed ? smol::cat("random seed; -1 = random (default ", *settings.seed, ")")
                       : std::string("random seed; -1 = random (default: random)"))
      ->type_name("N")
      ->transform(integer(-1, std::numeric_limits<std::int64_t>::max()));
}

}  // namespace smol::cli
