#!/usr/bin/env bash
# Sets everything up and starts smol-chat on the default model.
#   ./scripts/chat.sh [smol-chat flags...]     (BUILD_ROOT=build by default)
# smol-chat looks for SmolLM3-3B-Q4_K_M.gguf in $SMOL_MODELS (~/.cache/smol); see
# the README for what it does when the file is not there.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${BUILD_ROOT:-build}
jobs=${JOBS:-$(nproc)}

./scripts/install-deps.sh

cmake -S . -B "$root/release" -DCMAKE_BUILD_TYPE=Release
cmake --build "$root/release" -j "$jobs" --target smol-chat smol-make-model smol-inspect
exec "$root/release/examples/smol-chat" "$@"
