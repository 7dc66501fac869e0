# aarch64 check: Debian's cross compiler (g++-aarch64-linux-gnu) compiles the NEON
# dispatch unit and the umbrella header. The architecture-independent headers of the
# host's Eigen, xsimd and oneTBB serve (-idirafter /usr/include). scripts/test.sh also
# cross-builds the kernel suites (cmake/aarch64-linux-gnu.cmake) and runs them under
# qemu-user.
find_program(SMOL_AARCH64_CXX aarch64-linux-gnu-g++)
if(SMOL_AARCH64_CXX AND NOT SMOL_SANITIZE)
  set(cross_flags -std=c++20 -O2 -fsyntax-only -Wall -Wextra -Wpedantic -Werror
                  -I${PROJECT_SOURCE_DIR}/include -idirafter /usr/include)
  add_test(NAME aarch64_neon_dispatch_unit
           COMMAND ${SMOL_AARCH64_CXX} ${cross_flags} -DSMOL_DISPATCH=1
                   ${PROJECT_SOURCE_DIR}/dispatch/isa_neon.cpp)
  add_test(NAME aarch64_umbrella_header
           COMMAND ${SMOL_AARCH64_CXX} ${cross_flags} -x c++
                   ${CMAKE_CURRENT_SOURCE_DIR}/cross/umbrella.cpp)
else()
  message(STATUS "smol: aarch64-linux-gnu-g++ not found; the aarch64 compile check is off")
endif()
