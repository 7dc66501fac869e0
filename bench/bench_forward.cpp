// Decode-side costs of the model beyond the matvecs: attention over a deep KV cache of
// each type (SmolLM3-3B's shape, K/V streamed from beyond the LLC as in a real decode
// step) against a plain memory read in the same run (counter `vs_memory`), and whole
// decode steps of a small synthetic model and, when $SMOL_BENCH_MODEL names a GGUF file
// (e.g. one from `smol-make-model --preset smollm3-3b`), of that model, and restoring a
// saved session of that model.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "smol/gguf/gguf_file.hpp"
#include "smol/model/model.hpp"
#include "smol/model/session_file.hpp"
#include "smol/model/transformer.hpp"
#include "smol/ops/attention.hpp"
#include "smol/quant/kv_layout.hpp"
#include "smol/testing/synthetic.hpp"

using namespace smol;

namespace bench_forward {

constexpr AttentionShape kSmolLM3{16, 4, 128};

// Copies of one layer's K and V (cache type `type`) at `depth` positions, enough of
// them to exceed the LLC; each iteration reads the next copy.
struct KvPool {
  std::vector<std::byte> bytes;
  std::size_t head_bytes = 0, layer_bytes = 0, copies = 0;
};

KvPool make_pool(KvType type, std::size_t depth) {
  KvPool pool;
  const std::size_t dim = kSmolLM3.head_dim;
  pool.head_bytes = depth * kv_row_bytes(type, dim);
  pool.layer_bytes = 2 * kSmolLM3.n_head_kv * pool.head_bytes;
  pool.copies = std::max<std::size_t>(2, bench::kMemoryReadBytes / pool.layer_bytes);
  pool.bytes.resize(pool.copies * pool.layer_bytes);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(dim);
  for (std::size_t h = 0; h < 2 * kSmolLM3.n_head_kv; ++h) {
    std::byte* region = pool.bytes.data() + h * pool.head_bytes;
    for (std::size_t p = 0; p < depth; ++p) {
      for (float& x : row) x = normal(rng);
      if (h < kSmolLM3.n_head_kv) {
        store_key(type, row.data(), region, p, dim);
      } else {
        store_value(type, row.data(), region, p, dim);
      }
    }
  }
  for (std::size_t c = 1; c < pool.copies; ++c) {
    std::copy_n(pool.bytes.begin(), pool.layer_bytes,
                pool.bytes.begin() + static_cast<std::ptrdiff_t>(c * pool.layer_bytes));
  }
  return pool;
}

// Arguments: depth, threads, cache type (an index into kAllKvTypes).
void BM_attention_decode(benchmark::State& state) {
  const auto depth = static_cast<std::size_t>(state.range(0));
  Context ctx(static_cast<int>(state.range(1)));
  const KvType type = kAllKvTypes[static_cast<std::size_t>(state.range(2))];
  const double memory_gbps = bench::memory_read_gbps(ctx);
  const KvPool pool = make_pool(type, depth);
  std::vector<float> q(kSmolLM3.n_head * kSmolLM3.head_dim, 0.1f), out(q.size());
  std::size_t copy = 0;
  for (auto _ : state) {
    const std::byte* keys = pool.bytes.data() + copy * pool.layer_bytes;
    const KvHeads kv{.types = type,
                     .keys = keys,
                     .key_head_stride = pool.head_bytes,
                     .values = keys + pool.layer_bytes / 2,
                     .value_head_stride = pool.head_bytes};
    attention(ctx, kSmolLM3, q.data(), 1, depth - 1, kv, out.data());
    benchmark::DoNotOptimize(out.data());
    copy = (copy + 1) % pool.copies;
  }
  const double bytes =
      static_cast<double>(state.iterations()) * static_cast<double>(pool.layer_bytes);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["GBps"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["memory_GBps"] = memory_gbps;
  state.counters["vs_memory"] =
      benchmark::Counter(bytes / 1e9 / memory_gbps, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(isa_name(ctx.isa())) + " " + std::string(kv_type_name(type)));
}

// One decode step of the tiny synthetic SmolLM3 (the fixture's shape, Q4_K_M) after a
// prompt of `depth` tokens; the step is rewound each iteration so depth stays fixed.
void BM_decode_tiny(benchmark::State& state) {
  static const Model model = [] {
    SyntheticSpec spec = synthetic_preset("tiny");
    auto file = gguf::GgufFile::from_bytes(make_synthetic_writer(spec).to_bytes(), "tiny.gguf");
    ModelConfig config = ModelConfig::from_gguf(file);
    return Model(std::move(file), std::move(config));
  }();
  const auto depth = static_cast<std::size_t>(state.range(0));
  Context ctx(static_cast<int>(state.range(1)));
  Transformer session(model, ctx, {.context = depth + 1});
  std::vector<std::int32_t> prompt(depth);
  for (std::size_t i = 0; i < depth; ++i) prompt[i] = static_cast<std::int32_t>(i * 7 % 900);
  session.forward(prompt, 0, LogitsFor::none);
  const std::int32_t next = 42;
  for (auto _ : state) {
    benchmark::DoNotOptimize(session.forward(std::span(&next, 1), depth).data());
  }
  state.counters["tok_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// One decode step of the model in $SMOL_BENCH_MODEL at a fixed depth, as above.
void BM_decode_file(benchmark::State& state) {
  static const std::unique_ptr<Model> model =
      std::make_unique<Model>(Model::open(std::getenv("SMOL_BENCH_MODEL")));
  const auto depth = static_cast<std::size_t>(state.range(0));
  Context ctx(static_cast<int>(state.range(1)));
  Transformer session(*model, ctx, {.context = depth + 1});
  std::vector<std::int32_t> prompt(depth);
  for (std::size_t i = 0; i < depth; ++i) prompt[i] = static_cast<std::int32_t>(i * 7 % 900);
  session.forward(prompt, 0, LogitsFor::none);
  const std::int32_t next = 42;
  for (auto _ : state) {
    benchmark::DoNotOptimize(session.forward(std::span(&next, 1), depth).data());
  }
  state.counters["tok_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(isa_name(ctx.isa()).data());
}

// Restoring a saved session of `depth` positions of the model in $SMOL_BENCH_MODEL, with
// cache type `kv` (an index into kAllKvTypes): mapping and checking the file, then
// copying its rows into a fresh session's cache (committing those pages).
void BM_session_restore(benchmark::State& state) {
  static const std::unique_ptr<Model> model =
      std::make_unique<Model>(Model::open(std::getenv("SMOL_BENCH_MODEL")));
  const auto depth = static_cast<std::size_t>(state.range(0));
  const KvType type = kAllKvTypes[static_cast<std::size_t>(state.range(1))];
  Context ctx(2);
  const TransformerOptions options{.context = depth + 1, .kv_type = type};
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("smol-bench-session-" + std::to_string(::getpid()) + ".bin");
  {
    Transformer session(*model, ctx, options);
    std::vector<std::int32_t> prompt(depth);
    for (std::size_t i = 0; i < depth; ++i) prompt[i] = static_cast<std::int32_t>(i * 7 % 900);
    session.forward(prompt, 0, LogitsFor::none);
    save_session(path, session, prompt);
  }
  for (auto _ : state) {
    state.PauseTiming();
    auto session = std::make_unique<Transformer>(*model, ctx, options);
    state.ResumeTiming();
    benchmark::DoNotOptimize(load_session(path, *session).data());
    state.PauseTiming();
    session.reset();
    state.ResumeTiming();
  }
  const auto bytes = static_cast<double>(std::filesystem::file_size(path));
  std::filesystem::remove(path);
  state.counters["file_MB"] = bytes / 1e6;
  state.counters["GBps"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
  state.SetLabel(std::string(kv_type_name(type)));
}

const bool registered = [] {
  auto* attention = benchmark::RegisterBenchmark("attention_decode/smollm3", BM_attention_decode);
  attention->ArgNames({"depth", "threads", "kv"});
  for (int kv = 0; kv < static_cast<int>(kAllKvTypes.size()); ++kv) {
    for (const int depth : {512, 4096, 16384, 32768}) {
      for (const int threads : {1, 2, 4, 8, 16}) attention->Args({depth, threads, kv});
    }
  }
  attention->UseRealTime()->Unit(benchmark::kMicrosecond);
  auto* decode = benchmark::RegisterBenchmark("decode_step/tiny_q4_k_m", BM_decode_tiny);
  for (const int depth : {16, 1024}) decode->Args({depth, 1})->Args({depth, 4});
  decode->UseRealTime()->Unit(benchmark::kMicrosecond);
  if (std::getenv("SMOL_BENCH_MODEL") != nullptr) {
    auto* file = benchmark::RegisterBenchmark("decode_step/$SMOL_BENCH_MODEL", BM_decode_file);
    for (const int depth : {16, 512}) file->Args({depth, 2})->Args({depth, 16});
    file->UseRealTime()->Unit(benchmark::kMillisecond);
    auto* restore =
        benchmark::RegisterBenchmark("session_restore/$SMOL_BENCH_MODEL", BM_session_restore);
    restore->ArgNames({"depth", "kv"});
    for (const int kv : {1, 3}) restore->Args({2048, kv});  // f16, q8_0
    restore->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace bench_forward
