// matmul (prefill) of 512 tokens on SmolLM3 shapes: int8 GOPS (2 ops per multiply-add),
// and a projection of whole-model prefill tok/s from the per-shape times: 36 layers of
// q, k, v, o, gate, up, down (v and down in Q6_K for 18 of the layers, as in the real
// Q4_K_M file) plus the LM head for the last token. Attention and norms are not counted.
// Each shape runs on the file's layout and, as `..._rows8`, on the interleaved copy
// (quant/rows8.hpp, or quant/rows16.hpp for the types that have one); the projection uses the
// layout the kernel set prefers, as smol-bench's default `--repack auto` does.
#include <benchmark/benchmark.h>

#include <time.h>

#include <chrono>

#include "bench_support.hpp"
#include "smol/ops/matmul.hpp"
#include "smol/quant/interleaved_rows.hpp"

using namespace smol;

namespace bench_matmul {

constexpr std::size_t kTokens = 512;

struct Shape {
  const char* name;
  std::size_t rows, cols;
  GgmlType type;
  double per_model;  // how many times the model runs this shape per prefill
};
constexpr Shape kShapes[] = {
    {"q_o_2048x2048_Q4_K", 2048, 2048, GgmlType::Q4_K, 72},
    {"k_v_2048to512_Q4_K", 512, 2048, GgmlType::Q4_K, 36 + 18},
    {"v_2048to512_Q6_K", 512, 2048, GgmlType::Q6_K, 18},
    {"gate_up_2048to11008_Q4_K", 11008, 2048, GgmlType::Q4_K, 72},
    {"down_11008to2048_Q4_K", 2048, 11008, GgmlType::Q4_K, 18},
    {"down_11008to2048_Q6_K", 2048, 11008, GgmlType::Q6_K, 18},
};
constexpr Shape kLmHead{"lm_head_2048to128256_Q6_K", 128256, 2048, GgmlType::Q6_K, 1};
// The other types on the widest shape (with a sixteen-row copy, quant/rows16.hpp, where
// they have one): not in the projection, which is the Q4_K_M file's.
constexpr Shape kOtherShapes[] = {
    {"gate_up_2048to11008_Q5_K", 11008, 2048, GgmlType::Q5_K, 0},
    {"gate_up_2048to11008_Q5_0", 11008, 2048, GgmlType::Q5_0, 0},
    {"gate_up_2048to11008_Q5_1", 11008, 2048, GgmlType::Q5_1, 0},
    {"gate_up_2048to11008_Q4_0", 11008, 2048, GgmlType::Q4_0, 0},
    {"gate_up_2048to11008_Q4_1", 11008, 2048, GgmlType::Q4_1, 0},
    {"gate_up_2048to11008_Q8_0", 11008, 2048, GgmlType::Q8_0, 0},
    {"gate_up_2048to11008_IQ4_NL", 11008, 2048, GgmlType::IQ4_NL, 0},
    {"gate_up_2048to11008_IQ4_XS", 11008, 2048, GgmlType::IQ4_XS, 0},
};

// Speculative verification and small batches: a few tokens per pass on SmolLM2-135M's
// widest shape (whose weights, 0.5 MB, stay in L2: the kernels' own pace) and on the 3B
// gate/up, one thread. per_token (seconds) against the one-token run of the same shape says what
// each extra token of a pass costs.
constexpr Shape kSmallBatchShapes[] = {
    {"smollm2_gate_up_576to1536_Q4_1", 1536, 576, GgmlType::Q4_1, 0},
    {"smollm2_gate_up_576to1536_Q8_0", 1536, 576, GgmlType::Q8_0, 0},
    {"gate_up_2048to11008_Q4_K", 11008, 2048, GgmlType::Q4_K, 0},
};

struct Operands {
  AlignedBuffer<std::byte> weights, rows8;
  std::vector<float> x, y;
  WeightMatrix w, w_rows8;  // the file's layout; the same matrix through the copy
};

Operands& operands(const Shape& s, std::size_t tokens) {
  static std::map<std::string, Operands> cache;
  auto& o = cache[std::string(s.name) + "/" + std::to_string(tokens)];
  if (o.weights.size() == 0) {
    o.weights = AlignedBuffer<std::byte>(s.rows * ggml_row_bytes(s.type, s.cols));
    bench::fill_random_blocks(s.type, o.weights.data(), o.weights.size(), 3);
    std::mt19937 rng(4);
    std::normal_distribution<float> g;
    o.x.resize(tokens * s.cols);
    for (auto& v : o.x) v = g(rng);
    o.y.resize(tokens * s.rows);
    o.w = bench::matrix_view(s.type, o.weights.data(), s.rows, s.cols);
    if (!has_interleaved_copy(s.type)) {
      o.w_rows8 = o.w;  // no copy: the file's layout (not registered as `_rows8`)
    } else {
      o.rows8 = AlignedBuffer<std::byte>(interleaved_bytes(s.type, s.rows, s.cols));
      for (std::size_t g = 0; g < interleaved_groups(s.type, s.rows); ++g) {
        repack_interleaved_group(s.type, o.weights.data(), o.w.row_bytes, s.rows, s.cols, g,
                                 o.rows8.data());
      }
    }
    o.w_rows8 = o.w;
    o.w_rows8.rows8 = o.rows8.data();
  }
  return o;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timing {
  double wall = 1e30, cpu = 1e30;  // cpu: this thread only (meaningful with 1 thread)
};

Timing time_matmul(Context& ctx, const Shape& s, std::size_t tokens, bool rows8, int reps) {
  Operands& o = operands(s, tokens);
  const WeightMatrix& w = rows8 ? o.w_rows8 : o.w;
  matmul(ctx, w, o.x.data(), tokens, o.y.data());  // warm up
  Timing best;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_seconds();
    matmul(ctx, w, o.x.data(), tokens, o.y.data());
    best.cpu = std::min(best.cpu, thread_cpu_seconds() - cpu_start);
    best.wall = std::min(
        best.wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

void BM_matmul(benchmark::State& state, Shape s, bool rows8) {
  Context ctx(static_cast<int>(state.range(0)));
  Operands& o = operands(s, kTokens);
  const WeightMatrix& w = rows8 ? o.w_rows8 : o.w;
  for (auto _ : state) {
    matmul(ctx, w, o.x.data(), kTokens, o.y.data());
    benchmark::DoNotOptimize(o.y.data());
  }
  const double ops = 2.0 * static_cast<double>(s.rows * s.cols * kTokens);
  state.counters["GOPS"] = benchmark::Counter(static_cast<double>(state.iterations()) * ops / 1e9,
                                              benchmark::Counter::kIsRate);
  state.SetLabel(isa_name(ctx.isa()).data());
}

// A pass of state.range(0) tokens over the copy, one thread.
void BM_matmul_tokens(benchmark::State& state, Shape s) {
  Context ctx(1);
  const auto tokens = static_cast<std::size_t>(state.range(0));
  Operands& o = operands(s, tokens);
  for (auto _ : state) {
    matmul(ctx, o.w_rows8, o.x.data(), tokens, o.y.data());
    benchmark::DoNotOptimize(o.y.data());
  }
  state.counters["per_token"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(tokens),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(isa_name(ctx.isa()).data());
}

// One iteration times every distinct shape (best of 2) and sums them as the model would.
// With one thread it also reports the projection from this thread's CPU time, which
// stays meaningful when other work shares the cores (x threads = the ideal scaling).
void BM_projected_prefill(benchmark::State& state) {
  Context ctx(static_cast<int>(state.range(0)));
  const bool rows8 = ctx.kernels().prefers_rows8;
  double wall = 0, cpu = 0;
  for (auto _ : state) {
    const Timing head = time_matmul(ctx, kLmHead, 1, rows8, 2);
    wall = head.wall, cpu = head.cpu;
    for (const Shape& s : kShapes) {
      const Timing t = time_matmul(ctx, s, kTokens, rows8, 2);
      wall += s.per_model * t.wall;
      cpu += s.per_model * t.cpu;
    }
  }
  const double tokens = static_cast<double>(kTokens);
  state.counters["prefill_tok_per_s"] = tokens / wall;
  state.counters["vs_llamacpp_pp512_40"] = tokens / wall / 40.0;
  if (ctx.threads() == 1) state.counters["per_core_cpu_tok_per_s"] = tokens / cpu;
  state.SetLabel(std::string(isa_name(ctx.isa())) + (rows8 ? "+repack" : ""));
}

const bool registered = [] {
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.insert(shapes.end(), std::begin(kOtherShapes), std::end(kOtherShapes));
  for (const Shape& s : shapes) {
    for (const bool rows8 : {false, true}) {
      if (rows8 && !has_interleaved_copy(s.type)) continue;
      const std::string name = std::string("matmul512/") + s.name + (rows8 ? "_rows8" : "");
      benchmark::RegisterBenchmark(name.c_str(), BM_matmul, s, rows8)
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (const Shape& s : kSmallBatchShapes) {
    const std::string name = std::string("matmul_tokens/") + s.name;
    benchmark::RegisterBenchmark(name.c_str(), BM_matmul_tokens, s)
        ->ArgName("tokens")
        ->Arg(1)
        ->Arg(2)
        ->Arg(4)
        ->Arg(8)
        ->Arg(16)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("projected_prefill_512", BM_projected_prefill)
      ->Arg(1)
      ->Arg(2)
      ->Iterations(1)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace bench_matmul
