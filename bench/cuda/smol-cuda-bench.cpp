// smol-cuda-bench: prefill and decode tokens/s of smol::cuda::GpuTransformer on the
// full-size model, llama-bench style (pp: one prompt in one call; tg: one token per
// call, logits every step).
//
//   smol-cuda-bench                        SmolLM3-3B-Q4_K_M.gguf from $SMOL_MODELS
//                                          (default ~/.cache/smol), else --synthetic
//   smol-cuda-bench -m model.gguf -p 512 -n 128 -r 3
//   smol-cuda-bench --list-devices
//
// Without the real file, --synthetic FILE writes (once) a model with SmolLM3-3B's
// exact shapes and Q4_K_M type mix and random weights: a decode step reads the same
// bytes, so its speed is the real file's. Exit codes: 0 done, 1 error, 2 bad command
// line, 77 no CUDA device (it prints "skipped: no CUDA device": CTest's skip).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smol/core/error.hpp"
#include "smol/cuda/gpu_transformer.hpp"
#include "smol/model/model.hpp"
#include "smol/testing/synthetic.hpp"

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kUsage = R"(usage: smol-cuda-bench [options]

  -m, --model FILE      GGUF model (default: SmolLM3-3B-Q4_K_M.gguf in $SMOL_MODELS,
                        default ~/.cache/smol, when it is there)
  --synthetic FILE      otherwise: write a synthetic SmolLM3-3B (random weights, real
                        shapes and Q4_K_M type mix) to FILE once, and use it
  -p N                  prompt tokens of the prefill test (default 512; 0 = none)
  -n N                  tokens of the decode test (default 128; 0 = none)
  -r N                  timed repetitions of each test (default 3)
  --list-devices        print the CUDA devices and exit
  -h, --help            this text
)";

struct Options {
  std::string model;
  std::string synthetic;
  std::size_t prompt = 512;
  std::size_t decode = 128;
  std::size_t repetitions = 3;
  bool list_devices = false;
};

struct UsageError {
  std::string message;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError{flag + " needs a value"};
      return argv[++i];
    };
    const auto count = [&](std::size_t min) {
      const std::string text = value();
      char* end = nullptr;
      const unsigned long long n = std::strtoull(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || text[0] == '-' || n < min) {
        throw UsageError{flag + ": expected an integer >= " + std::to_string(min) + ", got \"" +
                         text + "\""};
      }
      return static_cast<std::size_t>(n);
    };
    if (flag == "-h" || flag == "--help") {
      std::fputs(kUsage.data(), stdout);
      std::exit(0);
    } else if (flag == "-m" || flag == "--model") {
      options.model = value();
    } else if (flag == "--synthetic") {
      options.synthetic = value();
    } else if (flag == "-p") {
      options.prompt = count(0);
    } else if (flag == "-n") {
      options.decode = count(0);
    } else if (flag == "-r") {
      options.repetitions = count(1);
    } else if (flag == "--list-devices") {
      options.list_devices = true;
    } else {
      throw UsageError{"unknown option " + flag};
    }
  }
  return options;
}

