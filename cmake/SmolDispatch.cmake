# smol_add_dispatch(<target>)
#
# smol is header-only, but code for an instruction set must be compiled with that
# instruction set's flags. The first call builds one small static library per ISA
# from dispatch/isa_<isa>.cpp, each with its own -m flags, and groups them behind
# the target `smol_dispatch`; every call links that to <target> and defines
# SMOL_DISPATCH there, so the headers pick among the kernel sets at run time (after
# checking cpuid). The scalar set gets a unit too (no flags, last, so that it resolves
# the vector units' references to it): every includer would
# otherwise compile all the reference kernels again. The units are compiled once per
# project, not once per target.
# A target that does not call this gets only the kernels its own flags allow.
include_guard(GLOBAL)

set(SMOL_DISPATCH_DIR "${SMOL_DISPATCH_DIR}" CACHE INTERNAL "per-ISA kernel units")
# Extra compile options for the kernel units alone, after the build type's. The sanitizer
# stages of scripts/test.sh build everything at -Og but these at -O2: at -Og GCC leaves
# xsimd's one-line operators as calls, and the suites spent most of their time in them.
set(SMOL_DISPATCH_FLAGS "" CACHE STRING "extra compile options for the per-ISA kernel units")

function(_smol_make_dispatch_targets)
  add_library(smol_dispatch INTERFACE)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    set(avx2_flags -mavx2 -mfma -mf16c -mbmi2)
    set(avx512_flags ${avx2_flags} -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512cd)
    set(avx512vnni_flags ${avx512_flags} -mavx512vnni)
    set(amx_flags ${avx512vnni_flags} -mamx-tile -mamx-int8)
    set(isas avx2 avx512 avx512vnni amx scalar)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(isas neon scalar)
  else()
    return()  # no vector sets for this processor: the scalar kernels serve
  endif()
  foreach(isa IN LISTS isas)
    add_library(smol_dispatch_${isa} STATIC "${SMOL_DISPATCH_DIR}/isa_${isa}.cpp")
    target_link_libraries(smol_dispatch_${isa} PRIVATE smol::smol)
    target_compile_options(smol_dispatch_${isa} PRIVATE ${${isa}_flags} ${SMOL_DISPATCH_FLAGS})
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # GCC 12's own AVX-512 intrinsics (reached through xsimd and our kernels) trip
      # its -W(maybe-)uninitialized at low optimisation levels: GCC bug 105593. The
      # pragmas in kernels_impl.hpp cannot reach code inlined from xsimd's headers.
      target_compile_options(smol_dispatch_${isa} PRIVATE -Wno-uninitialized -Wno-maybe-uninitialized)
    endif()
    target_compile_definitions(smol_dispatch_${isa} PRIVATE SMOL_DISPATCH=1)
    set_target_properties(smol_dispatch_${isa} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    if(TARGET smol_warnings)  # inside smol itself: the same warnings as everything else
      target_link_libraries(smol_dispatch_${isa} PRIVATE smol_warnings)
    endif()
    target_link_libraries(smol_dispatch INTERFACE smol_dispatch_${isa})
  endforeach()
  target_compile_definitions(smol_dispatch INTERFACE SMOL_DISPATCH=1)
endfunction()

function(smol_add_dispatch target)
  if(NOT TARGET smol_dispatch)
    _smol_make_dispatch_targets()
  endif()
  # PUBLIC for libraries: code linking a library that carries the units must see the
  # extern template declarations too, or it would only know the scalar kernels.
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_link_libraries(${target} PRIVATE smol_dispatch)
  else()
    target_link_libraries(${target} PUBLIC smol_dispatch)
  endif()
endfunction()
