# Tests of the optional CUDA unit (label "cuda"; included by tests/CMakeLists.txt).
#
#   test_cuda_host     nvcc-compiled: the unit's decoders and its whole forward pass run
#                      on the host (cuda/host_backend.cuh). Needs no GPU.
#   test_cuda_device   GpuTransformer vs the CPU Transformer and the goldens.
#   cuda_decode_speed  smol-cuda-bench on the full-size model: pp512 / tg128 tok/s.
#   chat_gpu           smol-chat --gpu: a reply, or exit 1 saying there is no device.
#
# The two GPU tests print "skipped: no CUDA device" and exit 77, which CTest counts as
# skipped, when there is no device; that is the only reason they do not run.
# `smol_cuda_tests` builds everything these need, smol-chat included (one build goal, so
# that Make compiles them side by side: goals given one by one build one after another).
find_program(SMOL_SH sh REQUIRED)
set(cuda_fixture "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf")

if(NOT SMOL_CUDA)
  # A build without the unit says what --gpu needs: exit 2, one line.
  if(EXISTS "${PROJECT_SOURCE_DIR}/examples/chat")
    add_test(NAME chat_gpu_needs_cuda_build
             COMMAND ${SMOL_SH} "${CMAKE_CURRENT_SOURCE_DIR}/chat/expect.sh" 2
                     "^smol-chat: --gpu needs a build with -DSMOL_CUDA=ON$" 1
                     $<TARGET_FILE:smol-chat> -m "${cuda_fixture}" --gpu)
  endif()
  return()
endif()

add_custom_target(smol_cuda_tests)

add_executable(test_cuda_host cuda/test_cuda_host.cu)
target_link_libraries(test_cuda_host PRIVATE smol_test_main smol::testing smol_cuda_flags)
add_dependencies(test_cuda_host smol_test_data)
add_dependencies(smol_cuda_tests test_cuda_host)
add_test(NAME test_cuda_host COMMAND test_cuda_host)
set_tests_properties(test_cuda_host PROPERTIES LABELS cuda)

# Its own main (the device check comes first), so not smol_test_main.
add_executable(test_cuda_device cuda/test_cuda_device.cpp)
target_link_libraries(test_cuda_device PRIVATE smol::cuda smol::testing doctest::doctest smol_warnings
                                               smol_program_flags)
target_compile_definitions(test_cuda_device PRIVATE
  SMOL_FIXTURES_DIR="${SMOL_FIXTURES_DIR}" SMOL_TEST_DATA_DIR="${SMOL_TEST_DATA_DIR}")
smol_add_dispatch(test_cuda_device)
add_dependencies(test_cuda_device smol_test_data)
add_dependencies(smol_cuda_tests test_cuda_device)
add_test(NAME test_cuda_device COMMAND test_cuda_device)
set_tests_properties(test_cuda_device PROPERTIES LABELS cuda SKIP_RETURN_CODE 77 TIMEOUT 600)

# The real SmolLM3-3B when $SMOL_MODELS (or ~/.cache/smol) has it, else a synthetic
# one of the same size, written into the build tree on the first run (1.9 GB).
add_dependencies(smol_cuda_tests smol-cuda-bench)
add_test(NAME cuda_decode_speed
         COMMAND smol-cuda-bench --synthetic "${CMAKE_CURRENT_BINARY_DIR}/data/cuda/smollm3-3b-synthetic.gguf")
set_tests_properties(cuda_decode_speed PROPERTIES LABELS cuda SKIP_RETURN_CODE 77 TIMEOUT 1800
                                                  RUN_SERIAL TRUE)

if(EXISTS "${PROJECT_SOURCE_DIR}/examples/chat")
  if(SMOL_BUILD_EXAMPLES)
    add_dependencies(smol_cuda_tests smol-chat)  # resolved when the build is generated
  endif()
  add_test(NAME chat_gpu
           COMMAND ${SMOL_SH} "${CMAKE_CURRENT_SOURCE_DIR}/cuda/chat_gpu.sh" $<TARGET_FILE:smol-chat>
                   $<TARGET_FILE:smol-cuda-bench> "${cuda_fixture}")
  set_tests_properties(chat_gpu PROPERTIES LABELS cuda TIMEOUT 120)
endif()
