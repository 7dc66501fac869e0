# clang check: everything else builds with the system's GCC, so clang++ (installed for
# the fuzz stage) reads the umbrella header as a program's own code would (no -m flags)
# and the AVX-512 VNNI kernel unit with its flags, with the project's warnings as errors,
# -fsyntax-only (5 s and 2 s): the headers stay a clang user's too. Both once failed
# there and nowhere else: an asm operand of a 512-bit type, which clang sizes where it
# reads the statement, in every program that included the kernels; and clang 14's
# _cvtss_sh, whose macro is a C compound literal (-Wpedantic).
find_program(SMOL_CLANGXX clang++)
if(SMOL_CLANGXX AND NOT SMOL_SANITIZE AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(clang_flags -std=c++20 -O2 -fsyntax-only -Wall -Wextra -Wpedantic -Werror
                  -I${PROJECT_SOURCE_DIR}/include)
  add_test(NAME clang_umbrella_header
           COMMAND ${SMOL_CLANGXX} ${clang_flags} -x c++ ${CMAKE_CURRENT_SOURCE_DIR}/cross/umbrella.cpp)
  # The flags of cmake/SmolDispatch.cmake's avx512vnni unit.
  add_test(NAME clang_avx512vnni_unit
           COMMAND ${SMOL_CLANGXX} ${clang_flags} -DSMOL_DISPATCH=1 -mavx2 -mfma -mf16c -mbmi2
                   -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512cd -mavx512vnni
                   ${PROJECT_SOURCE_DIR}/dispatch/isa_avx512vnni.cpp)
elseif(NOT SMOL_SANITIZE)
  message(STATUS "smol: clang++ not found; the clang compile check is off")
endif()
