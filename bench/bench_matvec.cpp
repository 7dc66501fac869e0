// matvec (decode) on SmolLM3 shapes, weights streamed from beyond the LLC as in a real
// decode step, against a plain memory read measured in the same run:
// counter `vs_memory` = kernel GB/s / memory-read GB/s with the same threads.
#include <benchmark/benchmark.h>

#include "bench_support.hpp"
#include "smol/ops/matvec.hpp"
#include "smol/quant/interleaved_rows.hpp"

using namespace smol;

namespace bench_matvec {

struct Shape {
  const char* name;
  std::size_t rows, cols;
  GgmlType type;
  bool rows8 = false;  // through the interleaved copy (Model's repack option)
};
constexpr Shape kShapes[] = {
    {"q_o_2048x2048_Q4_K", 2048, 2048, GgmlType::Q4_K},
    {"kv_2048to512_Q4_K", 512, 2048, GgmlType::Q4_K},
    {"kv_2048to512_Q6_K", 512, 2048, GgmlType::Q6_K},
    {"q_o_2048x2048_Q4_K_rows8", 2048, 2048, GgmlType::Q4_K, true},
    {"gate_up_2048to11008_Q4_K", 11008, 2048, GgmlType::Q4_K},
    {"gate_up_2048to11008_Q4_K_rows8", 11008, 2048, GgmlType::Q4_K, true},
    {"down_11008to2048_Q4_K", 2048, 11008, GgmlType::Q4_K},
    {"down_11008to2048_Q4_K_rows8", 2048, 11008, GgmlType::Q4_K, true},
    {"down_11008to2048_Q6_K", 2048, 11008, GgmlType::Q6_K},
    {"down_11008to2048_Q6_K_rows8", 2048, 11008, GgmlType::Q6_K, true},
    {"lm_head_2048to128256_Q6_K", 128256, 2048, GgmlType::Q6_K},
    {"lm_head_2048to128256_Q6_K_rows8", 128256, 2048, GgmlType::Q6_K, true},
};

// One copy of the matrix per window of a buffer larger than the LLC; each call uses
// the next window, so every call reads its weights from memory.
struct WeightPool {
  AlignedBuffer<std::byte> bytes;
  std::size_t matrix_bytes = 0, copies = 0;
};

// One pool at a time (each is about 1 GiB): rebuilt when the shape changes.
WeightPool& pool_for(const Shape& s) {
  static WeightPool pool;
  static std::string current;
  if (current != s.name) {
    pool = WeightPool{};
    current = s.name;
    const std::size_t row_bytes = ggml_row_bytes(s.type, s.cols);
    pool.matrix_bytes = s.rows8 ? interleaved_bytes(s.type, s.rows, s.cols) : s.rows * row_bytes;
    pool.copies = std::max<std::size_t>(2, bench::kMemoryReadBytes / pool.matrix_bytes);
    pool.bytes = AlignedBuffer<std::byte>(pool.copies * pool.matrix_bytes);
    if (s.rows8) {
      AlignedBuffer<std::byte> file_rows(s.rows * row_bytes);
      bench::fill_random_blocks(s.type, file_rows.data(), file_rows.size(), 1);
      for (std::size_t g = 0; g < interleaved_groups(s.type, s.rows); ++g) {
        repack_interleaved_group(s.type, file_rows.data(), row_bytes, s.rows, s.cols, g,
                                 pool.bytes.data());
      }
    } else {
      bench::fill_random_blocks(s.type, pool.bytes.data(), pool.matrix_bytes, 1);
    }
    for (std::size_t c = 1; c < pool.copies; ++c) {
      std::memcpy(pool.bytes.data() + c * pool.matrix_bytes, pool.bytes.data(), pool.matrix_bytes);
    }
  }
  return pool;
}

void BM_matvec(benchmark::State& state, Shape s) {
  Context ctx(static_cast<int>(state.range(0)));
  WeightPool& pool = pool_for(s);
  const double memory_gbps = bench::memory_read_gbps(ctx);
  std::vector<float> x(s.cols, 0.5f), y(s.rows);
  std::size_t copy = 0;
  for (auto _ : state) {
    std::byte* data = pool.bytes.data() + copy * pool.matrix_bytes;
    WeightMatrix w = bench::matrix_view(s.type, data, s.rows, s.cols);
    if (s.rows8) w.rows8 = data;
    matvec(ctx, w, x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    copy = (copy + 1) % pool.copies;
  }
  const double bytes =
      static_cast<double>(state.iterations()) * static_cast<double>(pool.matrix_bytes);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["GBps"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["memory_GBps"] = memory_gbps;
  state.counters["vs_memory"] =
      benchmark::Counter(bytes / 1e9 / memory_gbps, benchmark::Counter::kIsRate);
  state.SetLabel(isa_name(ctx.isa()).data());
}

const bool registered = [] {
  for (const Shape& s : kShapes) {
    benchmark::RegisterBenchmark((std::string("matvec/") + s.name).c_str(), BM_matvec, s)
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace bench_matvec