fs::path models_directory() {
  if (const char* dir = std::getenv("SMOL_MODELS"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr && *home != '\0' ? home : ".") / ".cache" / "smol";
}

// The model to measure: -m, else the real SmolLM3-3B, else the synthetic one.
std::string choose_model(const Options& options) {
  if (!options.model.empty()) return options.model;
  const fs::path real = models_directory() / "SmolLM3-3B-Q4_K_M.gguf";
  if (fs::exists(real)) return real.string();
  if (options.synthetic.empty()) {
    smol::fail(real.string(), " is not there; give -m FILE or --synthetic FILE");
  }
  if (!fs::exists(options.synthetic)) {
    std::fprintf(stderr, "smol-cuda-bench: writing a synthetic SmolLM3-3B to %s (once)\n",
                 options.synthetic.c_str());
    fs::create_directories(fs::absolute(options.synthetic).parent_path());
    const std::string partial = options.synthetic + ".partial";
    smol::write_synthetic_model(smol::synthetic_preset("smollm3-3b"), partial);
    fs::rename(partial, options.synthetic);  // a run cut short leaves no half-written model
  }
  return options.synthetic;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Result {
  double best = 0, mean = 0;  // tokens per second
};

template <class Run>
Result measure(std::size_t tokens, std::size_t repetitions, const Run& run) {
  run();  // warm-up: first touch of the scratch buffers and the kernels' first launch
  Result result;
  for (std::size_t r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    const double rate = static_cast<double>(tokens) / seconds_since(start);
    result.best = std::max(result.best, rate);
    result.mean += rate / static_cast<double>(repetitions);
  }
  return result;
}

int run(const Options& options) {
  const std::string path = choose_model(options);
  const smol::Model model = smol::Model::open(path);
  const auto upload_start = std::chrono::steady_clock::now();
  const std::size_t longest = std::max<std::size_t>({options.prompt, options.decode, 1});
  smol::cuda::GpuTransformer gpu(
      model, {.context = longest, .max_batch = std::max<std::size_t>(options.prompt, 1)});
  const double upload_seconds = seconds_since(upload_start);

  std::printf("device: %s\n", smol::cuda::device_name().c_str());
  std::printf("model: %s (%s, %zu layers, vocab %zu)\n", path.c_str(),
              model.config().architecture.c_str(), model.config().n_layer, model.config().n_vocab);
  std::printf("weights on the device: %.3f GiB, uploaded in %.2f s\n",
              static_cast<double>(gpu.weight_bytes()) / (1024.0 * 1024.0 * 1024.0), upload_seconds);

  std::mt19937 rng(42);
  std::uniform_int_distribution<std::int32_t> ids(
      0, static_cast<std::int32_t>(model.config().n_vocab - 1));
  std::vector<std::int32_t> tokens(longest);
  for (std::int32_t& token : tokens) token = ids(rng);

  if (options.prompt > 0) {
    const auto prompt = std::span(tokens).first(options.prompt);
    const Result pp = measure(options.prompt, options.repetitions,
                              [&] { gpu.forward(prompt, 0, smol::LogitsFor::last); });
    std::printf("pp%zu: %.1f tok/s (best of %zu: %.1f)\n", options.prompt, pp.mean,
                options.repetitions, pp.best);
  }
  if (options.decode > 0) {
    const Result tg = measure(options.decode, options.repetitions, [&] {
      for (std::size_t i = 0; i < options.decode; ++i) {
        gpu.forward(std::span(tokens).subspan(i, 1), i, smol::LogitsFor::last);
      }
    });
    // Each step reads every weight once (the KV cache is small beside them here): the
    // rate of weight bytes read says how near the memory bandwidth the kernels run.
    std::printf("tg%zu: %.1f tok/s (best of %zu: %.1f), %.0f GB/s of weights read\n",
                options.decode, tg.mean, options.repetitions, tg.best,
                tg.mean * static_cast<double>(gpu.weight_bytes()) / 1e9);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse(argc, argv);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "smol-cuda-bench: %s (see --help)\n", error.message.c_str());
    return 2;
  }
  const int devices = smol::cuda::device_count();
  if (options.list_devices) {
    if (devices == 0) {
      std::printf("0 CUDA devices (%s)\n", smol::cuda::device_error().c_str());
    } else {
      std::printf("%d CUDA device%s\n", devices, devices == 1 ? "" : "s");
      for (int d = 0; d < devices; ++d)
        std::printf("%d: %s\n", d, smol::cuda::device_name(d).c_str());
    }
    return 0;
  }
  if (devices == 0) {
    std::puts("skipped: no CUDA device");
    return 77;
  }
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "smol-cuda-bench: %s\n", error.what());
    return 1;
  }
}
