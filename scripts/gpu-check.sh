#!/usr/bin/env bash
# The CUDA unit on a GPU machine that has a CUDA toolkit, a C++ compiler and CMake but
# none of smol's other dependencies and no network: builds it against a prefix of
# unpacked Debian 12 packages, then runs `ctest -L cuda` (test_cuda_host,
# test_cuda_device, chat_gpu) and the benchmark (cuda_decode_speed: smol-cuda-bench,
# pp512 / tg128, on a synthetic full-size SmolLM3-3B Q4_K_M written by smol-make-model).
#
#   ./scripts/gpu-check.sh --prepare   here, with Debian's package archive reachable:
#        apt-get download the packages below, unpack them (dpkg -x) into
#        .devdeps/root, keep headers, CMake/pkg-config files and shared libraries only;
#        copy the fixtures the CUDA tests read into .devdeps/fixtures; ignore .devdeps
#        in .git/info/exclude. About 33 MB.
#   ./scripts/gpu-check.sh             there, from a copy of the tree with .devdeps:
#        configure, build, test, benchmark. Markers "== gpu-check [  Ns] ..." on
#        stdout; everything also goes to $OUT (default ./gpu-out): gpu-check.log,
#        env.txt, configure.log, build.log, ctest.log, LastTest.log, bench.log. Exit
#        0 when every step ran and passed, 1 when one failed or timed out, 3 when
#        none failed but one was not run for want of time or a test was skipped (no
#        CUDA device): "RESULT: ..." says which.
#
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), CUDA_ARCHS
# (90), JOBS (nproc), BUILD (build/gpu-check), GPU_CHECK_SECONDS (360: the whole run;
# each step gets what is left, and the model and benchmark are skipped, saying so,
# when too little is), BENCH=0 (no model, no benchmark), SMOL_FIXTURES_DIR (for
# --prepare; default ../shared/fixtures).
#
# The packages' libraries need glibc 2.34 or newer (Ubuntu 22.04 has 2.35, 24.04 2.39).
# The programs link the prefix's copies and find them through their RUNPATH; those the
# machine lacks (by soname, ldconfig -p) are also linked into BUILD/devdeps-lib, on
# LD_LIBRARY_PATH, for what RUNPATH does not cover: pkgconf's own library, and what the
# packages' libraries load (libedit's libbsd).
# pkg-config is the carried pkgconf, with PKG_CONFIG_SYSROOT_DIR so the packages'
# /usr paths land in .devdeps/root; find_package is pointed at the prefix's config
# files. libcurl and OpenSSL are left out (smol-chat builds without model download).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
devdeps=$repo/.devdeps

# ---- --prepare: the packages and fixtures, here ----------------------------------
packages=(
  libxsimd-dev                                          # the library
  libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libhwloc15  # (TBB's config checks every .so)
  libeigen3-dev                                         # smol::testing
  doctest-dev                                           # the tests
  libcli11-dev nlohmann-json3-dev                       # the programs
  libedit-dev libedit2 libbsd0 libmd0                   # smol-chat's prompt
  libcpp-httplib-dev libcpp-httplib0.11                 # configure needs it (smol-server, not built)
  libssl-dev libbrotli-dev libbrotli1 zlib1g-dev        # cpp-httplib.pc's Requires.private
  pkgconf-bin libpkgconf3                               # pkg-config itself
  xz-utils                                              # unpacking the F32 fixture
)
fixtures=(
  tiny-smollm3-a.q4_k_m.gguf tiny-smollm3-a.f32.gguf.xz
  tiny-smollm3-a.f32.P1.json tiny-smollm3-a.f32.P1.bin
  tiny-smollm3-a.f32.P2.json tiny-smollm3-a.f32.P2.bin
  tiny-smollm3-a.f32.P3.json tiny-smollm3-a.f32.P3.bin
)

