# cmake -DSOURCE= -DWORK= -DLEVELS="a;b" -DMODEL= -DFIXTURES= -DCXX= -P run.cmake
execute_process(
  COMMAND ${CMAKE_COMMAND} -S "${SOURCE}" -B "${WORK}" -DCMAKE_BUILD_TYPE=Release
          -DCMAKE_CXX_FLAGS_RELEASE=-O0
          -DCMAKE_CXX_COMPILER=${CXX} -DSMOL_BUILD_TESTS=OFF -DSMOL_BUILD_BENCH=OFF
          -DSMOL_BUILD_EXAMPLES=ON "-DSMOL_ARCH_VARIANTS=${LEVELS}" -DSMOL_FIXTURES_DIR=${FIXTURES}
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "configuring the arch variants failed")
endif()
# smol-logits: the smallest program that runs the forward pass (the kernels the level's
# flags pick), 16 s of compile at -O0 against smol-chat's 26.
foreach(level IN LISTS LEVELS)
  execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK}" --target smol-logits-${level}
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(rc)
    message(FATAL_ERROR "building smol-logits-${level} failed")
  endif()
  execute_process(COMMAND "${WORK}/examples/smol-logits-${level}" -m "${MODEL}" --prompt "Hello"
                          -o "${WORK}/logits-${level}.bin"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "smol-logits-${level} failed (${rc}): ${err}")
  endif()
  message(STATUS "smol-logits-${level}: ${out}")
endforeach()
