# JSON Schema -> grammar (grammar/json_schema.hpp) against Python's jsonschema: the
# sample_grammar tool converts each schema of json_schema/cases.json and walks its grammar
# at random; compare_with_jsonschema.py validates every text it wrote with jsonschema, and
# checks that every mutation of them that jsonschema rejects (a number a step past a
# bound, an item or member added or dropped, ...) the grammar refuses too, and that the
# integer and short decimal ranges it lists are accepted exactly. Needs Debian's
# python3-jsonschema (scripts/install-deps.sh --test). Included by tests/CMakeLists.txt.
add_executable(sample_grammar ${CMAKE_CURRENT_SOURCE_DIR}/json_schema/sample_grammar.cpp)
target_link_libraries(sample_grammar PRIVATE smol::smol nlohmann_json::nlohmann_json
                                             smol_warnings smol_program_flags)

# Debian's python3 first: a python3 earlier on PATH (pyenv, a venv) may lack jsonschema.
find_program(SMOL_JSONSCHEMA_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT SMOL_JSONSCHEMA_PYTHON)
  find_program(SMOL_JSONSCHEMA_PYTHON NAMES python3)
endif()
if(SMOL_JSONSCHEMA_PYTHON)
  execute_process(COMMAND ${SMOL_JSONSCHEMA_PYTHON} -c "import jsonschema"
                  RESULT_VARIABLE no_jsonschema OUTPUT_QUIET ERROR_QUIET)
endif()
if(NOT SMOL_JSONSCHEMA_PYTHON OR no_jsonschema)
  message(FATAL_ERROR "the JSON schema tests need python3 with jsonschema: run "
                      "./scripts/install-deps.sh --test (Debian's python3-jsonschema)")
endif()

add_test(NAME json_schema_jsonschema
         COMMAND ${SMOL_JSONSCHEMA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/json_schema/compare_with_jsonschema.py"
                 --tool $<TARGET_FILE:sample_grammar>
                 --cases "${CMAKE_CURRENT_SOURCE_DIR}/json_schema/cases.json"
                 --work "${CMAKE_CURRENT_BINARY_DIR}/data/json_schema_jsonschema")
set_tests_properties(json_schema_jsonschema PROPERTIES TIMEOUT 120 LABELS "grammar")
