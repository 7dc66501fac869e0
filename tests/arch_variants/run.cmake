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
foreach(level IN LISTS LEVELS)
  execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK}" -j 2 --target smol-chat-${level}
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(rc)
    message(FATAL_ERROR "building smol-chat-${level} failed")
  endif()
  execute_process(COMMAND "${WORK}/examples/smol-chat-${level}" -m "${MODEL}" -p "Hello" -n 4 --temp 0
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "smol-chat-${level} failed (${rc}): ${err}")
  endif()
  message(STATUS "smol-chat-${level}: ${out}")
endforeach()
