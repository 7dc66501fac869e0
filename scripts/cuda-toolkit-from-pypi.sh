#!/usr/bin/env bash
# Installs NVIDIA's CUDA compiler from PyPI into DIR, laid out as a CUDA toolkit that
# CMake's CUDA language and find_package(CUDAToolkit) accept, and prints the path of
# its nvcc. For machines without a CUDA toolkit (scripts/test.sh's cuda stage):
#   nvcc=$(./scripts/cuda-toolkit-from-pypi.sh build/cuda-toolkit)
#   cmake -S . -B build/cuda -DSMOL_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc"
# The wheels are NVIDIA's own, pinned to CUDA 13.0 (nvcc 13.0.88; the newest 13.0
# release of each package), whose runtime a driver 580 (CUDA 13.0) runs. What they
# hold, in DIR/pkgs/nvidia/cu13 after `pip install --target`:
#   nvidia-cuda-nvcc     bin/: nvcc, ptxas, nvlink, fatbinary, cudafe++, nvcc.profile
#   nvidia-cuda-crt      include/crt/ (host_config.h, ...), which nvcc's headers include
#   nvidia-nvvm          nvvm/bin/cicc, nvvm/libdevice, lib/libnvvm.so.4
#   nvidia-cuda-runtime  include/ (cuda_runtime.h, ...), lib/libcudart_static.a,
#                        libcudadevrt.a, libcudart.so.13
#   nvidia-cuda-cccl     include/cccl/ (CUB, Thrust, libcu++), on nvcc's -isystem path
# nvcc.profile looks for lib64/ (the wheels have lib/) and CMake for libcudart.so (they
# have libcudart.so.13): two symbolic links add them. Tried on x86-64 (Debian 12, g++
# 12, CMake 3.25 and 4.4); on aarch64 pip would pick that machine's wheels (untried).
# Installed once: a later run with the same pins finds the
# stamp and prints the path without touching the network (about 270 MB installed, 120
# MB downloaded; the wheels are deleted once installed, pip keeps its own cache).
# Exit 1 with a message on stderr when it cannot install them (no pip, no network, an
# unsupported machine); nothing is printed on stdout then.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
mkdir -p "$1"
dir=$(cd "$1" && pwd)

pins=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-cccl==13.0.85
)
root="$dir/pkgs/nvidia/cu13"
stamp="$dir/installed"

fail() {
  echo "cuda-toolkit-from-pypi: $*" >&2
  exit 1
}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${pins[*]}" ] && "$root/bin/nvcc" --version >/dev/null 2>&1; then
  echo "$root/bin/nvcc"
  exit 0
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64 | Linux-aarch64) ;;
  *) fail "NVIDIA's compiler wheels are for Linux on x86-64 or aarch64, not $(uname -s) $(uname -m)" ;;
esac
python3 -m pip --version >/dev/null 2>&1 || fail "python3 -m pip does not run (Debian: python3-pip)"

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
rm -rf "$stamp" "$dir/pkgs" "$dir/pkgs.new" "$dir/wheels"
echo "cuda-toolkit-from-pypi: downloading ${pins[*]}" >&2
python3 -m pip download -q --no-deps --only-binary=:all: -d "$dir/wheels" "${pins[@]}" >&2 ||
  fail "pip could not download ${pins[*]}"
python3 -m pip install -q --no-deps --no-index --no-compile --find-links "$dir/wheels" \
  --target "$dir/pkgs.new" "${pins[@]}" >&2 ||
  fail "pip could not install the downloaded wheels into $dir/pkgs.new"
mv "$dir/pkgs.new" "$dir/pkgs"
rm -rf "$dir/wheels"

[ -x "$root/bin/nvcc" ] || fail "the wheels hold no $root/bin/nvcc"
ln -sfn lib "$root/lib64"
ln -sfn libcudart.so.13 "$root/lib/libcudart.so"
version=$("$root/bin/nvcc" --version 2>&1) || fail "$root/bin/nvcc does not run: $version"
echo "${pins[*]}" >"$stamp"
echo "cuda-toolkit-from-pypi: $(printf '%s\n' "$version" | grep -o 'release [0-9.]*, V[0-9.]*') in $root" >&2
echo "$root/bin/nvcc"
