#!/usr/bin/env bash
# Installs the Debian 12 packages smol builds and tests with. Idempotent: only
# missing packages are installed. Runs as root, or through sudo.
set -euo pipefail

packages=(
  build-essential cmake g++ clang libclang-rt-14-dev  # compilers; clang for libFuzzer
  libeigen3-dev libxsimd-dev libtbb-dev                # the library's dependencies
  doctest-dev libbenchmark-dev                         # tests and micro-benchmarks
  libcurl4-openssl-dev libssl-dev                      # smol-chat's model download (+ sha256)
  xz-utils python3 nodejs npm                          # test data and tokenizer conformance
  g++-aarch64-linux-gnu                                # the aarch64 (NEON) compile check
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
# A machine that already has a newer Node.js (not from Debian) keeps it.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs/}")
  missing=("${missing[@]/npm/}")
fi
read -r -a missing <<<"${missing[*]}"  # drop the emptied entries

as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
  echo "smol: installing ${missing[*]}"
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The NEON kernels' suites run under qemu-user (scripts/test.sh): they need the arm64
# oneTBB, so the arm64 architecture is added to dpkg. Optional: on failure the step is
# skipped with a message, the rest of the tests do not depend on it.
if ! command -v qemu-aarch64 >/dev/null || [ ! -e /usr/lib/aarch64-linux-gnu/libtbb.so ]; then
  echo "smol: installing qemu-user and libtbb-dev:arm64 (aarch64 suites under qemu)"
  if ! { "${as_root[@]}" dpkg --add-architecture arm64 &&
         "${as_root[@]}" apt-get update -qq &&
         "${as_root[@]}" apt-get install -y -qq --no-install-recommends qemu-user libtbb-dev:arm64; }; then
    echo "smol: could not install them; the aarch64 suites will be skipped" >&2
  fi
fi
