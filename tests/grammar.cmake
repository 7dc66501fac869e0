# The grammar engine's token masks against the brute force on SmolLM2-135M-Instruct's
# real 49,152-token vocabulary (the file the real_model fixture of real_model.cmake
# extracts). The unit runs of test_grammar and test_grammar_schema skip these cases when
# the file is absent; here it is required. Included by tests/CMakeLists.txt.
if(NOT SMOL_REAL_MODEL_TESTS)
  return()
endif()
foreach(suite IN ITEMS test_grammar test_grammar_schema)
  smol_suite_command(${suite} command)
  add_test(NAME ${suite}_smollm2 COMMAND ${command} "--test-case=*SmolLM2*")
  set_tests_properties(${suite}_smollm2 PROPERTIES
    FIXTURES_REQUIRED real_model TIMEOUT 300 LABELS real_model
    ENVIRONMENT "SMOL_REAL_MODEL=${CMAKE_CURRENT_BINARY_DIR}/real-model/SmolLM2-135M-Instruct.Q4_1.gguf;SMOL_REQUIRE_REAL_MODEL=1")
endforeach()
