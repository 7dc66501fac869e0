#!/usr/bin/env bash
# Sets everything up and runs every test, in stages:
#   release   the Release build: every doctest suite (the kernel suites once more per
#             other instruction set the CPU can run, forced with SMOL_ISA), the programs end
#             to end, consumer projects, per-architecture builds, tokenizer conformance
#   sanitize  the doctest suites under AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan      the concurrency suites (connection threads, the engine thread) under
#             ThreadSanitizer
#   fuzz      libFuzzer on the GGUF reader, bounded
#   aarch64   the NEON kernel suites cross-compiled and run under qemu-user
#   cuda      the CUDA unit and its tests (those that need a GPU report "skipped: no
#             CUDA device" without one), with the system's nvcc or else NVIDIA's
#             compiler wheels from PyPI installed into the build tree
# Every stage runs even when an earlier one failed, so one failure hides nothing; the
# summary at the end names the stages that failed, and the exit status is 1 if any did.
#   ./scripts/test.sh                 (BUILD_ROOT=build by default)
#   STAGES="release fuzz" ./scripts/test.sh    a subset
set -uo pipefail
cd "$(dirname "$0")/.."
root=${BUILD_ROOT:-build}
jobs=${JOBS:-$(nproc)}
stages=${STAGES:-release sanitize tsan fuzz aarch64 cuda}

./scripts/install-deps.sh --test || { echo "smol: installing the test dependencies failed" >&2; exit 1; }

# The cuda stage later adds the CUDA unit to this same tree (see there); -DSMOL_CUDA=OFF
# here keeps a rerun of this stage testing the build users get, without it.
# The micro-benchmarks (bench/bench_*.cpp, one unit) only compile-checked (bench/CMakeLists.txt):
# no test runs them, and their build was a seventh of the stage's compile.
release_flags=(-DCMAKE_BUILD_TYPE=Release -DSMOL_WERROR=ON -DSMOL_BUILD_TESTS=ON
               -DSMOL_BUILD_BENCH=ON -DSMOL_BUILD_MICRO_BENCH=OFF)
stage_release() {
  cmake -S . -B "$root/release" "${release_flags[@]}" -DSMOL_CUDA=OFF &&
  cmake --build "$root/release" -j "$jobs" &&
  ctest --test-dir "$root/release" --output-on-failure -j "$jobs"
}

# The sanitizer builds take line tables only (-g1): enough for the sanitizers' stack
# traces, and a model suite's object compiles 15 % faster and 40 % smaller than with
# full debug information (test_model_goldens: 111 s against 131 s, 46 MB against 78 MB).
# And -Og, not -O1: the build is the larger half of the stage, and at -Og it takes 40 %
# less (the model suites' unity object: 78 s against 126 s; the AMX dispatch unit 11 s
# against 34 s), while the suites run 15-25 % longer (test_model_batch 74 s against 65 s).
# The kernel units alone at -O2 (SMOL_DISPATCH_FLAGS): at -Og GCC leaves xsimd's one-line
# operators as calls, and the model suites spent most of their time in them; measured on
# a 2-core AMD Zen 1, -O1 there took the units' build about 60 CPU s more and the suites
# 113 less (844 -> 731 CPU s, 423 -> 366 s wall; test_model_batch 118 -> 87 s). -O2 over
# -O1, on a 2-core Xeon: the units compile 3-10 % longer (AMX 47.7 -> 49.0 s, AVX2 31.9 ->
# 35.2 s), the suites run 365 -> 304 s wall (the attention kernels most: test_simd_attention
# 46 -> 25 s, test_matmul 78 -> 50 s). The sanitizers still see every load the kernels
# make (an unaligned 32-byte load past a heap block is reported at -O2 as at -O0).
# SMOL_DISPATCH_ISAS=native (here and in the tsan stage): only the kernel units this CPU
# runs; a unit it cannot run would never execute here (cmake/SmolDispatch.cmake).
# SMOL_PROGRAMS_ONE_UNIT=OFF: of the programs, the suites run smol-server alone
# (test_server_http), so it compiles apart rather than in the unit of them all
# (cmake/SmolPrograms.cmake).
# SMOL_TEST_FEWER_REPEATS=1 (tests/fewer_repeats.hpp): the suites that run one path many
# times over (three golden prompts per file type, a thousand sampled replies, both
# activation precisions on every synthetic shape) run it fewer times here; the release
# stage runs every repetition.
stage_sanitize() {
  cmake -S . -B "$root/sanitize" -DCMAKE_BUILD_TYPE=Debug -DSMOL_SANITIZE=ON -DSMOL_WERROR=ON \
    -DSMOL_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG="-Og -g1" -DSMOL_DISPATCH_FLAGS=-O2 \
    -DSMOL_DISPATCH_ISAS=native -DSMOL_PROGRAMS_ONE_UNIT=OFF &&
  cmake --build "$root/sanitize" -j "$jobs" --target smol_unit_tests &&
  SMOL_TEST_FEWER_REPEATS=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$root/sanitize" --output-on-failure -j "$jobs" -L unit
}

