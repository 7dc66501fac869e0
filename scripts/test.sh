#!/usr/bin/env bash
# Sets everything up and runs every test: the Release build (all suites, the
# example programs' CTest checks), the same suites under AddressSanitizer +
# UndefinedBehaviorSanitizer, a bounded libFuzzer run of the GGUF reader, the NEON
# kernel suites cross-compiled for aarch64 and run under qemu-user, and, where
# nvcc is installed, the build with the CUDA unit and its tests (those that need a GPU
# report "skipped: no CUDA device" without one).
#   ./scripts/test.sh            (BUILD_ROOT=build by default)
set -euo pipefail
cd "$(dirname "$0")/.."
root=${BUILD_ROOT:-build}
jobs=${JOBS:-$(nproc)}

./scripts/install-deps.sh

echo "== Release build and tests"
cmake -S . -B "$root/release" -DCMAKE_BUILD_TYPE=Release -DSMOL_WERROR=ON
cmake --build "$root/release" -j "$jobs"
ctest --test-dir "$root/release" --output-on-failure -j "$jobs"

echo "== ASan + UBSan build and tests"
cmake -S . -B "$root/sanitize" -DCMAKE_BUILD_TYPE=Debug -DSMOL_SANITIZE=ON -DSMOL_WERROR=ON \
  -DSMOL_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g"
cmake --build "$root/sanitize" -j "$jobs" --target smol_unit_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$root/sanitize" --output-on-failure -j "$jobs" -L unit

echo "== libFuzzer (clang) on the GGUF reader, bounded"
cmake -S . -B "$root/fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DSMOL_FUZZ=ON -DSMOL_WERROR=ON -DSMOL_BUILD_BENCH=OFF -DSMOL_BUILD_EXAMPLES=OFF
cmake --build "$root/fuzz" -j "$jobs" --target fuzz_gguf_reader
ctest --test-dir "$root/fuzz" --output-on-failure -L fuzz

# The NEON kernels, which no machine here can run natively: cross-compiled with Debian's
# aarch64 g++ and run under qemu-user. Only the kernel suites: the multi-threaded model
# suites take many minutes under emulation.
aarch64_suites=(test_simd_dot test_quant_rows8 test_simd_attention test_quant_blocks
                test_ops_elementwise test_ops_rope)
if command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64 >/dev/null &&
   [ -e /usr/lib/aarch64-linux-gnu/libtbb.so ]; then
  echo "== aarch64 (NEON) kernel suites under qemu-user"
  cmake -S . -B "$root/aarch64" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DCMAKE_BUILD_TYPE=Release -DSMOL_WERROR=ON -DSMOL_BUILD_BENCH=OFF -DSMOL_BUILD_EXAMPLES=OFF
  cmake --build "$root/aarch64" -j "$jobs" --target "${aarch64_suites[@]}"
  pattern=$(IFS='|'; echo "${aarch64_suites[*]}")
  ctest --test-dir "$root/aarch64" --output-on-failure -j "$jobs" -R "^($pattern)(@scalar)?\$"
else
  echo "== aarch64 suites: skipped (needs aarch64-linux-gnu-g++, qemu-aarch64, libtbb-dev:arm64)"
fi

# nvcc is not on PATH in a default CUDA install; CMake is told where it is.
nvcc=""
if [ -x /usr/local/cuda/bin/nvcc ]; then
  nvcc=/usr/local/cuda/bin/nvcc
elif command -v nvcc >/dev/null 2>&1; then
  nvcc=$(command -v nvcc)
fi
if [ -n "$nvcc" ]; then
  echo "== CUDA unit ($nvcc): compile and link, CUDA tests"
  cmake -S . -B "$root/cuda" -DSMOL_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DSMOL_WERROR=ON \
    -DCMAKE_BUILD_TYPE=Release -DSMOL_BUILD_BENCH=OFF
  # The CPU suites ran in the Release build above; CUDA changes nothing in them.
  cmake --build "$root/cuda" -j "$jobs" --target smol_cuda smol_cuda_tests smol-chat
  ctest --test-dir "$root/cuda" --output-on-failure -j "$jobs" -L cuda
else
  echo "== CUDA unit: skipped, no nvcc (not at /usr/local/cuda/bin/nvcc, not on PATH)"
fi
