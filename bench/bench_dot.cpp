// Single-thread dot throughput per ISA, in GB/s of weights: Q4_K and Q6_K rows of 2048
// against one Q8_K activation row, with the weights in L2 (256 KB) and beyond the LLC.
#include <benchmark/benchmark.h>

#include "bench_support.hpp"
#include "smol/simd/kernels_impl.hpp"

using namespace smol;

namespace {

constexpr std::size_t kCols = 2048, kBlocks = kCols / QK_K;

template <class Block>
void BM_dot(benchmark::State& state, Isa isa, GgmlType type, std::size_t bytes) {
  const Kernels& k = kernels_for_isa(isa);
  const std::size_t row_bytes = ggml_row_bytes(type, kCols);
  const std::size_t rows = bytes / row_bytes;
  static std::map<std::pair<int, std::size_t>, AlignedBuffer<std::byte>> buffers;
  auto& w = buffers[{static_cast<int>(type), bytes}];
  if (w.size() == 0) {
    w = AlignedBuffer<std::byte>(rows * row_bytes);
    bench::fill_random_blocks(type, w.data(), w.size(), 2);
  }
  std::vector<float> x(kCols, 0.25f);
  std::vector<BlockQ8K> xq(kBlocks);
  k.quantize_row_q8k(x.data(), xq.data(), kCols);
  float (*dot)(const Block*, const BlockQ8K*, std::size_t) = nullptr;
  if constexpr (std::is_same_v<Block, BlockQ4K>)
    dot = k.dot_q4k_q8k;
  else
    dot = k.dot_q6k_q8k;
  std::size_t r = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < 64; ++i) {
      benchmark::DoNotOptimize(
          dot(reinterpret_cast<const Block*>(w.data() + r * row_bytes), xq.data(), kBlocks));
      r = r + 1 == rows ? 0 : r + 1;
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 64 * row_bytes));
}

const bool registered = [] {
  for (Isa isa : available_isas()) {
    for (std::size_t bytes : {std::size_t{256} << 10, bench::kMemoryReadBytes}) {
      const std::string where = bytes < (1u << 20) ? "L2" : "memory";
      const std::string suffix = std::string(isa_name(isa)) + "/" + where;
      benchmark::RegisterBenchmark(("dot_q4k/" + suffix).c_str(), BM_dot<BlockQ4K>, isa,
                                   GgmlType::Q4_K, bytes);
      benchmark::RegisterBenchmark(("dot_q6k/" + suffix).c_str(), BM_dot<BlockQ6K>, isa,
                                   GgmlType::Q6_K, bytes);
    }
  }
  return true;
}();

}  // namespace
