// The plain memory-read bandwidth that bounds decode: a sum over a buffer larger
// than the last-level cache, with the same threads (and the same oneTBB arena) that
// the model runs with, so the ceiling and the measured tokens/s share every condition.
// The buffer lies in transparent huge pages, as the weights decode reads do (the copies
// --repack makes at load are HugePageBuffers): on 4 KB pages the read pays a TLB miss
// every 4 KB that decode does not, and on a Zen 4 VM (THP "madvise") it measured 29-31
// GB/s against 33-34 on huge pages, so decode read "above" its ceiling (108-125 %).
// Shared by smol-bench (the roofline) and the kernel micro-benchmarks (their
// `vs_memory` bar); it needs only smol, not Google Benchmark.
#pragma once

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <numeric>
#include <span>
#include <utility>

#include "smol/core/huge_page_buffer.hpp"
#include "smol/ops/context.hpp"

namespace smol::bench {

struct MemoryReadResult {
  double best_gbps = 0;  // 1e9 bytes per second, the best pass
  std::size_t buffer_bytes = 0;
  int passes = 0;
  const char* loads = "";  // the load width used: "avx512", "avx2" or "portable"
};

// Larger than any LLC smol targets (this machine's is 480 MiB), so every pass after the
// first streams from DRAM just as a decode step streams the weights.
inline constexpr std::size_t kMemoryReadBytes = std::size_t{1} << 30;

namespace detail {

using WordSpan = std::span<const std::uint64_t>;

// Sums with several independent accumulators, so the adds never wait on each other and
// the loads alone set the pace.
inline std::uint64_t sum_words_portable(WordSpan words) noexcept {
  std::uint64_t partial[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= words.size(); i += 8) {
    for (std::size_t k = 0; k < 8; ++k) partial[k] += words[i + k];
  }
  for (; i < words.size(); ++i) partial[0] += words[i];
  return std::accumulate(std::begin(partial), std::end(partial), std::uint64_t{0});
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The decode kernels load 64 bytes at a time; on some cores (Sapphire Rapids among them)
// fewer, wider loads in flight reach 20-30% more bandwidth than 16-byte SSE2 loads,
// and a ceiling measured with narrower loads than the kernels use would flatter them.
// Compiled for AVX-512 by attribute and called only when the CPU has it, so the program
// itself needs no -mavx512f.
__attribute__((target("avx512f"))) inline std::uint64_t sum_words_avx512(WordSpan words) noexcept {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  const std::uint64_t* p = words.data();
  std::size_t i = 0;
  for (; i + 32 <= words.size(); i += 32) {
    a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 8));
    a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 16));
    a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 24));
  }
  // Through memory rather than _mm512_reduce_add_epi64, which trips GCC 12's
  // -Wuninitialized inside its own header.
  std::uint64_t lanes[8];
  _mm512_storeu_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  return std::accumulate(std::begin(lanes), std::end(lanes), std::uint64_t{0}) +
         sum_words_portable(words.subspan(i));
}

__attribute__((target("avx2"))) inline std::uint64_t sum_words_avx2(WordSpan words) noexcept {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  const std::uint64_t* p = words.data();
  std::size_t i = 0;
  for (; i + 16 <= words.size(); i += 16) {
    const auto* v = reinterpret_cast<const __m256i*>(p + i);
    a0 = _mm256_add_epi64(a0, _mm256_loadu_si256(v));
    a1 = _mm256_add_epi64(a1, _mm256_loadu_si256(v + 1));
    a2 = _mm256_add_epi64(a2, _mm256_loadu_si256(v + 2));
    a3 = _mm256_add_epi64(a3, _mm256_loadu_si256(v + 3));
  }
  std::uint64_t lanes[4];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes),
                      _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + sum_words_portable(words.subspan(i));
}
#endif

using SumWords = std::uint64_t (*)(WordSpan) noexcept;

// The widest loads this CPU runs, and their name for the report.
inline std::pair<SumWords, const char*> widest_sum_words() noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f")) return {sum_words_avx512, "avx512"};
  if (__builtin_cpu_supports("avx2")) return {sum_words_avx2, "avx2"};
#endif
  return {sum_words_portable, "portable"};
}

}  // namespace detail

// Best of `passes` timed reads; the buffer is freed on return. The best pass, not the
// mean, because other tenants only ever slow a pass down.
inline MemoryReadResult measure_memory_read(Context& context, std::size_t bytes = kMemoryReadBytes,
                                            int passes = 10) {
  const std::size_t words = bytes / sizeof(std::uint64_t);
  HugePageBuffer memory(words * sizeof(std::uint64_t));
  auto* buffer = reinterpret_cast<std::uint64_t*>(memory.data());
  // Writing every word commits the pages and keeps zero-page tricks out of the reads.
  for (std::size_t i = 0; i < words; ++i) buffer[i] = i;

  const auto [sum_words, loads] = detail::widest_sum_words();
  // Several chunks per thread so a thread that is descheduled does not hold up the pass.
  const std::size_t chunk =
      std::max<std::size_t>(4096, words / static_cast<std::size_t>(context.threads()) / 4);
  std::atomic<std::uint64_t> sink{0};
  MemoryReadResult result{0, words * sizeof(std::uint64_t), passes, loads};
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    context.arena().execute([&] {
      tbb::parallel_for(
          tbb::blocked_range<std::size_t>(0, words, chunk),
          [&](const tbb::blocked_range<std::size_t>& range) {
            // Publishing the sum is what stops the compiler from dropping the reads.
            const detail::WordSpan part(buffer + range.begin(), range.size());
            sink.fetch_add(sum_words(part), std::memory_order_relaxed);
          },
          tbb::static_partitioner());
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.best_gbps =
        std::max(result.best_gbps, static_cast<double>(result.buffer_bytes) / seconds / 1e9);
  }
  return result;
}

}  // namespace smol::bench
