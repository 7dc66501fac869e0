// Shared pieces of the kernel benchmarks: random valid weight rows and the plain
// memory-read baseline (memory_read.hpp) that matvec throughput is compared with.
#pragma once

#include <benchmark/benchmark.h>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "memory_read.hpp"
#include "smol/core/aligned_buffer.hpp"
#include "smol/core/half.hpp"
#include "smol/ops/context.hpp"
#include "smol/ops/weight_matrix.hpp"
#include "smol/quant/blocks.hpp"

namespace smol::bench {

// Random bytes with sane f16 scales (no NaN, infinity or subnormal surprises).
inline void fill_random_blocks(GgmlType type, std::byte* data, std::size_t bytes,
                               std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>(rng());
  std::uniform_real_distribution<float> u(0.001f, 0.01f);
  if (type == GgmlType::Q4_K) {
    auto* b = reinterpret_cast<BlockQ4K*>(data);
    for (std::size_t i = 0; i < bytes / sizeof(BlockQ4K); ++i) {
      b[i].d = f32_to_f16(u(rng));
      b[i].dmin = f32_to_f16(u(rng));
    }
  } else if (type == GgmlType::Q6_K) {
    auto* b = reinterpret_cast<BlockQ6K*>(data);
    for (std::size_t i = 0; i < bytes / sizeof(BlockQ6K); ++i) b[i].d = f32_to_f16(u(rng));
  } else if (type == GgmlType::Q4_0 || type == GgmlType::Q4_1 || type == GgmlType::Q5_0 ||
             type == GgmlType::Q5_1 || type == GgmlType::Q8_0 || type == GgmlType::IQ4_NL ||
             type == GgmlType::IQ4_XS) {
    // Their blocks begin with d (Q4_1's and Q5_1's then m) as f16: finite scales, as a
    // file has.
    const std::size_t block_bytes = ggml_type_info(type).block_bytes;
    for (std::size_t at = 0; at + block_bytes <= bytes; at += block_bytes) {
      const std::uint16_t d = f32_to_f16(u(rng)), m = f32_to_f16(-u(rng));
      std::memcpy(data + at, &d, 2);
      if (type == GgmlType::Q4_1 || type == GgmlType::Q5_1) std::memcpy(data + at + 2, &m, 2);
    }
  }
}

inline WeightMatrix matrix_view(GgmlType type, const std::byte* data, std::size_t rows,
                                std::size_t cols) {
  return WeightMatrix{type, data, rows, cols, ggml_row_bytes(type, cols), "bench.weight"};
}

// GB/s of the plain memory read (memory_read.hpp) with the context's threads: the bar
// a bandwidth-bound kernel is held to. Measured once per thread count per run.
inline double memory_read_gbps(Context& ctx) {
  static std::map<int, double> cache;
  if (auto it = cache.find(ctx.threads()); it != cache.end()) return it->second;
  const double gbps = measure_memory_read(ctx, kMemoryReadBytes, 5).best_gbps;
  cache[ctx.threads()] = gbps;
  return gbps;
}

}  // namespace smol::bench
