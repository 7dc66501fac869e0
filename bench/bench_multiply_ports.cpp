// Which AVX-512 instructions share vpdpbusd's execution slot: eight independent 512-bit
// vpdpbusd per iteration alone, then with two more instructions of one kind beside them.
// Where the pair costs nothing (the iteration's time stays that of the eight dots) the
// kind runs on other ports; where it adds two dots' time, every one of them takes a dot's
// slot. The tokens-in-lanes prefill kernels (simd/x86_avx512_token_lanes.hpp) are such a
// mix, so this says how close to the dot unit's peak they can get: per block of eight rows
// and sixteen tokens, 512 dots plus every vpmulld (a sub-block scale), vpdpwssd (a min
// term), vmulps and FMA (the float steps) they issue; bench/README.md ("What bounds the
// tokens-in-lanes kernels") counts them per type.
//
// Written as inline assembly because the point is the exact instruction mix: a compiler
// given intrinsics may keep the accumulators in memory or add moves. The program's own
// code is built without AVX-512 flags (the kernels run from the dispatch units), so the
// compiler never allocates zmm16-zmm31 here and the operands can live there between
// statements. Library code may still use them (glibc's AVX-512 string functions do), so
// set_operands() runs right before each timed loop; the integer mixes' timing does not
// depend on the values, and all-ones keeps the float ones clear of denormals. Skipped
// (with a message) on a CPU without AVX-512 VNNI.
//
//   build/release/bench/bench_multiply_ports --benchmark_repetitions=3
// Compare each mix's time with `dots8`'s in the same run; the counters give an iteration's
// time in dot slots (its time over dots8's, times eight).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>

#include "smol/simd/cpu_features.hpp"

#if defined(SMOL_X86)

namespace bench_multiply_ports {

#define SMOL_DOT(r) "vpdpbusd %%zmm30, %%zmm31, %%zmm" #r "\n\t"
#define SMOL_DOTS8 SMOL_DOT(0) SMOL_DOT(1) SMOL_DOT(2) SMOL_DOT(3) \
                   SMOL_DOT(4) SMOL_DOT(5) SMOL_DOT(6) SMOL_DOT(7)
// Two instructions of one kind, each on an accumulator of its own (no chain between
// iterations is shorter than eight instructions).
#define SMOL_PAIR(op) op " %%zmm29, %%zmm8, %%zmm8\n\t" op " %%zmm29, %%zmm9, %%zmm9\n\t"
#define SMOL_CLOBBERS "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", \
                      "xmm8", "xmm9"

void set_operands() {
  // All ones: no denormals or special values in the float instructions.
  asm volatile(
      "vpternlogd $0xff, %%zmm29, %%zmm29, %%zmm29\n\t"
      "vpternlogd $0xff, %%zmm30, %%zmm30, %%zmm30\n\t"
      "vpternlogd $0xff, %%zmm31, %%zmm31, %%zmm31\n\t"
      "vxorps %%xmm8, %%xmm8, %%xmm8\n\t"
      "vxorps %%xmm9, %%xmm9, %%xmm9" ::: "xmm8", "xmm9");
}

enum class Mix { dots8, vpmulld, vpdpwssd, vfmadd231ps, vmulps, vpaddd, vcvtdq2ps };

template <Mix kMix>
inline void iteration() {
  if constexpr (kMix == Mix::dots8) asm volatile(SMOL_DOTS8 ::: SMOL_CLOBBERS);
  if constexpr (kMix == Mix::vpmulld)
    asm volatile(SMOL_DOTS8 SMOL_PAIR("vpmulld") ::: SMOL_CLOBBERS);
  if constexpr (kMix == Mix::vpdpwssd)
    asm volatile(SMOL_DOTS8 SMOL_PAIR("vpdpwssd") ::: SMOL_CLOBBERS);
  if constexpr (kMix == Mix::vfmadd231ps)
    asm volatile(SMOL_DOTS8 SMOL_PAIR("vfmadd231ps") ::: SMOL_CLOBBERS);
  if constexpr (kMix == Mix::vmulps)
    asm volatile(SMOL_DOTS8 SMOL_PAIR("vmulps") ::: SMOL_CLOBBERS);
  if constexpr (kMix == Mix::vpaddd)
    asm volatile(SMOL_DOTS8 SMOL_PAIR("vpaddd") ::: SMOL_CLOBBERS);
  if constexpr (kMix == Mix::vcvtdq2ps)
    asm volatile(SMOL_DOTS8
                 "vcvtdq2ps %%zmm8, %%zmm8\n\t"
                 "vcvtdq2ps %%zmm9, %%zmm9\n\t" ::: SMOL_CLOBBERS);
}

constexpr int kIterations = 1024;

// Seconds per iteration of the eight dots alone, measured once per process.
double dots8_seconds() {
  static const double seconds = [] {
    set_operands();
    double best = 1e30;
    for (int rep = 0; rep < 20; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 64 * kIterations; ++i) iteration<Mix::dots8>();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                                    .count() /
                                (64.0 * kIterations));
    }
    return best;
  }();
  return seconds;
}

template <Mix kMix>
void BM_mix(benchmark::State& state) {
  if (!smol::cpu_supports(smol::Isa::avx512vnni)) {
    state.SkipWithError("needs AVX-512 VNNI");
    return;
  }
  const double reference = dots8_seconds();
  set_operands();
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (int i = 0; i < kIterations; ++i) iteration<kMix>();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double iterations = static_cast<double>(state.iterations()) * kIterations;
  state.counters["dot_slots"] = iterations > 0 ? 8.0 * seconds / iterations / reference : 0.0;
}

BENCHMARK(BM_mix<Mix::dots8>)->Name("dots8");
BENCHMARK(BM_mix<Mix::vpmulld>)->Name("dots8+2vpmulld");
BENCHMARK(BM_mix<Mix::vpdpwssd>)->Name("dots8+2vpdpwssd");
BENCHMARK(BM_mix<Mix::vfmadd231ps>)->Name("dots8+2vfmadd231ps");
BENCHMARK(BM_mix<Mix::vmulps>)->Name("dots8+2vmulps");
BENCHMARK(BM_mix<Mix::vpaddd>)->Name("dots8+2vpaddd");
BENCHMARK(BM_mix<Mix::vcvtdq2ps>)->Name("dots8+2vcvtdq2ps");

}  // namespace bench_multiply_ports

#endif  // SMOL_X86
