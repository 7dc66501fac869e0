# cmake -DPYTHON=... -DNODE=... -DPREFIX=<npm prefix> -DWORK=<dir> -P reference_ids.cmake
# Writes WORK/corpus.json (make_corpus.py) and WORK/reference_ids.json (reference_ids.mjs).
execute_process(COMMAND "${PYTHON}" "${CMAKE_CURRENT_LIST_DIR}/make_corpus.py" "${WORK}/corpus.json"
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "make_corpus.py failed (${result})")
endif()
execute_process(COMMAND "${NODE}" "${CMAKE_CURRENT_LIST_DIR}/reference_ids.mjs" "${PREFIX}"
                        "${WORK}/corpus.json" "${WORK}/reference_ids.json"
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "reference_ids.mjs failed (${result})")
endif()
