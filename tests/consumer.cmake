# CTest entries that build tests/consumer/ against smol three ways: as a
# subdirectory, through find_package on this build tree, and through find_package
# on an install prefix. Each configures, builds and runs the consumer on a fixture: one
# program on smol::smol, one on smol::testing. The build-tree consumer takes no dispatch
# units (the kernels its own flags allow: scalar), so both ways of getting kernels are
# proven; the other two compile the units from the source tree and from the installed
# copy. The install-prefix consumer also builds and runs README.md's ten-line program
# (examples/library/, a project of its own) against the installed package.
set(consumer_src "${CMAKE_CURRENT_SOURCE_DIR}/consumer")
set(consumer_work "${CMAKE_CURRENT_BINARY_DIR}/consumer")
set(consumer_model "${SMOL_FIXTURES_DIR}/tiny-smollm3-a.q4_k_m.gguf")
# -O0: these tests prove that the three ways of consuming smol configure, compile, link
# and run; the code's speed is measured elsewhere. Each build is one fifth cheaper than
# at -O1 (the build-tree consumer: 35 CPU s against 48; its run, the forward pass and
# the Eigen reference on three tokens, stays well under a second), and -O3 would double it.
# SMOL_DISPATCH_ISAS=best: the one vector unit this CPU would pick (and scalar), which
# these builds then run: that a consumer's units compile, link and dispatch is proven by
# one (the other sets' units are the same code with other flags, and every unit, AMX's
# included, compiles at -O2 in this build's own programs and suites); native's three on
# an AVX-512 VNNI machine cost the two builds that compile units about 100 CPU s more.
set(consumer_common -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O0
    -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER} -DSMOL_DISPATCH_ISAS=best)

add_test(NAME consumer_subdirectory
  COMMAND ${CMAKE_COMMAND} -DSRC=${consumer_src} -DWORK=${consumer_work}/subdirectory
          -DMODEL=${consumer_model}
          "-DARGS=${consumer_common};-DSMOL_CONSUME=subdirectory;-DSMOL_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
          -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run_consumer.cmake)

add_test(NAME consumer_build_tree
  COMMAND ${CMAKE_COMMAND} -DSRC=${consumer_src} -DWORK=${consumer_work}/build_tree
          -DMODEL=${consumer_model}
          "-DARGS=${consumer_common};-Dsmol_DIR=${PROJECT_BINARY_DIR};-DSMOL_CONSUMER_DISPATCH=OFF"
          -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run_consumer.cmake)

add_test(NAME consumer_install_prefix
  COMMAND ${CMAKE_COMMAND} -DSRC=${consumer_src} -DWORK=${consumer_work}/installed
          -DMODEL=${consumer_model} -DINSTALL_FROM=${PROJECT_BINARY_DIR}
          "-DARGS=${consumer_common};-DCMAKE_PREFIX_PATH=${consumer_work}/installed/prefix;-DSMOL_HELLO_CHAT_DIR=${PROJECT_SOURCE_DIR}/examples/library"
          -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run_consumer.cmake)

set(consumer_output "architecture: smollm3, tensors: 74\nisa: ISA, logits: 1024\nreference logits: 3 x 1024\nsynthetic tiny tensors: 74")
string(REPLACE "ISA" "[a-z0-9]+" consumer_dispatch_output "${consumer_output}")
string(REPLACE "ISA" "scalar" consumer_scalar_output "${consumer_output}")
# A pass expression overrides the exit status: a failure after the expected lines must
# still fail the test (run_consumer.cmake stops with a CMake Error).
set_tests_properties(consumer_subdirectory PROPERTIES
  PASS_REGULAR_EXPRESSION "${consumer_dispatch_output}")
set_tests_properties(consumer_install_prefix PROPERTIES
  PASS_REGULAR_EXPRESSION "${consumer_dispatch_output}.*hello_chat answered:")
set_tests_properties(consumer_build_tree PROPERTIES
  PASS_REGULAR_EXPRESSION "${consumer_scalar_output}")
set_tests_properties(consumer_subdirectory consumer_install_prefix consumer_build_tree PROPERTIES
  FAIL_REGULAR_EXPRESSION "CMake Error" LABELS "consumer;slow")