prepare() {
  set -e
  local fixtures_dir=${SMOL_FIXTURES_DIR:-$repo/../shared/fixtures}
  rm -rf "$devdeps"
  mkdir -p "$devdeps/debs" "$devdeps/root" "$devdeps/fixtures"
  apt-get update -qq || echo "gpu-check: apt-get update failed; downloading from the lists there are" >&2
  (cd "$devdeps/debs" && apt-get download "${packages[@]}")
  local deb
  : >"$devdeps/MANIFEST"
  for deb in "$devdeps"/debs/*.deb; do
    dpkg-deb -f "$deb" Package Version | sed 's/^[A-Za-z]*: //' | paste -sd' ' >>"$devdeps/MANIFEST"
    dpkg -x "$deb" "$devdeps/root"
  done
  rm -rf "$devdeps/debs"
  local usr=$devdeps/root/usr
  # Headers, CMake and pkg-config files, shared libraries, pkgconf and xz: nothing else.
  rm -rf "$usr"/share/{doc,man,lintian,locale,bug,doc-base} "$usr/include/eigen3/unsupported"
  find "$devdeps/root" -name '*.a' -delete
  # Links into the rest of a system (libz.so -> /lib/...) or to libraries left out
  # (libssl.so -> libssl.so.3): dangling there, so gone.
  find "$devdeps/root" -type l ! -exec test -e {} \; -delete
  find "$usr/bin" -type f ! -name pkgconf ! -name xz -delete
  find "$usr/bin" -type l ! -name pkg-config -delete
  cp "${fixtures[@]/#/$fixtures_dir/}" "$devdeps/fixtures/"
  local exclude
  exclude=$(git rev-parse --git-path info/exclude)
  grep -qxF '/.devdeps/' "$exclude" 2>/dev/null || echo '/.devdeps/' >>"$exclude"
  echo "gpu-check: $(du -sh "$devdeps" | cut -f1) in $devdeps ($(wc -l <"$devdeps/MANIFEST") packages, MANIFEST)"
}

if [ "${1:-}" = --prepare ]; then
  prepare
  exit
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--prepare]" >&2
  exit 2
fi

# ---- the check, there --------------------------------------------------------------
build=${BUILD:-build/gpu-check}
mkdir -p "$build"
build=$(cd "$build" && pwd)
out=${OUT:-$repo/gpu-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=${JOBS:-$(nproc)}
deadline=$((SECONDS + ${GPU_CHECK_SECONDS:-360}))
exec > >(tee "$out/gpu-check.log") 2>&1
tee_pid=$!

mark() { printf '== gpu-check [%4ds] %s\n' "$SECONDS" "$*"; }
left() { echo $((deadline - SECONDS)); }
# budget N: N seconds, or what is left of the whole run less 10, if less.
budget() { local l=$(($(left) - 10)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }
results=()
finish() {
  local rc=0
  mark "summary: ${results[*]}"
  mark "logs in $out"
  case " ${results[*]} " in
    *=FAILED* | *=TIMEOUT*) mark "RESULT: FAILED"; rc=1 ;;
    *=not-run\ * | *=SKIPPED*) mark "RESULT: INCOMPLETE (nothing failed; see the summary)"; rc=3 ;;
    *) mark "RESULT: passed" ;;
  esac
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null  # the log is whole when the script returns
  exit "$rc"
}
# step NAME LIMIT LOG COMMAND...: runs it under timeout, output to LOG and stdout.
step() {
  local name=$1 limit=$2 log=$3 rc
  shift 3
  if [ "$limit" -lt 20 ]; then
    mark "$name: not run: only $(left) s left of GPU_CHECK_SECONDS"
    results+=("$name=not-run")
    return 1
  fi
  mark "$name (at most $limit s): $*"
  timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ]; then
    results+=("$name=ok")
    mark "$name: ok"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    results+=("$name=TIMEOUT")
    mark "$name: TIMEOUT after $limit s"
  else
    results+=("$name=FAILED")
    mark "$name: FAILED (exit $rc)"
  fi
  return "$rc"
}

mark "start: $(date -u +%FT%TZ) in $repo, build $build, logs $out"
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cxx=${CXX:-$(command -v g++ || command -v c++ || true)}
{
  echo "host: $(uname -srm); $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"); $(ldd --version 2>/dev/null | head -1)"
  echo "cpus: $(nproc)"
  echo "gpu: $(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4)"
  echo "nvcc: $nvcc: $("$nvcc" --version 2>&1 | grep -o 'release [0-9.]*, V[0-9.]*' || echo missing)"
  echo "c++: ${cxx:-missing} $([ -n "$cxx" ] && "$cxx" --version | head -1)"
  echo "cmake: $(command -v cmake) $(cmake --version 2>/dev/null | head -1)"
  echo "ninja: $(command -v ninja || echo none) $(ninja --version 2>/dev/null)"
  echo "pkg-config, xz on the machine: $(command -v pkg-config || echo no pkg-config) $(command -v xz || echo no xz)"
} | tee "$out/env.txt"
missing=()
[ -x "$nvcc" ] || missing+=("nvcc (set NVCC)")
[ -n "$cxx" ] || missing+=("a C++ compiler (g++ or c++)")
command -v cmake >/dev/null || missing+=(cmake)
[ -d "$devdeps/root/usr/include/xsimd" ] && [ -d "$devdeps/fixtures" ] ||
  missing+=(".devdeps (./scripts/gpu-check.sh --prepare where apt works, then carry it)")
if [ ${#missing[@]} -gt 0 ]; then
  mark "cannot build: no ${missing[*]}"
  results+=("setup=FAILED")
  finish
fi

# The prefix: libraries the machine lacks, by soname, on LD_LIBRARY_PATH.
prefix=$devdeps/root/usr
libdir=$prefix/lib/x86_64-linux-gnu
overlay=$build/devdeps-lib
rm -rf "$overlay"
mkdir -p "$overlay"
known=$(ldconfig -p 2>/dev/null || true)
for lib in "$libdir"/lib*.so.*; do
  name=$(basename "$lib")
  if ! printf '%s\n' "$known" | grep -q "^[[:space:]]*$name "; then
    ln -s "$lib" "$overlay/$name"
  fi
done
mark "libraries from .devdeps that the machine lacks: $(cd "$overlay" && ls | grep -E '\.so\.[0-9]+$' | paste -sd' ')"
export LD_LIBRARY_PATH=$overlay${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:$prefix/bin  # xz where the machine has none
export PKG_CONFIG_LIBDIR=$libdir/pkgconfig:$prefix/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$devdeps/root
unset PKG_CONFIG_PATH
# -I/usr/include is the prefix's include folder here, not a system one to drop.
export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1

generator=()
if command -v ninja >/dev/null && [ ! -e "$build/CMakeCache.txt" ]; then
  generator=(-G Ninja)
fi
step configure "$(budget 120)" "$out/configure.log" \
  cmake -S "$repo" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DSMOL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" -DSMOL_BUILD_BENCH=OFF \
    -DSMOL_SERVER_E2E_TESTS=OFF -DSMOL_REAL_MODEL_TESTS=OFF \
    -DSMOL_FIXTURES_DIR="$devdeps/fixtures" \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DTBB_DIR="$libdir/cmake/TBB" -Dxsimd_DIR="$libdir/cmake/xsimd" \
    -DEigen3_DIR="$prefix/share/eigen3/cmake" -Ddoctest_DIR="$prefix/lib/cmake/doctest" \
    -DCLI11_DIR="$prefix/share/cmake/CLI11" -Dnlohmann_json_DIR="$prefix/share/cmake/nlohmann_json" \
    -DPKG_CONFIG_EXECUTABLE="$prefix/bin/pkgconf" \
    -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 || finish

# smol_cuda_tests: the unit, test_cuda_host, test_cuda_device, smol-cuda-bench; smol-chat
# for chat_gpu. Whatever is left but a minute (for the tests), at most 10 minutes.
step build "$(budget $(($(left) - 70 < 600 ? $(left) - 70 : 600)))" "$out/build.log" \
  cmake --build "$build" -j "$jobs" --target smol_cuda_tests smol-chat smol-make-model || finish

# The correctness tests first; the benchmark only after them.
step ctest "$(budget 180)" "$out/ctest.log" \
  ctest --test-dir "$build" -L cuda -E '^cuda_decode_speed$' --output-on-failure -j 4
grep -E '^[0-9]+% tests passed|Skipped|Failed|Not Run' "$out/ctest.log" | sed 's/^/   /'
if grep -q '\*\*\*Skipped' "$out/ctest.log"; then
  results+=("gpu-tests=SKIPPED(no CUDA device?)")
fi
cp "$build/Testing/Temporary/LastTest.log" "$out/LastTest.log" 2>/dev/null

if [ "${BENCH:-1}" = 0 ]; then
  results+=("bench=not-run(BENCH=0)")
  finish
fi
# The same file cuda_decode_speed writes on first use (tests/cuda.cmake); written
# here first, with its own time limit, so the benchmark's time is the benchmark's.
model=$build/tests/data/cuda/smollm3-3b-synthetic.gguf
if [ ! -e "$model" ]; then
  mkdir -p "$(dirname "$model")"
  step model "$(budget 150)" "$out/bench.log" \
    "$build/examples/smol-make-model" --preset smollm3-3b -o "$model.partial" &&
    mv "$model.partial" "$model" || finish
fi
step bench "$(budget 240)" "$out/bench.log" \
  ctest --test-dir "$build" -R '^cuda_decode_speed$' -V
grep -E ': (device|weights on the device|pp[0-9]+|tg[0-9]+):' "$out/bench.log" | sed 's/^[0-9]*: /   /'
if grep -q '\*\*\*Skipped' "$out/bench.log"; then
  results+=("bench-result=SKIPPED(no CUDA device?)")
fi
finish
