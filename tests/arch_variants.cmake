# Per-architecture builds: configures a separate tree with SMOL_ARCH_VARIANTS, builds
# smol-logits for each x86-64 level this CPU can run, and runs each on the fixture.
# Slow (three full compiles, at -O0: the test is that each level compiles and runs, not
# how fast), so it is labelled and kept out of the sanitizer run.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND EXISTS /proc/cpuinfo)
  file(READ /proc/cpuinfo cpuinfo)
  set(levels x86-64-v2)
  if(cpuinfo MATCHES " avx2 " AND cpuinfo MATCHES " bmi2 " AND cpuinfo MATCHES " fma ")
    list(APPEND levels x86-64-v3)
    if(cpuinfo MATCHES " avx512bw " AND cpuinfo MATCHES " avx512vl " AND cpuinfo MATCHES " avx512dq ")
      list(APPEND levels x86-64-v4)
    endif()
  endif()
  list(JOIN levels "\\;" levels_arg)
  add_test(NAME arch_variants_smol_logits
    COMMAND ${CMAKE_COMMAND} -DSOURCE=${PROJECT_SOURCE_DIR} -DWORK=${CMAKE_CURRENT_BINARY_DIR}/arch_variants
            -DLEVELS=${levels_arg} -DMODEL=${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf
            -DFIXTURES=${SMOL_FIXTURES_DIR} -DCXX=${CMAKE_CXX_COMPILER}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/arch_variants/run.cmake)
  set_tests_properties(arch_variants_smol_logits PROPERTIES LABELS "slow" TIMEOUT 1500 COST 150)
endif()
