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

# Which units to compile: all those of the processor (the default), or "native": only
# the sets this machine's CPU runs (read from /proc/cpuinfo), scalar always. A "native"
# binary still runs anywhere (a set left out is as if no CPU had it) but is fast only on
# CPUs like this one. The sanitize stage of scripts/test.sh builds "native": a unit the
# CPU cannot run is never executed there, and the AMX unit alone was 38 CPU s of its
# compile on a CPU without AMX.
set(SMOL_DISPATCH_ISAS "all" CACHE STRING
    "per-ISA kernel units: all, native (the sets this CPU runs) or best (the best of them)")
set_property(CACHE SMOL_DISPATCH_ISAS PROPERTY STRINGS all native best)

# smol_cpu_runs(<isa> <var>): whether this machine's CPU runs `isa` (avx2, avx512,
# avx512vnni, amx): /proc/cpuinfo lists every flag that simd/cpu_features.hpp checks for
# it at run time. ON for scalar and neon, and where there is no cpuinfo to read or the
# build is cross-compiled. tests/ picks its per-ISA suite copies with it too.
function(smol_cpu_runs isa out)
  set(${out} ON PARENT_SCOPE)
  if(CMAKE_CROSSCOMPILING OR NOT EXISTS /proc/cpuinfo OR isa STREQUAL "scalar" OR isa STREQUAL "neon")
    return()
  endif()
  file(READ /proc/cpuinfo cpuinfo)
  set(avx2_needs avx2 fma f16c bmi2)
  set(avx512_needs ${avx2_needs} avx512f avx512bw avx512vl avx512dq avx512cd)
  set(avx512vnni_needs ${avx512_needs} avx512_vnni)
  set(amx_needs ${avx512vnni_needs} amx_tile amx_int8)
  foreach(flag IN LISTS ${isa}_needs)
    if(NOT cpuinfo MATCHES " ${flag}[ \n]")
      set(${out} OFF PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()

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
  if(NOT SMOL_DISPATCH_ISAS MATCHES "^(all|native|best)$")
    message(FATAL_ERROR "SMOL_DISPATCH_ISAS is '${SMOL_DISPATCH_ISAS}': all, native or best")
  endif()
  # Every includer and every unit must agree on which units exist (kernels.hpp).
  set(without "")
  if(SMOL_DISPATCH_ISAS MATCHES "^(native|best)$")
    # best: the last vector set of the list (each contains the ones before it) that this
    # CPU runs, and scalar: a build that proves the units compile, link and run, as the
    # consumer tests do, without compiling the sets the program would never pick.
    set(best "")
    foreach(isa IN LISTS isas)
      smol_cpu_runs(${isa} runs)
      if(runs AND NOT isa STREQUAL "scalar")
        set(best ${isa})
      endif()
    endforeach()
    foreach(isa IN LISTS isas)
      smol_cpu_runs(${isa} runs)
      if(NOT runs OR (SMOL_DISPATCH_ISAS STREQUAL "best" AND NOT isa MATCHES "^(${best}|scalar)$"))
        list(REMOVE_ITEM isas ${isa})
        string(TOUPPER ${isa} upper)
        list(APPEND without SMOL_DISPATCH_WITHOUT_${upper}=1)
      endif()
    endforeach()
    message(STATUS "smol: kernel units for this CPU only: ${isas}")
  endif()
  target_compile_definitions(smol_dispatch INTERFACE ${without})
  foreach(isa IN LISTS isas)
    add_library(smol_dispatch_${isa} STATIC "${SMOL_DISPATCH_DIR}/isa_${isa}.cpp")
    target_compile_definitions(smol_dispatch_${isa} PRIVATE ${without})
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