stage_tsan() {
  cmake -S . -B "$root/tsan" -DCMAKE_BUILD_TYPE=Debug -DSMOL_TSAN=ON -DSMOL_WERROR=ON \
    -DSMOL_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG="-Og -g1" -DSMOL_DISPATCH_ISAS=native &&
  cmake --build "$root/tsan" -j "$jobs" --target smol_concurrency_tests &&
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir "$root/tsan" --output-on-failure -j "$jobs" -L concurrency
}

# Line tables only (tests/fuzz/CMakeLists.txt says why), for the seed writers too.
stage_fuzz() {
  cmake -S . -B "$root/fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
    -DSMOL_FUZZ=ON -DSMOL_WERROR=ON -DSMOL_BUILD_BENCH=OFF -DSMOL_BUILD_EXAMPLES=OFF &&
  cmake --build "$root/fuzz" -j "$jobs" --target smol_fuzzers &&
  ctest --test-dir "$root/fuzz" --output-on-failure -j "$jobs" -L fuzz
}

# The NEON kernels, which no machine here can run natively: cross-compiled with Debian's
# aarch64 g++ and run under qemu-user. Only the kernel suites: the multi-threaded model
# suites take many minutes under emulation.
# The suites of tests/CMakeLists.txt's `kernels` group, built as one executable.
aarch64_suites=(test_simd_dot test_quant_rows8 test_simd_attention test_quant_blocks
                test_ops_elementwise test_ops_rope)
stage_aarch64() {
  if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64 >/dev/null ||
     [ ! -e /usr/lib/aarch64-linux-gnu/libtbb.so ]; then
    echo "skipped: needs aarch64-linux-gnu-g++, qemu-aarch64 and libtbb-dev:arm64"
    return 0
  fi
  cmake -S . -B "$root/aarch64" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DCMAKE_BUILD_TYPE=Release -DSMOL_WERROR=ON -DSMOL_BUILD_BENCH=OFF -DSMOL_BUILD_EXAMPLES=OFF &&
  cmake --build "$root/aarch64" -j "$jobs" --target smol_suites_kernels &&
  ctest --test-dir "$root/aarch64" --output-on-failure -j "$jobs" \
    -R "^($(IFS='|'; echo "${aarch64_suites[*]}"))(@scalar)?\$"
}

# The CUDA unit compiles wherever nvcc does: a system toolkit when there is one, else
# NVIDIA's compiler wheels from PyPI, pinned, installed once into the build tree
# (scripts/cuda-toolkit-from-pypi.sh). Only sm_90 by default (CUDA_ARCHS): a compile
# check needs one architecture, and each costs a full device pass over the unit.
# Without any nvcc (no pip, no network) the stage says why and is skipped.
stage_cuda() {
  # nvcc is not on PATH in a default CUDA install; CMake is told where it is.
  local nvcc=""
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
  elif command -v nvcc >/dev/null 2>&1; then
    nvcc=$(command -v nvcc)
  else
    echo "no system nvcc: NVIDIA's CUDA compiler from PyPI into $root/cuda-toolkit"
    if ! nvcc=$(./scripts/cuda-toolkit-from-pypi.sh "$root/cuda-toolkit"); then
      echo "skipped: no nvcc (not at /usr/local/cuda/bin/nvcc, not on PATH) and the PyPI" \
           "packages could not be installed (see above)"
      return 0
    fi
  fi
  echo "nvcc: $nvcc ($("$nvcc" --version | grep -o 'release [0-9.]*, V[0-9.]*'))"
  # In the release stage's tree, with the unit added: the kernel units, the test main and
  # everything else already built there are reused (a tree of its own compiled them all
  # again, about a minute of the stage); only smol-chat, which links the unit, compiles
  # again. The CPU suites ran in the release stage; CUDA changes nothing in them.
  cmake -S . -B "$root/release" "${release_flags[@]}" -DSMOL_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" &&
  cmake --build "$root/release" -j "$jobs" --target smol_cuda_tests &&
  ctest --test-dir "$root/release" --output-on-failure -j "$jobs" -L cuda
}

failed=()
summary=()
for stage in $stages; do
  if ! declare -F "stage_$stage" >/dev/null; then
    echo "smol: unknown stage '$stage' (release sanitize tsan fuzz aarch64 cuda)" >&2
    exit 2
  fi
  echo "== $stage"
  started=$SECONDS
  if "stage_$stage"; then
    result=passed
  else
    result=FAILED
    failed+=("$stage")
  fi
  summary+=("$(printf '%-9s %-7s %4d s' "$stage" "$result" $((SECONDS - started)))")
  echo "== $stage: $result in $((SECONDS - started)) s"
done

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "== FAILED: ${failed[*]}"
  exit 1
fi
echo "== every stage passed"
