#!/usr/bin/env bash
# Installs the Debian 12 packages smol needs. Idempotent: only missing packages are
# installed. Runs as root, or through sudo.
#   ./scripts/install-deps.sh          what building the programs and chatting needs
#   ./scripts/install-deps.sh --test   that, plus what every test stage needs
set -euo pipefail

mode=chat
case "${1:-}" in
  "") ;;
  --test) mode=test ;;
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac

# Building the library and the programs, and the default model's download.
packages=(
  build-essential cmake g++ pkg-config                 # compilers
  libxsimd-dev libtbb-dev                              # the library's dependencies
  libeigen3-dev                                        # smol::testing (tests, demo and synthetic models)
  libcli11-dev libedit-dev                             # the programs' flags, the chat prompt
  libcurl4-openssl-dev libssl-dev                      # smol-chat's model download (+ sha256)
  libcpp-httplib-dev nlohmann-json3-dev                # smol-server: HTTP; JSON (also smol-inspect, smol-bench)
  python3 python3-pip                                  # the default model SmolLM2 comes through pip
)
if [ "$mode" = test ]; then
  packages+=(
    clang libclang-rt-14-dev                           # libFuzzer
    doctest-dev libbenchmark-dev                       # tests and micro-benchmarks
    xz-utils python3 nodejs npm                        # test data, tokenizer conformance
    python3-jinja2                                     # chat templates against jinja2
    python3-jsonschema                                 # JSON schema grammars against jsonschema
    g++-aarch64-linux-gnu                              # the aarch64 (NEON) compile check
    chromium nginx                                     # the chat page in a browser, replicas behind nginx
  )
fi

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

# Tests only: the NEON kernels' suites run under qemu-user (scripts/test.sh) and need
# the arm64 oneTBB, so the arm64 architecture is added to dpkg. Optional: on failure
# that stage is skipped with a message; nothing else depends on it.
if [ "$mode" = test ] &&
   { ! command -v qemu-aarch64 >/dev/null || [ ! -e /usr/lib/aarch64-linux-gnu/libtbb.so ]; }; then
  echo "smol: installing qemu-user and libtbb-dev:arm64 (aarch64 suites under qemu)"
  if ! { "${as_root[@]}" dpkg --add-architecture arm64 &&
         "${as_root[@]}" apt-get update -qq &&
         "${as_root[@]}" apt-get install -y -qq --no-install-recommends qemu-user libtbb-dev:arm64; }; then
    echo "smol: could not install them; the aarch64 suites will be skipped" >&2
  fi
fi
