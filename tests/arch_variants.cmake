# Per-architecture builds: configures a separate tree with SMOL_ARCH_VARIANTS, builds
# smol-logits for each x86-64 level with vector kernels that this CPU can run (x86-64-v3:
# AVX2, v4: AVX-512), and runs each on the fixture. Not x86-64-v2: its flags give no
# vector set of ours, so its program carries the scalar kernels, compiled in without
# dispatch units exactly as consumer_build_tree's program is (tests/consumer.cmake); a
# third compile here proved nothing more (25 s of the release stage).
# Slow (full compiles, at -O0: the test is that each level compiles and runs, not how
# fast), so it is labelled and kept out of the sanitizer run.
set(levels "")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND EXISTS /proc/cpuinfo)
  smol_cpu_runs(avx2 runs_v3)  # cmake/SmolDispatch.cmake: the AVX2 set's flags
  smol_cpu_runs(avx512 runs_v4)  # AVX-512 F, BW, CD, DQ, VL: x86-64-v4's
  if(runs_v3)
    list(APPEND levels x86-64-v3)
  endif()
  if(runs_v4)
    list(APPEND levels x86-64-v4)
  endif()
endif()
if(levels)
  list(JOIN levels "\\;" levels_arg)
  add_test(NAME arch_variants_smol_logits
    COMMAND ${CMAKE_COMMAND} -DSOURCE=${PROJECT_SOURCE_DIR} -DWORK=${CMAKE_CURRENT_BINARY_DIR}/arch_variants
            -DLEVELS=${levels_arg} -DMODEL=${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf
            -DFIXTURES=${SMOL_FIXTURES_DIR} -DCXX=${CMAKE_CXX_COMPILER}
            -P ${CMAKE_CURRENT_SOURCE_DIR}/arch_variants/run.cmake)
  set_tests_properties(arch_variants_smol_logits PROPERTIES LABELS "slow" TIMEOUT 1500 COST 150)
endif()
