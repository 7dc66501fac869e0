# Cross-compiling for 64-bit Arm with Debian's g++-aarch64-linux-gnu, the arm64 oneTBB
# (libtbb-dev:arm64) and the host's architecture-independent headers (Eigen, xsimd,
# doctest). Tests run under qemu-user (qemu-aarch64 with the cross sysroot), so
# `ctest` exercises the NEON kernels on an x86 machine. scripts/test.sh uses it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
find_program(SMOL_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${SMOL_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu")
# Debian ships xsimd's (header-only) package config under the host's multiarch folder.
if(EXISTS /usr/lib/x86_64-linux-gnu/cmake/xsimd/xsimdConfig.cmake)
  set(xsimd_DIR /usr/lib/x86_64-linux-gnu/cmake/xsimd CACHE PATH "")
endif()
