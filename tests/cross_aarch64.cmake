# aarch64 check: Debian's cross compiler (g++-aarch64-linux-gnu) compiles the umbrella
# header. The architecture-independent headers of the host's Eigen, xsimd and oneTBB
# serve (-idirafter /usr/include). The NEON dispatch unit is scripts/test.sh's aarch64
# stage's: it cross-builds the kernel suites, which link that unit, with
# cmake/aarch64-linux-gnu.cmake and runs them under qemu-user (a syntax check of the unit
# here repeated that compile: 41 s of the release stage on a 2-core AMD Zen 1).
find_program(SMOL_AARCH64_CXX aarch64-linux-gnu-g++)
if(SMOL_AARCH64_CXX AND NOT SMOL_SANITIZE)
  set(cross_flags -std=c++20 -O2 -fsyntax-only -Wall -Wextra -Wpedantic -Werror
                  -I${PROJECT_SOURCE_DIR}/include -idirafter /usr/include)
  add_test(NAME aarch64_umbrella_header
           COMMAND ${SMOL_AARCH64_CXX} ${cross_flags} -x c++
                   ${CMAKE_CURRENT_SOURCE_DIR}/cross/umbrella.cpp)
elseif(NOT SMOL_SANITIZE)
  message(STATUS "smol: aarch64-linux-gnu-g++ not found; the aarch64 compile check is off")
endif()
