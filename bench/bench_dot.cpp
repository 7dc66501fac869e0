// Single-thread dot throughput per ISA, in GB/s of weights: Q2_K, Q3_K, Q4_K and Q6_K rows of 2048
// against one Q8_K activation row, with the weights in L2 (256 KB) and beyond the LLC;
// on the file's rows (dot_*; dot_*_plain: the plain-decode dot where a set has one,
// WeightKernels::dot_plain) and on rows interleaved by eight (rows8_*, quant/rows8.hpp).
#include <benchmark/benchmark.h>

#include "bench_support.hpp"
#include "smol/quant/interleaved_rows.hpp"
#include "smol/simd/kernels_impl.hpp"

using namespace smol;

namespace bench_dot {

constexpr std::size_t kCols = 2048, kBlocks = kCols / QK_K;

template <class Block, bool kPlain = false>
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
  const auto& kernels = k.of<BlockTraits<Block>::type>();
  const auto dot = kPlain ? kernels.dot_plain : kernels.dot;
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

// One decode token through the interleaved-rows kernel, eight rows per call.
template <class Rows8>
void BM_rows8(benchmark::State& state, Isa isa, GgmlType type, std::size_t bytes) {
  const Kernels& k = kernels_for_isa(isa);
  const std::size_t group_bytes = interleaved_bytes(type, kRowsPerGroup, kCols);
  const std::size_t groups = bytes / group_bytes;
  static std::map<std::pair<int, std::size_t>, AlignedBuffer<std::byte>> buffers;
  auto& w = buffers[{static_cast<int>(type), bytes}];
  if (w.size() == 0) {
    const std::size_t row_bytes = ggml_row_bytes(type, kCols);
    AlignedBuffer<std::byte> file_rows(groups * kRowsPerGroup * row_bytes);
    bench::fill_random_blocks(type, file_rows.data(), file_rows.size(), 2);
    w = AlignedBuffer<std::byte>(groups * group_bytes);
    for (std::size_t g = 0; g < groups; ++g) {
      repack_interleaved_group(type, file_rows.data(), row_bytes, groups * kRowsPerGroup, kCols, g,
                               w.data());
    }
  }
  std::vector<float> x(kCols, 0.25f), y(kRowsPerGroup);
  std::vector<BlockQ8K> xq(kBlocks);
  k.quantize_row_q8k(x.data(), xq.data(), kCols);
  const auto kernel =
      k.of < std::is_same_v<Rows8, BlockQ4KRows8> ? GgmlType::Q4_K : GgmlType::Q6_K > ().rows8;
  std::size_t g = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < 8; ++i) {
      kernel(reinterpret_cast<const Rows8*>(w.data() + g * group_bytes), kBlocks, xq.data(),
             kBlocks, 1, y.data(), 1, WeightsFrom::memory);
      benchmark::DoNotOptimize(y.data());
      g = g + 1 == groups ? 0 : g + 1;
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 8 * group_bytes));
}

const bool registered = [] {
  for (Isa isa : available_isas()) {
    for (std::size_t bytes : {std::size_t{256} << 10, bench::kMemoryReadBytes}) {
      const std::string where = bytes < (1u << 20) ? "L2" : "memory";
      const std::string suffix = std::string(isa_name(isa)) + "/" + where;
      benchmark::RegisterBenchmark(("dot_q2k/" + suffix).c_str(), BM_dot<BlockQ2K>, isa,
                                   GgmlType::Q2_K, bytes);
      benchmark::RegisterBenchmark(("dot_q3k/" + suffix).c_str(), BM_dot<BlockQ3K>, isa,
                                   GgmlType::Q3_K, bytes);
      if (kernels_for_isa(isa).of<GgmlType::Q2_K>().dot_plain) {
        benchmark::RegisterBenchmark(("dot_q2k_plain/" + suffix).c_str(), BM_dot<BlockQ2K, true>,
                                     isa, GgmlType::Q2_K, bytes);
      }
      if (kernels_for_isa(isa).of<GgmlType::Q3_K>().dot_plain) {
        benchmark::RegisterBenchmark(("dot_q3k_plain/" + suffix).c_str(), BM_dot<BlockQ3K, true>,
                                     isa, GgmlType::Q3_K, bytes);
      }
      benchmark::RegisterBenchmark(("dot_q4k/" + suffix).c_str(), BM_dot<BlockQ4K>, isa,
                                   GgmlType::Q4_K, bytes);
      benchmark::RegisterBenchmark(("dot_q6k/" + suffix).c_str(), BM_dot<BlockQ6K>, isa,
                                   GgmlType::Q6_K, bytes);
      benchmark::RegisterBenchmark(("rows8_q4k/" + suffix).c_str(), BM_rows8<BlockQ4KRows8>, isa,
                                   GgmlType::Q4_K, bytes);
      benchmark::RegisterBenchmark(("rows8_q6k/" + suffix).c_str(), BM_rows8<BlockQ6KRows8>, isa,
                                   GgmlType::Q6_K, bytes);
    }
  }
  return true;
}();

}  // namespace bench_dot
