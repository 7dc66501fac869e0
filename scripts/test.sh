#!/usr/bin/env bash
# Sets everything up and runs every test: the Release build (all suites, the
# example programs' CTest checks), the same suites under AddressSanitizer +
# UndefinedBehaviorSanitizer, and a bounded libFuzzer run of the GGUF reader.
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
