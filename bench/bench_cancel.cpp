// How long a cancel takes to stop a prefill: the time from setting the flag (what
// smol-chat's Ctrl-C handler and a server's client disconnect do) to the return of
// Transformer::forward with Cancelled, for flags set at random moments of a 512-token
// prefill. The model is $SMOL_BENCH_MODEL (e.g. the full-size SmolLM3-3B shape from
// `smol-make-model --preset smollm3-3b`), else the tiny synthetic preset.
//
//   build/release/bench/micro_benchmarks --benchmark_filter='^BM_cancel_prefill'
//   (with SMOL_BENCH_MODEL=build/smollm3-3b-q4_k_m.gguf in the environment)
//
// Counters: latency_ms_mean / latency_ms_max over the iterations, and layer_ms, the
// time of one layer of that prefill (the four polls per layer bound the latency to
// about a third of it).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "smol/core/cancel.hpp"
#include "smol/model/model.hpp"
#include "smol/model/transformer.hpp"
#include "smol/testing/synthetic.hpp"

using namespace smol;

namespace bench_cancel {

using Clock = std::chrono::steady_clock;

std::string model_path() {
  if (const char* path = std::getenv("SMOL_BENCH_MODEL"); path != nullptr && *path != '\0') {
    return path;
  }
  static const std::string tiny = [] {
    const std::string path = "bench_cancel_tiny.gguf";
    write_synthetic_model(synthetic_preset("tiny"), path);
    return path;
  }();
  return tiny;
}

void BM_cancel_prefill(benchmark::State& state) {
  const Model model = Model::open(model_path(), {.repack = Repack::when_faster});
  Context ctx(static_cast<int>(state.range(0)));
  constexpr std::size_t kTokens = 512;
  std::vector<std::int32_t> tokens(kTokens);
  std::mt19937 rng(11);
  for (auto& token : tokens) {
    token = static_cast<std::int32_t>(rng() % model.config().n_vocab);
  }
  Transformer session(model, ctx, {.context = 1024});

  // One uncancelled prefill: its length sets the range of the random cancel moments.
  const auto begin = Clock::now();
  session.forward(tokens, 0, LogitsFor::none);
  const double prefill_s = std::chrono::duration<double>(Clock::now() - begin).count();

  std::uniform_real_distribution<double> moment(0.05 * prefill_s, 0.95 * prefill_s);
  std::vector<double> latencies;
  for (auto _ : state) {
    std::atomic<bool> flag{false};
    std::atomic<std::int64_t> set_at{0};
    const auto delay = std::chrono::duration<double>(moment(rng));
    std::thread canceller([&] {
      std::this_thread::sleep_for(delay);
      set_at.store(Clock::now().time_since_epoch().count());
      flag.store(true);
    });
    const auto started = Clock::now();
    bool cancelled = false;
    try {
      session.forward(tokens, 0, LogitsFor::none, &flag);
    } catch (const Cancelled&) {
      cancelled = true;
    }
    const auto returned = Clock::now();
    canceller.join();
    state.SetIterationTime(std::chrono::duration<double>(returned - started).count());
    if (!cancelled) continue;  // the flag came after the end: no latency to count
    const Clock::time_point flagged{Clock::duration(set_at.load())};
    latencies.push_back(std::chrono::duration<double, std::milli>(returned - flagged).count());
  }
  double sum = 0, worst = 0;
  for (const double ms : latencies) {
    sum += ms;
    worst = std::max(worst, ms);
  }
  state.counters["latency_ms_mean"] = latencies.empty() ? 0 : sum / double(latencies.size());
  state.counters["latency_ms_max"] = worst;
  state.counters["cancelled"] = static_cast<double>(latencies.size());
  state.counters["layer_ms"] = 1e3 * prefill_s / static_cast<double>(model.config().n_layer);
}

BENCHMARK(BM_cancel_prefill)
    ->Arg(2)
    ->Iterations(10)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace bench_cancel
