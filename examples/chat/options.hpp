// smol-chat's command line, spelled like llama.cpp's where a flag exists there.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smol/generate/sampler.hpp"
#include "smol/model/kv_cache.hpp"
#include "smol/model/model.hpp"

namespace chat {

constexpr std::string_view kUsage = R"(usage: smol-chat [options]

Chat with a SmolLM3 or Llama-family GGUF model. Without -m it uses
SmolLM3-3B-Q4_K_M.gguf from $SMOL_MODELS (default ~/.cache/smol), offering to
download it, or a small demo model with random weights.

model and input:
  -m, --model FILE         GGUF model file
  -p, --prompt TEXT        answer TEXT and exit; without -p, a REPL (or, when stdin
                           is not a terminal, one turn per line of stdin)
  --system TEXT            system prompt (also -sys, --system-prompt)
  --raw                    no chat template: continue the text as written (base models)
  -y, --yes                download the default model without asking (or SMOL_DOWNLOAD=1)

generation:
  -n, --n-predict N        at most N tokens per reply (default -1: until the model stops)
  --temp X                 temperature; 0 = greedy (default 0.6)
  --top-k N                keep the N most likely tokens; 0 = off (default 40)
  --top-p X                nucleus sampling; 1 = off (default 0.95)
  --min-p X                drop tokens below X times the best; 0 = off (default 0.05)
  --repeat-penalty X       penalize recent tokens; 1 = off (default 1.0)
  --repeat-last-n N        how many recent tokens the penalty sees (default 64)
  --seed N                 random seed (default: random)
  --stop TEXT              stop a reply at TEXT (repeatable; also -r)
  --ignore-eos             keep generating past the end of the turn (benchmarks)
  --think, --no-think      SmolLM3's reasoning mode (default: on)
  --hide-thinking          do not print the reasoning, only the answer

runtime:
  -t, --threads N          CPU threads (default: all)
  -c, --ctx-size N         context in tokens (default: the model's)
  --kv-type f16|f32        KV cache precision (default f16)
  --gpu                    run the model on the GPU (a build with -DSMOL_CUDA=ON)
  --repack auto|on|off     interleave the Q4_K/Q6_K weights in groups of 8 rows at
                           load (on: always; auto, the default: where the CPU's
                           kernels run faster on them, AVX2 and AVX-512; off: read
                           the file only)
  --no-context-shift       when the context is full, stop instead of forgetting the
                           oldest turns
  -h, --help               show this text

in the chat: /think, /no_think, /system TEXT, /reset, /stats, /help, /quit.
Ctrl-C stops the current reply; Ctrl-C twice at the prompt quits.
)";

struct Options {
  std::optional<std::string> model;
  std::optional<std::string> prompt;
  std::string system;
  bool raw = false;
  bool yes = false;
  long max_tokens = -1;
  smol::SamplerSettings sampling = default_sampling();
  std::vector<std::string> stop_strings;
  bool thinking = true;
  bool hide_thinking = false;
  bool ignore_eos = false;
  int threads = 0;
  std::size_t context = 0;
  smol::KvType kv_type = smol::KvType::f16;
  bool context_shift = true;
  bool gpu = false;
  smol::Repack repack = smol::Repack::when_faster;

  // SmolLM3's recommended temperature (0.6, top-p 0.95); the rest are llama.cpp's.
  static smol::SamplerSettings default_sampling() {
    smol::SamplerSettings settings;
    settings.temperature = 0.6f;
    return settings;
  }
};

struct UsageError {
  std::string message;
};

namespace detail {

inline long parse_integer(std::string_view flag, const std::string& text, long min) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < min) {
    throw UsageError{std::string(flag) + ": expected an integer >= " + std::to_string(min) +
                     ", got \"" + text + "\""};
  }
  return value;
}

inline float parse_number(std::string_view flag, const std::string& text) {
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(value == value)) {
    throw UsageError{std::string(flag) + ": expected a number, got \"" + text + "\""};
  }
  return value;
}

}  // namespace detail

inline Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{flag + " needs a value"};
      return argv[++i];
    };
    const auto integer = [&](long min) { return detail::parse_integer(flag, value(), min); };
    const auto number = [&] { return detail::parse_number(flag, value()); };
    if (flag == "-h" || flag == "--help") {
      std::fputs(kUsage.data(), stdout);
      std::exit(0);
    } else if (flag == "-m" || flag == "--model") {
      options.model = value();
    } else if (flag == "-p" || flag == "--prompt") {
      options.prompt = value();
    } else if (flag == "--system" || flag == "-sys" || flag == "--system-prompt") {
      options.system = value();
    } else if (flag == "--raw") {
      options.raw = true;
    } else if (flag == "-y" || flag == "--yes") {
      options.yes = true;
    } else if (flag == "-n" || flag == "--n-predict") {
      options.max_tokens = integer(-1);
    } else if (flag == "--temp") {
      options.sampling.temperature = number();
    } else if (flag == "--top-k") {
      options.sampling.top_k = static_cast<int>(integer(0));
    } else if (flag == "--top-p") {
      options.sampling.top_p = number();
    } else if (flag == "--min-p") {
      options.sampling.min_p = number();
    } else if (flag == "--repeat-penalty") {
      options.sampling.repeat_penalty = number();
    } else if (flag == "--repeat-last-n") {
      options.sampling.penalty_window = static_cast<int>(integer(0));
    } else if (flag == "--seed") {
      const long seed = integer(-1);
      if (seed >= 0) options.sampling.seed = static_cast<std::uint64_t>(seed);
    } else if (flag == "--stop" || flag == "-r" || flag == "--reverse-prompt") {
      options.stop_strings.push_back(value());
    } else if (flag == "--think") {
      options.thinking = true;
    } else if (flag == "--no-think") {
      options.thinking = false;
    } else if (flag == "--ignore-eos") {
      options.ignore_eos = true;
    } else if (flag == "--hide-thinking") {
      options.hide_thinking = true;
    } else if (flag == "-t" || flag == "--threads") {
      options.threads = static_cast<int>(integer(1));
    } else if (flag == "-c" || flag == "--ctx-size") {
      options.context = static_cast<std::size_t>(integer(0));
    } else if (flag == "--kv-type") {
      const std::string type = value();
      if (type == "f16") {
        options.kv_type = smol::KvType::f16;
      } else if (type == "f32") {
        options.kv_type = smol::KvType::f32;
      } else {
        throw UsageError{"--kv-type: expected f16 or f32, got \"" + type + "\""};
      }
    } else if (flag == "--no-context-shift") {
      options.context_shift = false;
    } else if (flag == "--gpu") {
      options.gpu = true;
    } else if (flag == "--repack") {
      const std::string mode = value();
      if (mode == "auto") {
        options.repack = smol::Repack::when_faster;
      } else if (mode == "on") {
        options.repack = smol::Repack::always;
      } else if (mode == "off") {
        options.repack = smol::Repack::never;
      } else {
        throw UsageError{"--repack: expected auto, on or off, got \"" + mode + "\""};
      }
    } else {
      throw UsageError{"unknown option " + flag};
    }
  }
  return options;
}

}  // namespace chat
